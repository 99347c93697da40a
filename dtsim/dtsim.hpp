// dtsim's public library API: what the command line (cli/), the Python module and any program built against an
// installed dtsim (find_package(dtsim CONFIG), target dtsim::dtsim) call. One header to include; it pulls in the
// sections plan.hpp (planners), sweep.hpp (sweeps and their reports) and validate.hpp (measurements, fits, replay).
//
// Conventions, the same for every call:
// - Inputs are named the way a user names them: a preset ("gpt3-175b", "dgx-a100:64"), a JSON file path, and for
//   the calibration also "" (the built-in one of the cluster's GPU). load_inputs() resolves and validates them.
// - A call returns a plain struct: typed results, `text` (what `dtsim <command>` prints) and `files` (name ->
//   content: what `--out DIR` writes; write_files() writes them all or nothing). Nothing is written unless asked.
// - Bad input throws dtsim::ConfigError (or another dtsim::Error, traces/error.hpp) with the one-line message the
//   CLI prints after "dtsim: error: ". Nothing ends the process.
// - simulate() with the flow network runs SimGrid, whose engine exists once per process: call it once per process
//   (plan(), bakeoff() and sweep() fork a child per simulation and may be called repeatedly).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dtsim/common.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/error.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

namespace dtsim {

/// "0.1.0".
std::string version();
/// "3.32.0": the SimGrid this library was built with.
std::string simgrid_version();

// ---- presets ------------------------------------------------------------------------------------------------------

struct Presets {
  std::vector<std::string> models;    ///< model presets (--model NAME)
  std::vector<std::string> gpus;      ///< GPU presets
  std::vector<std::string> clusters;  ///< cluster presets, used as NAME:GPUS
  std::string text;                   ///< the table `dtsim presets` prints
};
Presets presets();

// ---- inputs -------------------------------------------------------------------------------------------------------

/// What one simulation is about, as a user names it. Empty `plan` means the plan is given as a struct instead.
struct InputSpec {
  std::string model;        ///< preset name or model JSON file
  std::string cluster;      ///< preset NAME:GPUS[:fabric...] or cluster JSON file
  std::string plan;         ///< plan JSON file ("" = set Inputs::plan yourself)
  std::string calibration;  ///< calibration JSON file ("" = the built-in one of the cluster's GPU)
};

/// The resolved inputs of one simulation.
struct Inputs {
  TransformerSpec model;
  ClusterSpec cluster;
  ParallelPlan plan;
  Calibration calibration;
};

/// The documented finite range of every number an input can give (traces/limits.hpp), as a Markdown table: what
/// `dtsim presets --limits` prints and docs/errors.md includes.
std::string input_limits_markdown();

/// The calibration named by `spec` (a JSON file; "" = the built-in one of `cluster`'s GPU).
Calibration resolve_calibration(const std::string& spec, const ClusterSpec& cluster);
/// Loads what `spec` names (the plan only when spec.plan is given). Throws ConfigError naming the bad field.
Inputs load_inputs(const InputSpec& spec);
/// Checks that model, cluster, plan and calibration are consistent (what simulate() checks before it runs).
void validate_inputs(const Inputs& in);

// ---- simulate -----------------------------------------------------------------------------------------------------

/// How to simulate, as the CLI spells it. Unknown values throw ConfigError naming `command` and the option.
struct SimulateOptions {
  std::string collectives = "flow";           ///< flow | steps (collectives as one flow per ring, or every step)
  std::string fold = "auto";                  ///< auto | none (symmetry folding)
  std::string collective_algorithm = "auto";  ///< auto | ring | hierarchical | tree | nvls
  std::string network = "flow";               ///< flow (SimGrid, links shared) | analytic (alpha-beta)
  std::string engine = "auto";  ///< flow network: auto | simgrid | maxmin (dtsim's own max-min engine, same model)
  int channels = 1;             ///< parallel flows per ring transfer (NCCL channels), 1..64
  /// Rings over several GPUs on each of several nodes cross every node through each member's NIC, as NCCL's
  /// channels do; false (--single-nic-rings): through one NIC per node, to see what the mechanism changes.
  bool spread_rings = true;
  bool interference = true;   ///< overlapped kernels and collectives slow each other (flow engine)
  bool receive_bound = true;  ///< analytic all-to-all: a member's down-links take its pieces one after another
  bool trace = true;          ///< render trace.json into the result's files
  bool trace_links = false;   ///< one load counter track per link in trace.json (and trace.pftrace)
  /// Ranks in trace.json: auto (every simulated rank up to 64, else per pipeline stage its representative, busiest
  /// and fullest-memory ranks) | all | a list of global ranks and ranges such as "0-7,64".
  std::string trace_ranks = "auto";
  /// With trace_links, the links in trace.json: auto (every used link when every simulated rank is traced, else the
  /// 32 that carried the most bytes) | all | N (the N busiest).
  std::string trace_link_count = "auto";
  /// Also render trace.pftrace (Perfetto protobuf): every simulated rank and, with trace_links, every used link.
  bool perfetto = false;
  /// Refuse (ConfigError, before lowering) a run whose estimated peak memory (sim/model/footprint.hpp) is above this
  /// many bytes: 0 = default_max_memory_bytes(), negative = no limit.
  double max_memory_bytes = 0;
  /// Also export the simulated iteration as Chakra execution traces (sim/report/chakra_export.hpp): files
  /// "chakra/<chakra_prefix>.<rank>.et" per rank and "chakra/<chakra_prefix>.comm_group.json" (ASTRA-sim's
  /// --comm-group-configuration) in SimulateResult::files. Every rank is then simulated (fold none; folding is exact,
  /// so the results are the same). simulate() only: simulate_jobs() and collective() refuse it (ConfigError).
  bool export_chakra = false;
  std::string chakra_prefix = "dtsim";  ///< file-name prefix of the export (ASTRA-sim's workload prefix)
  std::string command = "simulate";     ///< names the caller in error messages
};

/// One simulated rank (folded runs simulate one rank per symmetry class).
struct RankResult {
  int global_rank = 0;
  int stage = 0, data = 0, tensor = 0;  ///< coordinates: pipeline stage, data-parallel and tensor-parallel index
  double compute_s = 0;                 ///< compute stream busy
  double exposed_comm_s = 0;            ///< compute idle while this rank's communication is in flight
  double bubble_s = 0;                  ///< compute idle with no communication in flight
  double variability_wait_s = 0;        ///< waiting for the job's slowest GPU (per-GPU speed variability)
  double bubble_fraction = 0;           ///< idle / compute
  double peak_bytes = 0;                ///< peak device memory
  double peak_time_s = 0;               ///< when the peak is first reached
  std::string oom_event;                ///< the first allocation over the device's capacity ("" if none)
  /// (time s, bytes in use) after each change of this rank's memory.
  std::vector<std::pair<double, double>> memory_timeline;
};

/// Traffic of one network link over the iteration.
struct LinkResult {
  std::string name;
  double bandwidth_Bps = 0;
  double bytes = 0;
  double busy_s = 0;
  double peak_utilization = 0;
};

struct SimulateResult {
  double iteration_time_s = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;     ///< model FLOPs (no recompute) per second per GPU, TFLOP/s
  double hardware_tflops_per_gpu = 0;  ///< executed FLOPs (with recompute) per second per GPU, TFLOP/s
  double mfu = 0;                      ///< model FLOPs utilisation against the GPU's dense peak
  double max_bubble_fraction = 0;
  double peak_bytes = 0;    ///< the largest peak over the ranks
  bool oom = false;         ///< some rank exceeds its device memory
  std::string engine;       ///< "simgrid-flow" or "analytic"
  std::uint64_t tasks = 0;  ///< tasks in the lowered graph
  std::uint64_t activities = 0;
  std::vector<RankResult> ranks;
  std::vector<LinkResult> links;
  std::string text;  ///< the human summary
  /// summary.json, with options.trace trace.json, with options.perfetto trace.pftrace, with options.export_chakra
  /// the Chakra files (names under "chakra/")
  Files files;
};

/// Validates the inputs, lowers the plan, runs it and reports. Once per process with the flow network (SimGrid).
/// A run whose estimated peak memory is above options.max_memory_bytes is refused before it starts (ConfigError).
SimulateResult simulate(const Inputs& in, const SimulateOptions& options = {});
/// The default memory limit of a run (SimulateOptions::max_memory_bytes = 0): 90% of this machine's physical memory.
double default_max_memory_bytes();

/// Several jobs sharing one cluster, each on its own GPUs (`jobs_file`: the --jobs JSON). With `alone`, each job is
/// also simulated alone (in its own process) and its slowdown reported.
struct JobsResult {
  struct Job {
    std::string name;
    int first_gpu = 0, gpus = 0;
    double iteration_time_s = 0;
    double alone_iteration_time_s = 0;  ///< 0 unless simulated alone
  };
  std::vector<Job> jobs;
  std::string text;
  Files files;  ///< summary.json (schema dtsim.jobs)
};
JobsResult simulate_jobs(const std::string& cluster, const std::string& jobs_file, const std::string& calibration,
                         const SimulateOptions& options, bool alone);

/// One collective over the first `ranks` GPUs of a cluster (or every power of two between two sizes), reported as
/// nccl-tests does (algbw = bytes / time; busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for gathers/scatters).
struct CollectiveRequest {
  std::string cluster;
  std::string calibration;          ///< "" = the built-in one of the cluster's GPU
  int ranks = -1;                   ///< GPUs in the group (the first ones); -1 = every GPU
  std::string op = "all-reduce";    ///< all-reduce | all-gather | reduce-scatter | all-to-all | broadcast | reduce
  std::vector<double> sizes_bytes;  ///< one size, or a sweep
  SimulateOptions options;          ///< collectives, collective_algorithm, network, channels
  std::string nccl_protocol;        ///< ring protocols: auto | off | ll | ll128 | simple; "" = the calibration's
};
struct CollectivePoint {
  double bytes = 0, time_s = 0, algbw_Bps = 0, busbw_Bps = 0;
};
struct CollectiveResult {
  std::vector<CollectivePoint> points;
  std::string text;  ///< the table (without the wall time)
  Files files;       ///< collective.tsv, collective.json
};
CollectiveResult collective(const CollectiveRequest& req);

}  // namespace dtsim

#include "dtsim/plan.hpp"
#include "dtsim/sweep.hpp"
#include "dtsim/validate.hpp"
