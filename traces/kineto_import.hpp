// Importer for PyTorch-profiler (Kineto) Chrome traces: the JSON written by torch.profiler / libkineto, plain,
// gzip-compressed, or several ranks in one .tar.gz. Reduces them to dtsim's ImportedTrace (trace_events.hpp).
//
// What is kept: complete events ("ph":"X") whose category maps to a TraceEventKind (several Kineto/PyTorch
// vocabularies: "cpu_op"/"Operator", "cuda_runtime"/"cuda_driver"/"Runtime"/HIP, "kernel"/"Kernel",
// "gpu_memcpy"/"Memcpy", "gpu_memset"/"Memset", "user_annotation", "gpu_user_annotation"). Everything else
// (flows, counters, metadata, "Trace" spans, "python_function", "cuda_sync", "cuda_profiler_range") is skipped.
// CPU ops keep their argument shapes and types when the trace records them ("Input Dims", "Input type"; see
// TraceEvent::input_dims); other args of CPU ops ("Input Strides", "Concrete Inputs", call stacks) are not kept.
// Kineto times are microseconds, possibly fractional (nanosecond-resolution traces have three decimals); they
// are converted from the JSON number's text to exact int64 nanoseconds (rounded half away from zero), so no
// precision is lost to doubles. Every failure is a dtsim::FormatError / ConfigError naming the source.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "traces/trace_events.hpp"

namespace dtsim {

/// Imports one Kineto trace file (plain JSON or .gz). ConfigError if it cannot be opened, FormatError if it is
/// corrupt, truncated or not a Kineto trace. The result has format "kineto" and `source` = path.
ImportedTrace import_kineto(const std::string& path);

/// Parses Kineto JSON text. `source` names the text in error messages and becomes ImportedTrace::source.
/// Accepts the usual object form ({"traceEvents": [...], ...}) and the legacy bare array of events.
ImportedTrace parse_kineto(const std::string& text, const std::string& source);

/// Imports every member whose name ends in ".json" of a (compressed) tar archive holding one trace per rank, in
/// member-name order. Each trace's source is "<path>:<member name>". FormatError if the archive is corrupt or
/// holds no ".json" member.
std::vector<ImportedTrace> import_kineto_archive(const std::string& path);

namespace kineto {

/// Exact conversion of a JSON number literal in microseconds (e.g. "1712195495505582.988", "12", "1.5e3") to
/// integer nanoseconds, rounded half away from zero. nullopt if the text is not a number or the result does not
/// fit in int64.
std::optional<std::int64_t> us_text_to_ns(std::string_view text);

/// Normalised collective name ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "send",
/// "recv", "reduce") from a PyTorch "Collective name" ("allreduce", "_allgather_base"), an annotation
/// ("nccl:all_to_all") or an NCCL/RCCL kernel name ("ncclDevKernel_AllReduce_Sum_f32_RING_LL"); "" when the
/// name names none of them (e.g. "barrier", "wait", NCCL's "SendRecv" kernels, which serve several ops).
std::string normalize_collective_op(std::string_view name);

/// Bytes per element of a PyTorch dtype name as Kineto records it ("Float", "BFloat16", "Long", ...; also
/// "float32", "fp16" style); 0 when unknown.
int dtype_size_bytes(std::string_view dtype);

}  // namespace kineto
}  // namespace dtsim
