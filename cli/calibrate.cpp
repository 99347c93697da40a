// `dtsim calibrate nccl-tests LOG`, `dtsim calibrate compute`, `dtsim calibrate runs` and `dtsim calibrate
// device-model`: calibrations from measurements (dtsim::calibrate_nccl_tests, dtsim::calibrate_compute,
// dtsim::calibrate_runs) and from a measured GPU by board power (dtsim::calibrate_device_model).
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"

namespace dtsim::cli {
namespace {

/// The options of `calibrate SUB ...` (argv[0] is SUB), parsed with `self` as the program name in messages.
po::variables_map parse_subcommand(const po::options_description& desc, std::string self, int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  args[0] = self.data();
  return parse(desc, argc, args.data());
}

/// `calibrate compute`: the compute fields (launch overhead, memory-bandwidth and GEMM efficiency) fitted to the
/// kernel times of Kineto traces and GEMM sweep CSVs (validate/calibrate/compute_fit.hpp). argv[0] is "compute".
int cmd_calibrate_compute(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim calibrate compute: fit the compute calibration (kernel launch overhead, memory-bandwidth and GEMM\n"
      "efficiency) to the kernel times of PyTorch-profiler traces recorded with shapes and/or GEMM sweep CSVs\n"
      "example: dtsim calibrate compute --trace rank0.json.gz --gemm-csv gemm.csv --out cal/\n"
      "         (writes cal/calibration.json, cal/points.csv and, with a trace's host issue time, "
      "cal/stack.json)\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("trace", po::value<std::vector<std::string>>()->composing(), "Kineto trace (.json, .json.gz, or a .tar.gz of ranks); repeatable")
    ("gemm-csv", po::value<std::vector<std::string>>()->composing(), "GEMM sweep CSV (m,n,k,dtype,time_s,tflops); repeatable")
    ("gpu", po::value<std::string>(), "GPU preset or JSON file with its peaks (default: the traces' GPU)")
    ("base", po::value<std::string>(), "base calibration: JSON file or GPU preset name (default: the GPU's built-in one)")
    ("stack", po::value<std::string>(), "stack profile (name or JSON file) that stack.json copies with the traces' measured host issue time (default: megatron-core)")
    ("out", po::value<std::string>(), "directory to write calibration.json, points.csv and (when a trace measures the host issue time) stack.json into");
  // clang-format on
  const auto vm = parse_subcommand(desc, "calibrate compute", argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  CalibrateComputeRequest req;
  if (vm.count("trace")) req.traces = vm["trace"].as<std::vector<std::string>>();
  if (vm.count("gemm-csv")) req.gemm_csvs = vm["gemm-csv"].as<std::vector<std::string>>();
  if (vm.count("gpu")) req.gpu = vm["gpu"].as<std::string>();
  if (vm.count("base")) req.base = vm["base"].as<std::string>();
  if (vm.count("stack")) req.stack = vm["stack"].as<std::string>();
  // --out is required once there is something to fit (without inputs, calibrate_compute names those first).
  if (!vm.count("out") && !(req.traces.empty() && req.gemm_csvs.empty()))
    throw ConfigError("calibrate compute: --out DIR is required");
  if (vm.count("out")) req.out_dir = vm["out"].as<std::string>();
  const CalibrateComputeResult r = calibrate_compute(req);
  write_files(req.out_dir, r.files);
  out << r.text;
  return 0;
}

/// `calibrate device-model`: the calibration of a GPU nothing was measured on, from a measured one by board power
/// (traces/device_model.hpp). argv[0] is "device-model".
int cmd_calibrate_device_model(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim calibrate device-model: derive the calibration of a GPU nothing was measured on from a measured GPU of\n"
      "the same process generation: sustained tensor-core throughput scaled by board power (docs/modelling.md)\n"
      "example: dtsim calibrate device-model --gpu b200 --reference h100-sxm5-80gb --out cal/\n"
      "         (writes cal/calibration.json)\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("gpu", po::value<std::string>(), "the GPU to derive for: preset or JSON file (with board_power_w)")
    ("reference", po::value<std::string>(), "the measured GPU: preset or JSON file (default h100-sxm5-80gb)")
    ("base", po::value<std::string>(), "the reference's calibration file (default: its built-in one)")
    ("out", po::value<std::string>(), "directory to write calibration.json into");
  // clang-format on
  const auto vm = parse_subcommand(desc, "calibrate device-model", argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  CalibrateDeviceModelRequest req;
  if (vm.count("gpu")) req.gpu = vm["gpu"].as<std::string>();
  if (vm.count("reference")) req.reference = vm["reference"].as<std::string>();
  if (vm.count("base")) req.base = vm["base"].as<std::string>();
  if (!vm.count("out")) throw ConfigError("calibrate device-model: --out DIR is required");
  req.out_dir = vm["out"].as<std::string>();
  const CalibrateDeviceModelResult r = calibrate_device_model(req);
  write_files(req.out_dir, r.files);
  out << r.text;
  return 0;
}

/// `calibrate runs`: the user's cluster and stack from a few measured runs (validate/calibrate/runs_fit.hpp).
/// argv[0] is "runs".
int cmd_calibrate_runs(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim calibrate runs: fit what a few measured runs of your cluster can identify (GPU efficiencies, NVLink\n"
      "and NIC efficiency, the stack's host costs) and say why every other value is kept; writes a hardware\n"
      "calibration, a stack profile (for simulate --calibration --stack) and a fit report\n"
      "example: dtsim calibrate runs --data my_runs.json --out cal/\n"
      "         (runs: docs/accuracy.md, 'Your own runs': model, cluster, plan, measured_s per run)\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("data", po::value<std::vector<std::string>>()->composing(), "file of measured runs (JSON rows or a published-data format); repeatable")
    ("calibration", po::value<std::string>(), "base hardware calibration (default: the built-in one of the runs' GPU)")
    ("stack", po::value<std::string>(), "base software stack: name or profile .json (default: the runs' own)")
    ("fit-max-gpus", po::value<int>(), "fit on the runs with at most N GPUs; predict the others with the fit")
    ("fit-runs", po::value<int>(), "fit on at most N of those runs, evenly spaced; predict the rest")
    ("max-evals", po::value<int>()->default_value(300), "evaluations of the fit's objective (each predicts every run)")
    ("noise", po::value<double>()->default_value(0.02), "relative noise of one measured time (what counts as identified)")
    ("out", po::value<std::string>(), "directory to write calibration.json, stack.json and fit_report.json into");
  // clang-format on
  const auto vm = parse_subcommand(desc, "calibrate runs", argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  CalibrateRunsRequest req;
  if (vm.count("data")) req.data = vm["data"].as<std::vector<std::string>>();
  if (req.data.empty()) throw ConfigError("calibrate runs: --data FILE is required (measured runs)");
  if (!vm.count("out")) throw ConfigError("calibrate runs: --out DIR is required");
  req.out_dir = vm["out"].as<std::string>();
  if (vm.count("calibration")) req.calibration = vm["calibration"].as<std::string>();
  if (vm.count("stack")) req.stack = vm["stack"].as<std::string>();
  if (vm.count("fit-max-gpus")) req.fit_max_gpus = vm["fit-max-gpus"].as<int>();
  if (vm.count("fit-runs")) req.fit_runs = vm["fit-runs"].as<int>();
  req.max_evaluations = vm["max-evals"].as<int>();
  req.noise = vm["noise"].as<double>();
  const CalibrateRunsResult r = calibrate_runs(req);
  write_files(req.out_dir, r.files);
  out << r.text;
  return 0;
}

}  // namespace

int cmd_calibrate(int argc, char** argv, std::ostream& out) {
  if (argc >= 2 && std::string(argv[1]) == "compute") return cmd_calibrate_compute(argc - 1, argv + 1, out);
  if (argc >= 2 && std::string(argv[1]) == "runs") return cmd_calibrate_runs(argc - 1, argv + 1, out);
  if (argc >= 2 && std::string(argv[1]) == "device-model") return cmd_calibrate_device_model(argc - 1, argv + 1, out);
  po::options_description desc(
      "dtsim calibrate nccl-tests LOG: fit the network's message-size segments (latency and bandwidth factors\n"
      "per size range) of one link class to an nccl-tests log and write a calibration file\n"
      "example: dtsim calibrate nccl-tests all_reduce.log --cluster dgx-a100:8 --out cal/   (writes "
      "cal/calibration.json)\n"
      "('dtsim calibrate compute --help': the compute fit from kernel traces and GEMM sweeps;\n"
      " 'dtsim calibrate device-model --help': a GPU nothing was measured on, from a measured one by board "
      "power;\n 'dtsim calibrate runs --help': your cluster and stack from a few measured runs)\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("source", po::value<std::string>(), "what to fit: nccl-tests")
    ("log", po::value<std::string>(), "the nccl-tests text output")
    ("cluster", po::value<std::string>(), "the cluster the log was measured on (preset or JSON)")
    ("op", po::value<std::string>(), "collective, if the log does not say (all-reduce, all-gather, reduce-scatter)")
    ("ranks", po::value<int>(), "ranks, if the log does not list them")
    ("calibration", po::value<std::string>(), "base calibration (default: the built-in one for the GPU)")
    ("out", po::value<std::string>(), "directory to write calibration.json into");
  // clang-format on
  po::positional_options_description pos;
  pos.add("source", 1).add("log", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string("calibrate: ") + e.what());
  }
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("source") || vm["source"].as<std::string>() != "nccl-tests")
    throw ConfigError("calibrate: the first argument must be 'nccl-tests', 'compute', 'device-model' or 'runs'");
  if (!vm.count("log")) throw ConfigError("calibrate: give the nccl-tests log file");
  if (!vm.count("cluster")) throw ConfigError("calibrate: --cluster is required");
  if (!vm.count("out")) throw ConfigError("calibrate: --out DIR is required");
  CalibrateNcclRequest req;
  req.log = vm["log"].as<std::string>();
  req.cluster = vm["cluster"].as<std::string>();
  if (vm.count("calibration")) req.calibration = vm["calibration"].as<std::string>();
  if (vm.count("op")) req.op = vm["op"].as<std::string>();
  if (vm.count("ranks")) req.ranks = vm["ranks"].as<int>();
  req.out_dir = vm["out"].as<std::string>();
  const CalibrateNcclResult r = calibrate_nccl_tests(req);
  write_files(req.out_dir, r.files);
  out << r.text;
  return 0;
}

}  // namespace dtsim::cli
