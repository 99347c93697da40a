#include "validate/published/published.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "sim/engine/isolate.hpp"
#include "strategies/estimator.hpp"
#include "strategies/transformer_costs.hpp"
#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/limits.hpp"
#include "traces/parallel.hpp"
#include "traces/stack_profile.hpp"
#include "validate/calibrate/nelder_mead.hpp"
#include "validate/published/published_json.hpp"

namespace dtsim::sim {
namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  for (auto& f : out) {
    const auto b = f.find_first_not_of(" \t"), e = f.find_last_not_of(" \t");
    f = b == std::string::npos ? "" : f.substr(b, e - b + 1);
  }
  return out;
}

double to_number(const std::string& s, const std::string& ctx) {
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size() || !std::isfinite(v)) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    throw FormatError(ctx + ": '" + s + "' is not a number");
  }
}

int to_int(const std::string& s, const std::string& ctx) {
  const double v = to_number(s, ctx);
  if (v != std::floor(v) || v < 0 || v > 1e9) throw FormatError(ctx + ": '" + s + "' is not a non-negative integer");
  return static_cast<int>(v);
}

/// How a run shards the vocabulary over TP ranks.
enum class VocabSharding {
  PADDED,    ///< Megatron: padded up to a multiple of 128 x TP (--make-vocab-size-divisible-by 128)
  TRUNCATED  ///< vTrain's runs: vocab // TP rows per rank, no padding (src/model/gpt_model.py, ShardedGptLogit)
};

/// GPT-2 style model of a Megatron-DeepSpeed run (see the header).
TransformerSpec gpt_model(int hidden, int heads, int layers, int seq, int vocab, int tp, VocabSharding sharding) {
  TransformerSpec m = model_preset("gpt3-1.3b");
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.num_layers = layers;
  m.seq_len = seq;
  m.ffn_hidden = 4 * hidden;
  const int mult = 128 * tp;
  m.vocab = sharding == VocabSharding::PADDED ? (vocab + mult - 1) / mult * mult : vocab / tp * tp;
  m.tied_embeddings = true;
  m.learned_pos_embedding = true;
  m.dtype = DType::FP16;
  m.name = "gpt-h" + std::to_string(hidden) + "-a" + std::to_string(heads) + "-l" + std::to_string(layers) + "-s" +
           std::to_string(seq);
  return m;
}

ParallelPlan megatron_plan(int tp, int pp, int dp, int mbs, int gbs, Recompute rc) {
  ParallelPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.micro_batch_size = mbs;
  p.global_batch_size = gbs;
  p.schedule = Schedule::ONE_F_ONE_B;
  p.recompute = rc;
  return p;
}

/// Calls `row(fields, ctx)` for every non-empty line after the header; ctx is "path:line".
void for_each_csv_row(std::istream& in, const std::string& path,
                      const std::function<void(const std::vector<std::string>&, const std::string&)>& row) {
  std::string line;
  int lineno = 1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line == "\r") continue;
    row(split_csv_line(line), path + ":" + std::to_string(lineno));
  }
}

std::vector<PublishedRow> parse_vtrain(std::istream& in, const std::string& path) {
  std::vector<PublishedRow> rows;
  for_each_csv_row(in, path, [&](const std::vector<std::string>& f, const std::string& ctx) {
    if (f.size() != 11) throw FormatError(ctx + ": expected 11 columns, found " + std::to_string(f.size()));
    const int gpus = to_int(f[0], ctx), gbs = to_int(f[1], ctx), mbs = to_int(f[2], ctx), h = to_int(f[3], ctx),
              a = to_int(f[4], ctx), L = to_int(f[5], ctx), s = to_int(f[6], ctx), tp = to_int(f[7], ctx),
              dp = to_int(f[8], ctx), pp = to_int(f[9], ctx);
    const double ms = to_number(f[10], ctx);
    if (limits::checked_product({tp, dp, pp}, ctx, "TP*DP*PP") != gpus) throw FormatError(ctx + ": TP*DP*PP != GPUs");
    if (!(ms > 0)) throw FormatError(ctx + ": iteration time must be positive");
    PublishedRow r;
    r.index = static_cast<int>(rows.size());
    r.cluster = "dgx-a100:" + std::to_string(gpus);
    r.model = gpt_model(h, a, L, s, 50257, tp, VocabSharding::TRUNCATED);
    r.plan = megatron_plan(tp, pp, dp, mbs, gbs, Recompute::FULL);
    r.plan.stack = "megatron-deepspeed";  // vTrain measured Megatron-DeepSpeed
    r.measured_s = ms / 1000.0;
    r.group = r.model.name;
    rows.push_back(std::move(r));
  });
  return rows;
}

/// Generic rows: model shape, GPU/cluster, degrees, batch, schedule, recompute, measured time.
PublishedRow generic_row(const nlohmann::json& j, const std::string& ctx, int index) {
  using json_util::get;
  using json_util::get_or;
  json_util::reject_unknown(
      j, ctx, {"hidden",     "heads",     "num_layers",  "seq_len",      "vocab",     "ffn_hidden", "tp",
               "pp",         "dp",        "micro_batch", "global_batch", "recompute", "schedule",   "sequence_parallel",
               "zero_stage", "precision", "stack",       "cluster",      "gpu",       "measured_s", "measured_ms",
               "group",      "measure"});
  PublishedRow r;
  r.index = index;
  const int tp = get_or<int>(j, ctx, "tp", 1);
  // The GPU count is a product of the degrees: in 64 bits, bounded, before it names a cluster.
  (void)limits::checked_product({tp, get_or<int>(j, ctx, "pp", 1), get_or<int>(j, ctx, "dp", 1)}, ctx, "tp*pp*dp",
                                limits::kMaxGpus);
  r.model =
      gpt_model(get<int>(j, ctx, "hidden"), get<int>(j, ctx, "heads"), get<int>(j, ctx, "num_layers"),
                get_or<int>(j, ctx, "seq_len", 2048), get_or<int>(j, ctx, "vocab", 50257), tp, VocabSharding::PADDED);
  if (j.contains("ffn_hidden")) r.model.ffn_hidden = get<int>(j, ctx, "ffn_hidden");
  r.plan = megatron_plan(tp, get_or<int>(j, ctx, "pp", 1), get_or<int>(j, ctx, "dp", 1),
                         get<int>(j, ctx, "micro_batch"), get<int>(j, ctx, "global_batch"),
                         recompute_from_string(get_or<std::string>(j, ctx, "recompute", "full"), ctx));
  set_schedule(r.plan, get_or<std::string>(j, ctx, "schedule", "1f1b"), ctx);
  r.plan.sequence_parallel = get_or<bool>(j, ctx, "sequence_parallel", false);
  r.plan.zero_stage = get_or<int>(j, ctx, "zero_stage", 0);
  r.plan.precision = precision_from_string(get_or<std::string>(j, ctx, "precision", "bf16"), ctx);
  r.plan.stack = get_or<std::string>(j, ctx, "stack", "megatron-lm");  // Megatron-LM papers and README by default
  (void)stack_profile(r.plan.stack);                                   // an unknown stack names the known ones
  r.cluster = get_or<std::string>(j, ctx, "cluster", "dgx-a100:" + std::to_string(r.plan.world_size()));
  r.gpu = load_cluster(r.cluster).gpu.name;
  if (j.contains("gpu") && get<std::string>(j, ctx, "gpu") != r.gpu)
    throw FormatError(ctx + ": gpu '" + get<std::string>(j, ctx, "gpu") + "' is not the GPU of cluster '" + r.cluster +
                      "' (" + r.gpu + ")");
  if (j.contains("measured_s")) r.measured_s = get<double>(j, ctx, "measured_s");
  else r.measured_s = get<double>(j, ctx, "measured_ms") / 1000.0;
  limits::check(r.measured_s, limits::kMeasuredTime, ctx, "measured time");
  r.group = get_or<std::string>(j, ctx, "group", r.model.name);
  r.measure = get_or<std::string>(j, ctx, "measure", "iteration");
  if (r.measure != "iteration" && r.measure != "layer")
    throw FormatError(ctx + ": measure '" + r.measure + "' is not known (known: iteration, layer)");
  return r;
}

/// A user's run: the inputs `dtsim simulate` takes (model preset or file, cluster, plan JSON as `--plan` reads it,
/// stack) and what was measured (docs/accuracy.md, "Your own runs").
PublishedRow run_row(const nlohmann::json& j, const std::string& ctx, int index) {
  using json_util::get;
  using json_util::get_or;
  json_util::reject_unknown(
      j, ctx,
      {"id", "group", "model", "cluster", "plan", "stack", "measured_s", "measured_ms", "measured_peak_gib", "notes"});
  PublishedRow r;
  r.index = index;
  r.id = get_or<std::string>(j, ctx, "id", "");
  const auto model = get<std::string>(j, ctx, "model");
  r.model = load_model(model);
  r.cluster = get<std::string>(j, ctx, "cluster");
  const ClusterSpec cluster = load_cluster(r.cluster);
  r.gpu = cluster.gpu.name;
  nlohmann::json pj = get<nlohmann::json>(j, ctx, "plan");
  if (pj.is_string()) {
    r.plan = load_plan(pj.get<std::string>());
  } else {
    if (!pj.is_object()) throw FormatError(ctx + ": 'plan' must be a plan object or a plan JSON file name");
    if (!pj.contains("schema_version")) pj["schema_version"] = 1;
    r.plan = plan_from_json(pj, ctx + ".plan");
  }
  r.plan.stack = get_or<std::string>(j, ctx, "stack", r.plan.stack.empty() ? kDefaultStack : r.plan.stack);
  (void)stack_profile(r.plan.stack);  // an unknown stack names the known ones
  try {
    r.plan.validate(r.model, cluster);
  } catch (const ConfigError& e) {
    throw FormatError(ctx + ": " + e.what());
  }
  if (j.contains("measured_s")) r.measured_s = get<double>(j, ctx, "measured_s");
  else r.measured_s = get<double>(j, ctx, "measured_ms") / 1000.0;
  limits::check(r.measured_s, limits::kMeasuredTime, ctx, "measured time");
  if (j.contains("measured_peak_gib")) {
    const double gib = get<double>(j, ctx, "measured_peak_gib");
    if (!(gib > 0 && gib < 1e5)) throw FormatError(ctx + ": measured_peak_gib must be in (0, 1e5)");
    r.measured_peak_memory_bytes = gib * 1024.0 * 1024 * 1024;
  }
  r.precision = to_string(r.plan.precision);
  r.notes = get_or<std::string>(j, ctx, "notes", "");
  r.group = get_or<std::string>(j, ctx, "group", r.model.name);
  return r;
}

std::vector<PublishedRow> parse_generic_csv(std::istream& in, const std::string& path, const std::string& header) {
  const auto names = split_csv_line(header);
  std::vector<PublishedRow> rows;
  for_each_csv_row(in, path, [&](const std::vector<std::string>& f, const std::string& ctx) {
    if (f.size() != names.size())
      throw FormatError(ctx + ": expected " + std::to_string(names.size()) + " columns, found " +
                        std::to_string(f.size()));
    nlohmann::json j = nlohmann::json::object();
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto& n = names[i];
      if (n == "schedule" || n == "recompute" || n == "cluster" || n == "group" || n == "gpu" || n == "measure" ||
          n == "stack" || n == "precision")
        j[n] = f[i];
      else if (n == "sequence_parallel") j[n] = f[i] == "1" || f[i] == "true";
      else if (n == "measured_s" || n == "measured_ms") j[n] = to_number(f[i], ctx);
      else j[n] = to_int(f[i], ctx);
    }
    rows.push_back(generic_row(j, ctx, static_cast<int>(rows.size())));
  });
  return rows;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> idx(v.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (std::size_t k = i; k <= j; ++k) r[idx[k]] = avg;
    i = j + 1;
  }
  return r;
}

RowResult predict_one(const PublishedRow& row, const Calibration& cal, NetworkMode network) {
  RowResult out;
  out.row = row;
  const ClusterSpec cluster = load_cluster(row.cluster);
  if (row.measure == "layer") {
    // One layer, one micro-batch: its passes with the TP group's collectives (the estimator's step times, which the
    // simulator reproduces for a GPU-bound layer).
    row.plan.validate(row.model, cluster);
    if (row.plan.tp > cluster.gpus_per_node) throw ConfigError("layer rows need the TP group inside one node");
    const auto passes = cost::layer_passes(row.model, cost::shape_of(row.plan, row.plan.micro_batch_size));
    const Calibration filled = with_stack(cal, row.plan.stack);
    double t = 0;
    for (const auto* steps : {&passes.forward, &passes.recompute, &passes.backward})
      t += estimate::steps_time_s(*steps, cluster, filled, row.model.dtype, row.plan.tp);
    out.predicted_s = out.compute_s = t;
    out.error = relative_error(t, row.measured_s);
    return out;
  }
  SimOptions opt;
  opt.network = network;
  Inputs in{&row.model, &cluster, &row.plan, &cal, &opt};
  // iteration time, compute / exposed communication / bubble of the slowest rank, OOM, largest peak memory
  constexpr std::size_t kValues = 6;
  auto fill = [&](const Report& rep) {
    std::array<double, kValues> v{rep.iteration_time_s, 0, 0, 0, rep.oom.empty() ? 0.0 : 1.0, 0};
    for (const auto& r : rep.ranks) {
      if (r.compute_s + r.exposed_comm_s + r.bubble_s > v[1] + v[2] + v[3])
        v[1] = r.compute_s, v[2] = r.exposed_comm_s, v[3] = r.bubble_s;
      v[5] = std::max(v[5], r.peak_bytes);
    }
    return v;
  };
  auto run = [&](const Inputs& inputs) {
    std::array<double, kValues> v{};
    if (network == NetworkMode::ANALYTIC) return fill(simulate(inputs).report);
    auto r = run_isolated(
        [&] {
          auto a = fill(simulate(inputs).report);
          return std::vector<double>(a.begin(), a.end());
        },
        kValues);
    std::copy(r.begin(), r.end(), v.begin());
    return v;
  };
  std::array<double, kValues> v = run(in);
  // A measured run fitted in memory. When the plan as mapped does not and the source left the memory levers unstated,
  // take the first of Megatron's standard ones that fits (each a documented default of large runs): the distributed
  // optimizer (ZeRO-1), then selective, then full activation recomputation, then sequence parallelism (with TP; opt-in
  // in Megatron-LM and Megatron-Core, --sequence-parallel, so assumed last). Each lever keeps the ones before it.
  if (v[4] > 0 && !row.measured_oom && (row.recompute_unstated || row.zero_unstated || row.sp_unstated)) {
    std::vector<std::pair<ParallelPlan, std::string>> levers;
    ParallelPlan p = row.plan;
    auto with = [&] { return levers.empty() ? std::string() : levers.back().second + " + "; };
    if (row.zero_unstated && p.zero_stage == 0 && p.dp > 1) {
      p.zero_stage = 1;
      p.overlap_param_gather = param_gather_overlap_assumed(p, row.overlap_unstated);
      levers.emplace_back(p, p.overlap_param_gather ? "distributed optimizer (ZeRO-1, parameter all-gather overlapped)"
                                                    : "distributed optimizer (ZeRO-1)");
    }
    if (row.recompute_unstated && p.recompute == Recompute::NONE) {
      const std::string before = with();
      for (auto [rc, name] : {std::pair{Recompute::SELECTIVE, "selective"}, std::pair{Recompute::FULL, "full"}}) {
        p.recompute = rc;
        levers.emplace_back(p, before + name + " recompute");
      }
    }
    if (row.sp_unstated && p.tp > 1 && !p.sequence_parallel) {
      p.sequence_parallel = true;
      levers.emplace_back(p, with() + "sequence parallelism");
    }
    for (const auto& [plan, name] : levers) {
      Inputs alt = in;
      alt.plan = &plan;
      const auto w = run(alt);
      if (w[4] > 0) continue;
      v = w;
      out.row.plan = plan;
      out.row.notes += std::string(out.row.notes.empty() ? "" : "; ") + "does not fit as mapped: " + name +
                       " assumed (the run fitted)";
      break;
    }
  }
  out.predicted_s = v[0];
  out.compute_s = v[1];
  out.exposed_comm_s = v[2];
  out.bubble_s = v[3];
  out.oom = v[4] > 0;
  out.predicted_peak_memory_bytes = row.memory_from_allocator ? v[5] - cal.reserved_memory_bytes : v[5];
  out.error = relative_error(out.predicted_s, row.measured_s);
  out.memory_error = relative_error(out.predicted_peak_memory_bytes, row.measured_peak_memory_bytes);
  return out;
}

}  // namespace

bool param_gather_overlap_assumed(const ParallelPlan& p, bool overlap_unstated) {
  return overlap_unstated && p.stack == "megatron-core" && p.dp > 1 && p.dp_overlap && !p.megatron_fsdp &&
         (p.zero_stage == 1 || p.zero_stage == 2);
}

double relative_error(double predicted, double measured) {
  return measured > 0 ? (predicted - measured) / measured : 0.0;
}

std::vector<PublishedRow> load_published(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ConfigError(path + ": cannot open file");
  std::string first;
  if (!std::getline(f, first)) throw FormatError(path + ": empty file");
  if (first.rfind("\xEF\xBB\xBF", 0) == 0) first = first.substr(3);
  std::vector<PublishedRow> rows;
  if (!first.empty() && (first[0] == '[' || first[0] == '{')) {
    f.clear();
    f.seekg(0);
    std::stringstream ss;
    ss << f.rdbuf();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(ss.str());
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(path + ": invalid JSON (" + std::string(e.what()) + ")");
    }
    if (is_measurements_document(j)) {
      rows = load_measurements_document(j, path);
    } else {
      if (j.is_object()) j = json_util::get<nlohmann::json>(j, path, "rows");
      if (!j.is_array()) throw FormatError(path + ": expected a list of rows");
      for (std::size_t i = 0; i < j.size(); ++i) {
        const std::string ctx = path + ": row " + std::to_string(i);
        // A row naming its model (preset or file) is a run in `dtsim simulate`'s terms; else a GPT-shape row.
        rows.push_back(j[i].is_object() && j[i].contains("model") ? run_row(j[i], ctx, static_cast<int>(i))
                                                                  : generic_row(j[i], ctx, static_cast<int>(i)));
      }
    }
  } else if (first.rfind("# GPUs,global batch,micro batch", 0) == 0) {
    rows = parse_vtrain(f, path);
  } else if (first.find("micro_batch") != std::string::npos) {
    rows = parse_generic_csv(f, path, first);
  } else {
    throw FormatError(path + ": unknown format (expected the vTrain CSV header, a CSV with named columns, or JSON)");
  }
  if (rows.empty()) throw FormatError(path + ": no rows");
  return rows;
}

std::vector<PublishedRow> select_split(const std::vector<PublishedRow>& rows, const std::string& split) {
  if (split == "all") return rows;
  if (split != "train" && split != "test") throw ConfigError("unknown split '" + split + "' (known: all, train, test)");
  std::vector<PublishedRow> out;
  for (const auto& r : rows)
    if ((r.index % 2 == 0) == (split == "train")) out.push_back(r);
  return out;
}

std::vector<RowResult> predict_rows(const std::vector<PublishedRow>& rows, const Calibration& cal,
                                    NetworkMode network) {
  return predict_rows(
      rows, [&](const PublishedRow&) -> const Calibration& { return cal; }, network);
}

std::vector<RowResult> predict_rows(const std::vector<PublishedRow>& rows,
                                    const std::function<const Calibration&(const PublishedRow&)>& calibration_of,
                                    NetworkMode network) {
  std::vector<RowResult> out(rows.size());
  auto predict = [&](std::size_t i) {
    const PublishedRow& r = rows[i];
    if (!r.failure.empty()) {  // not expressible: kept, not simulated
      out[i].row = r;
      out[i].failure = r.failure;
      return;
    }
    try {
      out[i] = predict_one(r, calibration_of(r), network);
    } catch (const Error& e) {
      out[i].row = r;  // predict_one threw before writing the slot
      out[i].failure = e.what();
    }
  };
  // Rows are independent simulations: on the analytic network they run on worker_threads() threads
  // (traces/parallel.hpp), each result written to its row's slot, so the output is the same whatever the thread count
  // (the flow network's rows are child processes already, run one at a time). Calibrations are read, never written, by
  // the workers.
  parallel_for(rows.size(), network == NetworkMode::ANALYTIC ? worker_threads() : 1, predict);
  return out;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  DTSIM_ASSERT(a.size() == b.size(), "spearman of unequal lengths");
  if (a.size() < 2) return 0;
  const auto ra = ranks(a), rb = ranks(b);
  const double ma = mean(ra), mb = mean(rb);
  double num = 0, da = 0, db = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (ra[i] - ma) * (rb[i] - mb);
    da += (ra[i] - ma) * (ra[i] - ma);
    db += (rb[i] - mb) * (rb[i] - mb);
  }
  return da > 0 && db > 0 ? num / std::sqrt(da * db) : 0;
}

std::string failure_reason(const std::string& failure) {
  std::string r = failure;
  const auto row = r.find(": row ");
  if (row != std::string::npos) {
    const auto close = r.find("): ", row);
    const auto colon = r.find(": ", row + 6);
    if (close != std::string::npos && close < colon + 2) r = r.substr(close + 3);
    else if (colon != std::string::npos) r = r.substr(colon + 2);
  }
  const auto cut = std::min({r.find(" ("), r.find(", "), r.find("; ")});
  if (cut != std::string::npos && cut > 0) r = r.substr(0, cut);
  return r;
}

ValidationScore score(const std::vector<RowResult>& results) {
  ValidationScore s;
  std::map<std::string, int> reasons;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> groups;
  std::map<std::string, std::vector<double>> features;
  std::vector<double> abs_err, err, mem_abs_err, mem_err;
  std::map<std::string, std::vector<double>> group_mem;
  for (const auto& r : results) {
    if (!r.failure.empty()) {
      ++s.failed;
      ++reasons[failure_reason(r.failure)];
      continue;
    }
    if (r.has_memory()) {
      mem_abs_err.push_back(std::abs(r.memory_error));
      mem_err.push_back(r.memory_error);
      s.memory_max_abs_error = std::max(s.memory_max_abs_error, std::abs(r.memory_error));
      group_mem[r.row.group].push_back(std::abs(r.memory_error));
    }
    if (r.row.measured_oom) {  // no measured time: an outcome to agree with, not an error to score
      ++s.measured_oom_rows;
      if (r.oom) ++s.measured_oom_predicted;
      continue;
    }
    ++s.rows;
    abs_err.push_back(std::abs(r.error));
    err.push_back(r.error);
    s.max_abs_error = std::max(s.max_abs_error, std::abs(r.error));
    groups[r.row.group].first.push_back(r.predicted_s);
    groups[r.row.group].second.push_back(r.row.measured_s);
    const auto& p = r.row.plan;
    features[p.pp > 1 ? "pp > 1" : "pp = 1"].push_back(std::abs(r.error));
    features[p.tp > 1 ? "tp > 1" : "tp = 1"].push_back(std::abs(r.error));
    features[p.dp > 1 ? "dp > 1" : "dp = 1"].push_back(std::abs(r.error));
    features["micro-batch " + std::to_string(p.micro_batch_size)].push_back(std::abs(r.error));
  }
  s.mape = mean(abs_err);
  s.mean_error = mean(err);
  s.memory_rows = static_cast<int>(mem_abs_err.size());
  s.memory_mape = mean(mem_abs_err);
  s.memory_mean_error = mean(mem_err);
  s.spearman_min = groups.empty() ? 0 : 1;
  for (const auto& [name, pm] : groups) {
    GroupScore g;
    g.group = name;
    g.rows = static_cast<int>(pm.first.size());
    std::vector<double> e;
    for (std::size_t i = 0; i < pm.first.size(); ++i) {
      e.push_back(std::abs(pm.first[i] - pm.second[i]) / pm.second[i]);
      g.max_abs_error = std::max(g.max_abs_error, e.back());
    }
    g.mape = mean(e);
    g.spearman = spearman(pm.first, pm.second);
    s.spearman_min = std::min(s.spearman_min, g.spearman);
    if (const auto it = group_mem.find(name); it != group_mem.end()) {
      g.memory_rows = static_cast<int>(it->second.size());
      g.memory_mape = mean(it->second);
    }
    s.groups.push_back(g);
  }
  for (const auto& [name, v] : features)
    s.by_feature.emplace_back(name + " (" + std::to_string(v.size()) + " rows)", mean(v));
  s.speedups = speedup_pairs(results);
  s.scale_trends = scale_trends(results);
  s.failed_by_reason.assign(reasons.begin(), reasons.end());
  std::stable_sort(s.failed_by_reason.begin(), s.failed_by_reason.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

std::vector<ScaleTrend> scale_trends(const std::vector<RowResult>& results) {
  // The timed rows, and per series (publication, in name order).
  std::vector<const RowResult*> all;
  std::map<std::string, std::vector<const RowResult*>> by_series;
  for (const auto& r : results) {
    if (!r.timed()) continue;
    all.push_back(&r);
    if (!r.row.series.empty()) by_series[r.row.series].push_back(&r);
  }
  std::vector<ScaleTrend> out;
  auto add = [&](const std::string& name, const std::vector<const RowResult*>& rows) {
    if (rows.size() < 3) return;
    ScaleTrend t;
    t.series = name;
    t.rows = static_cast<int>(rows.size());
    const auto [lo, hi] = std::minmax_element(rows.begin(), rows.end(), [](const RowResult* a, const RowResult* b) {
      return a->row.plan.world_size() < b->row.plan.world_size();
    });
    t.min_gpus = (*lo)->row.plan.world_size();
    t.max_gpus = (*hi)->row.plan.world_size();
    if (t.max_gpus < kScaleTrendMinSpan * t.min_gpus) return;
    std::vector<double> gpus, err;
    double small_sum = 0, large_sum = 0;
    int small = 0, large = 0;
    for (const auto* r : rows) {
      gpus.push_back(r->row.plan.world_size());
      err.push_back(r->error);
      if (r->row.plan.world_size() == t.min_gpus) small_sum += r->error, ++small;
      if (r->row.plan.world_size() == t.max_gpus) large_sum += r->error, ++large;
    }
    t.spearman = spearman(gpus, err);
    t.mean_error_small = small_sum / small;
    t.mean_error_large = large_sum / large;
    out.push_back(t);
  };
  add("all", all);
  if (by_series.size() > 1)  // one publication only: its trend is the file's
    for (const auto& [name, rows] : by_series) add(name, rows);
  return out;
}

nlohmann::json scale_trends_json(const std::vector<ScaleTrend>& trends) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& t : trends)
    a.push_back({{"series", t.series},
                 {"rows", t.rows},
                 {"min_gpus", t.min_gpus},
                 {"max_gpus", t.max_gpus},
                 {"spearman", t.spearman},
                 {"mean_error_at_min_gpus", t.mean_error_small},
                 {"mean_error_at_max_gpus", t.mean_error_large}});
  return a;
}

std::vector<SpeedupPair> speedup_pairs(const std::vector<RowResult>& results) {
  std::vector<SpeedupPair> out;

  // The plan without the switch under study, with the model and cluster: equal keys = a pair.
  auto key = [](const RowResult& r, const char* without) {
    nlohmann::json j = to_json(r.row.plan, r.row.model.num_layers);
    j.erase(without);
    j["model"] = r.row.model.name;
    j["seq"] = r.row.model.seq_len;
    j["cluster"] = r.row.cluster;
    return j.dump();
  };
  for (std::size_t i = 0; i < results.size(); ++i)
    for (std::size_t k = 0; k < results.size(); ++k) {
      const auto &a = results[i], &b = results[k];
      if (i == k || !a.timed() || !b.timed() || a.row.group != b.row.group) continue;  // one table, one software date
      const auto &pa = a.row.plan, &pb = b.row.plan;
      std::string feature;
      if (pa.precision == Precision::BF16 && pb.precision != Precision::BF16 &&
          pa.tp_comm_overlap == pb.tp_comm_overlap && a.row.compiled == b.row.compiled &&
          key(a, "precision") == key(b, "precision"))
        feature = to_string(pb.precision);
      else if (!pa.tp_comm_overlap && pb.tp_comm_overlap && pa.precision == pb.precision &&
               a.row.compiled == b.row.compiled && key(a, "tp_comm_overlap") == key(b, "tp_comm_overlap"))
        feature = "tp overlap";
      else if (!a.row.compiled && b.row.compiled && pa.precision == pb.precision &&
               pa.tp_comm_overlap == pb.tp_comm_overlap && key(a, "") == key(b, ""))
        feature = "compile";
      if (feature.empty()) continue;
      out.push_back({feature, a.row.id.empty() ? std::to_string(a.row.index) : a.row.id,
                     b.row.id.empty() ? std::to_string(b.row.index) : b.row.id, a.row.measured_s / b.row.measured_s,
                     a.predicted_s / b.predicted_s});
    }
  return out;
}

namespace {
// The fitted parameters, as logs so the simplex moves multiplicatively and stays positive.
constexpr int kParams = 11;
constexpr int kMisalignedParam = 8;      ///< index of gemm_misaligned_efficiency (capped at 1)
constexpr int kCollectiveHostParam = 9;  ///< index of host_collective_issue_s
constexpr int kExponentParam = 10;       ///< index of gemm_efficiency_exponent (clamped to [0.25, 8])
std::array<double, kParams> params_of(const Calibration& c) {
  return {std::log(c.gemm_efficiency_max),
          std::log(c.gemm_half_efficiency_flops),
          std::log(c.memory_bandwidth_efficiency),
          std::log(c.kernel_launch_s),
          std::log(c.intra_bandwidth_efficiency),
          std::log(std::max(c.host_issue_s, 1e-6)),
          std::log(std::max(c.collective_step_overhead_s, 1e-7)),
          std::log(std::max(c.p2p_overhead_s, 1e-7)),
          std::log(c.gemm_misaligned_efficiency),               // kMisalignedParam
          std::log(std::max(c.host_collective_issue_s, 1e-6)),  // kCollectiveHostParam
          std::log(c.gemm_efficiency_exponent)};                // kExponentParam
}
const std::array<const char*, kParams> kFieldNames = {
    "compute.gemm_efficiency_max",         "compute.gemm_half_efficiency_flops",
    "compute.memory_bandwidth_efficiency", "compute.kernel_launch_s",
    "network.intra_bandwidth_efficiency",  "compute.host_issue_s",
    "network.collective_step_overhead_s",  "network.p2p_overhead_s",
    "compute.gemm_misaligned_efficiency",  "compute.host_collective_issue_s",
    "compute.gemm_efficiency_exponent"};
Calibration with_params(Calibration c, const std::array<double, kParams>& x) {
  c.gemm_efficiency_max = std::min(1.0, std::exp(x[0]));
  c.gemm_half_efficiency_flops = std::exp(x[1]);
  c.memory_bandwidth_efficiency = std::min(1.0, std::exp(x[2]));
  c.kernel_launch_s = std::exp(x[3]);
  c.intra_bandwidth_efficiency = std::min(1.0, std::exp(x[4]));
  c.host_issue_s = std::exp(x[5]);
  c.collective_step_overhead_s = std::exp(x[6]);
  c.p2p_overhead_s = std::exp(x[7]);
  c.gemm_misaligned_efficiency = std::min(1.0, std::exp(x[kMisalignedParam]));
  c.host_collective_issue_s = std::exp(x[kCollectiveHostParam]);
  c.gemm_efficiency_exponent = std::clamp(std::exp(x[kExponentParam]), 0.25, 8.0);
  // The fitted software values hold for every row, whatever its stack profile says.
  for (const char* f : {"host_issue_s", "p2p_overhead_s", "host_collective_issue_s"}) c.pin(f);
  return c;
}
}  // namespace

namespace {
/// The simplex's initial steps: log(1.3), log(4) for the wide-range parameters; the misaligned-GEMM factor starts at
/// its cap (1) and steps down, the curve's exponent by a factor of 2.
std::vector<double> simplex_steps() {
  std::vector<double> steps(kParams);
  for (int i = 0; i < kParams; ++i)
    steps[static_cast<std::size_t>(i)] = i == kMisalignedParam ? std::log(0.5)
                                         : i == kExponentParam ? std::log(2.0)
                                         : i == 1 || i >= 5    ? std::log(4.0)
                                                               : std::log(1.3);
  return steps;
}
std::array<double, kParams> to_array(const std::vector<double>& v) {
  std::array<double, kParams> a{};
  std::copy(v.begin(), v.end(), a.begin());
  return a;
}
}  // namespace

const std::vector<std::string>& fitted_fields() {
  static const std::vector<std::string> names(kFieldNames.begin(), kFieldNames.end());
  return names;
}

FitResult fit_published(const std::vector<PublishedRow>& rows, const Calibration& base, int max_evaluations,
                        double max_error_weight) {
  FitResult fr;
  // Rows that cannot be expressed (failure set when read) fail under every calibration: they are left out.
  std::vector<PublishedRow> usable;
  for (const auto& r : rows)
    if (r.failure.empty()) usable.push_back(r);
  // Every model group counts equally (a small published set weighs as much as one vTrain model).
  auto objective = [&](const std::array<double, kParams>& x) {
    const auto s = score(predict_rows(usable, with_params(base, x), NetworkMode::ANALYTIC));
    if (s.failed > 0) return 1e9;
    double sum = 0;
    for (const auto& g : s.groups) sum += g.mape + max_error_weight * g.max_abs_error;
    return s.groups.empty() ? 1e9 : sum / static_cast<double>(s.groups.size());
  };
  // Software values the base does not pin start from the stack of the rows (the first row's: the shipped fit's
  // stacks, Megatron-LM and Megatron-DeepSpeed, share their host values).
  const Calibration start0 = usable.empty() ? base : with_stack(base, usable.front().plan.stack);
  fr.objective_before = objective(params_of(start0));
  ++fr.evaluations;
  // Two starts on either side of the GPU-bound / host-bound divide (the MAPE surface has a valley between a
  // large additive launch cost and a host issue floor): the base as given, and the base with a 50 us floor.
  Calibration host_bound = start0;
  host_bound.host_issue_s = std::max(start0.host_issue_s, 50e-6);
  std::array<double, kParams> best_x = params_of(start0);
  double best_v = fr.objective_before;
  for (const Calibration& start : {start0, host_bound}) {
    const auto p = params_of(start);
    auto [x, v] =
        nelder_mead([&](const std::vector<double>& y) { return objective(to_array(y)); },
                    std::vector<double>(p.begin(), p.end()), simplex_steps(), max_evaluations / 2, fr.evaluations);
    if (v < best_v) best_x = to_array(x), best_v = v;
  }
  fr.calibration = with_params(start0, best_x);
  fr.objective_after = best_v;
  return fr;
}

std::string scatter_svg(const std::vector<RowResult>& results, const std::string& title) {
  double lo = 1e300, hi = 0;
  auto plotted = [](const RowResult& r) { return r.failure.empty() && r.row.measured_s > 0 && r.predicted_s > 0; };
  for (const auto& r : results)
    if (plotted(r)) {
      lo = std::min({lo, r.predicted_s, r.row.measured_s});
      hi = std::max({hi, r.predicted_s, r.row.measured_s});
    }
  if (!(hi > lo)) lo = 0.001, hi = 1;
  lo = std::pow(10, std::floor(std::log10(lo)));
  hi = std::pow(10, std::ceil(std::log10(hi)));
  const double W = 560, H = 560, M = 60;
  auto px = [&](double v) {
    return M + (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (W - 2 * M);
  };
  auto py = [&](double v) {
    return H - M - (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (H - 2 * M);
  };
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"14\">" << title << "</text>\n";
  o << "<line x1=\"" << px(lo) << "\" y1=\"" << py(lo) << "\" x2=\"" << px(hi) << "\" y2=\"" << py(hi)
    << "\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>\n";
  for (double t = lo; t <= hi * 1.001; t *= 10) {
    o << "<line x1=\"" << px(t) << "\" y1=\"" << H - M << "\" x2=\"" << px(t) << "\" y2=\"" << H - M + 5
      << "\" stroke=\"black\"/>";
    o << "<text x=\"" << px(t) << "\" y=\"" << H - M + 18 << "\" text-anchor=\"middle\">" << t << " s</text>\n";
    o << "<line x1=\"" << M - 5 << "\" y1=\"" << py(t) << "\" x2=\"" << M << "\" y2=\"" << py(t)
      << "\" stroke=\"black\"/>";
    o << "<text x=\"" << M - 8 << "\" y=\"" << py(t) + 4 << "\" text-anchor=\"end\">" << t << "</text>\n";
  }
  o << "<rect x=\"" << M << "\" y=\"" << M << "\" width=\"" << W - 2 * M << "\" height=\"" << H - 2 * M
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  o << "<text x=\"" << W / 2 << "\" y=\"" << H - 15 << "\" text-anchor=\"middle\">measured iteration time</text>\n";
  o << "<text x=\"15\" y=\"" << H / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 15 " << H / 2
    << ")\">predicted iteration time</text>\n";
  o.precision(2);
  for (const auto& r : results)
    if (plotted(r))
      o << "<circle cx=\"" << px(r.row.measured_s) << "\" cy=\"" << py(r.predicted_s) << "\" r=\"2\" fill=\""
        << (r.row.plan.pp > 1   ? "#d62728"
            : r.row.plan.tp > 1 ? "#1f77b4"
                                : "#2ca02c")
        << "\" fill-opacity=\"0.6\"/>\n";
  o << "<text x=\"" << M + 10 << "\" y=\"" << M + 18 << "\" fill=\"#d62728\">pp &gt; 1</text>";
  o << "<text x=\"" << M + 10 << "\" y=\"" << M + 34 << "\" fill=\"#1f77b4\">tp &gt; 1, pp = 1</text>";
  o << "<text x=\"" << M + 10 << "\" y=\"" << M + 50 << "\" fill=\"#2ca02c\">data parallel only</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace dtsim::sim
