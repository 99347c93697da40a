// `dtsim bakeoff`: every planner on one model and cluster, compared in the same simulator (dtsim::bakeoff).
#include "cli/commands.hpp"

#include <string>

#include "cli/options.hpp"
#include "cli/sim_flags.hpp"
#include "dtsim/dtsim.hpp"

namespace dtsim::cli {

int cmd_bakeoff(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim bakeoff: run every planner on one model and cluster, simulate each planner's best candidates in the same\n"
      "simulator, and compare\n"
      "example: dtsim bakeoff --model gpt3-1.3b --cluster dgx-a100:16 --gbs 64 --out bakeoff/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("out", po::value<std::string>(), "write bakeoff.json")
    ("quiet,q", "print nothing on success");
  // clang-format on
  add_planner_options(desc);
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  const BakeoffResult r = bakeoff(plan_request(vm, "bakeoff"));
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), r.files);
  if (!vm.count("quiet")) out << r.text;
  return 0;
}

}  // namespace dtsim::cli
