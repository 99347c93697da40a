// Public API, the core: inputs, presets, simulate, several jobs, collectives (dtsim/dtsim.hpp).
#include "dtsim/dtsim.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "dtsim/internal.hpp"
#include "sim/engine/simgrid_runtime.hpp"
#include "sim/model/footprint.hpp"
#include "sim/report/chakra_export.hpp"
#include "sim/report/trace_render.hpp"
#include "sim/simulate.hpp"
#include "studies/collective_bench.hpp"
#include "studies/multi_job.hpp"
#include "traces/limits.hpp"
#include "traces/output.hpp"
#include "traces/units.hpp"

namespace dtsim {

void write_files(const std::string& dir, const Files& files) { write_outputs(dir, files); }

std::string version() { return DTSIM_VERSION; }

std::string input_limits_markdown() {
  std::string t = "| input | fields | range |\n|---|---|---|\n";
  for (const auto& e : limits::table())
    t += "| " + e.input + " | " + e.fields + " | " + limits::describe(e.range) + " |\n";
  t += "| plan, flags | tp, pp, dp, cp, ep, etp, micro and global batch | integers >= 1; GPU counts at most " +
       std::to_string(limits::kMaxGpus) + ", products of degrees checked in 64 bits |\n";
  t += "| model JSON | num_layers, hidden, heads, ffn_hidden, seq_len, vocab, experts | positive integers below 2^31 "
       "whose "
       "parameter count is at most 10^15 |\n";
  return t;
}
std::string simgrid_version() { return sim::simgrid_version(); }

Presets presets() {
  Presets p;
  p.models = model_preset_names();
  p.gpus = gpu_preset_names();
  p.clusters = cluster_preset_names();
  std::string t;
  t += "models (--model NAME, or a JSON file):\n";
  for (const auto& n : model_preset_names()) {
    auto m = model_preset(n);
    char line[200];
    std::snprintf(line, sizeof line,
                  "  %-15s %7.1fB params  layers %3d  hidden %5d  heads %3d  kv %3d  ffn %6d  seq %5d  vocab %6d\n",
                  n.c_str(), static_cast<double>(m.total_params()) / 1e9, m.num_layers, m.hidden, m.heads, m.kv_heads,
                  m.ffn_hidden, m.seq_len, m.vocab);
    t += line;
    if (m.moe.enabled() || m.mla.enabled()) {
      std::string extra = "                  ";
      if (m.moe.enabled())
        extra += std::to_string(m.moe.experts) + " experts top-" + std::to_string(m.moe.top_k) + " of ffn " +
                 std::to_string(m.moe.expert_ffn_hidden) +
                 (m.moe.shared_ffn_hidden > 0 ? " + shared ffn " + std::to_string(m.moe.shared_ffn_hidden) : "") +
                 (m.moe.dense_layers > 0 ? ", first " + std::to_string(m.moe.dense_layers) + " layers dense" : "") +
                 (m.moe.router_groups > 0 ? ", routed within " + std::to_string(m.moe.router_group_topk) + " of " +
                                                std::to_string(m.moe.router_groups) + " groups"
                                          : "");
      if (m.mla.enabled()) extra += std::string(m.moe.enabled() ? ", " : "") + "MLA attention";
      char act[64];
      std::snprintf(act, sizeof act, "%.1fB active", static_cast<double>(m.active_params()) / 1e9);
      t += extra + (m.moe.enabled() ? std::string(", ") + act : std::string()) + "\n";
    }
  }
  t += "gpus:\n";
  for (const auto& n : gpu_preset_names()) {
    auto g = gpu_preset(n);
    char line[200];
    // Dense tensor-core peaks (fp8, fp4: "-" where the GPU has none), HBM bandwidth, capacity in GiB as stored.
    auto peak = [](double flops) {
      char b[16];
      if (flops > 0) std::snprintf(b, sizeof b, "%6.0f", flops / 1e12);
      else std::snprintf(b, sizeof b, "%6s", "-");
      return std::string(b);
    };
    std::snprintf(line, sizeof line, "  %-15s %6.0f bf16 %s fp8 %s fp4 TFLOP/s  %6.0f GB/s HBM  %5.1f GiB\n", n.c_str(),
                  g.peak_bf16_flops / 1e12, peak(g.peak_fp8_flops).c_str(), peak(g.peak_fp4_flops).c_str(),
                  g.hbm_Bps / 1e9, g.memory_bytes / units::kGiB);
    t += line;
  }
  t += "clusters (--cluster NAME:GPUS, or a JSON file):\n";
  for (const auto& n : cluster_preset_names()) {
    auto c = load_cluster(n);
    char line[300];
    if (c.has_graph())
      std::snprintf(
          line, sizeof line,
          "  %-15s %d x %s per node, explicit graph (%zu vertices, %zu links per node), %d NICs x %.0f Gb/s\n",
          (n + ":N").c_str(), c.gpus_per_node, c.gpu.name.c_str(), c.graph.vertices.size() - 1, c.graph.links.size(),
          c.inter.nics_per_node, c.inter.nic_bandwidth_Bps * 8 / 1e9);
    else
      std::snprintf(line, sizeof line,
                    "  %-15s %d x %s per node, NVSwitch %.0f GB/s per GPU per direction, %d NICs x %.0f Gb/s\n",
                    (n + ":N").c_str(), c.gpus_per_node, c.gpu.name.c_str(), c.intra.bandwidth_Bps / 1e9,
                    c.inter.nics_per_node, c.inter.nic_bandwidth_Bps * 8 / 1e9);
    t += line;
  }
  t += "fewer GPUs per node: NAME:GPUS@PER_NODE (gb200-nvl72:576@64 = 9 racks of 64; NVL72 counts that are multiples "
       "of 64 but not of 72 take 64 per rack)\n";
  t += "fabrics (after NAME:GPUS): :fat-tree:NODES_PER_LEAF:OVERSUB[:LEAVES_PER_POD:POD_OVERSUB], "
       ":rail:NODES_PER_RAIL:OVERSUB\n";
  t += "other NICs (after NAME:GPUS, before a fabric): :nics:NICS_PER_NODE:GBPS (dgx-a100:384:nics:4:100 = 4 x "
       "100 Gb/s per node)\n";
  p.text = std::move(t);
  return p;
}

Calibration resolve_calibration(const std::string& spec, const ClusterSpec& cluster) {
  return calibration_or_default(spec, cluster.gpu.name);
}

Inputs load_inputs(const InputSpec& spec) {
  Inputs in;
  in.model = load_model(spec.model);
  in.cluster = load_cluster(spec.cluster);
  if (!spec.plan.empty()) in.plan = load_plan(spec.plan);
  in.calibration = resolve_calibration(spec.calibration, in.cluster);
  return in;
}

void validate_inputs(const Inputs& in) {
  const sim::SimOptions opt;
  sim::validate_inputs(sim::Inputs{&in.model, &in.cluster, &in.plan, &in.calibration, &opt});
}

namespace detail {

sim::SimOptions sim_options(const SimulateOptions& o) {
  const std::string& cmd = o.command;
  const std::string algo_flag = cmd == "collective" ? "--algo" : "--collective-algo";
  sim::SimOptions opt;
  if (o.collectives == "flow") opt.collective_mode = sim::CollectiveMode::FLOW;
  else if (o.collectives == "steps") opt.collective_mode = sim::CollectiveMode::STEPS;
  else throw ConfigError(cmd + ": --collectives '" + o.collectives + "' is not known (known: flow, steps)");
  if (o.fold == "auto") opt.fold = sim::FoldMode::AUTO;
  else if (o.fold == "none") opt.fold = sim::FoldMode::NONE;
  else throw ConfigError(cmd + ": --fold '" + o.fold + "' is not known (known: auto, none)");
  const std::string& algo = o.collective_algorithm;
  if (algo == "auto") opt.collective_algorithm = sim::CollectiveAlgorithm::AUTO;
  else if (algo == "ring") opt.collective_algorithm = sim::CollectiveAlgorithm::RING;
  else if (algo == "hierarchical") opt.collective_algorithm = sim::CollectiveAlgorithm::HIERARCHICAL;
  else if (algo == "tree") opt.collective_algorithm = sim::CollectiveAlgorithm::TREE;
  else if (algo == "nvls") opt.collective_algorithm = sim::CollectiveAlgorithm::NVLS;
  else
    throw ConfigError(cmd + ": " + algo_flag + " '" + algo +
                      "' is not known (known: auto, ring, hierarchical, tree, nvls)");
  opt.network = network_mode(o.network, cmd);
  if (o.engine == "auto") opt.engine = sim::FlowEngine::AUTO;
  else if (o.engine == "simgrid") opt.engine = sim::FlowEngine::SIMGRID;
  else if (o.engine == "maxmin") opt.engine = sim::FlowEngine::MAXMIN;
  else throw ConfigError(cmd + ": --engine '" + o.engine + "' is not known (known: auto, simgrid, maxmin)");
  opt.channels = o.channels;
  opt.spread_rings = o.spread_rings;
  opt.interference = o.interference;
  opt.receive_bound = o.receive_bound;
  if (opt.channels < 1 || opt.channels > 64) throw ConfigError(cmd + ": --channels must be between 1 and 64");
  return opt;
}

sim::NetworkMode network_mode(const std::string& net, const std::string& cmd) {
  if (net == "flow") return sim::NetworkMode::FLOW;
  if (net == "analytic") return sim::NetworkMode::ANALYTIC;
  throw ConfigError(cmd + ": --network '" + net + "' is not known (known: flow, analytic)");
}

double memory_limit_bytes(const SimulateOptions& options) {
  return options.max_memory_bytes == 0 ? default_max_memory_bytes() : options.max_memory_bytes;
}

void check_memory(const Inputs& in, const sim::SimOptions& opt, const SimulateOptions& options,
                  const sim::FootprintOutputs& outputs) {
  const double limit = memory_limit_bytes(options);
  if (limit < 0 || !std::isfinite(limit)) return;
  const sim::Footprint f = sim::estimate_footprint(in.model, in.cluster, in.plan, in.calibration, opt, outputs);
  if (f.bytes <= limit) return;
  // What to change, most effective first.
  std::string why;
  std::vector<std::string> fixes;
  if (opt.fold == sim::FoldMode::NONE) {
    sim::SimOptions folded = opt;
    folded.fold = sim::FoldMode::AUTO;
    const sim::Footprint a = sim::estimate_footprint(in.model, in.cluster, in.plan, in.calibration, folded, outputs);
    if (a.simulated_ranks < f.simulated_ranks)
      fixes.push_back((options.export_chakra ? "drop --export-chakra, which simulates every rank (folded: "
                                             : "drop --fold none (") +
                      sim::bytes_text(a.bytes) + ")");
  } else if (f.simulated_ranks > in.plan.pp && !f.fold_tp && !f.fold_dp && !f.fold_edp) {
    why = f.fold_reason;
  }
  if (opt.collective_mode == sim::CollectiveMode::STEPS) fixes.emplace_back("use --collectives flow");
  if (outputs.perfetto) fixes.emplace_back("drop --perfetto");
  fixes.emplace_back("use fewer micro-batches (a smaller --gbs or a larger --mbs)");
  std::string msg = options.command + ": this run would need about " + sim::describe(f, why) + " but --max-memory is " +
                    sim::bytes_text(limit) + ": ";
  for (const auto& fix : fixes) msg += fix + ", ";
  throw ConfigError(msg + "or raise --max-memory");
}

}  // namespace detail

namespace detail {
std::string write_reproducer(const Inputs& in, const SimulateOptions& options) {
  const nlohmann::json j = {{"schema", "dtsim.reproducer"},
                            {"dtsim_version", DTSIM_VERSION},
                            {"model", to_json(in.model)},
                            {"cluster", to_json(in.cluster)},
                            {"plan", to_json(in.plan, in.model.num_layers)},
                            {"calibration", to_json(in.calibration)},
                            {"options",
                             {{"collectives", options.collectives},
                              {"fold", options.fold},
                              {"collective_algorithm", options.collective_algorithm},
                              {"network", options.network},
                              {"engine", options.engine},
                              {"channels", options.channels},
                              {"spread_rings", options.spread_rings},
                              {"interference", options.interference},
                              {"export_chakra", options.export_chakra}}}};
  const std::string text = j.dump(2) + "\n";
  // Named by the content: the same failing run writes the same file.
  const std::string name =
      "dtsim-reproducer-" + std::to_string(std::hash<std::string>{}(text) % 1000000007ULL) + ".json";
  std::error_code ec;
  auto dir = std::filesystem::temp_directory_path(ec);
  if (ec) dir = ".";
  const auto path = dir / name;
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) return "the run's inputs could not be written to " + path.string();
  return "the run's inputs (model, cluster, plan, calibration, options) are in " + path.string() + "; please report it";
}
}  // namespace detail

double default_max_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return -1;  // unknown: no limit
  return 0.9 * static_cast<double>(pages) * static_cast<double>(page);
}

namespace {

SimulateResult result_of(const sim::Simulation& s) {
  const sim::Report& rep = s.report;
  SimulateResult r;
  r.iteration_time_s = rep.iteration_time_s;
  r.samples_per_s = rep.samples_per_s;
  r.tokens_per_s = rep.tokens_per_s;
  r.model_tflops_per_gpu = rep.model_tflops_per_gpu;
  r.hardware_tflops_per_gpu = rep.hardware_tflops_per_gpu;
  r.mfu = rep.mfu;
  r.max_bubble_fraction = rep.max_bubble_fraction;
  r.oom = !rep.oom.empty();
  r.engine = s.engine.engine;
  r.tasks = rep.tasks;
  r.activities = rep.activities;
  for (const auto& rr : rep.ranks) {
    RankResult x;
    x.global_rank = rr.global_rank;
    x.stage = rr.coord.pp;
    x.data = rr.coord.dp;
    x.tensor = rr.coord.tp;
    x.compute_s = rr.compute_s;
    x.exposed_comm_s = rr.exposed_comm_s;
    x.bubble_s = rr.bubble_s;
    x.variability_wait_s = rr.variability_wait_s;
    x.bubble_fraction = rr.bubble_fraction;
    x.peak_bytes = rr.peak_bytes;
    x.peak_time_s = rr.peak_time_s;
    x.oom_event = rr.oom_event;
    x.memory_timeline.reserve(rr.memory_timeline.size());
    for (const auto& [t, bytes] : rr.memory_timeline) {
      double total = 0;
      for (double b : bytes) total += b;
      x.memory_timeline.emplace_back(t, total);
    }
    r.peak_bytes = std::max(r.peak_bytes, rr.peak_bytes);
    r.ranks.push_back(std::move(x));
  }
  for (const auto& l : s.engine.link_stats)
    r.links.push_back({l.name, l.bandwidth_Bps, l.bytes, l.busy_s, l.peak_utilization});
  return r;
}

}  // namespace

SimulateResult simulate(const Inputs& in, const SimulateOptions& options) {
  sim::SimOptions opt = detail::sim_options(options);
  if (options.export_chakra) {
    // The export writes every rank's graph: no folding (exact, same results), and the lowering keeps its collectives.
    const auto& p = options.chakra_prefix;
    if (p.empty() || p.find_first_of("/\\") != std::string::npos || p == "." || p == "..")
      throw ConfigError(options.command + ": the Chakra prefix '" + p + "' must be a plain file-name prefix");
    opt.fold = sim::FoldMode::NONE;
    opt.record_collectives = true;
    opt.record_kernels = true;  // each compute node's tensor_size: the HBM bytes of its kernels
  }
  const sim::Inputs si{&in.model, &in.cluster, &in.plan, &in.calibration, &opt};
  // Valid inputs first: the trace request and the memory estimate use the plan's world size.
  sim::validate_inputs(si);
  // The trace's ranks and links are checked before the simulation runs (a large run takes minutes).
  sim::TraceRequest trace;
  sim::parse_trace_ranks(options.trace_ranks, in.plan.world_size(), trace, options.command + ": --trace-ranks");
  trace.link_tracks = options.trace_links;
  trace.max_links = sim::parse_trace_link_count(options.trace_link_count, options.command + ": --trace-links");
  // Refuse what will not fit before lowering it.
  detail::check_memory(in, opt, options,
                       {options.trace,
                        trace.ranks == sim::TraceRequest::Ranks::ALL    ? -1
                        : trace.ranks == sim::TraceRequest::Ranks::LIST ? static_cast<int>(trace.rank_list.size())
                                                                        : 0,
                        options.perfetto, options.export_chakra});
  sim::ChakraExport chakra;
  sim::Simulation s;
  try {
    s = options.export_chakra ? sim::simulate(si, {},
                                              [&](const sim::Lowered& low, const sim::EngineResult& res) {
                                                chakra = sim::chakra_export(low, res);
                                              })
                              : sim::simulate(si);
  } catch (const InternalError& e) {
    throw InternalError(std::string(e.what()) + "; " + detail::write_reproducer(in, options));
  }
  SimulateResult r = result_of(s);
  r.text = sim::human_summary(si, s.lowered, s.engine, s.report);
  r.files.emplace_back("summary.json", sim::summary_json(si, s.lowered, s.engine, s.report).dump(2) + "\n");
  if (options.trace)
    r.files.emplace_back("trace.json", sim::trace_json(si, s.lowered, s.engine, s.report,
                                                       sim::select_trace(s.lowered, s.report, s.engine, trace)));
  if (options.perfetto)
    r.files.emplace_back("trace.pftrace", sim::perfetto_trace(si, s.lowered, s.engine, s.report, options.trace_links));
  if (options.export_chakra)
    for (auto& f : sim::chakra_export_files(chakra, options.chakra_prefix))
      r.files.emplace_back("chakra/" + f.first, std::move(f.second));
  return r;
}

JobsResult simulate_jobs(const std::string& cluster_spec, const std::string& jobs_file, const std::string& calibration,
                         const SimulateOptions& options, bool alone) {
  if (options.export_chakra)
    throw ConfigError(options.command + ": --export-chakra exports one job; it cannot be combined with --jobs");
  const ClusterSpec cluster = load_cluster(cluster_spec);
  const auto jobs = sim::load_jobs(jobs_file);
  const Calibration cal = resolve_calibration(calibration, cluster);
  const sim::SimOptions opt = detail::sim_options(options);
  const auto res = sim::simulate_jobs(jobs, cluster, cal, opt, alone);
  JobsResult out;
  nlohmann::json js = nlohmann::json::array();
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    const auto& jr = res.jobs[k];
    const sim::Inputs in{&jobs[k].model, &cluster, &jobs[k].plan, &cal, &jr.options};
    auto j = sim::summary_json(in, jr.lowered, jr.engine, jr.report);
    j.erase("links");
    j["job"] = {{"name", jobs[k].name}, {"first_gpu", jobs[k].first_gpu}, {"gpus", jobs[k].plan.world_size()}};
    if (jr.alone_iteration_s > 0) {
      j["job"]["alone_iteration_time_s"] = jr.alone_iteration_s;
      j["job"]["slowdown"] = jr.report.iteration_time_s / jr.alone_iteration_s;
    }
    js.push_back(j);
    out.jobs.push_back(
        {jobs[k].name, jobs[k].first_gpu, jobs[k].plan.world_size(), jr.report.iteration_time_s, jr.alone_iteration_s});
    out.text += "== job '" + jobs[k].name + "' on GPUs " + std::to_string(jobs[k].first_gpu) + ".." +
                std::to_string(jobs[k].first_gpu + jobs[k].plan.world_size() - 1) + "\n";
    out.text += sim::human_summary(in, jr.lowered, jr.engine, jr.report);
    if (jr.alone_iteration_s > 0) {
      char line[200];
      std::snprintf(line, sizeof line, "sharing the cluster: %.3f s per iteration vs %.3f s alone (slowdown x%.3f)\n",
                    jr.report.iteration_time_s, jr.alone_iteration_s,
                    jr.report.iteration_time_s / jr.alone_iteration_s);
      out.text += line;
    }
    out.text += "\n";
  }
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : res.combined.link_stats)
    links.push_back({{"name", l.name},
                     {"bandwidth_Bps", l.bandwidth_Bps},
                     {"bytes", l.bytes},
                     {"busy_s", l.busy_s},
                     {"peak_utilization", l.peak_utilization}});
  const nlohmann::json summary = {{"schema", "dtsim.jobs"},
                                  {"schema_version", 1},
                                  {"dtsim_version", DTSIM_VERSION},
                                  {"simgrid_version", sim::simgrid_version()},
                                  {"cluster", to_json(cluster)},
                                  {"jobs", js},
                                  {"links", links}};
  out.files.emplace_back("summary.json", summary.dump(2) + "\n");
  return out;
}

CollectiveResult collective(const CollectiveRequest& req) {
  if (req.options.export_chakra)
    throw ConfigError("collective: the Chakra export (SimulateOptions::export_chakra) is for simulate() only");
  const ClusterSpec cluster = load_cluster(req.cluster);
  const int n = req.ranks == -1 ? cluster.total_gpus() : req.ranks;
  const auto kind = sim::collective_kind_from_string(req.op, "--op");
  Calibration cal = resolve_calibration(req.calibration, cluster);
  if (!req.nccl_protocol.empty()) {
    cal.nccl_protocol = req.nccl_protocol;
    cal.validate("collective: --nccl-proto");
  }
  SimulateOptions so = req.options;
  so.command = "collective";
  const sim::SimOptions opt = detail::sim_options(so);
  if (req.sizes_bytes.empty()) throw ConfigError("collective: no message size given");
  if (n < 1 || n > cluster.total_gpus())
    throw ConfigError("collective: --ranks " + std::to_string(n) + " does not fit the " +
                      std::to_string(cluster.total_gpus()) + " GPUs of cluster '" + cluster.name + "'");
  // Refused up front when the largest point would not fit (issue Guard): an all-to-all lowers n(n-1) flows. A
  // collective's tasks never fall as its size grows (chunk counts only rise), so the largest size is the one to check.
  const double limit = detail::memory_limit_bytes(so);
  if (limit > 0 && std::isfinite(limit)) {
    const double bytes = *std::max_element(req.sizes_bytes.begin(), req.sizes_bytes.end());
    const sim::Footprint f = sim::collective_footprint(cluster, cal, opt, n, kind, bytes);
    if (f.bytes > limit)
      throw ConfigError("collective: " + req.op + " of " + sim::bytes_text(bytes) + " over " + std::to_string(n) +
                        " GPUs would need about " + sim::describe(f) + " but the memory limit is " +
                        sim::bytes_text(limit) + ": use fewer --ranks" +
                        (so.collectives == "steps" ? std::string(", --collectives flow") : std::string()) +
                        (so.fold == "none" ? std::string(", --fold auto") : std::string()));
  }
  std::vector<sim::CollectivePoint> pts;
  if (req.sizes_bytes.size() == 1) pts.push_back(sim::run_collective(cluster, cal, opt, n, kind, req.sizes_bytes[0]));
  else pts = sim::collective_sweep(cluster, cal, opt, n, kind, req.sizes_bytes);

  CollectiveResult out;
  std::string tsv = "bytes\ttime_us\talgbw_GBps\tbusbw_GBps\n";
  nlohmann::json rows = nlohmann::json::array();
  out.text = "dtsim " + std::string(DTSIM_VERSION) + " | " + req.op + " over " + std::to_string(n) + " GPUs of " +
             cluster.name + " | algorithm " + so.collective_algorithm + ", collectives as " + so.collectives + ", " +
             so.network + " network\n\n";
  out.text += "        bytes      time (us)   algbw (GB/s)   busbw (GB/s)\n";
  for (const auto& p : pts) {
    out.points.push_back({p.bytes, p.time_s, p.algbw_Bps, p.busbw_Bps});
    char line[160];
    std::snprintf(line, sizeof line, "%.0f\t%.3f\t%.3f\t%.3f\n", p.bytes, p.time_s * 1e6, p.algbw_Bps / 1e9,
                  p.busbw_Bps / 1e9);
    tsv += line;
    std::snprintf(line, sizeof line, "%13.0f  %13.3f  %13.3f  %13.3f\n", p.bytes, p.time_s * 1e6, p.algbw_Bps / 1e9,
                  p.busbw_Bps / 1e9);
    out.text += line;
    rows.push_back({{"bytes", p.bytes}, {"time_s", p.time_s}, {"algbw_Bps", p.algbw_Bps}, {"busbw_Bps", p.busbw_Bps}});
  }
  const nlohmann::json j = {{"schema", "dtsim.collective"},
                            {"schema_version", 1},
                            {"dtsim_version", DTSIM_VERSION},
                            {"cluster", to_json(cluster)},
                            {"calibration", cal.name},
                            {"ranks", n},
                            {"op", req.op},
                            {"algorithm", so.collective_algorithm},
                            {"collectives", so.collectives},
                            {"network", so.network},
                            {"definitions",
                             "nccl-tests: algbw = bytes / time; busbw = algbw * 2(n-1)/n (all-reduce), "
                             "* (n-1)/n (all-gather, reduce-scatter)"},
                            {"points", rows}};
  out.files = {{"collective.tsv", tsv}, {"collective.json", j.dump(2) + "\n"}};
  return out;
}

}  // namespace dtsim
