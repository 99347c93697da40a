// `dtsim plan`: a planner's best candidates simulated, the fastest that fits chosen (dtsim::plan).
#include "cli/commands.hpp"

#include <string>

#include "cli/options.hpp"
#include "cli/sim_flags.hpp"
#include "dtsim/dtsim.hpp"

namespace dtsim::cli {

int cmd_plan(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim plan: search a parallel plan, simulate the planner's best candidates, keep the fastest that fits\n"
      "example: dtsim plan --planner grid --model gpt3-175b --cluster dgx-a100:1024 --gbs 1536 --out plan/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("planner", po::value<std::string>()->default_value("grid"), "planner: grid | pipedream | dapple | rannc | rannc-paper | rannc-layers | uniap | uniap-k1 | luo")
    ("out", po::value<std::string>(), "write plan.json, candidates.json and the chosen plan's summary.json/trace.json")
    ("quiet,q", "print nothing on success");
  // clang-format on
  add_planner_options(desc);
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  PlanRequest req = plan_request(vm, "plan");
  req.planner = vm["planner"].as<std::string>();
  req.simulate_chosen = vm.count("out") > 0;
  const PlanResult r = plan(req);
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), r.files);
  if (!vm.count("quiet")) out << r.text;
  return 0;
}

}  // namespace dtsim::cli
