// `dtsim report RESULTS --html OUT.html`: one self-contained HTML page of a sweep's results. A thin layer over
// dtsim::report() (dtsim/sweep.hpp).
#include <string>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"
#include "traces/error.hpp"

namespace dtsim::cli {

int cmd_report(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim report RESULTS --html OUT.html: one self-contained HTML page of a sweep's results (inline SVG plots:\n"
      "best throughput vs GPU count, memory per strategy, Pareto fronts, time breakdown; the top strategies per\n"
      "GPU count; skip and failure counts)\n"
      "example: dtsim report out/sweep --html out/sweep/report.html --top 5\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("results", po::value<std::string>(), "results.jsonl, or the sweep's output directory")
    ("html", po::value<std::string>(), "the HTML file to write (atomically)")
    ("top", po::value<int>()->default_value(5), "strategies per model and GPU count in the table and bar charts")
    ("quiet,q", "print nothing on success");
  // clang-format on
  const auto vm = parse_positional(desc, "results", argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("html")) throw ConfigError("report: --html OUT.html is required");
  ReportRequest req;
  if (vm.count("results")) req.results = vm["results"].as<std::string>();
  req.html_path = vm["html"].as<std::string>();
  req.top = vm["top"].as<int>();
  const ReportResult res = report(req);
  write_files(res.out_dir, res.files);
  if (!vm.count("quiet")) out << res.text << "wrote " << req.html_path << " (" << res.html.size() << " bytes)\n";
  return 0;
}

}  // namespace dtsim::cli
