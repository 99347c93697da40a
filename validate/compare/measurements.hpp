// What the executor measured (validate/exec), as plain data and JSON: the file `dtsim-exec` writes on the GPU
// machine and `dtsim validate` reads back where the simulator runs. Always built (no CUDA needed to read it).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::exec {

struct RankMeasurement {
  int sim_rank = 0;
  int global_rank = 0;
  bool ok = true;
  std::string error;                    ///< OOM / CUDA / cuBLAS failure, with the task it happened in
  std::vector<double> iteration_s;      ///< first compute task start to last compute task end, per timed iteration
  double context_bytes = 0;             ///< device memory in use by this process before the model's (context, cuBLAS)
  double pool_used_high_bytes = 0;      ///< high-water mark of the model's live allocations
  double pool_reserved_high_bytes = 0;  ///< high-water mark of memory the pool held (fragmentation included)
  double peak_memory_bytes = 0;         ///< context_bytes + pool_reserved_high_bytes
  double scratch_bytes = 0;             ///< GEMM operand scratch, outside the memory model
};

struct TaskMeasurement {
  int task = 0;                    ///< task id in the lowered graph
  std::vector<double> duration_s;  ///< per timed iteration
};

struct Measurements {
  std::string device_name;
  int warmup = 0, iterations = 0;
  std::vector<RankMeasurement> ranks;
  std::vector<TaskMeasurement> tasks;  ///< by task id
};

/// measurements.json; schema_version 1.
nlohmann::json to_json(const Measurements& m);
/// FormatError naming `ctx` and the field on a malformed file.
Measurements measurements_from_json(const nlohmann::json& j, const std::string& ctx);
Measurements load_measurements(const std::string& path);

/// Median of the samples (0 when empty).
double median(std::vector<double> v);

}  // namespace dtsim::exec
