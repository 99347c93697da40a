// `dtsim collective`: one collective or a sweep of sizes, reported as nccl-tests algbw/busbw (dtsim::collective).
#include "cli/commands.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "cli/options.hpp"
#include "cli/sim_flags.hpp"
#include "dtsim/dtsim.hpp"
#include "traces/units.hpp"

namespace dtsim::cli {

int cmd_collective(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim collective: simulate one collective over the first N GPUs of a cluster and report nccl-tests\n"
      "algbw/busbw; with --sweep, every power of two between two sizes\n"
      "example: dtsim collective --cluster dgx-a100:16 --op all-reduce --sweep 8:1GiB\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("cluster", po::value<std::string>(), "cluster preset NAME:GPUS or cluster JSON file")
    ("ranks", po::value<int>(), "GPUs in the group (default: all)")
    ("op", po::value<std::string>()->default_value("all-reduce"),
     "all-reduce | all-gather | reduce-scatter | all-to-all | broadcast | reduce")
    ("bytes", po::value<std::string>(), "message size, e.g. 1GiB (default 1GiB)")
    ("sweep", po::value<std::string>(), "MIN:MAX, every power of two from MIN to MAX, e.g. 8:1GiB")
    ("algo", po::value<std::string>()->default_value("auto"), "auto | ring | hierarchical | tree | nvls")
    ("collectives", po::value<std::string>()->default_value("flow"), "flow | steps")
    ("network", po::value<std::string>()->default_value("flow"), "flow | analytic")
    ("channels", po::value<int>()->default_value(1), "parallel flows per ring transfer (NCCL channels)")
    ("single-nic-rings", "rings over several GPUs per node cross each node through one NIC (default: every member's)")
    ("calibration", po::value<std::string>(), "calibration JSON file")
    ("nccl-proto", po::value<std::string>(),
     "rings' NCCL protocol: auto (NCCL's tuning model picks by size; a floor) | off | ll | ll128 | simple (forced); "
     "default: the calibration's")
    ("max-memory", po::value<std::string>(),
     "refuse, before it starts, a collective whose estimated memory is above SIZE (e.g. 8GB; none: no limit; "
     "default: 90% of this machine's memory)")
    ("out", po::value<std::string>(), "write collective.tsv and collective.json into this directory")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("cluster")) throw ConfigError("collective: --cluster is required (e.g. dgx-a100:16)");
  CollectiveRequest req;
  req.cluster = vm["cluster"].as<std::string>();
  if (vm.count("ranks")) req.ranks = vm["ranks"].as<int>();
  req.op = vm["op"].as<std::string>();
  req.calibration = value_or(vm, "calibration");
  req.nccl_protocol = value_or(vm, "nccl-proto");
  req.options = simulate_options(vm, "collective", "algo");
  req.options.max_memory_bytes = parse_max_memory(vm, "collective");
  if (vm.count("bytes") && vm.count("sweep")) throw ConfigError("collective: give --bytes or --sweep, not both");
  std::vector<double>& sizes = req.sizes_bytes;
  if (vm.count("sweep")) {
    const std::string sw = vm["sweep"].as<std::string>();
    const auto colon = sw.find(':');
    if (colon == std::string::npos) throw ConfigError("collective: --sweep '" + sw + "' must be MIN:MAX");
    const double lo = parse_bytes(sw.substr(0, colon), "--sweep"), hi = parse_bytes(sw.substr(colon + 1), "--sweep");
    if (lo > hi) throw ConfigError("collective: --sweep '" + sw + "' has MIN above MAX");
    for (double b = lo; b <= hi * (1 + 1e-12); b *= 2) sizes.push_back(std::round(b));
  } else {
    sizes.push_back(vm.count("bytes") ? std::round(parse_bytes(vm["bytes"].as<std::string>(), "--bytes"))
                                      : units::kGiB);
  }
  const auto wall0 = std::chrono::steady_clock::now();
  const CollectiveResult r = collective(req);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), r.files);
  if (!vm.count("quiet")) {
    out << r.text;
    char line[120];
    std::snprintf(line, sizeof line, "\nsimulated in %.2f s wall\n", wall);
    out << line;
  }
  return 0;
}

}  // namespace dtsim::cli
