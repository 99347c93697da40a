// dtsim pareto / dtsim report: read a sweep's results.jsonl (sim/sweep_results.hpp) and print its Pareto fronts
// (sim/pareto.hpp) or write a self-contained HTML report (sim/sweep_html.hpp).
#include <boost/program_options.hpp>
#include <filesystem>

#include "sim/apps/commands.hpp"
#include "sim/pareto.hpp"
#include "sim/sweep_html.hpp"
#include "sim/sweep_results.hpp"
#include "traces/error.hpp"
#include "traces/output.hpp"

namespace po = boost::program_options;

namespace dtsim::cli {
namespace {

/// Options plus one positional RESULTS; argv[0] is the command's name.
po::variables_map parse_results_command(const po::options_description& desc, int argc, char** argv) {
  po::positional_options_description pos;
  pos.add("results", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string(argv[0]) + ": " + e.what());
  }
  return vm;
}

sim::SweepResults load_nonempty(const po::variables_map& vm, const std::string& cmd) {
  if (!vm.count("results"))
    throw ConfigError(cmd + ": give the sweep's results.jsonl or its output directory (dtsim " + cmd + " RESULTS)");
  sim::SweepResults res = sim::load_sweep_results(vm["results"].as<std::string>());
  if (res.rows.empty()) throw ConfigError(cmd + ": '" + res.path + "' holds no scenario yet (empty results)");
  return res;
}

std::string counts_line(const sim::SweepResults& res) {
  const sim::StatusCounts n = sim::count_status(res.rows);
  return std::to_string(n.total) + " scenarios in " + res.path + ": " + std::to_string(n.ok_fit) + " ran and fit, " +
         std::to_string(n.ok_over) + " over capacity, " + std::to_string(n.oom) + " oom, " + std::to_string(n.failed) +
         " failed, " + std::to_string(n.crashed) + " crashed\n";
}

}  // namespace

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
  auto vm = parse_results_command(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  const sim::SweepResults res = load_nonempty(vm, "pareto");
  const auto groups = sim::pareto_fronts(res.rows);
  if (vm.count("out"))
    write_outputs(vm["out"].as<std::string>(), {{"pareto.json", sim::pareto_json(groups, res.path).dump(2) + "\n"},
                                                {"pareto.csv", sim::pareto_csv(groups)}});
  if (!vm.count("quiet")) {
    out << counts_line(res) << "\n" << sim::pareto_table(groups);
    if (vm.count("out")) out << "\nwrote " << vm["out"].as<std::string>() << "/pareto.json and pareto.csv\n";
  }
  return 0;
}

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
  auto vm = parse_results_command(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("html")) throw ConfigError("report: --html OUT.html is required");
  const int top = vm["top"].as<int>();
  if (top < 1 || top > 100) throw ConfigError("report: --top must be between 1 and 100");
  const std::filesystem::path html = vm["html"].as<std::string>();
  if (html.filename().empty() || html.filename() == "." || html.filename() == "..")
    throw ConfigError("report: --html '" + html.string() + "' does not name a file");
  const sim::SweepResults res = load_nonempty(vm, "report");
  const std::string page = sim::sweep_html(res, top);
  write_outputs(html.has_parent_path() ? html.parent_path().string() : ".", {{html.filename().string(), page}});
  if (!vm.count("quiet")) out << counts_line(res) << "wrote " << html.string() << " (" << page.size() << " bytes)\n";
  return 0;
}

}  // namespace dtsim::cli
