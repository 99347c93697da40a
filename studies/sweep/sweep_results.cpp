#include "studies/sweep/sweep_results.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "traces/error.hpp"

namespace dtsim::sim {
namespace {
using nlohmann::json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const json& field(const json& j, const std::string& ctx, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) throw FormatError(ctx + ": missing field '" + name + "'");
  return *it;
}
[[noreturn]] void wrong_type(const std::string& ctx, const char* name, const json& v, const char* expected) {
  throw FormatError(ctx + ": field '" + name + "' is " + v.type_name() + ", expected " + expected);
}
std::string str(const json& j, const std::string& ctx, const char* name) {
  const json& v = field(j, ctx, name);
  if (v.is_null()) return "";
  if (!v.is_string()) wrong_type(ctx, name, v, "a string");
  return v.get<std::string>();
}
int integer(const json& j, const std::string& ctx, const char* name) {
  const json& v = field(j, ctx, name);
  if (!v.is_number_integer()) wrong_type(ctx, name, v, "an integer");
  return v.get<int>();
}
/// A number, or NaN for null.
double number(const json& j, const std::string& ctx, const char* name) {
  const json& v = field(j, ctx, name);
  if (v.is_null()) return kNaN;
  if (!v.is_number()) wrong_type(ctx, name, v, "a number or null");
  return v.get<double>();
}
bool boolean(const json& j, const std::string& ctx, const char* name, bool null_ok) {
  const json& v = field(j, ctx, name);
  if (v.is_null() && null_ok) return false;
  if (!v.is_boolean()) wrong_type(ctx, name, v, null_ok ? "true, false or null" : "true or false");
  return v.get<bool>();
}

SweepRow row_from_json(const json& j, const std::string& ctx) {
  if (!j.is_object()) throw FormatError(ctx + ": expected a JSON object, found " + j.type_name());
  SweepRow r;
  r.id = str(j, ctx, "id");
  r.index = integer(j, ctx, "index");
  r.model = str(j, ctx, "model");
  r.params = number(j, ctx, "params");
  r.cluster = str(j, ctx, "cluster");
  r.gpu = str(j, ctx, "gpu");
  r.gpus = integer(j, ctx, "gpus");
  r.nodes = integer(j, ctx, "nodes");
  r.network = str(j, ctx, "network");
  r.planner = str(j, ctx, "planner");
  r.tp = integer(j, ctx, "tp");
  r.pp = integer(j, ctx, "pp");
  r.dp = integer(j, ctx, "dp");
  r.cp = j.contains("cp") ? integer(j, ctx, "cp") : 1;
  r.ep = j.contains("ep") ? integer(j, ctx, "ep") : 1;
  r.vp = integer(j, ctx, "vp");
  r.mbs = integer(j, ctx, "mbs");
  r.gbs = integer(j, ctx, "gbs");
  r.schedule = str(j, ctx, "schedule");
  r.zero = integer(j, ctx, "zero");
  r.recompute = str(j, ctx, "recompute");
  r.tp_layout = str(j, ctx, "tp_layout");
  r.sequence_parallel = boolean(j, ctx, "sequence_parallel", false);
  r.precision = j.contains("precision") ? str(j, ctx, "precision") : "bf16";
  r.tp_comm_overlap = j.contains("tp_comm_overlap") && boolean(j, ctx, "tp_comm_overlap", false);
  r.overlap_param_gather = j.contains("overlap_param_gather") && boolean(j, ctx, "overlap_param_gather", false);
  r.cuda_graphs = j.contains("cuda_graphs") && boolean(j, ctx, "cuda_graphs", false);
  r.dispatcher = j.contains("dispatcher") ? str(j, ctx, "dispatcher") : "alltoall";
  r.overlap_moe_comm = j.contains("overlap_moe_comm") && boolean(j, ctx, "overlap_moe_comm", false);
  r.megatron_fsdp = j.contains("megatron_fsdp") && boolean(j, ctx, "megatron_fsdp", false);
  r.status = str(j, ctx, "status");
  if (r.status != "ok" && r.status != "oom" && r.status != "failed" && r.status != "crashed")
    throw FormatError(ctx + ": status '" + r.status + "' is not one of ok, oom, failed, crashed");
  r.error = str(j, ctx, "error");
  r.iteration_time_s = number(j, ctx, "iteration_time_s");
  r.tokens_per_s = number(j, ctx, "tokens_per_s");
  r.samples_per_s = number(j, ctx, "samples_per_s");
  r.mfu = number(j, ctx, "mfu");
  r.model_tflops_per_gpu = number(j, ctx, "model_tflops_per_gpu");
  r.peak_memory_bytes = number(j, ctx, "peak_memory_bytes");
  r.memory_capacity_bytes = number(j, ctx, "memory_capacity_bytes");
  r.fits = boolean(j, ctx, "fits", true);
  const json& mem = field(j, ctx, "memory_bytes");
  if (mem.is_null()) {
    r.memory_bytes = {kNaN, kNaN, kNaN, kNaN, kNaN};
  } else {
    if (!mem.is_object()) wrong_type(ctx, "memory_bytes", mem, "an object or null");
    const std::string mctx = ctx + ": memory_bytes";
    r.memory_bytes = {number(mem, mctx, "weights"), number(mem, mctx, "gradients"), number(mem, mctx, "optimizer"),
                      number(mem, mctx, "activations"), number(mem, mctx, "reserved")};
  }
  r.compute_s = number(j, ctx, "compute_s");
  r.exposed_comm_s = number(j, ctx, "exposed_comm_s");
  r.bubble_s = number(j, ctx, "bubble_s");
  r.sim_wall_s = number(j, ctx, "sim_wall_s");
  if (r.ok()) {
    if (!std::isfinite(r.tokens_per_s) || !std::isfinite(r.peak_memory_bytes) || field(j, ctx, "fits").is_null())
      throw FormatError(ctx + ": status ok but tokens_per_s, peak_memory_bytes or fits is null");
  }
  return r;
}

json num_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

}  // namespace

std::string SweepRow::strategy() const {
  std::string s = std::string("tp") + std::to_string(tp) + " pp" + std::to_string(pp) + " dp" + std::to_string(dp) +
                  (cp > 1 ? " cp" + std::to_string(cp) : std::string()) +
                  (ep > 1 ? " ep" + std::to_string(ep) : std::string()) + " vp" + std::to_string(vp) + " mbs" +
                  std::to_string(mbs) + " zero" + std::to_string(zero) +
                  " recompute=" + (recompute.empty() ? std::string("none") : recompute) +
                  " layout=" + (tp_layout.empty() ? std::string("1d") : tp_layout) + (sequence_parallel ? " sp" : "") +
                  (precision.empty() || precision == "bf16" ? std::string() : " " + precision) +
                  (tp_comm_overlap ? " tp-overlap" : "") + (overlap_param_gather ? " param-gather-overlap" : "") +
                  (cuda_graphs ? " cuda-graphs" : "") +
                  (dispatcher.empty() || dispatcher == "alltoall" ? std::string() : " " + dispatcher) +
                  (overlap_moe_comm ? " moe-comm-overlap" : "") + (megatron_fsdp ? " megatron-fsdp" : "");
  return planner.empty() ? s : std::string("planner ") + planner + ": " + s;
}

void StatusCounts::add(const SweepRow& r) {
  ++total;
  if (r.ok()) ++(r.fits ? ok_fit : ok_over);
  else if (r.status == "oom") ++oom;
  else if (r.status == "failed") ++failed;
  else ++crashed;
}

StatusCounts& StatusCounts::operator+=(const StatusCounts& o) {
  total += o.total, ok_fit += o.ok_fit, ok_over += o.ok_over, oom += o.oom, failed += o.failed, crashed += o.crashed;
  return *this;
}

StatusCounts count_status(const std::vector<SweepRow>& rows) {
  StatusCounts c;
  for (const SweepRow& r : rows) c.add(r);
  return c;
}

std::vector<SweepRow> parse_sweep_results(std::istream& in, const std::string& name) {
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<SweepRow> rows;
  std::size_t pos = 0;
  for (int line_no = 1; pos < text.size(); ++line_no) {
    const std::size_t nl = text.find('\n', pos);
    const bool terminated = nl != std::string::npos;
    const std::string line = text.substr(pos, terminated ? nl - pos : std::string::npos);
    pos = terminated ? nl + 1 : text.size();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string ctx = name + ":" + std::to_string(line_no);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      if (!terminated)
        throw FormatError(ctx +
                          ": torn last line (incomplete JSON without a newline: the sweep was interrupted while "
                          "writing it; resume the sweep or delete the line)");
      const std::string what = e.what();
      const auto at = what.find("parse error");
      throw FormatError(ctx + ": not valid JSON: " + (at == std::string::npos ? what : what.substr(at)));
    }
    rows.push_back(row_from_json(j, ctx));
  }
  return rows;
}

SweepResults load_sweep_results(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    file = (fs::path(path) / "results.jsonl").string();
    if (!fs::exists(file, ec))
      throw ConfigError("'" + path + "' is a directory without results.jsonl (not a sweep output?)");
  } else if (!fs::exists(path, ec)) {
    throw ConfigError("'" + path + "' does not exist (give a results.jsonl or a sweep output directory)");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ConfigError("cannot open '" + file + "'");
  return {file, parse_sweep_results(in, file)};
}

nlohmann::json to_json(const SweepRow& r) {
  const json mem = {{"weights", num_or_null(r.memory_bytes.weights)},
                    {"gradients", num_or_null(r.memory_bytes.gradients)},
                    {"optimizer", num_or_null(r.memory_bytes.optimizer)},
                    {"activations", num_or_null(r.memory_bytes.activations)},
                    {"reserved", num_or_null(r.memory_bytes.reserved)}};
  const bool have_mem = std::isfinite(r.memory_bytes.weights);
  return {{"id", r.id},
          {"index", r.index},
          {"model", r.model},
          {"params", num_or_null(r.params)},
          {"cluster", r.cluster},
          {"gpu", r.gpu},
          {"gpus", r.gpus},
          {"nodes", r.nodes},
          {"network", r.network},
          {"planner", r.planner},
          {"tp", r.tp},
          {"pp", r.pp},
          {"dp", r.dp},
          {"cp", r.cp},
          {"ep", r.ep},
          {"vp", r.vp},
          {"mbs", r.mbs},
          {"gbs", r.gbs},
          {"schedule", r.schedule},
          {"zero", r.zero},
          {"recompute", r.recompute},
          {"tp_layout", r.tp_layout},
          {"sequence_parallel", r.sequence_parallel},
          {"precision", r.precision},
          {"tp_comm_overlap", r.tp_comm_overlap},
          {"overlap_param_gather", r.overlap_param_gather},
          {"cuda_graphs", r.cuda_graphs},
          {"dispatcher", r.dispatcher},
          {"overlap_moe_comm", r.overlap_moe_comm},
          {"megatron_fsdp", r.megatron_fsdp},
          {"status", r.status},
          {"error", r.error},
          {"iteration_time_s", num_or_null(r.iteration_time_s)},
          {"tokens_per_s", num_or_null(r.tokens_per_s)},
          {"samples_per_s", num_or_null(r.samples_per_s)},
          {"mfu", num_or_null(r.mfu)},
          {"model_tflops_per_gpu", num_or_null(r.model_tflops_per_gpu)},
          {"peak_memory_bytes", num_or_null(r.peak_memory_bytes)},
          {"memory_capacity_bytes", num_or_null(r.memory_capacity_bytes)},
          {"fits", r.ok() || std::isfinite(r.peak_memory_bytes) ? json(r.fits) : json(nullptr)},
          {"memory_bytes", have_mem ? mem : json(nullptr)},
          {"compute_s", num_or_null(r.compute_s)},
          {"exposed_comm_s", num_or_null(r.exposed_comm_s)},
          {"bubble_s", num_or_null(r.bubble_s)},
          {"sim_wall_s", num_or_null(r.sim_wall_s)}};
}

}  // namespace dtsim::sim
