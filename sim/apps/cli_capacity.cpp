// `dtsim capacity --model M --tokens T --days D --gpu TYPE [--price-per-gpu-hour P]`: the deadline form of
// capacity planning (sim/capacity_deadline.hpp). The ladder form (largest model per planner) is in cli.cpp.
#include <boost/program_options.hpp>
#include <cstdio>
#include <string>

#include "sim/apps/commands.hpp"
#include "sim/capacity_deadline.hpp"
#include "strategies/planner.hpp"
#include "traces/error.hpp"
#include "traces/output.hpp"
#include "traces/units.hpp"

namespace po = boost::program_options;

namespace dtsim::cli {
namespace {

/// A cluster preset name ("dgx-h100") or the GPU of one ("h100-sxm5-80gb") -> the cluster preset.
std::string cluster_preset_for(const std::string& gpu_or_cluster) {
  std::string known;
  for (const auto& c : cluster_preset_names()) {
    const ClusterSpec spec = load_cluster(c + ":8");
    if (c == gpu_or_cluster || spec.gpu.name == gpu_or_cluster) return c;
    known += (known.empty() ? "" : ", ") + c + " (" + spec.gpu.name + ")";
  }
  throw ConfigError("capacity: --gpu '" + gpu_or_cluster + "' is not known (known: " + known + ")");
}

double parse_count(const std::string& s, const std::string& flag) {
  // 1e12, 300e9, or with a suffix: 300B, 1.5T, 500M tokens.
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw ConfigError("capacity: " + flag + " '" + s + "' is not a number");
  }
  const std::string suffix = s.substr(pos);
  if (suffix == "K" || suffix == "k") v *= 1e3;
  else if (suffix == "M") v *= 1e6;
  else if (suffix == "B" || suffix == "G") v *= 1e9;
  else if (suffix == "T") v *= 1e12;
  else if (!suffix.empty()) throw ConfigError("capacity: " + flag + " '" + s + "' has an unknown suffix (K, M, B, T)");
  return v;
}

}  // namespace

int cmd_capacity_deadline(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim capacity (deadline form): the smallest GPU count, powers of two, whose best strategy trains the model on\n"
      "--tokens tokens within --days days, with the strategy and the cost; per count, the grid planner ranks every\n"
      "TP x PP x DP x micro-batch x schedule x recompute x ZeRO plan and its best --top are simulated\n"
      "example: dtsim capacity --model gpt3-175b --tokens 300B --days 30 --gpu a100-sxm4-80gb --price-per-gpu-hour "
      "2\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("model", po::value<std::string>(), "model preset or JSON file")
    ("tokens", po::value<std::string>(), "tokens to train (e.g. 300B, 1T, 2e12)")
    ("days", po::value<double>(), "deadline in days")
    ("gpu", po::value<std::string>(), "GPU preset (a100-sxm4-80gb, h100-sxm5-80gb, ...) or cluster preset (dgx-h100, ...)")
    ("price-per-gpu-hour", po::value<double>()->default_value(0), "price of one GPU-hour (0: no cost)")
    ("gbs", po::value<int>(), "global batch in sequences (default: ~4M tokens, a power of two)")
    ("max-gpus", po::value<int>()->default_value(16384), "largest GPU count tried")
    ("top", po::value<int>()->default_value(3), "candidates simulated per GPU count")
    ("network", po::value<std::string>()->default_value("analytic"), "analytic | flow")
    ("memory-limit", po::value<double>(), "per-GPU memory limit in GB (default: the device's)")
    ("calibration", po::value<std::string>(), "calibration JSON file (default: the GPU's shipped one)")
    ("out", po::value<std::string>(), "write capacity.json")
    ("quiet,q", "print nothing on success");
  // clang-format on
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(std::string("capacity: ") + e.what());
  }
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  for (const char* req : {"model", "tokens", "days", "gpu"})
    if (!vm.count(req)) throw ConfigError(std::string("capacity: --") + req + " is required with --tokens/--days");
  sim::DeadlineInput in;
  in.model = load_model(vm["model"].as<std::string>());
  in.cluster_preset = cluster_preset_for(vm["gpu"].as<std::string>());
  const std::string gpu = load_cluster(in.cluster_preset + ":8").gpu.name;
  in.calibration =
      vm.count("calibration") ? load_calibration(vm["calibration"].as<std::string>()) : default_calibration(gpu);
  in.tokens = parse_count(vm["tokens"].as<std::string>(), "--tokens");
  in.days = vm["days"].as<double>();
  in.price_per_gpu_hour = vm["price-per-gpu-hour"].as<double>();
  if (vm.count("gbs")) {
    in.global_batch_size = vm["gbs"].as<int>();
  } else {
    in.global_batch_size = 1;
    while (2.0 * in.global_batch_size * in.model.seq_len <= 4.0 * (1 << 20)) in.global_batch_size *= 2;
  }
  in.max_gpus = vm["max-gpus"].as<int>();
  in.top = vm["top"].as<int>();
  if (in.top < 1 || in.top > 100) throw ConfigError("capacity: --top must be between 1 and 100");
  if (vm.count("memory-limit")) in.memory_limit_bytes = vm["memory-limit"].as<double>() * units::kGB;
  const std::string net = vm["network"].as<std::string>();
  if (net == "analytic") in.options.network = sim::NetworkMode::ANALYTIC;
  else if (net != "flow") throw ConfigError("capacity: --network '" + net + "' is not known (known: flow, analytic)");

  const auto r = sim::plan_for_deadline(in);

  char line[512];
  std::string text;
  std::snprintf(line, sizeof line,
                "dtsim %s | capacity | %s, %.4g tokens in %.4g days on %s (%s), global batch %d x %d tokens\n"
                "needs %.4g tokens/s; hardware bound: at least %.1f GPUs (6 x params x tokens/s at %.0f%% of peak)\n\n",
                DTSIM_VERSION, in.model.name.c_str(), in.tokens, in.days, in.cluster_preset.c_str(), gpu.c_str(),
                in.global_batch_size, in.model.seq_len, r.required_tokens_per_s, r.bound_gpus,
                100 * in.calibration.gemm_efficiency_max);
  text += line;
  text +=
      "   GPUs  best strategy (simulated)                          tokens/s     MFU       days  meets        cost\n";
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& st : r.steps) {
    if (!st.found) {
      std::snprintf(line, sizeof line, "%7d  no plan fits memory (%zu considered)\n", st.gpus, st.plans_considered);
    } else {
      std::snprintf(line, sizeof line, "%7d  %-48s %10.4g  %5.1f%%  %9.2f  %-5s  %10.4g\n", st.gpus,
                    planning::describe(st.plan).c_str(), st.tokens_per_s, 100 * st.mfu, st.days,
                    st.meets ? "yes" : "no", st.cost);
    }
    text += line;
    steps.push_back({{"gpus", st.gpus},
                     {"found", st.found},
                     {"plan", st.found ? planning::describe(st.plan) : ""},
                     {"iteration_s", st.iteration_s},
                     {"tokens_per_s", st.tokens_per_s},
                     {"mfu", st.mfu},
                     {"days", st.days},
                     {"meets", st.meets},
                     {"cost", st.cost}});
  }
  if (r.answer >= 0) {
    const auto& a = r.steps[r.answer];
    std::snprintf(line, sizeof line, "\nanswer: %d GPUs, %s: %.2f days", a.gpus, planning::describe(a.plan).c_str(),
                  a.days);
    text += line;
    if (in.price_per_gpu_hour > 0) {
      std::snprintf(line, sizeof line, ", %.4g GPU-hours, cost %.4g", a.gpus * a.days * 24, a.cost);
      text += line;
    }
    text += "\n";
  } else {
    std::snprintf(line, sizeof line, "\nanswer: the deadline is not met with up to %d GPUs\n", in.max_gpus);
    text += line;
  }
  if (vm.count("out")) {
    const nlohmann::json j = {{"model", in.model.name},
                              {"gpu", gpu},
                              {"cluster_preset", in.cluster_preset},
                              {"tokens", in.tokens},
                              {"days", in.days},
                              {"global_batch_size", in.global_batch_size},
                              {"price_per_gpu_hour", in.price_per_gpu_hour},
                              {"required_tokens_per_s", r.required_tokens_per_s},
                              {"bound_gpus", r.bound_gpus},
                              {"steps", steps},
                              {"answer_gpus", r.answer >= 0 ? r.steps[r.answer].gpus : -1}};
    write_outputs(vm["out"].as<std::string>(), {{"capacity.json", j.dump(2) + "\n"}});
  }
  if (!vm.count("quiet")) out << text;
  return 0;
}

}  // namespace dtsim::cli
