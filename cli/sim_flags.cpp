// Flags shared by the commands that simulate (cli/sim_flags.hpp).
#include "cli/sim_flags.hpp"

#include "cli/options.hpp"
#include "traces/error.hpp"
#include "traces/units.hpp"

namespace dtsim::cli {

SimulateOptions simulate_options(const po::variables_map& vm, const std::string& command,
                                 const std::string& algo_option) {
  SimulateOptions o;
  o.command = command;
  o.collectives = vm["collectives"].as<std::string>();
  if (vm.count("fold")) o.fold = vm["fold"].as<std::string>();
  o.collective_algorithm = vm[algo_option].as<std::string>();
  o.network = vm["network"].as<std::string>();
  if (vm.count("engine")) o.engine = vm["engine"].as<std::string>();
  o.channels = vm["channels"].as<int>();
  o.spread_rings = vm.count("single-nic-rings") == 0;
  o.interference = vm.count("no-interference") == 0;
  o.receive_bound = vm.count("no-receive-bound") == 0;
  return o;
}

void add_planner_options(po::options_description& desc) {
  // clang-format off
  desc.add_options()
    ("model", po::value<std::string>(), "model preset or JSON file")
    ("cluster", po::value<std::string>(), "cluster preset or JSON file")
    ("gbs", po::value<int>(), "global batch size in samples")
    ("memory-limit", po::value<double>(), "per-GPU memory limit in GB (default: the device's)")
    ("tp", po::value<int>()->default_value(1), "pipedream, dapple: GPUs of one node that act as one device (tensor parallel)")
    ("top", po::value<int>()->default_value(5), "how many of a planner's best candidates to simulate")
    ("calibration", po::value<std::string>(), "calibration JSON file")
    ("stack", po::value<std::string>(), "software stack of every candidate: megatron-core (default) | megatron-lm | megatron-deepspeed | torchtitan | a profile .json")
    ("network", po::value<std::string>()->default_value("flow"), "flow | analytic (for the simulations)")
    ("precision", po::value<std::string>()->default_value("bf16"),
     "linear-layer GEMM precision of every candidate: bf16 | fp8 (= fp8-delayed) | fp8-current | fp8-rowwise | mxfp8 | "
     "nvfp4 (the grid planner estimates with it; the other planners search in bf16, their picks are simulated with it)")
    ("seq-len", po::value<int>(), "override the model's sequence length (tokens per sample)");
  // clang-format on
}

PlanRequest plan_request(const po::variables_map& vm, const std::string& command) {
  for (const char* req : {"model", "cluster", "gbs"})
    if (!vm.count(req)) throw ConfigError(command + ": --" + req + " is required");
  PlanRequest r;
  r.command = command;
  r.model = vm["model"].as<std::string>();
  r.cluster = vm["cluster"].as<std::string>();
  r.calibration = value_or(vm, "calibration");
  r.stack = value_or(vm, "stack");
  r.global_batch_size = vm["gbs"].as<int>();
  if (vm.count("memory-limit")) {
    r.memory_limit_bytes = vm["memory-limit"].as<double>() * units::kGB;
    if (!(r.memory_limit_bytes > 0)) throw ConfigError(command + ": --memory-limit must be positive");
  }
  r.tensor_parallel = vm["tp"].as<int>();
  r.top = vm["top"].as<int>();
  r.network = vm["network"].as<std::string>();
  r.precision = vm["precision"].as<std::string>();
  if (vm.count("seq-len")) {
    r.seq_len = vm["seq-len"].as<int>();
    if (r.seq_len <= 0) throw ConfigError(command + ": --seq-len must be positive");
  }
  return r;
}

}  // namespace dtsim::cli
