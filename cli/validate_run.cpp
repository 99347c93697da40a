// `dtsim validate run` (simulate, execute on this GPU, compare: child processes of dtsim and dtsim-exec, then
// dtsim::compare) and `dtsim validate measured` (dtsim::validate_measured).
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "dtsim/dtsim.hpp"

namespace dtsim::cli {

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
  const auto r = validate_measured({vm["predicted"].as<std::string>(), vm["measurements"].as<std::string>()});
  write_files(vm["out"].as<std::string>(), r.files);
  if (!vm.count("quiet")) out << r.text;
  return 0;
}

namespace {

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

}  // namespace

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
    const CompareResult cmp = compare({pred, meas});
    write_files((work / "compare").string(), cmp.files);
    // The finished work directory replaces DIR (absent or empty); errors are the user's, not internal ones.
    std::error_code ec;
    fs::create_directories(fs::path(dir).parent_path().empty() ? fs::path(".") : fs::path(dir).parent_path(), ec);
    if (!ec) fs::remove(dir, ec);  // empty or absent
    if (!ec) fs::rename(work, dir, ec);
    if (ec)
      throw ConfigError("cannot install the results as '" + dir + "': " + ec.message() +
                        " (give a new or empty --out)");
    if (!quiet) out << cmp.text << "\nwrote " << dir << "/{predicted,measured,compare}\n";
  } catch (...) {
    std::error_code ec;
    fs::remove_all(work, ec);
    throw;
  }
  return 0;
}

}  // namespace dtsim::cli
