// `dtsim pareto RESULTS`: the Pareto fronts of a sweep's results. A thin layer over dtsim::pareto() (dtsim/sweep.hpp).
#include <string>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"

namespace dtsim::cli {

int cmd_pareto(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim pareto RESULTS: the Pareto front of throughput (tokens/s, higher is better) against peak memory (lower\n"
      "is better) of a sweep's scenarios that ran and fit, per model and GPU count. Equal throughput: the lower\n"
      "memory wins; equal memory: the higher throughput; identical points: the lowest index stands, the others are\n"
      "listed as the same point.\n"
      "example: dtsim pareto out/sweep --out out/sweep   (writes pareto.json and pareto.csv)\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("results", po::value<std::string>(), "results.jsonl, or the sweep's output directory")
    ("out", po::value<std::string>(), "directory to write pareto.json and pareto.csv into")
    ("quiet,q", "print nothing on success");
  // clang-format on
  const auto vm = parse_positional(desc, "results", argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  ParetoRequest req;
  if (vm.count("results")) req.results = vm["results"].as<std::string>();
  const ParetoResult res = pareto(req);
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), res.files);
  if (!vm.count("quiet")) {
    out << res.text;
    if (vm.count("out")) out << "\nwrote " << vm["out"].as<std::string>() << "/pareto.json and pareto.csv\n";
  }
  return 0;
}

}  // namespace dtsim::cli
