// `dtsim capacity`: the largest model of a ladder each planner fits (dtsim::capacity); with --tokens/--days, the
// deadline form (cli/capacity_deadline.cpp).
#include "cli/commands.hpp"

#include <string>
#include <vector>

#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"
#include "traces/units.hpp"

namespace dtsim::cli {

int cmd_capacity(int argc, char** argv, std::ostream& out) {
  for (int i = 1; i < argc; ++i)  // the deadline form: smallest GPU count that trains T tokens in D days
    if (std::string(argv[i]) == "--tokens" || std::string(argv[i]) == "--days")
      return cmd_capacity_deadline(argc, argv, out);
  po::options_description desc(
      "dtsim capacity: for each planner, the largest model of a ladder it fits on the cluster (its own memory check\n"
      "and dtsim's analytic memory model), against Megatron-style 1-D TP inside a node + DP (the baseline)\n"
      "example: dtsim capacity --cluster dgx1-v100:32 --gbs 256 --out capacity/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("cluster", po::value<std::string>(), "cluster preset or JSON file")
    ("gbs", po::value<int>(), "global batch size in samples")
    ("models", po::value<std::string>(), "comma-separated model ladder (default: the megatron-* presets by size)")
    ("planners", po::value<std::string>(), "comma-separated planners (default: all, and megatron-tp)")
    ("memory-limit", po::value<double>(), "per-GPU memory limit in GB (default: the device's)")
    ("calibration", po::value<std::string>(), "calibration JSON file")
    ("stack", po::value<std::string>(), "software stack: megatron-core (default) | ... | a profile .json")
    ("out", po::value<std::string>(), "write capacity.json")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  for (const char* req : {"cluster", "gbs"})
    if (!vm.count(req)) throw ConfigError(std::string("capacity: --") + req + " is required");
  auto split = [](const std::string& list) {  // non-empty names only ("a,,b" -> a, b)
    std::vector<std::string> v;
    for (auto& x : split_list(list))
      if (!x.empty()) v.push_back(std::move(x));
    return v;
  };
  CapacityRequest req;
  req.cluster = vm["cluster"].as<std::string>();
  req.calibration = value_or(vm, "calibration");
  req.stack = value_or(vm, "stack");
  req.global_batch_size = vm["gbs"].as<int>();
  if (vm.count("memory-limit")) {
    req.memory_limit_bytes = vm["memory-limit"].as<double>() * units::kGB;
    if (!(req.memory_limit_bytes > 0)) throw ConfigError("capacity: --memory-limit must be positive");
  }
  if (vm.count("models")) {
    req.models = split(vm["models"].as<std::string>());
    if (req.models.empty()) throw ConfigError("capacity: the model ladder is empty");
  }
  if (vm.count("planners")) req.planners = split(vm["planners"].as<std::string>());
  const CapacityResult r = capacity(req);
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), r.files);
  if (!vm.count("quiet")) out << r.text;
  return 0;
}

}  // namespace dtsim::cli
