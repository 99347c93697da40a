// `dtsim compare`: a predicted run directory against a measured one (dtsim::compare).
#include <string>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"

namespace dtsim::cli {
int cmd_compare(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim compare: compare a predicted run directory (dtsim simulate --out) with a measured one in the same format\n"
      "(trace.json + summary.json): per task, per rank (compute / exposed comm / bubble), per phase, peak memory and\n"
      "iteration time; error = measured / predicted - 1\n"
      "example: dtsim compare --predicted out/predicted --measured out/measured --out out/compare\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("predicted", po::value<std::string>(), "predicted run directory (trace.json + summary.json)")
    ("measured", po::value<std::string>(), "measured run directory in the same format")
    ("out", po::value<std::string>(), "write compare.json and compare_trace.json (both sides in one Chrome trace)")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  for (const char* req : {"predicted", "measured"})
    if (!vm.count(req)) throw ConfigError(std::string("compare: --") + req + " is required");
  const CompareResult r = compare({vm["predicted"].as<std::string>(), vm["measured"].as<std::string>()});
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), r.files);
  if (!vm.count("quiet")) {
    out << r.text;
    if (vm.count("out")) out << "\nwrote " << vm["out"].as<std::string>() << "/compare.json and compare_trace.json\n";
  }
  return 0;
}

}  // namespace dtsim::cli
