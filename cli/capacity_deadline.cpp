// `dtsim capacity --model M --tokens T --days D --gpu TYPE [--price-per-gpu-hour P]`: the deadline form of
// capacity planning (dtsim::deadline). The ladder form (largest model per planner) is in capacity.cpp.
#include <boost/program_options.hpp>
#include <cstdio>
#include <string>

#include "cli/commands.hpp"
#include "dtsim/dtsim.hpp"
#include "traces/units.hpp"

namespace po = boost::program_options;

namespace dtsim::cli {
namespace {

double parse_count(const std::string& s, const std::string& flag) {
  // 1e12, 300e9, or with a suffix: 300B, 1.5T, 500M tokens.
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw ConfigError("capacity: " + flag + " '" + s + "' is not a number");
  }
  const std::string suffix = s.substr(pos);
  if (suffix == "K" || suffix == "k") v *= 1e3;
  else if (suffix == "M") v *= 1e6;
  else if (suffix == "B" || suffix == "G") v *= 1e9;
  else if (suffix == "T") v *= 1e12;
  else if (!suffix.empty()) throw ConfigError("capacity: " + flag + " '" + s + "' has an unknown suffix (K, M, B, T)");
  return v;
}

}  // namespace

int cmd_capacity_deadline(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim capacity (deadline form): the smallest GPU count (powers of two up to one node, then whole nodes,\n"
      "doubling) whose best strategy trains the model on --tokens tokens within --days days, with the strategy and "
      "the\n"
      "cost; per count, the grid planner ranks every TP x PP x DP x micro-batch x schedule x recompute x ZeRO plan "
      "and\n"
      "its best --top are simulated\n"
      "example: dtsim capacity --model gpt3-175b --tokens 300B --days 30 --gpu a100-sxm4-80gb --price-per-gpu-hour "
      "2\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("model", po::value<std::string>(), "model preset or JSON file")
    ("tokens", po::value<std::string>(), "tokens to train (e.g. 300B, 1T, 2e12)")
    ("days", po::value<double>(), "deadline in days")
    ("gpu", po::value<std::string>(), "GPU preset (a100-sxm4-80gb, h100-sxm5-80gb, ...) or cluster preset (dgx-h100, ...)")
    ("price-per-gpu-hour", po::value<double>()->default_value(0), "price of one GPU-hour (0: no cost)")
    ("gbs", po::value<int>(), "global batch in sequences (default: ~4M tokens, a power of two; x 9 on 72-GPU NVL72 racks)")
    ("max-gpus", po::value<int>()->default_value(16384), "largest GPU count tried")
    ("top", po::value<int>()->default_value(3), "candidates simulated per GPU count")
    ("network", po::value<std::string>()->default_value("analytic"), "analytic | flow")
    ("memory-limit", po::value<double>(), "per-GPU memory limit in GB (default: the device's)")
    ("calibration", po::value<std::string>(), "calibration JSON file (default: the GPU's shipped one)")
    ("stack", po::value<std::string>(), "software stack: megatron-core (default) | ... | a profile .json")
    ("out", po::value<std::string>(), "write capacity.json")
    ("quiet,q", "print nothing on success");
  // clang-format on
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string("capacity: ") + e.what());
  }
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  for (const char* req : {"model", "tokens", "days", "gpu"})
    if (!vm.count(req)) throw ConfigError(std::string("capacity: --") + req + " is required with --tokens/--days");
  DeadlineRequest req;
  req.model = vm["model"].as<std::string>();
  req.gpu = vm["gpu"].as<std::string>();
  req.calibration = vm.count("calibration") ? vm["calibration"].as<std::string>() : "";
  req.stack = vm.count("stack") ? vm["stack"].as<std::string>() : "";
  req.tokens = parse_count(vm["tokens"].as<std::string>(), "--tokens");
  req.days = vm["days"].as<double>();
  req.price_per_gpu_hour = vm["price-per-gpu-hour"].as<double>();
  if (vm.count("gbs")) req.global_batch_size = vm["gbs"].as<int>();
  req.max_gpus = vm["max-gpus"].as<int>();
  req.top = vm["top"].as<int>();
  if (vm.count("memory-limit")) req.memory_limit_bytes = vm["memory-limit"].as<double>() * units::kGB;
  req.network = vm["network"].as<std::string>();
  const DeadlineResult r = deadline(req);
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), r.files);
  if (!vm.count("quiet")) out << r.text;
  return 0;
}

}  // namespace dtsim::cli
