#include "validate/calibrate/compute_fit.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "strategies/transformer_costs.hpp"
#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/kineto_import.hpp"
#include "traces/text.hpp"
#include "traces/units.hpp"

namespace dtsim::sim {

const char* to_string(ComputeCategory c) {
  switch (c) {
    case ComputeCategory::GEMM: return "gemm";
    case ComputeCategory::MEMORY: return "memory";
    case ComputeCategory::CONVOLUTION: return "convolution";
    case ComputeCategory::COLLECTIVE: return "collective";
    case ComputeCategory::OTHER: return "other";
  }
  return "?";
}

void ComputeSamples::append(ComputeSamples other) {
  samples.insert(samples.end(), std::make_move_iterator(other.samples.begin()),
                 std::make_move_iterator(other.samples.end()));
  for (const auto& [reason, tally] : other.skipped) {
    skipped[reason].kernels += tally.kernels;
    skipped[reason].seconds += tally.seconds;
  }
  kernels += other.kernels;
  for (auto& s : other.sources) sources.push_back(std::move(s));
  notes.insert(notes.end(), other.notes.begin(), other.notes.end());
}

double model_time_s(const ComputeSample& s, double hbm_Bps, const Calibration& cal) {
  // strategies/transformer_costs.cpp op_time_s with the sample's own peak, without its host floor (host_issue_s).
  const double t_mem = s.bytes / (hbm_Bps * cal.memory_bandwidth_efficiency);
  const double t_flop = s.category == ComputeCategory::GEMM
                            ? s.flops / (s.peak_flops * cost::gemm_efficiency(s.flops * s.curve_scale, cal))
                            : 0;
  return std::max(t_mem, t_flop) + cal.kernel_launch_s;
}

// ---------------------------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------------------------
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string trim(std::string_view s) {
  std::size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) --b;
  return std::string(s.substr(a, b - a));
}

std::string pct(double v) { return format_number("%.1f%%", 100 * v); }

/// Peak of a TF32 tensor-core GEMM: half the fp16 tensor-core peak (A100: 156 of 312 TFLOP/s, H100: 495 of 989).
double tf32_peak(const GpuSpec& gpu) { return gpu.peak_fp16_flops / 2; }

/// Element size and dtype label of a PyTorch profiler "Input type" that denotes a tensor; nullopt otherwise
/// ("Scalar", "TensorList", "", "ScalarList", ...).
struct TensorType {
  int bytes = 0;
  std::string dtype;
};
std::optional<TensorType> tensor_type(std::string_view type) {
  std::string t(type);
  if (t.rfind("c10::", 0) == 0) t = t.substr(5);
  static const std::pair<const char*, TensorType> kNamed[] = {
      {"float", {4, "fp32"}},
      {"double", {8, "fp64"}},
      {"Half", {2, "fp16"}},
      {"BFloat16", {2, "bf16"}},
      {"long", {8, "int64"}},
      {"long int", {8, "int64"}},
      {"int64_t", {8, "int64"}},
      {"int", {4, "int32"}},
      {"short", {2, "int16"}},
      {"signed char", {1, "int8"}},
      {"unsigned char", {1, "uint8"}},
      {"bool", {1, "bool"}},
      {"complex<float>", {8, "complex64"}},
      {"complex<double>", {16, "complex128"}},
      {"complex<c10::Half>", {4, "complex32"}},
      {"Float8_e4m3fn", {1, "fp8"}},
      {"Float8_e5m2", {1, "fp8"}},
  };
  for (const auto& [name, info] : kNamed)
    if (t == name) return info;
  const int size = kineto::dtype_size_bytes(t);  // "Float", "BFloat16", "float16", ... spellings
  if (size <= 0) return std::nullopt;
  const std::string l = lower(t);
  if (l == "half" || l == "float16" || l == "fp16") return TensorType{size, "fp16"};
  if (l == "bfloat16" || l == "bf16") return TensorType{size, "bf16"};
  if (l == "float" || l == "float32" || l == "fp32") return TensorType{size, "fp32"};
  if (l == "double" || l == "float64" || l == "fp64") return TensorType{size, "fp64"};
  return TensorType{size, l};
}

double numel(const std::vector<std::int64_t>& dims) {
  double n = 1;
  for (std::int64_t d : dims) n *= static_cast<double>(std::max<std::int64_t>(d, 0));
  return n;
}

// ---------------------------------------------------------------------------------------------------------------
// Operator classes
// ---------------------------------------------------------------------------------------------------------------

/// "aten::add_" -> "add", "aten::_softmax" -> "_softmax", "MmBackward0" -> "MmBackward0".
std::string op_class_of(std::string_view name) {
  std::string c(name);
  if (c.rfind("aten::", 0) == 0) c = c.substr(6);
  if (c.size() > 1 && c.back() == '_') c.pop_back();
  return c;
}

const std::set<std::string, std::less<>>& gemm_classes() {
  static const std::set<std::string, std::less<>> s = {"mm",     "addmm",  "bmm",    "baddbmm",
                                                       "addbmm", "matmul", "linear", "_addmm_activation"};
  return s;
}
/// Element-wise, normalisation, dropout, copy/fill and reduction operators: memory-bound kernels.
const std::set<std::string, std::less<>>& memory_classes() {
  static const std::set<std::string, std::less<>> s = {"add",
                                                       "sub",
                                                       "rsub",
                                                       "mul",
                                                       "div",
                                                       "neg",
                                                       "abs",
                                                       "exp",
                                                       "log",
                                                       "log2",
                                                       "log1p",
                                                       "sqrt",
                                                       "rsqrt",
                                                       "pow",
                                                       "reciprocal",
                                                       "sign",
                                                       "sigmoid",
                                                       "tanh",
                                                       "relu",
                                                       "gelu",
                                                       "silu",
                                                       "hardtanh",
                                                       "leaky_relu",
                                                       "elu",
                                                       "threshold",
                                                       "threshold_backward",
                                                       "gelu_backward",
                                                       "silu_backward",
                                                       "sigmoid_backward",
                                                       "tanh_backward",
                                                       "clamp",
                                                       "clamp_min",
                                                       "clamp_max",
                                                       "where",
                                                       "masked_fill",
                                                       "nan_to_num",
                                                       "addcmul",
                                                       "addcdiv",
                                                       "lerp",
                                                       "fill",
                                                       "zero",
                                                       "copy",
                                                       "_to_copy",
                                                       "clone",
                                                       "softmax",
                                                       "_softmax",
                                                       "log_softmax",
                                                       "_log_softmax",
                                                       "_softmax_backward_data",
                                                       "_log_softmax_backward_data",
                                                       "layer_norm",
                                                       "native_layer_norm",
                                                       "native_layer_norm_backward",
                                                       "rms_norm",
                                                       "_fused_rms_norm",
                                                       "group_norm",
                                                       "native_group_norm",
                                                       "native_group_norm_backward",
                                                       "batch_norm",
                                                       "native_batch_norm",
                                                       "native_batch_norm_backward",
                                                       "cudnn_batch_norm",
                                                       "cudnn_batch_norm_backward",
                                                       "_batch_norm_impl_index",
                                                       "dropout",
                                                       "native_dropout",
                                                       "native_dropout_backward",
                                                       "_fused_dropout",
                                                       "bernoulli",
                                                       "sum",
                                                       "mean",
                                                       "norm",
                                                       "linalg_vector_norm",
                                                       "amax",
                                                       "amin"};
  return s;
}
bool is_reduction(std::string_view c) {
  return c == "sum" || c == "mean" || c == "norm" || c == "linalg_vector_norm" || c == "amax" || c == "amin";
}

ComputeCategory category_of(std::string_view cls) {
  if (gemm_classes().count(cls)) return ComputeCategory::GEMM;
  const std::string l = lower(cls);
  if (contains(l, "conv") && !contains(l, "convert")) return ComputeCategory::CONVOLUTION;
  if (memory_classes().count(cls)) return ComputeCategory::MEMORY;
  return ComputeCategory::OTHER;
}

struct GemmShape {
  double batch = 1, m = 0, n = 0, k = 0;
  int a = 0;  ///< argument index of the left operand (its type is the GEMM's dtype)
};

/// Shape of a GEMM operator from its argument shapes; nullopt when inconsistent or empty.
std::optional<GemmShape> gemm_shape(std::string_view cls, const std::vector<std::vector<std::int64_t>>& dims) {
  auto arg = [&](std::size_t i) -> const std::vector<std::int64_t>* { return i < dims.size() ? &dims[i] : nullptr; };
  GemmShape g;
  const bool with_bias = cls == "addmm" || cls == "_addmm_activation" || cls == "baddbmm" || cls == "addbmm";
  g.a = with_bias ? 1 : 0;
  const auto* A = arg(g.a);
  const auto* B = arg(g.a + 1);
  if (!A || !B) return std::nullopt;
  auto positive = [](const std::vector<std::int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](std::int64_t d) { return d > 0; });
  };
  if (!positive(*A) || !positive(*B)) return std::nullopt;
  if (cls == "mm" || cls == "addmm" || cls == "_addmm_activation") {
    if (A->size() != 2 || B->size() != 2 || (*A)[1] != (*B)[0]) return std::nullopt;
    g.m = static_cast<double>((*A)[0]), g.k = static_cast<double>((*A)[1]), g.n = static_cast<double>((*B)[1]);
  } else if (cls == "bmm" || cls == "baddbmm" || cls == "addbmm") {
    if (A->size() != 3 || B->size() != 3 || (*A)[0] != (*B)[0] || (*A)[2] != (*B)[1]) return std::nullopt;
    g.batch = static_cast<double>((*A)[0]);
    g.m = static_cast<double>((*A)[1]), g.k = static_cast<double>((*A)[2]), g.n = static_cast<double>((*B)[2]);
  } else if (cls == "linear") {  // input [..., K], weight [N, K]
    if (A->empty() || B->size() != 2 || A->back() != (*B)[1]) return std::nullopt;
    g.m = numel(*A) / static_cast<double>(A->back());
    g.k = static_cast<double>(A->back()), g.n = static_cast<double>((*B)[0]);
  } else if (cls == "matmul") {  // torch.matmul: 1-D operands and broadcast batch dimensions
    if (A->empty() || B->empty()) return std::nullopt;
    const bool a1 = A->size() == 1, b1 = B->size() == 1;
    g.m = a1 ? 1 : static_cast<double>((*A)[A->size() - 2]);
    g.k = static_cast<double>(A->back());
    const double kb = static_cast<double>(b1 ? (*B)[0] : (*B)[B->size() - 2]);
    g.n = b1 ? 1 : static_cast<double>(B->back());
    if (kb != g.k) return std::nullopt;
    const std::size_t ra = a1 ? 0 : A->size() - 2, rb = b1 ? 0 : B->size() - 2;
    for (std::size_t i = 0; i < std::max(ra, rb); ++i) {  // from the right
      const std::int64_t x = i < ra ? (*A)[ra - 1 - i] : 1, y = i < rb ? (*B)[rb - 1 - i] : 1;
      if (x != y && x != 1 && y != 1) return std::nullopt;
      g.batch *= static_cast<double>(std::max(x, y));
    }
  } else {
    return std::nullopt;
  }
  return g;
}

/// Bytes moved by a memory-bound operator (see the header comment); 0 when it has no tensor argument.
double memory_bytes(std::string_view cls, const TraceEvent& op, std::string& dtype) {
  double sum = 0, largest = 0, first = -1;
  const std::size_t n = std::min(op.input_dims.size(), op.input_types.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto t = tensor_type(op.input_types[i]);
    if (!t) continue;
    const double b = numel(op.input_dims[i]) * t->bytes;
    if (first < 0) {
      first = b;
      dtype = t->dtype;
    }
    sum += b;
    largest = std::max(largest, b);
  }
  if (first < 0) return 0;
  if (cls == "fill" || cls == "zero") return first;
  if (cls == "copy" || is_reduction(cls)) return sum;
  return sum + largest;
}

bool is_tf32_kernel(std::string_view name) {
  const std::string l = lower(name);
  return contains(l, "tf32") || contains(l, "s1688gemm") || contains(l, "s16816gemm");
}

const char* const kSkipCollective = "collective kernel (NCCL/RCCL): excluded";
const char* const kSkipNoLaunch = "no launching runtime call in the trace (correlation id)";
const char* const kSkipNoOp = "no CPU operator encloses the launch";
const char* const kSkipNoShapes = "operator recorded without shapes (profile with record_shapes=True)";
const char* const kSkipConv = "convolution: reported, not fitted";
const char* const kSkipGemmUnderOther =
    "GEMM kernel under an operator without GEMM shapes (autograd node, compiled graph)";
const char* const kSkipOther = "other operator class (embedding, index, sort, compiled graph, ...): not modelled";
const char* const kSkipGemmShape = "GEMM with inconsistent or empty shapes";
const char* const kSkipNoPeak = "dtype without a peak on this GPU (fp64, integer, or a peak of 0)";
const char* const kSkipNoTensors = "memory-bound operator without tensor shapes (TensorList, scalars)";
const char* const kSkipZero = "zero duration";

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// GPUs
// ---------------------------------------------------------------------------------------------------------------

std::string gpu_preset_for_device(std::string_view device_name) {
  const std::string l = lower(device_name);
  if (contains(l, "a100")) return contains(l, "pcie") ? "a100-pcie-80gb" : "a100-sxm4-80gb";
  if (contains(l, "h100")) return contains(l, "sxm") || contains(l, "hbm3") ? "h100-sxm5-80gb" : "";
  if (contains(l, "v100")) return contains(l, "sxm") ? "v100-sxm2-32gb" : "";
  return "";
}

std::string trace_device_name(const ImportedTrace& trace) {
  std::set<int> used;
  for (const TraceEvent& e : trace.events)
    if (e.kind == TraceEventKind::KERNEL && e.device >= 0) used.insert(e.device);
  std::set<std::string> names;
  for (const TraceDevice& d : trace.devices)
    if (used.count(d.id) && !d.name.empty()) names.insert(d.name);
  if (names.empty())  // kernels on devices the trace does not describe: accept one common name
    for (const TraceDevice& d : trace.devices)
      if (!d.name.empty()) names.insert(d.name);
  if (names.empty()) return "";
  if (names.size() > 1)
    throw ConfigError(trace.source + ": kernels ran on GPUs of different kinds ('" + *names.begin() + "', '" +
                      *std::next(names.begin()) + "'); fit one kind at a time");
  return *names.begin();
}

GpuSpec trace_gpu(const ImportedTrace& trace, const std::string& source) {
  const std::string name = trace_device_name(trace);
  if (name.empty())
    throw ConfigError(source +
                      ": the trace does not name its GPU (no deviceProperties); pass --gpu PRESET or --gpu FILE.json");
  const std::string preset = gpu_preset_for_device(name);
  if (preset.empty()) {
    std::string known;
    for (const auto& p : gpu_preset_names()) known += (known.empty() ? "" : ", ") + p;
    throw ConfigError(source + ": GPU '" + name + "' has no preset (known: " + known +
                      "); pass --gpu PRESET or --gpu FILE.json with its peaks");
  }
  return gpu_preset(preset);
}

GpuSpec load_gpu(const std::string& preset_or_file) {
  if (!std::filesystem::is_regular_file(preset_or_file)) return gpu_preset(preset_or_file);
  const std::string ctx = "GPU file '" + preset_or_file + "'";
  GpuSpec g = gpu_from_json(json_util::read_file(preset_or_file), ctx);
  if (!(g.peak_fp16_flops > 0) || !(g.peak_fp32_flops > 0) || !(g.peak_bf16_flops >= 0) || !(g.hbm_Bps > 0))
    throw ConfigError(ctx + ": needs positive peak_fp16_flops, peak_fp32_flops and hbm_Bps (peak_bf16_flops >= 0)");
  return g;
}

// ---------------------------------------------------------------------------------------------------------------
// Samples from a trace
// ---------------------------------------------------------------------------------------------------------------

ComputeSamples samples_from_trace(const ImportedTrace& trace, const GpuSpec& gpu, const std::string& source) {
  ComputeSamples out;
  const auto& ev = trace.events;
  using Thread = std::pair<std::int64_t, std::int64_t>;
  std::unordered_map<std::int64_t, std::size_t> op_by_external, runtime_by_correlation;
  std::map<Thread, std::vector<std::size_t>> ops_by_thread;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const TraceEvent& e = ev[i];
    if (e.kind == TraceEventKind::CPU_OP) {
      if (e.external_id >= 0) op_by_external.try_emplace(e.external_id, i);
      ops_by_thread[{e.pid, e.tid}].push_back(i);
    } else if (e.kind == TraceEventKind::RUNTIME && e.correlation >= 0) {
      runtime_by_correlation.try_emplace(e.correlation, i);
    }
  }
  auto encloses = [&](const TraceEvent& op, const TraceEvent& call) {
    return op.pid == call.pid && op.tid == call.tid && op.start_ns <= call.start_ns &&
           op.start_ns + op.dur_ns >= call.start_ns + call.dur_ns;
  };
  auto skip = [&](const char* reason, std::size_t kernels, double seconds) {
    auto& t = out.skipped[reason];
    t.kernels += kernels;
    t.seconds += seconds;
  };

  // Kernel -> operator, by External id first, else by enclosure on the launching thread (queued for a sweep).
  std::map<std::size_t, std::vector<std::size_t>> kernels_of_op;  // op event index -> kernel event indices
  struct Query {
    std::int64_t start, end;
    std::size_t kernel;
  };
  std::map<Thread, std::vector<Query>> queries;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const TraceEvent& k = ev[i];
    if (k.kind != TraceEventKind::KERNEL) continue;
    ++out.kernels;
    const double seconds = static_cast<double>(k.dur_ns) * 1e-9;
    if (k.collective) {
      skip(kSkipCollective, 1, seconds);
      continue;
    }
    const auto rt = k.correlation >= 0 ? runtime_by_correlation.find(k.correlation) : runtime_by_correlation.end();
    if (rt == runtime_by_correlation.end()) {
      skip(kSkipNoLaunch, 1, seconds);
      continue;
    }
    const TraceEvent& call = ev[rt->second];
    if (call.external_id >= 0)
      if (auto op = op_by_external.find(call.external_id);
          op != op_by_external.end() && encloses(ev[op->second], call)) {
        kernels_of_op[op->second].push_back(i);
        continue;
      }
    queries[{call.pid, call.tid}].push_back({call.start_ns, call.start_ns + call.dur_ns, i});
  }
  for (auto& [thread, qs] : queries) {
    auto it = ops_by_thread.find(thread);
    std::vector<std::size_t> empty;
    std::vector<std::size_t>& ops = it == ops_by_thread.end() ? empty : it->second;
    // Outer operators first; equal intervals (microsecond traces) by External id, which grows with nesting.
    std::sort(ops.begin(), ops.end(), [&](std::size_t a, std::size_t b) {
      const TraceEvent &x = ev[a], &y = ev[b];
      return std::make_tuple(x.start_ns, -(x.start_ns + x.dur_ns), x.external_id, a) <
             std::make_tuple(y.start_ns, -(y.start_ns + y.dur_ns), y.external_id, b);
    });
    std::sort(qs.begin(), qs.end(), [](const Query& a, const Query& b) {
      return std::tie(a.start, a.end, a.kernel) < std::tie(b.start, b.end, b.kernel);
    });
    std::vector<std::size_t> open;
    std::size_t next = 0;
    auto end_of = [&](std::size_t o) { return ev[o].start_ns + ev[o].dur_ns; };
    for (const Query& q : qs) {
      for (; next < ops.size() && ev[ops[next]].start_ns <= q.start; ++next) {
        while (!open.empty() && end_of(open.back()) < ev[ops[next]].start_ns) open.pop_back();
        open.push_back(ops[next]);
      }
      while (!open.empty() && end_of(open.back()) < q.start) open.pop_back();
      std::optional<std::size_t> found;
      for (auto o = open.rbegin(); o != open.rend(); ++o)
        if (ev[*o].start_ns <= q.start && end_of(*o) >= q.end) {
          found = *o;
          break;
        }
      if (found) {
        kernels_of_op[*found].push_back(q.kernel);
      } else {
        skip(kSkipNoOp, 1, static_cast<double>(ev[q.kernel].dur_ns) * 1e-9);
      }
    }
  }

  // One sample per operator instance.
  for (auto& [op_index, kernels] : kernels_of_op) {
    std::sort(kernels.begin(), kernels.end());
    const TraceEvent& op = ev[op_index];
    std::int64_t dur_ns = 0;
    bool tf32 = false;
    for (std::size_t k : kernels) {
      dur_ns += ev[k].dur_ns;
      tf32 = tf32 || is_tf32_kernel(ev[k].name);
    }
    const double seconds = static_cast<double>(dur_ns) * 1e-9;
    const std::size_t n = kernels.size();
    ComputeSample s;
    s.source = source;
    s.op = op.name;
    s.op_class = op_class_of(op.name);
    s.category = category_of(s.op_class);
    s.measured_s = seconds;
    s.kernels = static_cast<int>(n);
    if (s.category == ComputeCategory::CONVOLUTION) {
      skip(kSkipConv, n, seconds);
      continue;
    }
    if (s.category == ComputeCategory::OTHER) {  // kernel by kernel: GEMMs hidden in other operators are worth a count
      for (std::size_t k : kernels)
        skip(contains(lower(ev[k].name), "gemm") ? kSkipGemmUnderOther : kSkipOther, 1,
             static_cast<double>(ev[k].dur_ns) * 1e-9);
      continue;
    }
    if (op.input_types.empty() && op.input_dims.empty()) {
      skip(kSkipNoShapes, n, seconds);
      continue;
    }
    if (dur_ns <= 0) {
      skip(kSkipZero, n, seconds);
      continue;
    }
    if (s.category == ComputeCategory::GEMM) {
      const auto g = gemm_shape(s.op_class, op.input_dims);
      const auto t = g && static_cast<std::size_t>(g->a) < op.input_types.size()
                         ? tensor_type(op.input_types[static_cast<std::size_t>(g->a)])
                         : std::nullopt;
      if (!g || !t) {
        skip(kSkipGemmShape, n, seconds);
        continue;
      }
      s.dtype = t->dtype == "fp32" && tf32 ? "tf32" : t->dtype;
      s.peak_flops = s.dtype == "fp16"   ? gpu.peak_fp16_flops
                     : s.dtype == "bf16" ? gpu.peak_bf16_flops
                     : s.dtype == "tf32" ? tf32_peak(gpu)
                     : s.dtype == "fp32" ? gpu.peak_fp32_flops
                                         : 0;
      if (!(s.peak_flops > 0)) {
        skip(kSkipNoPeak, n, seconds);
        continue;
      }
      s.curve_scale = cost::gemm_curve_flops(1, s.peak_flops, gpu);
      s.flops = 2 * g->batch * g->m * g->n * g->k;
      s.bytes = g->batch * (g->m * g->k + g->k * g->n + g->m * g->n) * t->bytes;
    } else {
      s.bytes = memory_bytes(s.op_class, op, s.dtype);
      if (!(s.bytes > 0)) {
        skip(kSkipNoTensors, n, seconds);
        continue;
      }
    }
    out.samples.push_back(std::move(s));
  }

  const std::string device = trace_device_name(trace);
  if (const std::string preset = gpu_preset_for_device(device); !preset.empty() && preset != gpu.name)
    out.notes.push_back(source + ": device '" + device + "' is a " + preset + ", but the fit uses GPU '" + gpu.name +
                        "' (--gpu)");
  for (const TraceDevice& d : trace.devices)
    if (d.name == device && d.total_memory_bytes > 0 && gpu.memory_bytes > 0) {
      const double ratio = d.total_memory_bytes / gpu.memory_bytes;
      if (ratio < 0.9 || ratio > 1.1)
        out.notes.push_back(
            source + ": device '" + device + "' has " + format_number("%.0f", d.total_memory_bytes / units::kGiB) +
            " GiB, preset '" + gpu.name + "' " + format_number("%.0f", gpu.memory_bytes / units::kGiB) +
            " GiB: its HBM bandwidth may differ from the preset's " + format_number("%.0f", gpu.hbm_Bps / 1e9) +
            " GB/s, which memory_bandwidth_efficiency is relative to");
      break;
    }
  std::size_t used = 0;
  for (const auto& s : out.samples) used += static_cast<std::size_t>(s.kernels);
  out.sources.push_back({{"file", source},
                         {"kind", "kineto"},
                         {"device", device},
                         {"gpu", gpu.name},
                         {"kernels", out.kernels},
                         {"kernels_used", used},
                         {"samples", out.samples.size()}});
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// GEMM sweep CSV
// ---------------------------------------------------------------------------------------------------------------

ComputeSamples samples_from_gemm_csv(const std::string& text, const GpuSpec& gpu, const std::string& source) {
  ComputeSamples out;
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header;
  std::map<std::string, std::size_t> col;
  auto split = [](const std::string& l) {
    std::vector<std::string> f;
    std::size_t a = 0;
    while (true) {
      const std::size_t b = l.find(',', a);
      f.push_back(trim(std::string_view(l).substr(a, b == std::string::npos ? std::string::npos : b - a)));
      if (b == std::string::npos) break;
      a = b + 1;
    }
    return f;
  };
  std::size_t line_no = 0, rows = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const std::vector<std::string> f = split(t);
    const std::string where = source + ": line " + std::to_string(line_no);
    if (header.empty()) {
      header = f;
      for (std::size_t i = 0; i < f.size(); ++i) col.try_emplace(lower(f[i]), i);
      for (const char* need : {"m", "n", "k", "dtype", "time_s"})
        if (!col.count(need))
          throw FormatError(source + ": missing column '" + need + "' in the header '" + t +
                            "' (expected m,n,k,dtype,time_s,tflops)");
      continue;
    }
    if (f.size() != header.size())
      throw FormatError(where + ": expected " + std::to_string(header.size()) + " fields, got " +
                        std::to_string(f.size()));
    auto integer = [&](const char* name) {
      const std::string& v = f[col.at(name)];
      std::int64_t x = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec != std::errc() || p != v.data() + v.size() || x <= 0)
        throw FormatError(where + ": " + name + " '" + v + "' is not a positive integer");
      return static_cast<double>(x);
    };
    const double m = integer("m"), n = integer("n"), k = integer("k");
    const std::string& tv = f[col.at("time_s")];
    double time_s = 0;
    const auto [p, ec] = std::from_chars(tv.data(), tv.data() + tv.size(), time_s);
    if (ec != std::errc() || p != tv.data() + tv.size() || !std::isfinite(time_s) || !(time_s > 0))
      throw FormatError(where + ": time_s '" + tv + "' is not a positive number");
    const std::string dt = lower(f[col.at("dtype")]);
    ComputeSample s;
    s.source = source;
    s.op = "gemm";
    s.op_class = "gemm-sweep";
    s.category = ComputeCategory::GEMM;
    int elem = 0;
    if (dt == "fp16" || dt == "half" || dt == "float16") {
      s.dtype = "fp16", s.peak_flops = gpu.peak_fp16_flops, elem = 2;
    } else if (dt == "bf16" || dt == "bfloat16") {
      s.dtype = "bf16", s.peak_flops = gpu.peak_bf16_flops, elem = 2;
    } else if (dt == "fp32" || dt == "float" || dt == "float32") {
      s.dtype = "fp32", s.peak_flops = gpu.peak_fp32_flops, elem = 4;
    } else if (dt == "tf32") {
      s.dtype = "tf32", s.peak_flops = tf32_peak(gpu), elem = 4;
    } else {
      throw FormatError(where + ": dtype '" + f[col.at("dtype")] + "' is not known (known: fp16, bf16, fp32, tf32)");
    }
    ++rows;
    if (!(s.peak_flops > 0)) {
      auto& tally = out.skipped[kSkipNoPeak];
      ++tally.kernels;
      tally.seconds += time_s;
      continue;
    }
    s.flops = 2 * m * n * k;
    s.curve_scale = cost::gemm_curve_flops(1, s.peak_flops, gpu);
    s.bytes = (m * k + k * n + m * n) * elem;
    s.measured_s = time_s;
    out.samples.push_back(std::move(s));
  }
  if (header.empty()) throw FormatError(source + ": empty GEMM CSV (expected the header m,n,k,dtype,time_s,tflops)");
  if (rows == 0) throw FormatError(source + ": no data rows after the header");
  out.sources.push_back(
      {{"file", source}, {"kind", "gemm-csv"}, {"gpu", gpu.name}, {"rows", rows}, {"samples", out.samples.size()}});
  return out;
}

ComputeSamples load_gemm_csv(const std::string& path, const GpuSpec& gpu) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw ConfigError("cannot open GEMM CSV '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return samples_from_gemm_csv(ss.str(), gpu, std::filesystem::path(path).filename().string());
}

// ---------------------------------------------------------------------------------------------------------------
// Robust bounded least squares in two unknowns
// ---------------------------------------------------------------------------------------------------------------
namespace {

/// Relative residual r = a0 x0 + a1 x1 - b of sample `sample`.
struct Row {
  double a0, a1, b;
  std::size_t sample;
};

/// argmin sum w (a.x - b)^2 subject to x0 >= lo0, x1 >= lo1: every set of active bounds is tried and the best
/// feasible candidate kept (exact for this convex problem). Columns are scaled to unit RMS first.
std::optional<std::array<double, 2>> bounded_lsq(const std::vector<Row>& rows, const std::vector<double>& w,
                                                 std::array<double, 2> lo) {
  double c0 = 0, c1 = 0, sw = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    c0 += w[i] * rows[i].a0 * rows[i].a0;
    c1 += w[i] * rows[i].a1 * rows[i].a1;
    sw += w[i];
  }
  if (!(sw > 0) || !(c0 > 0) || !(c1 > 0)) return std::nullopt;
  c0 = std::sqrt(c0 / sw), c1 = std::sqrt(c1 / sw);
  double S00 = 0, S01 = 0, S11 = 0, T0 = 0, T1 = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double p = rows[i].a0 / c0, q = rows[i].a1 / c1, b = rows[i].b;
    S00 += w[i] * p * p, S01 += w[i] * p * q, S11 += w[i] * q * q;
    T0 += w[i] * p * b, T1 += w[i] * q * b;
  }
  const double l0 = lo[0] * c0, l1 = lo[1] * c1;  // bounds in scaled coordinates
  std::vector<std::array<double, 2>> candidates;
  const double det = S00 * S11 - S01 * S01;
  if (det > 1e-12 * S00 * S11) candidates.push_back({(T0 * S11 - T1 * S01) / det, (S00 * T1 - S01 * T0) / det});
  candidates.push_back({l0, (T1 - S01 * l0) / S11});
  candidates.push_back({(T0 - S01 * l1) / S00, l1});
  candidates.push_back({l0, l1});
  std::optional<std::array<double, 2>> best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (const auto& x : candidates) {
    const double tol = 1e-12 * (1 + std::abs(x[0]) + std::abs(x[1]));
    if (!std::isfinite(x[0]) || !std::isfinite(x[1]) || x[0] < l0 - tol || x[1] < l1 - tol) continue;
    // sum w (p x0 + q x1 - b)^2 without the constant sum w b^2.
    const double cost = S00 * x[0] * x[0] + 2 * S01 * x[0] * x[1] + S11 * x[1] * x[1] - 2 * (T0 * x[0] + T1 * x[1]);
    if (cost < best_cost) {
      best_cost = cost;
      best = std::array<double, 2>{std::max(x[0], l0) / c0, std::max(x[1], l1) / c1};
    }
  }
  return best;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

ResidualStats stats_of(const std::vector<double>& abs_rel) {
  ResidualStats s;
  s.count = abs_rel.size();
  if (abs_rel.empty()) return s;
  double sum = 0;
  for (double r : abs_rel) {
    sum += r;
    s.max = std::max(s.max, r);
  }
  s.mean = sum / static_cast<double>(abs_rel.size());
  s.median = median_of(abs_rel);
  return s;
}

struct RobustResult {
  bool ok = false;
  std::array<double, 2> x{};
  std::vector<Row> rows;        ///< rows of the final iteration
  std::vector<double> weights;  ///< their Huber weights
  std::size_t outliers = 0;
};

constexpr double kHuberK = 1.345;
constexpr int kMaxIterations = 100;

/// Huber IRLS; `build(x, first)` gives the rows at parameters x (first: the initial rows, x meaningless).
template <typename Build>
RobustResult robust_fit(Build build, std::array<double, 2> lo) {
  RobustResult res;
  std::vector<Row> rows = build(std::array<double, 2>{0, 0}, true);
  std::vector<double> w(rows.size(), 1.0);
  auto x = bounded_lsq(rows, w, lo);
  if (!x) return res;
  for (int it = 0; it < kMaxIterations; ++it) {
    rows = build(*x, false);
    std::vector<double> r(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i)
      r[i] = std::abs(rows[i].a0 * (*x)[0] + rows[i].a1 * (*x)[1] - rows[i].b);
    const double scale = 1.4826 * median_of(r);
    w.assign(rows.size(), 1.0);
    if (scale > 1e-12)
      for (std::size_t i = 0; i < rows.size(); ++i)
        if (r[i] > kHuberK * scale) w[i] = kHuberK * scale / r[i];
    const auto nx = bounded_lsq(rows, w, lo);
    if (!nx) return res;
    const bool converged = std::abs((*nx)[0] - (*x)[0]) <= 1e-10 * std::abs((*x)[0]) + 1e-300 &&
                           std::abs((*nx)[1] - (*x)[1]) <= 1e-10 * std::abs((*x)[1]) + 1e-300;
    x = nx;
    if (converged) break;
  }
  res.ok = true;
  res.x = *x;
  res.rows = build(*x, false);
  std::vector<double> r(res.rows.size());
  for (std::size_t i = 0; i < res.rows.size(); ++i)
    r[i] = std::abs(res.rows[i].a0 * res.x[0] + res.rows[i].a1 * res.x[1] - res.rows[i].b);
  const double scale = 1.4826 * median_of(r);
  res.weights.assign(res.rows.size(), 1.0);
  if (scale > 1e-12)
    for (std::size_t i = 0; i < res.rows.size(); ++i)
      if (r[i] > kHuberK * scale) {
        res.weights[i] = kHuberK * scale / r[i];
        ++res.outliers;
      }
  return res;
}

std::size_t distinct(const std::vector<ComputeSample>& pts, const std::vector<std::size_t>& idx, bool by_flops) {
  std::set<double> v;
  for (std::size_t i : idx) v.insert(by_flops ? pts[i].flops : pts[i].bytes);
  return v.size();
}

/// Memory-bound line T = L + w bytes/H over `idx`: launch_s = L, memory_efficiency = 1/w.
LineFit fit_memory(const std::vector<ComputeSample>& pts, const std::vector<std::size_t>& idx, double hbm_Bps,
                   std::vector<double>* weights) {
  LineFit f;
  f.samples = idx.size();
  if (idx.size() < 3 || distinct(pts, idx, false) < 2) return f;
  auto build = [&](std::array<double, 2>, bool) {
    std::vector<Row> rows;
    rows.reserve(idx.size());
    for (std::size_t i : idx) {
      const double t = pts[i].measured_s;
      rows.push_back({1 / t, pts[i].bytes / hbm_Bps / t, 1.0, i});
    }
    return rows;
  };
  const RobustResult r = robust_fit(build, {0.0, 1.0});
  if (!r.ok || !(r.x[1] > 0)) return f;
  f.fitted = true;
  f.launch_s = r.x[0];
  f.memory_efficiency = 1 / r.x[1];
  f.outliers = r.outliers;
  std::vector<double> res;
  for (std::size_t j = 0; j < r.rows.size(); ++j) {
    const Row& row = r.rows[j];
    res.push_back(std::abs(row.a0 * r.x[0] + row.a1 * r.x[1] - row.b));
    if (weights) (*weights)[row.sample] = r.weights[j];
  }
  f.residuals = stats_of(res);
  return f;
}

/// GEMM curve with L and eff_mem fixed: T = L + max(bytes/(H eff_mem), (u f + v)/P); efficiency_max = 1/u,
/// half_efficiency_flops = v/u. Only GEMMs on the compute branch at the current (u, v) enter the least squares.
LineFit fit_gemm(const std::vector<ComputeSample>& pts, const std::vector<std::size_t>& idx, double hbm_Bps,
                 double launch_s, double eff_mem, std::vector<double>* weights) {
  LineFit f;
  f.samples = idx.size();
  if (idx.size() < 3 || distinct(pts, idx, true) < 2) return f;
  auto build = [&](std::array<double, 2> x, bool first) {
    std::vector<Row> rows;
    rows.reserve(idx.size());
    for (std::size_t i : idx) {
      const ComputeSample& s = pts[i];
      const double t = s.measured_s, P = s.peak_flops;
      // t - L = (u f + v / c) / P for a GEMM read on the curve at c f (ComputeSample::curve_scale).
      const double c = s.curve_scale;
      if (!first && (x[0] * s.flops + x[1] / c) / P < s.bytes / (hbm_Bps * eff_mem)) continue;  // memory branch
      rows.push_back({s.flops / (P * t), 1 / (P * c * t), 1 - launch_s / t, i});
    }
    return rows;
  };
  const RobustResult r = robust_fit(build, {1.0, 0.0});
  if (!r.ok || !(r.x[0] > 0) || r.rows.empty()) return f;
  f.fitted = true;
  f.efficiency_max = 1 / r.x[0];
  f.half_efficiency_flops = r.x[1] / r.x[0];
  f.samples = r.rows.size();
  f.outliers = r.outliers;
  std::vector<double> res;
  for (std::size_t j = 0; j < r.rows.size(); ++j) {
    const Row& row = r.rows[j];
    res.push_back(std::abs(row.a0 * r.x[0] + row.a1 * r.x[1] - row.b));
    if (weights) (*weights)[row.sample] = r.weights[j];
  }
  f.residuals = stats_of(res);
  return f;
}

nlohmann::json stats_json(const ResidualStats& s) {
  return {{"count", s.count}, {"median", s.median}, {"mean", s.mean}, {"max", s.max}};
}

nlohmann::json line_json(const LineFit& f, ComputeCategory c) {
  if (!f.fitted) return {{"fitted", false}, {"samples", f.samples}};
  nlohmann::json j = {{"fitted", true}, {"samples", f.samples}, {"outliers", f.outliers}};
  if (c == ComputeCategory::MEMORY) {
    j["kernel_launch_s"] = f.launch_s;
    j["memory_bandwidth_efficiency"] = f.memory_efficiency;
  } else {
    j["gemm_efficiency_max"] = f.efficiency_max;
    j["gemm_half_efficiency_flops"] = f.half_efficiency_flops;
  }
  j["residuals"] = stats_json(f.residuals);
  return j;
}

bool tensor_core(const std::string& dtype) { return dtype == "fp16" || dtype == "bf16" || dtype == "tf32"; }

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// The fit
// ---------------------------------------------------------------------------------------------------------------

ComputeFit fit_compute(ComputeSamples in, const GpuSpec& gpu, const Calibration& base) {
  if (!(gpu.hbm_Bps > 0)) throw ConfigError("calibrate compute: GPU '" + gpu.name + "' has no HBM bandwidth");
  ComputeFit fit;
  fit.gpu = gpu;
  fit.calibration = base;
  fit.points = std::move(in.samples);
  in.samples.clear();
  fit.inputs = std::move(in);
  fit.notes = fit.inputs.notes;
  auto& pts = fit.points;
  pts.erase(std::remove_if(pts.begin(), pts.end(),
                           [](const ComputeSample& s) {
                             return s.category != ComputeCategory::GEMM && s.category != ComputeCategory::MEMORY;
                           }),
            pts.end());
  if (pts.empty()) {
    std::vector<std::pair<std::size_t, std::string>> top;
    for (const auto& [reason, t] : fit.inputs.skipped) top.push_back({t.kernels, reason});
    std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    std::string why;
    for (std::size_t i = 0; i < std::min<std::size_t>(3, top.size()); ++i)
      why += (i ? "; " : "") + std::to_string(top[i].first) + " " + top[i].second;
    if (fit.inputs.kernels == 0 && why.empty())
      throw ConfigError("calibrate compute: the inputs hold no GPU kernel (and no GEMM CSV row) to fit");
    throw ConfigError("calibrate compute: no usable GEMM or memory-bound sample in " +
                      std::to_string(fit.inputs.kernels) + " kernels" + (why.empty() ? "" : " (" + why + ")"));
  }
  const double H = gpu.hbm_Bps;
  Calibration& cal = fit.calibration;
  std::vector<std::size_t> mem, gemm, tc;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    if (pts[i].category == ComputeCategory::MEMORY) mem.push_back(i);
    else {
      gemm.push_back(i);
      if (tensor_core(pts[i].dtype)) tc.push_back(i);
    }
  }
  std::vector<double> weights(pts.size(), 0.0);

  // 1. Memory-bound: launch overhead and bandwidth efficiency.
  fit.memory = fit_memory(pts, mem, H, &weights);
  if (fit.memory.fitted) {
    cal.kernel_launch_s = fit.memory.launch_s;
    cal.memory_bandwidth_efficiency = fit.memory.memory_efficiency;
  } else {
    fit.notes.push_back(std::to_string(mem.size()) +
                        " memory-bound samples: too few (or of one size) to fit; kernel_launch_s and "
                        "memory_bandwidth_efficiency kept from the base");
  }
  // 2. GEMMs, with step 1's launch overhead and memory efficiency.
  const bool use_tc = tc.size() >= kMinTensorCoreGemms;
  fit.gemm_fit_set = use_tc ? "tensor-core (fp16, bf16, tf32)" : "all";
  if (!use_tc && !tc.empty() && tc.size() < gemm.size())
    fit.notes.push_back("only " + std::to_string(tc.size()) + " tensor-core GEMMs: the GEMM fit uses all " +
                        std::to_string(gemm.size()) + " GEMMs, fp32 ones against peak_fp32");
  const std::vector<std::size_t>& gemm_set = use_tc ? tc : gemm;
  fit.gemm = fit_gemm(pts, gemm_set, H, cal.kernel_launch_s, cal.memory_bandwidth_efficiency, &weights);
  double max_flops = 0;
  for (std::size_t i : gemm_set) max_flops = std::max(max_flops, pts[i].flops);
  if (fit.gemm.fitted) {
    cal.gemm_efficiency_max = fit.gemm.efficiency_max;
    cal.gemm_half_efficiency_flops = fit.gemm.half_efficiency_flops;
    // The fit's curve is the hyperbola (exponent 1): a base with another exponent would pair the fitted max and
    // half with a curve they were not fitted for.
    if (cal.gemm_efficiency_exponent != 1.0)
      fit.notes.push_back("gemm_efficiency_exponent " + format_number("%.3g", cal.gemm_efficiency_exponent) +
                          " of the base set to 1: the GEMM fit is the hyperbola max * f / (f + f_half)");
    cal.gemm_efficiency_exponent = 1.0;
    if (max_flops < 10 * fit.gemm.half_efficiency_flops)
      fit.notes.push_back("the largest fitted GEMM (" + format_number("%.3g", max_flops) +
                          " FLOP) is below 10 x f_half (" + format_number("%.3g", fit.gemm.half_efficiency_flops) +
                          "): gemm_efficiency_max is an extrapolation beyond the data");
  } else {
    fit.notes.push_back(std::to_string(gemm.size()) +
                        " GEMM samples: too few (or of one size) to fit; gemm_efficiency_max and "
                        "gemm_half_efficiency_flops kept from the base");
  }
  cal.validate("fitted calibration");

  // Predictions and residuals under the fitted calibration.
  std::vector<double> r_mem, r_gemm, r_all;
  std::vector<double> rel(pts.size());
  for (std::size_t i = 0; i < pts.size(); ++i) {
    ComputeSample& s = pts[i];
    s.predicted_s = model_time_s(s, H, cal);
    s.weight = weights[i];
    if (s.category == ComputeCategory::GEMM)
      s.memory_branch = s.bytes / (H * cal.memory_bandwidth_efficiency) >
                        s.flops / (s.peak_flops * cost::gemm_efficiency(s.flops * s.curve_scale, cal));
    rel[i] = std::abs(s.predicted_s - s.measured_s) / s.measured_s;
    (s.category == ComputeCategory::MEMORY ? r_mem : r_gemm).push_back(rel[i]);
    r_all.push_back(rel[i]);
  }
  fit.memory_residuals = stats_of(r_mem);
  fit.gemm_residuals = stats_of(r_gemm);
  fit.all_residuals = stats_of(r_all);

  // 3. Per class and per GEMM dtype.
  std::map<std::pair<int, std::string>, std::vector<std::size_t>> groups;  // (order, name) -> samples
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const bool m = pts[i].category == ComputeCategory::MEMORY;
    groups[{m ? 0 : 1, pts[i].op_class}].push_back(i);
    if (!m) groups[{2, "dtype:" + pts[i].dtype}].push_back(i);
  }
  for (const auto& [key, idx] : groups) {
    ClassResult c;
    c.name = key.second;
    c.category = key.first == 0 ? ComputeCategory::MEMORY : ComputeCategory::GEMM;
    c.samples = idx.size();
    std::vector<double> r;
    for (std::size_t i : idx) {
      c.kernels += static_cast<std::size_t>(pts[i].kernels);
      c.measured_s += pts[i].measured_s;
      r.push_back(rel[i]);
    }
    c.global = stats_of(r);
    c.own = c.category == ComputeCategory::MEMORY
                ? fit_memory(pts, idx, H, nullptr)
                : fit_gemm(pts, idx, H, cal.kernel_launch_s, cal.memory_bandwidth_efficiency, nullptr);
    fit.classes.push_back(std::move(c));
  }

  // Provenance.
  auto range = [&](const std::vector<std::size_t>& idx, bool by_flops) {
    if (idx.empty()) return nlohmann::json(nullptr);
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (std::size_t i : idx) {
      const double v = by_flops ? pts[i].flops : pts[i].bytes;
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
    return nlohmann::json::array({lo, hi});
  };
  // The base's provenance is kept whole under base_provenance (its notes on the replaced fields would be stale
  // at the top level).
  nlohmann::json& prov = cal.provenance;
  std::vector<std::string> fitted_fields;
  if (fit.memory.fitted) fitted_fields.insert(fitted_fields.end(), {"kernel_launch_s", "memory_bandwidth_efficiency"});
  if (fit.gemm.fitted) fitted_fields.insert(fitted_fields.end(), {"gemm_efficiency_max", "gemm_half_efficiency_flops"});
  std::string status = "fitted to kernel measurements (compute_fit):";
  for (std::size_t i = 0; i < fitted_fields.size(); ++i) status += (i ? ", compute." : " compute.") + fitted_fields[i];
  if (fitted_fields.empty()) status = "no compute field fitted (too few samples)";
  prov = {{"status", status + "; every other field from the base calibration (base_provenance)"},
          {"base_calibration", base.name},
          {"base_provenance", base.provenance}};
  nlohmann::json skipped = nlohmann::json::object();
  std::size_t skipped_kernels = 0;
  for (const auto& [reason, t] : fit.inputs.skipped) {
    skipped[reason] = {{"kernels", t.kernels}, {"seconds", t.seconds}};
    skipped_kernels += t.kernels;
  }
  std::size_t used_kernels = 0;
  for (const auto& s : pts) used_kernels += static_cast<std::size_t>(s.kernels);
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& c : fit.classes)
    classes.push_back({{"class", c.name},
                       {"category", to_string(c.category)},
                       {"samples", c.samples},
                       {"kernels", c.kernels},
                       {"measured_s", c.measured_s},
                       {"own_fit", line_json(c.own, c.category)},
                       {"residuals_global_fit", stats_json(c.global)}});
  prov["compute_fit"] = {
      {"model",
       "T = kernel_launch_s + max(bytes / (hbm_Bps * memory_bandwidth_efficiency), flops / (peak * eff(flops))), "
       "eff(f) = gemm_efficiency_max * f / (f + gemm_half_efficiency_flops), flops term for GEMMs only "
       "(strategies/transformer_costs.cpp op_time_s); tf32 peak = peak_fp16 / 2"},
      {"method",
       "1. memory-bound operators: kernel_launch_s and memory_bandwidth_efficiency; 2. GEMMs with those "
       "fixed: gemm_efficiency_max and gemm_half_efficiency_flops (GEMMs on the memory branch leave the "
       "fit); 3. per class, reported only. Each: least squares on relative residuals, Huber IRLS "
       "(k = 1.345, scale 1.4826 median |r|), exact under the bounds eff <= 1, launch >= 0, "
       "f_half >= 0; at least 3 samples of 2 sizes. One sample = one operator instance (its kernels "
       "summed); see sim/calibrate_compute.hpp"},
      {"gpu",
       {{"name", gpu.name},
        {"peak_fp16_flops", gpu.peak_fp16_flops},
        {"peak_bf16_flops", gpu.peak_bf16_flops},
        {"peak_fp32_flops", gpu.peak_fp32_flops},
        {"peak_tf32_flops", tf32_peak(gpu)},
        {"hbm_Bps", gpu.hbm_Bps}}},
      {"sources", fit.inputs.sources},
      {"kernels",
       {{"seen", fit.inputs.kernels},
        {"used", used_kernels},
        {"skipped", skipped_kernels},
        {"skipped_by_reason", skipped}}},
      {"samples", {{"memory", mem.size()}, {"gemm", gemm.size()}}},
      {"memory_bound",
       [&] {
         nlohmann::json j = line_json(fit.memory, ComputeCategory::MEMORY);
         j["bytes_range"] = range(mem, false);
         return j;
       }()},
      {"gemm",
       [&] {
         nlohmann::json j = line_json(fit.gemm, ComputeCategory::GEMM);
         j["fit_set"] = fit.gemm_fit_set;
         j["flops_range"] = range(gemm_set, true);
         return j;
       }()},
      {"residuals",
       {{"memory", stats_json(fit.memory_residuals)},
        {"gemm", stats_json(fit.gemm_residuals)},
        {"all", stats_json(fit.all_residuals)}}},
      {"classes", classes},
      {"notes", fit.notes}};
  cal.name = base.name + " + compute fit";
  return fit;
}

// ---------------------------------------------------------------------------------------------------------------
// Outputs
// ---------------------------------------------------------------------------------------------------------------

std::string points_csv(const ComputeFit& fit) {
  auto field = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::string out =
      "source,op,class,category,dtype,kernels,flops,bytes,peak_flops,measured_s,predicted_s,rel_error,weight,bound\n";
  char num[256];
  for (const auto& s : fit.points) {
    const double rel = (s.predicted_s - s.measured_s) / s.measured_s;
    std::snprintf(num, sizeof num, "%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.6g,%.6g", s.kernels, s.flops, s.bytes, s.peak_flops,
                  s.measured_s, s.predicted_s, rel, s.weight);
    out += field(s.source) + "," + field(s.op) + "," + field(s.op_class) + "," + to_string(s.category) + "," +
           field(s.dtype) + "," + num + "," +
           (s.category == ComputeCategory::MEMORY || s.memory_branch ? "memory" : "compute") + "\n";
  }
  return out;
}

std::string summary_text(const ComputeFit& fit) {
  std::ostringstream o;
  const Calibration& c = fit.calibration;
  std::size_t used = 0;
  for (const auto& s : fit.points) used += static_cast<std::size_t>(s.kernels);
  std::size_t traces = 0, csvs = 0;
  for (const auto& s : fit.inputs.sources) (s.value("kind", "") == "gemm-csv" ? csvs : traces) += 1;
  auto stats = [](const ResidualStats& s) {
    if (s.count == 0) return std::string("none (no samples)");
    return "median " + pct(s.median) + ", mean " + pct(s.mean) + ", max " + pct(s.max);
  };
  o << "compute fit on " << fit.gpu.name << " from " << traces << " trace(s) and " << csvs
    << " GEMM CSV(s): " << fit.points.size() << " samples (" << used << " kernels";
  if (fit.inputs.kernels > 0) o << " of " << fit.inputs.kernels << " in traces";
  o << ")\n";
  std::size_t nm = 0, ng = 0;
  for (const auto& s : fit.points) (s.category == ComputeCategory::MEMORY ? nm : ng) += 1;
  o << "  memory-bound (" << nm << "): ";
  if (fit.memory.fitted)
    o << "kernel_launch_s " << format_number("%.3g", c.kernel_launch_s * 1e6) << " us, memory_bandwidth_efficiency "
      << format_number("%.3f", c.memory_bandwidth_efficiency) << " (" << fit.memory.outliers << " outliers)\n";
  else
    o << "not fitted, base kept (kernel_launch_s " << format_number("%.3g", c.kernel_launch_s * 1e6)
      << " us, memory_bandwidth_efficiency " << format_number("%.3f", c.memory_bandwidth_efficiency) << ")\n";
  o << "    residuals: " << stats(fit.memory_residuals) << "\n";
  o << "  GEMM (" << ng << ", fit on " << fit.gemm_fit_set << "): ";
  if (fit.gemm.fitted)
    o << "gemm_efficiency_max " << format_number("%.3f", c.gemm_efficiency_max) << ", gemm_half_efficiency_flops "
      << format_number("%.3g", c.gemm_half_efficiency_flops) << " (" << fit.gemm.outliers << " outliers)\n";
  else
    o << "not fitted, base kept (gemm_efficiency_max " << format_number("%.3f", c.gemm_efficiency_max)
      << ", gemm_half_efficiency_flops " << format_number("%.3g", c.gemm_half_efficiency_flops) << ")\n";
  o << "    residuals: " << stats(fit.gemm_residuals) << "\n";
  o << "per class: |relative residual| under the fitted calibration; own fit of the class when it has one\n";
  char line[256];
  std::snprintf(line, sizeof line, "  %-28s %-6s %6s %8s %8s %8s  %s\n", "class", "kind", "ops", "median", "mean",
                "max", "own fit");
  o << line;
  for (const auto& k : fit.classes) {
    std::string own = "-";
    if (k.own.fitted)
      own = k.category == ComputeCategory::MEMORY
                ? "launch " + format_number("%.3g", k.own.launch_s * 1e6) + " us, eff_mem " +
                      format_number("%.3f", k.own.memory_efficiency)
                : "eff_max " + format_number("%.3f", k.own.efficiency_max) + ", f_half " +
                      format_number("%.3g", k.own.half_efficiency_flops);
    std::snprintf(line, sizeof line, "  %-28.28s %-6s %6zu %8s %8s %8s  %s\n", k.name.c_str(),
                  k.category == ComputeCategory::MEMORY ? "memory" : "gemm", k.samples, pct(k.global.median).c_str(),
                  pct(k.global.mean).c_str(), pct(k.global.max).c_str(), own.c_str());
    o << line;
  }
  if (!fit.inputs.skipped.empty()) {
    o << "skipped:\n";
    for (const auto& [reason, t] : fit.inputs.skipped) {
      std::snprintf(line, sizeof line, "  %7zu kernels, %9.3f ms: ", t.kernels, t.seconds * 1e3);
      o << line << reason << "\n";
    }
  }
  for (const auto& n : fit.notes) o << "note: " << n << "\n";
  return o.str();
}

}  // namespace dtsim::sim
