#include "sim/apps/cli.hpp"
#include "sim/apps/commands.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "sim/calibrate.hpp"
#include "sim/calibrate_compute.hpp"
#include "sim/collective_bench.hpp"
#include "sim/multi_job.hpp"
#include "sim/plan_search.hpp"
#include "sim/replay.hpp"
#include "sim/simulate.hpp"
#include "sim/validate_published.hpp"
#include "strategies/capacity.hpp"
#include "traces/error.hpp"
#include "traces/kineto_import.hpp"
#include "traces/output.hpp"
#include "traces/units.hpp"
#include "validate/compare.hpp"
#include "validate/measured_timeline.hpp"

namespace po = boost::program_options;

namespace dtsim::cli {
namespace {

const char* kUsage =
    "usage: dtsim <command> [options]\n"
    "\n"
    "commands:\n"
    "  simulate   simulate one training iteration of a model, cluster and parallel plan\n"
    "  collective simulate one collective (or a sweep of sizes) and report nccl-tests algbw/busbw\n"
    "  calibrate  fit calibration inputs to measurements: 'calibrate nccl-tests LOG --cluster C --out DIR',\n"
    "             'calibrate compute --trace FILE | --gemm-csv FILE ... --out DIR'\n"
    "  plan       search a parallel plan with a planner, simulate the best candidates, write the chosen plan\n"
    "  bakeoff    run every planner on the same model and cluster and compare their plans in the simulator\n"
    "  capacity   the largest model of a ladder each planner fits on a cluster (vs Megatron-style TP + DP)\n"
    "  replay     replay a PyTorch-profiler (Kineto) trace on the simulator and predict what-if edits\n"
    "  validate   score predictions against published measurements (validate published), fit a calibration (validate "
    "fit),\n"
    "             run a plan on this GPU and compare (validate run; validate measured: an executor run as a timeline)\n"
    "  compare    compare a predicted run directory (simulate --out) with a measured one: per task, rank, phase, "
    "memory\n"
    "  sweep      simulate a grid/random space of scenarios (-j N workers, resumable; under mpirun: sharded)\n"
    "  pareto     the throughput-vs-memory Pareto front of sweep results, per GPU count\n"
    "  report     a self-contained HTML page of sweep results (plots as inline SVG, top strategies)\n"
    "  presets    list model, GPU and cluster presets\n"
    "  version    print versions\n"
    "\n"
    "'dtsim <command> --help' describes a command's options.\n";

/// The items of a comma-separated list (empty items kept, so callers can reject them).
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

std::vector<int> parse_int_list(const std::string& s, const std::string& what) {
  std::vector<int> out;
  for (const std::string& item : split_list(s)) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0')
      throw ConfigError(what + " '" + s + "' is not a comma-separated list of integers");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

po::variables_map parse(const po::options_description& desc, int argc, char** argv) {
  po::variables_map vm;
  try {
    // argv[0] is the subcommand; every other word must belong to an option ("--sequence-parallel false"
    // would otherwise switch the flag on and drop "false" silently).
    auto parsed = po::command_line_parser(argc, argv).options(desc).allow_unregistered().run();
    for (const auto& o : parsed.options)
      if (o.unregistered || o.position_key >= 0) {
        const std::string word = o.original_tokens.empty() ? o.string_key : o.original_tokens.front();
        if (o.unregistered) throw ConfigError(std::string(argv[0]) + ": unrecognised option '" + word + "'");
        throw ConfigError(std::string(argv[0]) + ": unexpected argument '" + word + "'");
      }
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string(argv[0]) + ": " + e.what());
  }
  return vm;
}

int cmd_presets(int argc, char** argv, std::ostream& out) {
  po::options_description desc("dtsim presets: list the built-in models, GPUs and clusters");
  desc.add_options()("help,h", "this help");
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  out << "models (--model NAME, or a JSON file):\n";
  for (const auto& n : model_preset_names()) {
    auto m = model_preset(n);
    char line[200];
    std::snprintf(line, sizeof line,
                  "  %-15s %7.1fB params  layers %3d  hidden %5d  heads %3d  kv %3d  ffn %6d  seq %5d  vocab %6d\n",
                  n.c_str(), static_cast<double>(m.total_params()) / 1e9, m.num_layers, m.hidden, m.heads, m.kv_heads,
                  m.ffn_hidden, m.seq_len, m.vocab);
    out << line;
  }
  out << "gpus:\n";
  for (const auto& n : gpu_preset_names()) {
    auto g = gpu_preset(n);
    char line[200];
    std::snprintf(line, sizeof line, "  %-15s %6.1f TFLOP/s fp16  %6.0f GB/s HBM  %5.1f GB\n", n.c_str(),
                  g.peak_fp16_flops / 1e12, g.hbm_Bps / 1e9, g.memory_bytes / 1e9);
    out << line;
  }
  out << "clusters (--cluster NAME:GPUS, or a JSON file):\n";
  for (const auto& n : cluster_preset_names()) {
    auto c = load_cluster(n);
    char line[300];
    if (c.has_graph())
      std::snprintf(
          line, sizeof line,
          "  %-15s %d x %s per node, explicit graph (%zu vertices, %zu links per node), %d NICs x %.0f Gb/s\n",
          (n + ":N").c_str(), c.gpus_per_node, c.gpu.name.c_str(), c.graph.vertices.size() - 1, c.graph.links.size(),
          c.inter.nics_per_node, c.inter.nic_bandwidth_Bps * 8 / 1e9);
    else
      std::snprintf(line, sizeof line,
                    "  %-15s %d x %s per node, NVSwitch %.0f GB/s per GPU per direction, %d NICs x %.0f Gb/s\n",
                    (n + ":N").c_str(), c.gpus_per_node, c.gpu.name.c_str(), c.intra.bandwidth_Bps / 1e9,
                    c.inter.nics_per_node, c.inter.nic_bandwidth_Bps * 8 / 1e9);
    out << line;
  }
  out << "fabrics (after NAME:GPUS): :fat-tree:NODES_PER_LEAF:OVERSUB[:LEAVES_PER_POD:POD_OVERSUB], "
         ":rail:NODES_PER_RAIL:OVERSUB\n";
  return 0;
}

sim::SimOptions sim_options(const po::variables_map& vm) {
  sim::SimOptions opt;
  const std::string coll = vm["collectives"].as<std::string>();
  if (coll == "flow") opt.collective_mode = sim::CollectiveMode::FLOW;
  else if (coll == "steps") opt.collective_mode = sim::CollectiveMode::STEPS;
  else throw ConfigError("simulate: --collectives '" + coll + "' is not known (known: flow, steps)");
  const std::string fold = vm["fold"].as<std::string>();
  if (fold == "auto") opt.fold = sim::FoldMode::AUTO;
  else if (fold == "none") opt.fold = sim::FoldMode::NONE;
  else throw ConfigError("simulate: --fold '" + fold + "' is not known (known: auto, none)");
  const std::string algo = vm["collective-algo"].as<std::string>();
  if (algo == "auto") opt.collective_algorithm = sim::CollectiveAlgorithm::AUTO;
  else if (algo == "ring") opt.collective_algorithm = sim::CollectiveAlgorithm::RING;
  else if (algo == "hierarchical") opt.collective_algorithm = sim::CollectiveAlgorithm::HIERARCHICAL;
  else if (algo == "tree") opt.collective_algorithm = sim::CollectiveAlgorithm::TREE;
  else if (algo == "nvls") opt.collective_algorithm = sim::CollectiveAlgorithm::NVLS;
  else
    throw ConfigError("simulate: --collective-algo '" + algo +
                      "' is not known (known: auto, ring, hierarchical, tree, nvls)");
  const std::string net = vm["network"].as<std::string>();
  if (net == "flow") opt.network = sim::NetworkMode::FLOW;
  else if (net == "analytic") opt.network = sim::NetworkMode::ANALYTIC;
  else throw ConfigError("simulate: --network '" + net + "' is not known (known: flow, analytic)");
  opt.channels = vm["channels"].as<int>();
  if (opt.channels < 1 || opt.channels > 64) throw ConfigError("simulate: --channels must be between 1 and 64");
  return opt;
}

int simulate_jobs_cli(const po::variables_map& vm, std::ostream& out) {
  for (const char* flag :
       {"model", "plan", "tp", "pp", "dp", "mbs", "gbs", "schedule", "recompute", "zero", "sequence-parallel",
        "layers-per-stage", "stage-replicas", "rank-order", "no-dp-overlap", "dp-bucket-mb", "tp-layout"})
    if (vm.count(flag)) throw ConfigError(std::string("simulate: --") + flag + " cannot be combined with --jobs");
  const auto wall0 = std::chrono::steady_clock::now();
  ClusterSpec cluster = load_cluster(vm["cluster"].as<std::string>());
  auto jobs = sim::load_jobs(vm["jobs"].as<std::string>());
  Calibration cal = vm.count("calibration") ? load_calibration(vm["calibration"].as<std::string>())
                                            : default_calibration(cluster.gpu.name);
  const sim::SimOptions opt = sim_options(vm);
  auto res = sim::simulate_jobs(jobs, cluster, cal, opt, vm.count("no-alone") == 0);
  nlohmann::json js = nlohmann::json::array();
  std::string text;
  for (std::size_t k = 0; k < jobs.size(); ++k) {
    auto& jr = res.jobs[k];
    sim::Inputs in{&jobs[k].model, &cluster, &jobs[k].plan, &cal, &jr.options};
    auto j = sim::summary_json(in, jr.lowered, jr.engine, jr.report);
    j.erase("links");
    j["job"] = {{"name", jobs[k].name}, {"first_gpu", jobs[k].first_gpu}, {"gpus", jobs[k].plan.world_size()}};
    if (jr.alone_iteration_s > 0) {
      j["job"]["alone_iteration_time_s"] = jr.alone_iteration_s;
      j["job"]["slowdown"] = jr.report.iteration_time_s / jr.alone_iteration_s;
    }
    js.push_back(j);
    text += "== job '" + jobs[k].name + "' on GPUs " + std::to_string(jobs[k].first_gpu) + ".." +
            std::to_string(jobs[k].first_gpu + jobs[k].plan.world_size() - 1) + "\n";
    text += sim::human_summary(in, jr.lowered, jr.engine, jr.report);
    if (jr.alone_iteration_s > 0) {
      char line[200];
      std::snprintf(line, sizeof line, "sharing the cluster: %.3f s per iteration vs %.3f s alone (slowdown x%.3f)\n",
                    jr.report.iteration_time_s, jr.alone_iteration_s,
                    jr.report.iteration_time_s / jr.alone_iteration_s);
      text += line;
    }
    text += "\n";
  }
  if (vm.count("out")) {
    nlohmann::json links = nlohmann::json::array();
    double T = 0;
    for (const auto& jr : res.jobs) T = std::max(T, jr.report.iteration_time_s);
    for (const auto& l : res.combined.link_stats)
      links.push_back({{"name", l.name},
                       {"bandwidth_Bps", l.bandwidth_Bps},
                       {"bytes", l.bytes},
                       {"busy_s", l.busy_s},
                       {"peak_utilization", l.peak_utilization}});
    nlohmann::json summary = {{"schema", "dtsim.jobs"},
                              {"schema_version", 1},
                              {"dtsim_version", DTSIM_VERSION},
                              {"simgrid_version", sim::simgrid_version()},
                              {"cluster", to_json(cluster)},
                              {"jobs", js},
                              {"links", links}};
    write_outputs(vm["out"].as<std::string>(), {{"summary.json", summary.dump(2) + "\n"}});
  }
  if (!vm.count("quiet")) {
    out << text;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    char line[120];
    std::snprintf(line, sizeof line, "simulated %zu jobs in %.2f s wall\n", jobs.size(), wall);
    out << line;
  }
  return 0;
}

int cmd_simulate(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim simulate: simulate one training iteration on SimGrid\n"
      "example: dtsim simulate --model gpt3-175b --cluster dgx-a100:1024 --tp 8 --pp 8 --dp 16 --mbs 1 --gbs 1536 "
      "--schedule 1f1b --out out/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("model", po::value<std::string>(), "model preset (see 'dtsim presets') or model JSON file")
    ("cluster", po::value<std::string>(), "cluster preset NAME:GPUS (e.g. dgx-a100:64) or cluster JSON file")
    ("plan", po::value<std::string>(), "plan JSON file (the plan flags below are then not allowed)")
    ("jobs", po::value<std::string>(),
     "jobs JSON file: several plans sharing --cluster, each on its own GPUs (replaces --model and the plan flags)")
    ("no-alone", "with --jobs, do not also simulate each job alone (no slowdown figures)")
    ("tp", po::value<int>(), "tensor-parallel degree (default 1)")
    ("pp", po::value<int>(), "pipeline-parallel degree (default 1)")
    ("dp", po::value<int>(), "data-parallel degree (default: GPUs / (tp * pp))")
    ("mbs", po::value<int>(), "micro-batch size (default 1)")
    ("gbs", po::value<int>(), "global batch size in samples (required without --plan)")
    ("schedule", po::value<std::string>(),
     "pipeline schedule: gpipe | 1f1b | 1f1b:dapple | interleaved:V | zb-h1 | zb-h2 | custom:FILE (default 1f1b)")
    ("recompute", po::value<std::string>(), "activation recompute: none | selective | full (default none)")
    ("zero", po::value<int>(), "ZeRO stage: 0 | 1 | 2 | 3 (3 = FSDP full sharding; default 0)")
    ("sequence-parallel", "Megatron sequence parallelism (needs tp > 1)")
    ("tp-layout", po::value<std::string>(),
     "tensor-parallel layout: 1d (Megatron, default) | 2d (tp = q^2) | 2.5d:D (tp = q^2 D) | 3d (tp = q^3)")
    ("layers-per-stage", po::value<std::string>(), "explicit layers per stage, e.g. 13,12,12,11")
    ("stage-replicas", po::value<std::string>(),
     "devices per stage inside one pipeline copy (stage replication), e.g. 2,1,1; GPUs = tp*dp*sum")
    ("rank-order", po::value<std::string>(), "axes innermost first (default tp,dp,pp)")
    ("no-dp-overlap", "start the gradient all-reduce only after the whole backward pass")
    ("dp-bucket-mb", po::value<double>(), "gradient bucket size in MiB (default 25)")
    ("calibration", po::value<std::string>(), "calibration JSON file (default: the built-in one for the GPU)")
    ("collectives", po::value<std::string>()->default_value("flow"), "collective lowering: flow | steps")
    ("fold", po::value<std::string>()->default_value("auto"), "symmetry folding: auto | none")
    ("collective-algo", po::value<std::string>()->default_value("auto"),
     "all-reduce algorithm: auto (the calibration's size table, else hierarchical across nodes with several GPUs "
     "per node, else ring) | ring | hierarchical | tree | nvls")
    ("network", po::value<std::string>()->default_value("flow"),
     "network fidelity: flow (SimGrid, links shared) | analytic (alpha-beta, contention-free, no SimGrid)")
    ("channels", po::value<int>()->default_value(1),
     "parallel flows per ring transfer (NCCL channels): more channels take a larger share of contended links")
    ("out", po::value<std::string>(), "write summary.json and trace.json into this directory")
    ("no-trace", "with --out, skip trace.json")
    ("trace-links", "add one load counter track per network link to trace.json")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("cluster")) throw ConfigError("simulate: --cluster is required (e.g. dgx-a100:8)");
  if (vm.count("jobs")) return simulate_jobs_cli(vm, out);
  if (!vm.count("model")) throw ConfigError("simulate: --model is required (see 'dtsim presets')");
  const auto wall0 = std::chrono::steady_clock::now();
  TransformerSpec model = load_model(vm["model"].as<std::string>());
  ClusterSpec cluster = load_cluster(vm["cluster"].as<std::string>());
  ParallelPlan plan;
  if (vm.count("plan")) {
    for (const char* flag :
         {"tp", "pp", "dp", "mbs", "gbs", "schedule", "recompute", "zero", "sequence-parallel", "layers-per-stage",
          "stage-replicas", "rank-order", "no-dp-overlap", "dp-bucket-mb", "tp-layout"})
      if (vm.count(flag)) throw ConfigError(std::string("simulate: --") + flag + " cannot be combined with --plan");
    plan = load_plan(vm["plan"].as<std::string>());
  } else {
    plan.tp = vm.count("tp") ? vm["tp"].as<int>() : 1;
    plan.pp = vm.count("pp") ? vm["pp"].as<int>() : 1;
    if (vm.count("stage-replicas"))
      plan.stage_replicas = parse_int_list(vm["stage-replicas"].as<std::string>(), "--stage-replicas");
    if (plan.has_stage_replicas() && !vm.count("pp")) plan.pp = static_cast<int>(plan.stage_replicas.size());
    if (vm.count("dp")) {
      plan.dp = vm["dp"].as<int>();
    } else {
      int per_copy = plan.tp * (plan.has_stage_replicas() && static_cast<int>(plan.stage_replicas.size()) == plan.pp
                                    ? plan.devices_per_pipeline()
                                    : plan.pp);
      if (per_copy <= 0 || cluster.total_gpus() % per_copy != 0)
        throw ConfigError("simulate: one pipeline copy needs " + std::to_string(per_copy) +
                          " GPUs, which does not divide the " + std::to_string(cluster.total_gpus()) +
                          " GPUs; give --dp explicitly");
      plan.dp = cluster.total_gpus() / per_copy;
    }
    plan.micro_batch_size = vm.count("mbs") ? vm["mbs"].as<int>() : 1;
    if (!vm.count("gbs")) throw ConfigError("simulate: --gbs (global batch size) is required without --plan");
    plan.global_batch_size = vm["gbs"].as<int>();
    if (vm.count("schedule")) set_schedule(plan, vm["schedule"].as<std::string>(), "--schedule");
    if (vm.count("recompute")) plan.recompute = recompute_from_string(vm["recompute"].as<std::string>(), "--recompute");
    if (vm.count("zero")) plan.zero_stage = vm["zero"].as<int>();
    plan.sequence_parallel = vm.count("sequence-parallel") > 0;
    if (vm.count("tp-layout")) {
      std::string spec = vm["tp-layout"].as<std::string>();
      if (spec.rfind("2.5d:", 0) == 0) {
        plan.tp_depth = parse_int_list(spec.substr(5), "--tp-layout 2.5d:D").at(0);
        spec = "2.5d";
      } else if (spec == "2.5d") {
        throw ConfigError("--tp-layout 2.5d needs its depth: 2.5d:D (tp = q^2 D)");
      }
      plan.tp_layout = tp_layout_from_string(spec, "--tp-layout");
    }
    if (vm.count("layers-per-stage"))
      plan.layers_per_stage = parse_int_list(vm["layers-per-stage"].as<std::string>(), "--layers-per-stage");
    if (vm.count("rank-order"))
      plan.rank_order = rank_order_from_string(vm["rank-order"].as<std::string>(), "--rank-order");
    plan.dp_overlap = vm.count("no-dp-overlap") == 0;
    if (vm.count("dp-bucket-mb")) plan.dp_bucket_bytes = vm["dp-bucket-mb"].as<double>() * units::kMiB;
  }
  Calibration cal = vm.count("calibration") ? load_calibration(vm["calibration"].as<std::string>())
                                            : default_calibration(cluster.gpu.name);
  const sim::SimOptions opt = sim_options(vm);

  sim::Inputs in{&model, &cluster, &plan, &cal, &opt};
  sim::Simulation s = sim::simulate(in);

  std::vector<std::pair<std::string, std::string>> files;
  if (vm.count("out")) {
    files.emplace_back("summary.json", sim::summary_json(in, s.lowered, s.engine, s.report).dump(2) + "\n");
    if (!vm.count("no-trace"))
      files.emplace_back("trace.json", sim::trace_json(in, s.lowered, s.engine, s.report, vm.count("trace-links") > 0));
    write_outputs(vm["out"].as<std::string>(), files);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (!vm.count("quiet")) {
    out << sim::human_summary(in, s.lowered, s.engine, s.report);
    char line[200];
    std::snprintf(line, sizeof line, "\nsimulated in %.2f s wall (%s engine, %.0f activities/s)\n", wall,
                  s.engine.engine.c_str(), static_cast<double>(s.engine.activities) / wall);
    out << line;
    if (vm.count("out")) {
      out << "wrote " << vm["out"].as<std::string>() << "/summary.json";
      if (files.size() > 1) out << " and trace.json (open in https://ui.perfetto.dev)";
      out << "\n";
    }
  }
  return 0;
}
double parse_bytes(const std::string& s, const std::string& what) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw ConfigError(what + " '" + s + "' is not a size such as 1048576, 64KiB, 1MiB or 1GiB");
  }
  const std::string unit = s.substr(pos);
  if (unit == "KiB") v *= 1024.0;
  else if (unit == "MiB") v *= units::kMiB;
  else if (unit == "GiB") v *= units::kGiB;
  else if (unit == "KB") v *= 1e3;
  else if (unit == "MB") v *= 1e6;
  else if (unit == "GB") v *= 1e9;
  else if (!unit.empty() && unit != "B") throw ConfigError(what + " '" + s + "' has an unknown unit '" + unit + "'");
  if (!(v > 0) || !std::isfinite(v)) throw ConfigError(what + " '" + s + "' must be positive");
  return v;
}

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
    ("calibration", po::value<std::string>(), "calibration JSON file")
    ("out", po::value<std::string>(), "write collective.tsv and collective.json into this directory")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("cluster")) throw ConfigError("collective: --cluster is required (e.g. dgx-a100:16)");
  ClusterSpec cluster = load_cluster(vm["cluster"].as<std::string>());
  const int n = vm.count("ranks") ? vm["ranks"].as<int>() : cluster.total_gpus();
  const auto kind = sim::collective_kind_from_string(vm["op"].as<std::string>(), "--op");
  Calibration cal = vm.count("calibration") ? load_calibration(vm["calibration"].as<std::string>())
                                            : default_calibration(cluster.gpu.name);
  sim::SimOptions opt;
  const std::string coll = vm["collectives"].as<std::string>(), algo = vm["algo"].as<std::string>(),
                    net = vm["network"].as<std::string>();
  if (coll == "flow") opt.collective_mode = sim::CollectiveMode::FLOW;
  else if (coll == "steps") opt.collective_mode = sim::CollectiveMode::STEPS;
  else throw ConfigError("collective: --collectives '" + coll + "' is not known (known: flow, steps)");
  if (algo == "auto") opt.collective_algorithm = sim::CollectiveAlgorithm::AUTO;
  else if (algo == "ring") opt.collective_algorithm = sim::CollectiveAlgorithm::RING;
  else if (algo == "hierarchical") opt.collective_algorithm = sim::CollectiveAlgorithm::HIERARCHICAL;
  else if (algo == "tree") opt.collective_algorithm = sim::CollectiveAlgorithm::TREE;
  else if (algo == "nvls") opt.collective_algorithm = sim::CollectiveAlgorithm::NVLS;
  else
    throw ConfigError("collective: --algo '" + algo + "' is not known (known: auto, ring, hierarchical, tree, nvls)");
  if (net == "flow") opt.network = sim::NetworkMode::FLOW;
  else if (net == "analytic") opt.network = sim::NetworkMode::ANALYTIC;
  else throw ConfigError("collective: --network '" + net + "' is not known (known: flow, analytic)");
  opt.channels = vm["channels"].as<int>();
  if (opt.channels < 1 || opt.channels > 64) throw ConfigError("collective: --channels must be between 1 and 64");
  if (vm.count("bytes") && vm.count("sweep")) throw ConfigError("collective: give --bytes or --sweep, not both");
  std::vector<double> sizes;
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
  if (n < 1 || n > cluster.total_gpus())
    throw ConfigError("collective: --ranks " + std::to_string(n) + " does not fit the " +
                      std::to_string(cluster.total_gpus()) + " GPUs of cluster '" + cluster.name + "'");
  const auto wall0 = std::chrono::steady_clock::now();
  std::vector<sim::CollectivePoint> pts;
  if (sizes.size() == 1) pts.push_back(sim::run_collective(cluster, cal, opt, n, kind, sizes[0]));
  else pts = sim::collective_sweep(cluster, cal, opt, n, kind, sizes);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

  std::string tsv = "bytes\ttime_us\talgbw_GBps\tbusbw_GBps\n";
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& p : pts) {
    char line[160];
    std::snprintf(line, sizeof line, "%.0f\t%.3f\t%.3f\t%.3f\n", p.bytes, p.time_s * 1e6, p.algbw_Bps / 1e9,
                  p.busbw_Bps / 1e9);
    tsv += line;
    rows.push_back({{"bytes", p.bytes}, {"time_s", p.time_s}, {"algbw_Bps", p.algbw_Bps}, {"busbw_Bps", p.busbw_Bps}});
  }
  if (vm.count("out")) {
    nlohmann::json j = {{"schema", "dtsim.collective"},
                        {"schema_version", 1},
                        {"dtsim_version", DTSIM_VERSION},
                        {"cluster", to_json(cluster)},
                        {"calibration", cal.name},
                        {"ranks", n},
                        {"op", vm["op"].as<std::string>()},
                        {"algorithm", algo},
                        {"collectives", coll},
                        {"network", net},
                        {"definitions",
                         "nccl-tests: algbw = bytes / time; busbw = algbw * 2(n-1)/n (all-reduce), "
                         "* (n-1)/n (all-gather, reduce-scatter)"},
                        {"points", rows}};
    write_outputs(vm["out"].as<std::string>(), {{"collective.tsv", tsv}, {"collective.json", j.dump(2) + "\n"}});
  }
  if (!vm.count("quiet")) {
    out << "dtsim " << DTSIM_VERSION << " | " << vm["op"].as<std::string>() << " over " << n << " GPUs of "
        << cluster.name << " | algorithm " << algo << ", collectives as " << coll << ", " << net << " network\n\n";
    out << "        bytes      time (us)   algbw (GB/s)   busbw (GB/s)\n";
    for (const auto& p : pts) {
      char line[160];
      std::snprintf(line, sizeof line, "%13.0f  %13.3f  %13.3f  %13.3f\n", p.bytes, p.time_s * 1e6, p.algbw_Bps / 1e9,
                    p.busbw_Bps / 1e9);
      out << line;
    }
    char line[120];
    std::snprintf(line, sizeof line, "\nsimulated in %.2f s wall\n", wall);
    out << line;
  }
  return 0;
}
/// `calibrate compute`: the compute fields (launch overhead, memory-bandwidth and GEMM efficiency) fitted to the
/// kernel times of Kineto traces and GEMM sweep CSVs (sim/calibrate_compute.hpp). argv[0] is "compute".
int cmd_calibrate_compute(int argc, char** argv, std::ostream& out) {
  namespace fs = std::filesystem;
  po::options_description desc(
      "dtsim calibrate compute: fit the compute calibration (kernel launch overhead, memory-bandwidth and GEMM\n"
      "efficiency) to the kernel times of PyTorch-profiler traces recorded with shapes and/or GEMM sweep CSVs\n"
      "example: dtsim calibrate compute --trace rank0.json.gz --gemm-csv gemm.csv --out cal/\n"
      "         (writes cal/calibration.json and cal/points.csv)\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("trace", po::value<std::vector<std::string>>()->composing(), "Kineto trace (.json, .json.gz, or a .tar.gz of ranks); repeatable")
    ("gemm-csv", po::value<std::vector<std::string>>()->composing(), "GEMM sweep CSV (m,n,k,dtype,time_s,tflops); repeatable")
    ("gpu", po::value<std::string>(), "GPU preset or JSON file with its peaks (default: the traces' GPU)")
    ("base", po::value<std::string>(), "base calibration: JSON file or GPU preset name (default: the GPU's built-in one)")
    ("out", po::value<std::string>(), "directory to write calibration.json and points.csv into");
  // clang-format on
  std::string self = "calibrate compute";
  std::vector<char*> args(argv, argv + argc);
  args[0] = self.data();
  auto vm = parse(desc, argc, args.data());
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  const auto traces = vm.count("trace") ? vm["trace"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const auto csvs = vm.count("gemm-csv") ? vm["gemm-csv"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (traces.empty() && csvs.empty())
    throw ConfigError("calibrate compute: give at least one --trace FILE or --gemm-csv FILE");
  if (!vm.count("out")) throw ConfigError("calibrate compute: --out DIR is required");

  // Traces, one per rank for archives; sources are named by file name (no directory), so outputs do not depend
  // on where the inputs lie.
  std::vector<std::pair<ImportedTrace, std::string>> imported;
  for (const auto& path : traces) {
    const std::string name = fs::path(path).filename().string();
    auto ends = [&](const std::string& suffix) {
      return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends(".tar.gz") || ends(".tgz") || ends(".tar")) {
      for (auto& t : import_kineto_archive(path)) {
        const std::string member = t.source.substr(std::min(t.source.size(), path.size() + 1));
        imported.emplace_back(std::move(t), name + ":" + member);
      }
    } else {
      imported.emplace_back(import_kineto(path), name);
    }
  }
  GpuSpec gpu;
  if (vm.count("gpu")) {
    gpu = sim::load_gpu(vm["gpu"].as<std::string>());
  } else if (!imported.empty()) {
    gpu = sim::trace_gpu(imported.front().first, imported.front().second);
    for (const auto& [t, name] : imported) {
      const GpuSpec g = sim::trace_gpu(t, name);
      if (g.name != gpu.name)
        throw ConfigError("calibrate compute: " + name + " ran on " + g.name + " but " + imported.front().second +
                          " on " + gpu.name + "; fit one GPU at a time or pass --gpu");
    }
  } else {
    throw ConfigError("calibrate compute: --gpu is required when only GEMM CSVs are given");
  }
  Calibration base;
  const std::string base_name = vm.count("base") ? vm["base"].as<std::string>() : gpu.name;
  if (vm.count("base") && fs::is_regular_file(base_name)) {
    base = load_calibration(base_name);
  } else {
    try {
      base = default_calibration(base_name);
    } catch (const ConfigError&) {
      throw ConfigError("calibrate compute: no built-in calibration for '" + base_name + "'; pass --base FILE.json");
    }
  }
  sim::ComputeSamples samples;
  for (const auto& [t, name] : imported) samples.append(sim::samples_from_trace(t, gpu, name));
  for (const auto& path : csvs) samples.append(sim::load_gemm_csv(path, gpu));
  const auto fit = sim::fit_compute(std::move(samples), gpu, base);
  const std::string dir = vm["out"].as<std::string>();
  write_outputs(dir,
                {{"calibration.json", to_json(fit.calibration).dump(2) + "\n"}, {"points.csv", sim::points_csv(fit)}});
  out << sim::summary_text(fit) << "wrote " << dir << "/calibration.json and " << dir << "/points.csv\n";
  return 0;
}

int cmd_calibrate(int argc, char** argv, std::ostream& out) {
  if (argc >= 2 && std::string(argv[1]) == "compute") return cmd_calibrate_compute(argc - 1, argv + 1, out);
  po::options_description desc(
      "dtsim calibrate nccl-tests LOG: fit the network's message-size segments (latency and bandwidth factors\n"
      "per size range) of one link class to an nccl-tests log and write a calibration file\n"
      "example: dtsim calibrate nccl-tests all_reduce.log --cluster dgx-a100:8 --out cal/   (writes "
      "cal/calibration.json)\n"
      "('dtsim calibrate compute --help': the compute fit from kernel traces and GEMM sweeps)\n\noptions");
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
    throw ConfigError("calibrate: the first argument must be 'nccl-tests' or 'compute'");
  if (!vm.count("log")) throw ConfigError("calibrate: give the nccl-tests log file");
  if (!vm.count("cluster")) throw ConfigError("calibrate: --cluster is required");
  if (!vm.count("out")) throw ConfigError("calibrate: --out DIR is required");
  const std::string log = vm["log"].as<std::string>();
  ClusterSpec cluster = load_cluster(vm["cluster"].as<std::string>());
  Calibration base = vm.count("calibration") ? load_calibration(vm["calibration"].as<std::string>())
                                             : default_calibration(cluster.gpu.name);
  NcclTestsRun run = load_nccl_tests(log);
  auto fit = sim::fit_nccl_tests(run, cluster, base, vm.count("op") ? vm["op"].as<std::string>() : "",
                                 vm.count("ranks") ? vm["ranks"].as<int>() : 0, log);
  fit.calibration.validate("fitted calibration");
  const std::string dir = vm["out"].as<std::string>();
  write_outputs(dir, {{"calibration.json", to_json(fit.calibration).dump(2) + "\n"}});
  const std::string path = dir + "/calibration.json";
  out << "fitted " << fit.link << " segments from " << run.rows.size() << " sizes of " << log << ":\n";
  for (const auto& g : fit.calibration.network_segments)
    if (g.link == fit.link) {
      char line[160];
      std::snprintf(line, sizeof line, "  ring-step messages <= %-12.6g B: latency x %.3f, bandwidth x %.3f\n",
                    g.max_bytes, g.latency_factor, g.bandwidth_factor);
      out << line;
    }
  char line[160];
  std::snprintf(line, sizeof line, "residuals: mean %.2f%%, max %.2f%% | wrote %s\n", 100 * fit.mean_rel_error,
                100 * fit.max_rel_error, path.c_str());
  out << line;
  return 0;
}
/// Options shared by `plan` and `bakeoff`: the planner input and the simulation options; returns --top.
void add_planner_options(po::options_description& desc) {
  // clang-format off
  desc.add_options()
    ("model", po::value<std::string>(), "model preset or JSON file")
    ("cluster", po::value<std::string>(), "cluster preset or JSON file")
    ("gbs", po::value<int>(), "global batch size in samples")
    ("memory-limit", po::value<double>(), "per-GPU memory limit in GB (default: the device's)")
    ("tp", po::value<int>()->default_value(1), "pipedream, dapple: GPUs of one node that act as one device (tensor parallel)")
    ("top", po::value<int>()->default_value(5), "how many of a planner's best candidates to simulate")
    ("calibration", po::value<std::string>(), "calibration JSON file")
    ("network", po::value<std::string>()->default_value("flow"), "flow | analytic (for the simulations)");
  // clang-format on
}

/// Cluster, calibration, global batch and memory limit of a planner input (shared by plan, bakeoff, capacity).
void cluster_input(const po::variables_map& vm, const std::string& cmd, planning::PlannerInput& in) {
  for (const char* req : {"cluster", "gbs"})
    if (!vm.count(req)) throw ConfigError(std::string(cmd + ": --") + req + " is required");
  in.cluster = load_cluster(vm["cluster"].as<std::string>());
  in.calibration = vm.count("calibration") ? load_calibration(vm["calibration"].as<std::string>())
                                           : default_calibration(in.cluster.gpu.name);
  in.global_batch_size = vm["gbs"].as<int>();
  if (in.global_batch_size <= 0) throw ConfigError(cmd + ": --gbs must be positive");
  if (vm.count("memory-limit")) {
    in.memory_limit_bytes = vm["memory-limit"].as<double>() * units::kGB;
    if (!(in.memory_limit_bytes > 0)) throw ConfigError(cmd + ": --memory-limit must be positive");
  }
}

int planner_options(const po::variables_map& vm, const std::string& cmd, planning::PlannerInput& in,
                    sim::SimOptions& opt) {
  if (!vm.count("model")) throw ConfigError(cmd + ": --model is required");
  in.model = load_model(vm["model"].as<std::string>());
  cluster_input(vm, cmd, in);
  in.tensor_parallel = vm["tp"].as<int>();
  const int top = vm["top"].as<int>();
  if (top < 1 || top > 100) throw ConfigError(cmd + ": --top must be between 1 and 100");
  const std::string net = vm["network"].as<std::string>();
  if (net == "analytic") opt.network = sim::NetworkMode::ANALYTIC;
  else if (net != "flow") throw ConfigError(cmd + ": --network '" + net + "' is not known (known: flow, analytic)");
  return top;
}

int cmd_plan(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim plan: search a parallel plan, simulate the planner's best candidates, keep the fastest that fits\n"
      "example: dtsim plan --planner grid --model gpt3-175b --cluster dgx-a100:1024 --gbs 1536 --out plan/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("planner", po::value<std::string>()->default_value("grid"), "planner: grid | pipedream | dapple | rannc | rannc-paper | uniap | luo")
    ("out", po::value<std::string>(), "write plan.json, candidates.json and the chosen plan's summary.json/trace.json")
    ("quiet,q", "print nothing on success");
  // clang-format on
  add_planner_options(desc);
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  planning::PlannerInput in;
  sim::SimOptions opt;
  const int top = planner_options(vm, "plan", in, opt);
  auto search = sim::search_plan(in, vm["planner"].as<std::string>(), top, opt);
  const auto& pr = search.planner;
  std::vector<std::pair<std::string, std::string>> files;
  std::string text;
  {
    char line[400];
    std::snprintf(
        line, sizeof line,
        "dtsim %s | planner %s | %s on %s, global batch %d\nsearch: %zu plans considered, %zu invalid, %zu over "
        "memory, %zu pruned, %zu feasible in %.2f s; %zu simulated in %.2f s\n\n",
        DTSIM_VERSION, pr.planner.c_str(), in.model.name.c_str(), in.cluster.name.c_str(), in.global_batch_size,
        pr.considered, pr.invalid, pr.over_memory, pr.pruned, pr.ranked.size(), pr.search_s, search.evaluated.size(),
        search.simulate_s);
    text += line;
    text +=
        "  #  plan                                                                predicted s  simulated s  peak GB  "
        "fits\n";
    for (std::size_t i = 0; i < search.evaluated.size(); ++i) {
      const auto& ev = search.evaluated[i];
      std::snprintf(line, sizeof line, "%3zu%s %-68s %11.3f  %11.3f  %7.1f  %s\n", i + 1,
                    static_cast<int>(i) == search.best ? "*" : " ", planning::describe(ev.candidate.plan).c_str(),
                    ev.candidate.estimate.iteration_s, ev.simulated_s, ev.peak_bytes / units::kGB,
                    ev.fits ? "yes" : "no");
      text += line;
    }
  }
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& ev : search.evaluated)
    cands.push_back({{"plan", to_json(ev.candidate.plan, in.model.num_layers)},
                     {"predicted_iteration_s", ev.candidate.estimate.iteration_s},
                     {"predicted_peak_bytes", ev.candidate.estimate.peak_bytes},
                     {"simulated_iteration_s", ev.simulated_s},
                     {"simulated_peak_bytes", ev.peak_bytes},
                     {"fits", ev.fits}});
  if (search.best < 0) {
    text += "\nno candidate fits in memory in simulation\n";
  } else if (vm.count("out")) {
    const auto& best = search.evaluated[search.best].candidate.plan;
    sim::Inputs sin{&in.model, &in.cluster, &best, &in.calibration, &opt};
    auto s = sim::simulate(sin);
    files.emplace_back("plan.json", to_json(best, in.model.num_layers).dump(2) + "\n");
    files.emplace_back("summary.json", sim::summary_json(sin, s.lowered, s.engine, s.report).dump(2) + "\n");
    files.emplace_back("trace.json", sim::trace_json(sin, s.lowered, s.engine, s.report));
  }
  if (vm.count("out")) {
    nlohmann::json j = {{"schema", "dtsim.plan_search"},
                        {"schema_version", 1},
                        {"planner", pr.planner},
                        {"considered", pr.considered},
                        {"invalid", pr.invalid},
                        {"over_memory", pr.over_memory},
                        {"pruned", pr.pruned},
                        {"feasible", pr.ranked.size()},
                        {"search_s_note", "wall times are not recorded here so that outputs are reproducible"},
                        {"chosen", search.best},
                        {"candidates", cands}};
    files.emplace_back("candidates.json", j.dump(2) + "\n");
    write_outputs(vm["out"].as<std::string>(), files);
  }
  if (!vm.count("quiet")) out << text;
  return 0;
}

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
  planning::PlannerInput in;
  sim::SimOptions opt;
  const int top = planner_options(vm, "bakeoff", in, opt);
  char line[512];
  std::snprintf(line, sizeof line,
                "dtsim %s | bakeoff | %s on %s, global batch %d; each planner's best %d simulated\n\n", DTSIM_VERSION,
                in.model.name.c_str(), in.cluster.name.c_str(), in.global_batch_size, top);
  std::string text = line;
  text += "planner     own pred s  simulated s  peak GB  fits  search s  plan\n";
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& name : planning::planner_names()) {
    auto search = sim::search_plan(in, name, top, opt);
    nlohmann::json row = {
        {"planner", name}, {"considered", search.planner.considered}, {"feasible", search.planner.ranked.size()}};
    if (search.best < 0) {
      std::snprintf(line, sizeof line, "%-10s  %10s  %11s  %7s  %4s  %8.2f  (%s)\n", name.c_str(), "-", "-", "-", "no",
                    search.planner.search_s,
                    search.planner.ranked.empty() ? "no plan fits the planner's memory model"
                                                  : "no candidate fits in simulation");
      row["plan"] = nullptr;
    } else {
      const auto& ev = search.evaluated[search.best];
      std::snprintf(line, sizeof line, "%-10s  %10.3f  %11.3f  %7.1f  %4s  %8.2f  %s\n", name.c_str(),
                    ev.candidate.estimate.iteration_s, ev.simulated_s, ev.peak_bytes / units::kGB, "yes",
                    search.planner.search_s, planning::describe(ev.candidate.plan).c_str());
      row["plan"] = to_json(ev.candidate.plan, in.model.num_layers);
      row["summary"] = planning::describe(ev.candidate.plan);
      row["predicted_iteration_s"] = ev.candidate.estimate.iteration_s;
      row["simulated_iteration_s"] = ev.simulated_s;
      row["simulated_peak_bytes"] = ev.peak_bytes;
      row["fits"] = ev.fits;
    }
    text += line;
    rows.push_back(row);
  }
  text +=
      "\nown pred: the planner's own cost model; simulated: dtsim (flow-level network unless --network analytic);\n"
      "search s: the planner's search wall time (not written to bakeoff.json, which stays reproducible).\n";
  if (vm.count("out")) {
    nlohmann::json j = {{"schema", "dtsim.bakeoff"},
                        {"schema_version", 1},
                        {"model", in.model.name},
                        {"cluster", in.cluster.name},
                        {"global_batch_size", in.global_batch_size},
                        {"planners", rows}};
    write_outputs(vm["out"].as<std::string>(), {{"bakeoff.json", j.dump(2) + "\n"}});
  }
  if (!vm.count("quiet")) out << text;
  return 0;
}
int cmd_capacity(int argc, char** argv, std::ostream& out) {
  for (int i = 1; i < argc; ++i)  // the deadline form: smallest GPU count that trains T tokens in D days
    if (std::string(argv[i]) == "--tokens" || std::string(argv[i]) == "--days")
      return cmd_capacity_deadline(argc, argv, out);
  po::options_description desc(
      "dtsim capacity: for each planner, the largest model of a ladder it fits on the cluster (its own memory check\n"
      "and dtsim's analytic memory model), against Megatron-style 1-D TP inside a node + DP (the baseline)\n"
      "example: dtsim capacity --cluster dgx1-v100:32 --gbs 256 --out capacity/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("cluster", po::value<std::string>(), "cluster preset or JSON file")
    ("gbs", po::value<int>(), "global batch size in samples")
    ("models", po::value<std::string>(), "comma-separated model ladder (default: the megatron-* presets by size)")
    ("planners", po::value<std::string>(), "comma-separated planners (default: all, and megatron-tp)")
    ("memory-limit", po::value<double>(), "per-GPU memory limit in GB (default: the device's)")
    ("calibration", po::value<std::string>(), "calibration JSON file")
    ("out", po::value<std::string>(), "write capacity.json")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  planning::PlannerInput in;
  cluster_input(vm, "capacity", in);
  auto split = [](const std::string& list) {  // non-empty names only ("a,,b" -> a, b)
    std::vector<std::string> v;
    for (auto& x : split_list(list))
      if (!x.empty()) v.push_back(std::move(x));
    return v;
  };
  const auto ladder = vm.count("models") ? split(vm["models"].as<std::string>()) : planning::default_capacity_ladder();
  for (const auto& m : ladder) load_model(m);  // a bad name fails before any search
  std::vector<std::string> planners;
  if (vm.count("planners")) {
    planners = split(vm["planners"].as<std::string>());
  } else {
    planners = planning::planner_names();
    planners.push_back(planning::kMegatronBaseline);
  }
  const auto rows = planning::capacity(in, ladder, planners);
  double baseline = 0;
  for (const auto& r : rows)
    if (r.planner == planning::kMegatronBaseline) baseline = r.largest_params;
  char line[512];
  std::snprintf(line, sizeof line, "dtsim %s | capacity | %s, global batch %d, %zu models from %s to %s\n\n",
                DTSIM_VERSION, in.cluster.name.c_str(), in.global_batch_size, ladder.size(), ladder.front().c_str(),
                ladder.back().c_str());
  std::string text = line;
  text += "planner        largest model     params  vs megatron-tp  plan\n";
  nlohmann::json jrows = nlohmann::json::array();
  for (const auto& r : rows) {
    const bool any = !r.largest_model.empty();
    std::string ratio = "-";
    if (any && baseline > 0) {
      char b[32];
      std::snprintf(b, sizeof b, "%.2fx", r.largest_params / baseline);
      ratio = b;
    }
    std::snprintf(line, sizeof line, "%-13s  %-15s  %7.1fB  %14s  %s\n", r.planner.c_str(),
                  any ? r.largest_model.c_str() : "(none)", r.largest_params / 1e9, ratio.c_str(),
                  any ? planning::describe(r.plan).c_str() : "-");
    text += line;
    nlohmann::json jr = {{"planner", r.planner}, {"fits", r.fits}};
    if (any) {
      jr["largest_model"] = r.largest_model;
      jr["largest_params"] = r.largest_params;
      jr["plan"] = to_json(r.plan, load_model(r.largest_model).num_layers);
    } else {
      jr["largest_model"] = nullptr;
    }
    jrows.push_back(jr);
  }
  if (vm.count("out")) {
    nlohmann::json j = {{"schema", "dtsim.capacity"}, {"schema_version", 1},
                        {"cluster", in.cluster.name}, {"global_batch_size", in.global_batch_size},
                        {"ladder", ladder},           {"planners", jrows}};
    write_outputs(vm["out"].as<std::string>(), {{"capacity.json", j.dump(2) + "\n"}});
  }
  if (!vm.count("quiet")) out << text;
  return 0;
}

/// `dtsim validate measured`: the executor's measurements.json as a timeline in the simulator's format.
int cmd_validate_measured(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim validate measured: turn an executor run (dtsim-exec's measurements.json) into a measured run directory\n"
      "in the simulator's format (summary.json + trace.json) for 'dtsim compare': the predicted graph re-timed with "
      "the\n"
      "measured compute durations (ex-situ: communication keeps its predicted times), with the measured peak memory\n"
      "example: dtsim validate measured --predicted pred/ --measurements meas/measurements.json --out "
      "meas/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("predicted", po::value<std::string>(), "the --out directory of the 'dtsim simulate' run the executor ran")
    ("measurements", po::value<std::string>(), "dtsim-exec's measurements.json")
    ("out", po::value<std::string>(), "directory to write summary.json and trace.json into")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  for (const char* req : {"predicted", "measurements", "out"})
    if (!vm.count(req)) throw ConfigError(std::string("validate measured: --") + req + " is required");
  const auto rc = sim::load_run_config(vm["predicted"].as<std::string>());
  const auto m = exec::load_measurements(vm["measurements"].as<std::string>());
  const auto t = exec::measured_timeline(rc, m);
  write_outputs(vm["out"].as<std::string>(), {{"summary.json", t.summary.dump(2) + "\n"}, {"trace.json", t.trace}});
  if (!vm.count("quiet")) {
    char line[256];
    std::snprintf(line, sizeof line, "measured on %s: %zu of %zu compute tasks; re-timed iteration %.6f s\n",
                  m.device_name.c_str(), t.measured_tasks, t.compute_tasks,
                  t.summary["results"]["iteration_time_s"].get<double>());
    out << line;
    for (const auto& r : m.ranks)
      if (!r.ok) out << "rank " << r.sim_rank << " (global " << r.global_rank << ") failed: " << r.error << "\n";
  }
  return 0;
}

/// Runs `args` (args[0] is the program) as a child process and waits; ConfigError naming `what` on failure.
void run_child(const std::vector<std::string>& args, const std::string& what) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
    throw ConfigError("validate run: cannot start " + what + " (" + args[0] + ")");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {}
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw ConfigError("validate run: " + what + " failed (exit status " +
                      std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + "; its message is above)");
}

/// `dtsim validate run`: simulate + execute on this machine's GPU + compare, in child processes (SimGrid allows
/// one engine per process); everything lands in --out only when all steps succeed.
int cmd_validate_run(int argc, char** argv, std::ostream& out) {
  std::string dir, exec_path, warmup = "2", iters = "5", device = "0";
  bool quiet = false;
  std::vector<std::string> sim_args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError("validate run: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--out") dir = value();
    else if (a == "--exec") exec_path = value();
    else if (a == "--warmup") warmup = value();
    else if (a == "--iters") iters = value();
    else if (a == "--device") device = value();
    else if (a == "-q" || a == "--quiet") quiet = true;
    else if (a == "-h" || a == "--help") {
      out << "dtsim validate run: simulate a plan, run it on this machine's GPU with dtsim-exec (each simulated rank\n"
             "alone, ex-situ; a one-rank plan is a full run), and compare task by task\n"
             "usage: dtsim validate run --out DIR [--exec PATH] [--warmup N] [--iters N] [--device D] [-q]\n"
             "                          SIMULATE OPTIONS (as 'dtsim simulate': --model, --cluster, --plan or --tp "
             "...)\n"
             "writes DIR/predicted, DIR/measured (measurements.json, summary.json, trace.json), DIR/compare\n";
      return 0;
    } else sim_args.push_back(a);
  }
  if (dir.empty()) throw ConfigError("validate run: --out is required");
  namespace fs = std::filesystem;
  if (fs::exists(dir) && !fs::is_empty(dir))
    throw ConfigError("validate run: --out directory '" + dir + "' is not empty");
  const fs::path self = fs::read_symlink("/proc/self/exe");
  if (exec_path.empty())
    for (const fs::path& c : {self.parent_path() / "dtsim-exec", self.parent_path() / "../validate/exec/dtsim-exec"})
      if (fs::exists(c)) {
        exec_path = fs::weakly_canonical(c).string();
        break;
      }
  if (exec_path.empty()) exec_path = "dtsim-exec";  // from PATH
  const fs::path work = dir + ".tmp-" + std::to_string(getpid());
  fs::remove_all(work);
  try {
    const std::string pred = (work / "predicted").string(), meas = (work / "measured").string();
    std::vector<std::string> simulate = {self.string(), "simulate"};
    simulate.insert(simulate.end(), sim_args.begin(), sim_args.end());
    simulate.insert(simulate.end(), {"--out", pred, "-q"});
    run_child(simulate, "the simulation");
    run_child(
        {exec_path, "--predicted", pred, "--out", meas, "--warmup", warmup, "--iters", iters, "--device", device, "-q"},
        "the executor");
    run_child({self.string(), "validate", "measured", "--predicted", pred, "--measurements",
               meas + "/measurements.json", "--out", meas, "-q"},
              "building the measured timeline");
    const auto report = validate::compare(validate::load_timeline(pred), validate::load_timeline(meas));
    write_outputs((work / "compare").string(),
                  {{"compare.json", validate::report_json(report).dump(2) + "\n"},
                   {"compare_trace.json",
                    validate::compare_trace_json(validate::load_timeline(pred), validate::load_timeline(meas))}});
    // The finished work directory replaces DIR (absent or empty); errors are the user's, not internal ones.
    std::error_code ec;
    fs::create_directories(fs::path(dir).parent_path().empty() ? fs::path(".") : fs::path(dir).parent_path(), ec);
    if (!ec) fs::remove(dir, ec);  // empty or absent
    if (!ec) fs::rename(work, dir, ec);
    if (ec)
      throw ConfigError("cannot install the results as '" + dir + "': " + ec.message() +
                        " (give a new or empty --out)");
    if (!quiet) out << validate::report_text(report) << "\nwrote " << dir << "/{predicted,measured,compare}\n";
  } catch (...) {
    std::error_code ec;
    fs::remove_all(work, ec);
    throw;
  }
  return 0;
}

int cmd_validate(int argc, char** argv, std::ostream& out) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (mode == "measured") return cmd_validate_measured(argc - 1, argv + 1, out);
  if (mode == "run") return cmd_validate_run(argc - 1, argv + 1, out);
  if (mode != "published" && mode != "fit")
    throw ConfigError(
        "validate: expected 'published', 'fit', 'measured' or 'run' (e.g. dtsim validate published --data FILE)");
  po::options_description desc(
      "dtsim validate published: predict every row of a file of measured runs and score the predictions\n"
      "dtsim validate fit: fit the calibration to the rows of a split (mean group MAPE [+ weight x max error], "
      "Nelder-Mead)\n"
      "example: dtsim validate published --data ../shared/measurements/vtrain_ground_truth_single.csv --out "
      "val/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("data", po::value<std::vector<std::string>>(), "measurements (repeatable): the vTrain CSV, a CSV with named columns, or JSON rows")
    ("calibration", po::value<std::string>(), "calibration JSON (default: the GPU's shipped calibration)")
    ("split", po::value<std::string>()->default_value("all"), "all | train (even rows) | test (odd rows)")
    ("network", po::value<std::string>()->default_value("analytic"), "analytic | flow (flow: one child process per row)")
    ("max-evals", po::value<int>()->default_value(300), "fit: objective evaluations (each predicts every row)")
    ("max-error-weight", po::value<double>()->default_value(0.0), "fit: weight of each group's largest |error| next to its MAPE")
    ("out", po::value<std::string>(), "published: validation.json, validation.csv, predicted_vs_measured.svg; fit: calibration.json")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc - 1, argv + 1);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("data")) throw ConfigError("validate: --data is required");
  const auto files = vm["data"].as<std::vector<std::string>>();
  std::string data_names;
  std::vector<sim::PublishedRow> all, rows;
  for (const auto& f : files) {
    auto part = sim::load_published(f);  // the split is taken per file (row parity within the file)
    for (auto& r : sim::select_split(part, vm["split"].as<std::string>())) rows.push_back(std::move(r));
    for (auto& r : part) all.push_back(std::move(r));
    data_names += (data_names.empty() ? "" : ", ") + f;
  }
  // One calibration per GPU kind: --calibration for rows of its GPU, else each row's GPU's shipped calibration.
  std::map<std::string, Calibration> cal_of_gpu;
  if (vm.count("calibration")) {
    Calibration c = load_calibration(vm["calibration"].as<std::string>());
    for (const auto& r : all)
      if (!c.gpu.empty() && r.gpu != c.gpu)
        throw ConfigError("validate: calibration '" + vm["calibration"].as<std::string>() + "' is for " + c.gpu +
                          ", but row " + std::to_string(r.index) + " (" + r.group + ") runs on " + r.gpu +
                          "; validate one GPU kind per calibration file");
    for (const auto& r : all) cal_of_gpu.emplace(r.gpu, c);
  } else {
    for (const auto& r : all)
      if (!cal_of_gpu.count(r.gpu)) cal_of_gpu.emplace(r.gpu, default_calibration(r.gpu));
  }
  const Calibration& cal = cal_of_gpu.begin()->second;
  std::string cal_names;
  for (const auto& [gpu, c] : cal_of_gpu) cal_names += (cal_names.empty() ? "'" : ", '") + c.name + "'";
  const std::string net = vm["network"].as<std::string>();
  if (net != "analytic" && net != "flow")
    throw ConfigError("validate: --network '" + net + "' is not known (known: flow, analytic)");
  const auto network = net == "flow" ? sim::NetworkMode::FLOW : sim::NetworkMode::ANALYTIC;
  char line[512];
  std::string text;
  if (mode == "fit") {
    const int evals = vm["max-evals"].as<int>();
    if (evals < 10) throw ConfigError("validate fit: --max-evals must be at least 10");
    if (cal_of_gpu.size() > 1)
      throw ConfigError("validate fit: the rows run on " + std::to_string(cal_of_gpu.size()) +
                        " GPU kinds; fit one GPU kind at a time");
    const double tail_weight = vm["max-error-weight"].as<double>();
    if (!(tail_weight >= 0)) throw ConfigError("validate fit: --max-error-weight must be at least 0");
    auto fr = sim::fit_published(rows, cal, evals, tail_weight);
    nlohmann::json prov = fr.calibration.provenance.is_object() ? fr.calibration.provenance : nlohmann::json::object();
    prov["fit"] = {{"sources", files},
                   {"split", vm["split"].as<std::string>()},
                   {"rows", rows.size()},
                   {"method",
                    "Nelder-Mead on log parameters minimising the mean over model groups of each group's "
                    "MAPE of predicted iteration times plus max_error_weight times the group's largest "
                    "|error| (analytic network engine); one value per parameter for all rows"},
                   {"max_error_weight", tail_weight},
                   {"fitted", sim::fitted_fields()},
                   {"objective_before", fr.objective_before},
                   {"objective_after", fr.objective_after},
                   {"evaluations", fr.evaluations}};
    fr.calibration.provenance = prov;
    std::snprintf(
        line, sizeof line,
        "dtsim %s | validate fit | %zu rows (%s split) | objective %.2f%% -> %.2f%% in %d evaluations\n"
        "gemm_efficiency_max %.4f  gemm_half_efficiency_flops %.4g  memory_bandwidth_efficiency %.4f  "
        "kernel_launch_s %.3g  intra_bandwidth_efficiency %.4f  host_issue_s %.3g  collective_step_overhead_s %.3g  "
        "p2p_overhead_s %.3g  gemm_misaligned_efficiency %.4f  host_collective_issue_s %.3g  "
        "gemm_efficiency_exponent %.3f\n",
        DTSIM_VERSION, rows.size(), vm["split"].as<std::string>().c_str(), 100 * fr.objective_before,
        100 * fr.objective_after, fr.evaluations, fr.calibration.gemm_efficiency_max,
        fr.calibration.gemm_half_efficiency_flops, fr.calibration.memory_bandwidth_efficiency,
        fr.calibration.kernel_launch_s, fr.calibration.intra_bandwidth_efficiency, fr.calibration.host_issue_s,
        fr.calibration.collective_step_overhead_s, fr.calibration.p2p_overhead_s,
        fr.calibration.gemm_misaligned_efficiency, fr.calibration.host_collective_issue_s,
        fr.calibration.gemm_efficiency_exponent);
    text = line;
    if (vm.count("out"))
      write_outputs(vm["out"].as<std::string>(), {{"calibration.json", to_json(fr.calibration).dump(2) + "\n"}});
    if (!vm.count("quiet")) out << text;
    return 0;
  }
  const auto results = sim::predict_rows(
      rows, [&](const sim::PublishedRow& r) -> const Calibration& { return cal_of_gpu.at(r.gpu); }, network);
  const auto sc = sim::score(results);
  std::snprintf(
      line, sizeof line,
      "dtsim %s | validate published | %s | %zu rows (%s split), calibration %s, %s network\n"
      "MAPE %.2f%%  max |error| %.2f%%  mean error %+.2f%%  min Spearman per model %.3f  (%d rows failed)\n\n",
      DTSIM_VERSION, data_names.c_str(), rows.size(), vm["split"].as<std::string>().c_str(), cal_names.c_str(),
      net.c_str(), 100 * sc.mape, 100 * sc.max_abs_error, 100 * sc.mean_error, sc.spearman_min, sc.failed);
  text = line;
  text += "model group                    rows   MAPE   max err  Spearman\n";
  for (const auto& g : sc.groups) {
    std::snprintf(line, sizeof line, "%-29s %5d  %5.2f%%  %6.2f%%  %8.3f\n", g.group.c_str(), g.rows, 100 * g.mape,
                  100 * g.max_abs_error, g.spearman);
    text += line;
  }
  text += "\nMAPE by feature:\n";
  for (const auto& [f, v] : sc.by_feature) {
    std::snprintf(line, sizeof line, "  %-28s %6.2f%%\n", f.c_str(), 100 * v);
    text += line;
  }
  if (vm.count("out")) {
    nlohmann::json jrows = nlohmann::json::array();
    std::string csv =
        "index,group,gpus,tp,pp,dp,micro_batch,global_batch,measured_s,predicted_s,error,compute_s,exposed_comm_s,"
        "bubble_s,oom,failure\n";
    for (const auto& r : results) {
      const auto& p = r.row.plan;
      jrows.push_back({{"index", r.row.index},
                       {"group", r.row.group},
                       {"plan", to_json(p, r.row.model.num_layers)},
                       {"measured_s", r.row.measured_s},
                       {"predicted_s", r.predicted_s},
                       {"error", r.error},
                       {"compute_s", r.compute_s},
                       {"exposed_comm_s", r.exposed_comm_s},
                       {"bubble_s", r.bubble_s},
                       {"oom", r.oom},
                       {"failure", r.failure}});
      std::snprintf(line, sizeof line, "%d,%s,%d,%d,%d,%d,%d,%d,%.9g,%.9g,%.6g,%.9g,%.9g,%.9g,%d,\"%s\"\n", r.row.index,
                    r.row.group.c_str(), p.world_size(), p.tp, p.pp, p.dp, p.micro_batch_size, p.global_batch_size,
                    r.row.measured_s, r.predicted_s, r.error, r.compute_s, r.exposed_comm_s, r.bubble_s, r.oom ? 1 : 0,
                    r.failure.c_str());
      csv += line;
    }
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : sc.groups)
      groups.push_back({{"group", g.group},
                        {"rows", g.rows},
                        {"mape", g.mape},
                        {"max_abs_error", g.max_abs_error},
                        {"spearman", g.spearman}});
    nlohmann::json feats = nlohmann::json::object();
    for (const auto& [f, v] : sc.by_feature) feats[f] = v;
    nlohmann::json j = {{"schema", "dtsim.validation"},
                        {"schema_version", 1},
                        {"data", files},
                        {"split", vm["split"].as<std::string>()},
                        {"calibration", to_json(cal)},
                        {"network", net},
                        {"rows", sc.rows},
                        {"failed", sc.failed},
                        {"mape", sc.mape},
                        {"max_abs_error", sc.max_abs_error},
                        {"mean_error", sc.mean_error},
                        {"spearman_min", sc.spearman_min},
                        {"groups", groups},
                        {"mape_by_feature", feats},
                        {"results", jrows}};
    write_outputs(vm["out"].as<std::string>(),
                  {{"validation.json", j.dump(2) + "\n"},
                   {"validation.csv", csv},
                   {"predicted_vs_measured.svg", sim::scatter_svg(results, "dtsim vs measured: " + data_names)}});
  }
  if (!vm.count("quiet")) out << text;
  return 0;
}
int cmd_replay(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim replay: replay a PyTorch-profiler (Kineto) trace as a dependency graph on the simulator, report the\n"
      "replay error, and predict the effect of edits (what-if)\n"
      "example: dtsim replay --trace rank0.json.gz --scale-kernels 'gemm|cutlass|sm80_xmma=0.5' --out "
      "replay/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("trace", po::value<std::string>(), "Kineto trace: .json, .json.gz, or a .tar.gz of one trace per rank")
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
  sim::ReplayOptions opt;
  if (vm.count("scale-kernels"))
    for (const auto& s : vm["scale-kernels"].as<std::vector<std::string>>())
      opt.kernel_scales.push_back(sim::parse_kernel_scale(s));
  if (vm.count("collective-bw-scale")) opt.collective_bw_scale = vm["collective-bw-scale"].as<double>();
  if (vm.count("collective-bw")) {
    opt.collective_bandwidth_Bps = vm["collective-bw"].as<double>() * units::kGB;
    if (!(opt.collective_bandwidth_Bps > 0)) throw ConfigError("replay: --collective-bw must be positive");
  }
  if (vm.count("collective-group")) {
    opt.collective_group_size = vm["collective-group"].as<int>();
    if (opt.collective_group_size < 2) throw ConfigError("replay: --collective-group must be at least 2");
  }
  if (vm.count("collective-alpha-us")) opt.collective_alpha_s = vm["collective-alpha-us"].as<double>() * 1e-6;
  if (vm.count("collective-time-scale")) opt.collective_time_scale = vm["collective-time-scale"].as<double>();
  if (vm.count("cpu-scale")) opt.cpu_gap_scale = vm["cpu-scale"].as<double>();
  if (vm.count("runtime-scale")) opt.runtime_scale = vm["runtime-scale"].as<double>();
  if (vm.count("launch-latency-us")) {
    const double us = vm["launch-latency-us"].as<double>();
    if (!(us >= 0) || !std::isfinite(us)) throw ConfigError("replay: --launch-latency-us must be a number >= 0");
    opt.launch_latency_ns = static_cast<std::int64_t>(std::llround(us * 1e3));
  }
  opt.keep_unexplained_gaps = vm.count("no-unexplained-gaps") == 0;
  opt.validate();
  const auto wall0 = std::chrono::steady_clock::now();
  const std::vector<ImportedTrace> traces = sim::import_traces_for_replay(
      vm["trace"].as<std::string>(), vm.count("member") ? vm["member"].as<std::string>() : "");
  std::vector<sim::Replay> replays;
  replays.reserve(traces.size());
  for (const auto& t : traces) replays.push_back(sim::replay_trace(t, opt));
  std::vector<sim::ReplayReport> reports;
  std::vector<const ImportedTrace*> tptr;
  std::vector<const sim::Replay*> rptr;
  std::string text;
  for (std::size_t k = 0; k < replays.size(); ++k) {
    reports.push_back(replays[k].report);
    tptr.push_back(&traces[k]);
    rptr.push_back(&replays[k]);
    text += (k ? "\n" : "") + sim::replay_summary(replays[k].report);
  }
  if (vm.count("out"))
    write_outputs(vm["out"].as<std::string>(), {{"replay.json", sim::replay_json(reports, opt)},
                                                {"replay_trace.json", sim::replay_chrome_trace(tptr, rptr)}});
  if (!vm.count("quiet")) {
    out << text;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    char line[160];
    std::snprintf(line, sizeof line, "\nreplayed %zu trace%s in %.2f s wall (analytic engine)\n", replays.size(),
                  replays.size() == 1 ? "" : "s", wall);
    out << line;
    if (vm.count("out")) out << "wrote " << vm["out"].as<std::string>() << "/replay.json and replay_trace.json\n";
  }
  return 0;
}
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
  const validate::Timeline predicted = validate::load_timeline(vm["predicted"].as<std::string>());
  const validate::Timeline measured = validate::load_timeline(vm["measured"].as<std::string>());
  const validate::CompareReport report = validate::compare(predicted, measured);
  if (vm.count("out"))
    write_outputs(vm["out"].as<std::string>(),
                  {{"compare.json", validate::report_json(report).dump(2) + "\n"},
                   {"compare_trace.json", validate::compare_trace_json(predicted, measured)}});
  if (!vm.count("quiet")) {
    out << validate::report_text(report);
    if (vm.count("out")) out << "\nwrote " << vm["out"].as<std::string>() << "/compare.json and compare_trace.json\n";
  }
  return 0;
}
}  // namespace

int run(int argc, char** argv, std::ostream& out) {
  if (argc < 2) {
    out << kUsage;
    return 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    out << kUsage;
    return 0;
  }
  if (cmd == "simulate") return cmd_simulate(argc - 1, argv + 1, out);
  if (cmd == "presets") return cmd_presets(argc - 1, argv + 1, out);
  if (cmd == "collective") return cmd_collective(argc - 1, argv + 1, out);
  if (cmd == "calibrate") return cmd_calibrate(argc - 1, argv + 1, out);
  if (cmd == "plan") return cmd_plan(argc - 1, argv + 1, out);
  if (cmd == "bakeoff") return cmd_bakeoff(argc - 1, argv + 1, out);
  if (cmd == "capacity") return cmd_capacity(argc - 1, argv + 1, out);
  if (cmd == "replay") return cmd_replay(argc - 1, argv + 1, out);
  if (cmd == "validate") return cmd_validate(argc - 1, argv + 1, out);
  if (cmd == "compare") return cmd_compare(argc - 1, argv + 1, out);
  if (cmd == "sweep") return cmd_sweep(argc - 1, argv + 1, out);
  if (cmd == "pareto") return cmd_pareto(argc - 1, argv + 1, out);
  if (cmd == "report") return cmd_report(argc - 1, argv + 1, out);
  if (cmd == "version" || cmd == "--version") {
    po::options_description desc("dtsim version: print versions");
    desc.add_options()("help,h", "this help");
    parse(desc, argc - 1, argv + 1);
    out << "dtsim " << DTSIM_VERSION << " (SimGrid " << sim::simgrid_version() << ")\n";
    return 0;
  }
  throw ConfigError("unknown command '" + cmd +
                    "' (known: simulate, collective, calibrate, plan, bakeoff, capacity, validate, compare, replay, "
                    "presets, version)");
}

}  // namespace dtsim::cli
