// dtsim-exec: runs a simulated plan's per-rank task graph on this machine's GPU and writes what it measured.
//
//   dtsim simulate ... --out pred/                  # the prediction (its summary.json holds every input)
//   dtsim-exec --predicted pred/ --out meas/        # each simulated rank alone (ex-situ), or the whole plan
//                                                  # when it has one rank; writes meas/measurements.json
//   dtsim validate measured --predicted pred/ --measurements meas/measurements.json --out meas/
//   dtsim compare --predicted pred/ --measured meas/
// Exit codes: 0 measured (a rank's OOM or CUDA failure is a measured result, reported in the file), 2 bad input
// or no GPU.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "sim/engine/analytic_runtime.hpp"
#include "sim/model/run_config.hpp"
#include "traces/error.hpp"
#include "traces/output.hpp"
#include "validate/exec/executor.hpp"

namespace {

const char* const kUsage =
    "usage: dtsim-exec --predicted DIR --out DIR [--warmup N] [--iters N] [--device D] [--ranks 0,2,...] [-q]\n"
    "  runs every simulated rank of the plan in DIR (the --out directory of 'dtsim simulate') alone on the GPU\n"
    "  (ex-situ; a one-rank plan is a full run) and writes DIR/measurements.json\n";

int to_int(const std::string& flag, const std::string& v) {
  try {
    std::size_t pos = 0;
    const int x = std::stoi(v, &pos);
    if (pos == v.size()) return x;
  } catch (const std::exception&) {}
  throw dtsim::ConfigError(flag + " expects an integer, got '" + v + "'");
}

int run(int argc, char** argv) {
  std::string predicted, out;
  dtsim::exec::ExecOptions opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw dtsim::ConfigError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--predicted") predicted = value();
    else if (a == "--out") out = value();
    else if (a == "--warmup") opt.warmup = to_int(a, value());
    else if (a == "--iters") opt.iterations = to_int(a, value());
    else if (a == "--device") opt.device = to_int(a, value());
    else if (a == "--ranks") {
      std::stringstream ss(value());
      for (std::string r; std::getline(ss, r, ',');) opt.ranks.push_back(to_int(a, r));
    } else if (a == "-q" || a == "--quiet") opt.quiet = true;
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else throw dtsim::ConfigError("unknown argument '" + a + "'");
  }
  if (predicted.empty() || out.empty()) throw dtsim::ConfigError("--predicted and --out are required");
  auto rc = dtsim::sim::load_run_config(predicted);
  rc.options.record_kernels = true;
  const auto low = dtsim::sim::lower(rc.model, rc.cluster, rc.plan, rc.calibration, rc.options);
  const auto [gpus, share] = dtsim::sim::platform_ranks(low, rc.plan, 0);
  // The simulator's schedule (analytic engine: no SimGrid here) orders each rank's tasks.
  const auto eng = dtsim::sim::run_analytic(low.graph, rc.cluster, rc.calibration, gpus, share);
  const auto m = dtsim::exec::execute(low, eng.start_s, rc.model.dtype, opt);
  dtsim::write_outputs(out, {{"measurements.json", dtsim::exec::to_json(m).dump(1) + "\n"}});
  if (!opt.quiet)
    for (const auto& r : m.ranks)
      std::printf(
          "rank %d (global %d): %s  median iteration %.3f ms  peak memory %.2f GB (context %.2f GB + pool %.2f GB)%s\n",
          r.sim_rank, r.global_rank, r.ok ? "ok" : "FAILED", 1e3 * dtsim::exec::median(r.iteration_s),
          r.peak_memory_bytes / 1e9, r.context_bytes / 1e9, r.pool_reserved_high_bytes / 1e9,
          r.ok ? "" : (std::string("  ") + r.error).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const dtsim::Error& e) {
    std::fprintf(stderr, "dtsim-exec: error: %s\n", e.what());
    return 2;
  }
}
