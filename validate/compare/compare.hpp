// Predicted vs measured timelines (`dtsim compare`): two run directories in the format `dtsim simulate --out`
// writes (trace.json + summary.json), the predicted one from the simulator and the measured one from the
// executor (or any tool writing the same format), aligned task by task and compared per task, per rank
// (compute / exposed communication / bubble), per phase, in peak memory and end to end.
// Depends on traces/ only.
#pragma once
#include <compare>
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dtsim::validate {

/// One complete ("X") event of a trace.json; times in microseconds, as written.
struct TimelineEvent {
  int pid = 0;  ///< simulated rank
  int tid = 0;  ///< stream: 0 compute, 1 tp-comm, 2 pp-comm, 3 dp-comm, 4 host
  std::string name, cat;
  std::string phase;                ///< args.phase, "" when absent
  int layer = -1, microbatch = -1;  ///< args.layer, args.microbatch; -1 when absent
  double ts_us = 0, dur_us = 0;
};

/// A run directory: DIR/trace.json and DIR/summary.json.
struct Timeline {
  std::string dir;
  std::vector<TimelineEvent> events;        ///< the "X" events, in file order
  double iteration_time_s = 0;              ///< summary results.iteration_time_s, else the trace's span
  std::map<int, double> peak_memory_bytes;  ///< summary ranks[]: global rank -> peak_memory_bytes
};

/// Reads DIR/trace.json and DIR/summary.json. ConfigError when the directory or a file is missing or a field is
/// missing or has the wrong type, FormatError when a file is not JSON; the one-line message names the file
/// and the field.
Timeline load_timeline(const std::string& dir);

/// The identity of a task in both timelines: the occurrence-th event, in ts order, with the same other fields.
struct TaskKey {
  int pid = 0, tid = 0;
  std::string name, phase;
  int layer = -1, microbatch = -1, occurrence = 0;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 flags the literal 0 of a defaulted <=>
  auto operator<=>(const TaskKey&) const = default;
};
/// e.g. "rank 0 compute attention forward layer 3 mb 0"; " #k" is added for the k-th repeat (k > 0).
std::string describe(const TaskKey& key);

/// A predicted and a measured value, error = measured / predicted - 1 (+0.2: measured 20% above the
/// prediction): exactly 0 when both are equal, NaN when predicted is 0 or a side is missing (NaN).
struct Metric {
  double predicted = 0, measured = 0, error = 0;
};
Metric metric(double predicted, double measured);

struct TaskDiff {
  TaskKey key;
  Metric dur_s;
};

/// Tasks of one side that the other side lacks: how many, and the first few (in key order) described.
struct Unmatched {
  std::size_t count = 0;
  std::vector<std::string> first;
};

/// A rank's iteration split as the simulator's summary splits it (seconds): compute = union of the compute
/// stream's busy time; exposed communication = some communication stream (1-3) busy while the compute stream
/// is idle; bubble = the rank's span (its first event's start to its last event's end) minus both.
struct RankDiff {
  Metric compute_s, exposed_comm_s, bubble_s;
};

/// Error statistics over matched tasks with a finite error.
struct TaskStats {
  std::size_t count = 0;
  double mape = 0;           ///< mean |error|
  double weighted_mape = 0;  ///< sum |measured - predicted| / sum predicted (duration-weighted)
  double max_abs_error = 0;
  std::string worst;  ///< the task with the largest |error|
};

struct CompareReport {
  std::string predicted_dir, measured_dir;
  Metric iteration_time_s;
  std::vector<TaskDiff> tasks;  ///< every matched task, in key order
  Unmatched only_predicted, only_measured;
  std::map<int, RankDiff> ranks;                  ///< by pid, ranks of either side
  std::map<std::string, Metric> phase_compute_s;  ///< compute-stream durations summed per args.phase
  std::map<int, Metric> peak_memory_bytes;        ///< by global rank, ranks of either summary
  TaskStats compute_tasks;                        ///< over matched compute-stream tasks
};

CompareReport compare(const Timeline& predicted, const Timeline& measured);

/// compare.json: every field of the report (NaN written as null).
nlohmann::json report_json(const CompareReport& report);
/// A readable table: end to end, per-rank breakdown, per-phase compute, memory, the worst tasks.
std::string report_text(const CompareReport& report, std::size_t worst_tasks = 10);
/// compare_trace.json: a Chrome trace with process "predicted rank N" (pid N) next to "measured rank N"
/// (pid 10000 + N), each side shifted to start at 0; every task carries the other side's duration and the error.
std::string compare_trace_json(const Timeline& predicted, const Timeline& measured);

}  // namespace dtsim::validate
