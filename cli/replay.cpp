// `dtsim replay`: a Kineto trace, or a set of Chakra execution traces (one .et per rank), replayed on the simulator,
// with what-if edits (dtsim::replay).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"

namespace dtsim::cli {
int cmd_replay(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim replay: replay a PyTorch-profiler (Kineto) trace as a dependency graph on the simulator, report the\n"
      "replay error, and predict the effect of edits (what-if); or replay Chakra execution traces (.et, one per rank)\n"
      "together as one multi-rank graph\n"
      "example: dtsim replay --trace rank0.json.gz --scale-kernels 'gemm|cutlass|sm80_xmma=0.5' --out "
      "replay/\n"
      "example: dtsim replay --trace chakra/ --collective-bw-scale 2   (a directory of <prefix>.<rank>.et files)"
      "\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("trace", po::value<std::vector<std::string>>()->multitoken()->composing(),
     "Kineto trace: .json, .json.gz, or a .tar.gz of one trace per rank; or Chakra execution traces: a directory of "
     "<prefix>.<rank>.et files, or the .et files (one per rank)")
    ("comm-groups", po::value<std::string>(),
     "Chakra: communicator-group JSON {\"id\": [ranks]} (ASTRA-sim's --comm-group-configuration; default: the "
     "directory's *comm_group.json, else groups by pg_name)")
    ("member", po::value<std::string>(), "with an archive: replay only this member (default: every rank, one by one)")
    ("scale-kernels", po::value<std::vector<std::string>>()->composing(),
     "REGEX=FACTOR: multiply the duration of non-collective GPU tasks whose name matches (repeatable; first match wins)")
    ("collective-bw-scale", po::value<double>(), "collective (NCCL) bandwidth x F (alpha-beta model)")
    ("collective-bw", po::value<double>(), "collective bus bandwidth in GB/s for collectives of known size")
    ("collective-group", po::value<int>(), "new collective group size N (ring alpha-beta model)")
    ("collective-alpha-us", po::value<double>(), "per-step latency alpha of the alpha-beta model, us (default 0)")
    ("collective-time-scale", po::value<double>(), "multiply every collective kernel's time by F")
    ("cpu-scale", po::value<double>(), "multiply CPU gaps (host work between runtime calls) by F")
    ("runtime-scale", po::value<double>(), "multiply runtime calls' own time by F")
    ("launch-latency-us", po::value<double>(), "launch latency, us (default: fitted from the trace)")
    ("no-unexplained-gaps", "do not keep GPU idle time that no dependency explains (measures the dependency model alone)")
    ("out", po::value<std::string>(), "write replay.json and replay_trace.json (Chrome trace of the replayed timeline)")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("trace"))
    throw ConfigError("replay: --trace is required (a Kineto .json/.json.gz or a .tar.gz of ranks)");
  ReplayRequest req;
  const auto traces = vm["trace"].as<std::vector<std::string>>();
  req.trace = traces.front();
  req.more_traces.assign(traces.begin() + 1, traces.end());
  if (vm.count("comm-groups")) req.comm_groups = vm["comm-groups"].as<std::string>();
  if (vm.count("member")) req.member = vm["member"].as<std::string>();
  if (vm.count("scale-kernels")) req.scale_kernels = vm["scale-kernels"].as<std::vector<std::string>>();
  if (vm.count("collective-bw-scale")) req.collective_bw_scale = vm["collective-bw-scale"].as<double>();
  if (vm.count("collective-bw")) req.collective_bw_GBps = vm["collective-bw"].as<double>();
  if (vm.count("collective-group")) req.collective_group = vm["collective-group"].as<int>();
  if (vm.count("collective-alpha-us")) req.collective_alpha_us = vm["collective-alpha-us"].as<double>();
  if (vm.count("collective-time-scale")) req.collective_time_scale = vm["collective-time-scale"].as<double>();
  if (vm.count("cpu-scale")) req.cpu_scale = vm["cpu-scale"].as<double>();
  if (vm.count("runtime-scale")) req.runtime_scale = vm["runtime-scale"].as<double>();
  if (vm.count("launch-latency-us")) req.launch_latency_us = vm["launch-latency-us"].as<double>();
  req.keep_unexplained_gaps = vm.count("no-unexplained-gaps") == 0;
  req.chrome_trace = vm.count("out") > 0;
  const auto wall0 = std::chrono::steady_clock::now();
  const ReplayResult r = replay(req);
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), r.files);
  if (!vm.count("quiet")) {
    out << r.text;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    char line[160];
    if (r.format == "chakra-et")
      std::snprintf(line, sizeof line, "\nreplayed %zu ranks' Chakra traces in %.2f s wall\n", r.traces.size(), wall);
    else
      std::snprintf(line, sizeof line, "\nreplayed %zu trace%s in %.2f s wall (analytic engine)\n", r.traces.size(),
                    r.traces.size() == 1 ? "" : "s", wall);
    out << line;
    if (vm.count("out")) {
      out << "wrote " << vm["out"].as<std::string>() << "/replay.json";
      if (r.files.size() > 1) out << " and replay_trace.json";
      out << "\n";
    }
  }
  return 0;
}

}  // namespace dtsim::cli
