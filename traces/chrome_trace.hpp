// Chrome-trace (Perfetto-readable) JSON writer. Times are int64 nanoseconds, written as microseconds.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtsim {

/// One argument attached to an event: integer, floating point or string.
struct TraceArg {
  std::string key;
  enum class Kind { INT, DOUBLE, STRING } kind = Kind::INT;
  std::int64_t i = 0;
  double d = 0;
  std::string s;
  static TraceArg integer(std::string k, std::int64_t v) { return {std::move(k), Kind::INT, v, 0, {}}; }
  static TraceArg real(std::string k, double v) { return {std::move(k), Kind::DOUBLE, 0, v, {}}; }
  static TraceArg text(std::string k, std::string v) { return {std::move(k), Kind::STRING, 0, 0, std::move(v)}; }
};

/// Builds a trace in memory (a string), so that nothing is written if the run fails.
class ChromeTraceWriter {
public:
  ChromeTraceWriter();
  /// Top-level metadata object ("otherData"), written at the end; value is raw JSON text.
  void set_metadata_json(std::string raw_json) { metadata_ = std::move(raw_json); }
  void process_name(int pid, const std::string& name, int sort_index);
  void thread_name(int pid, int tid, const std::string& name);
  /// A complete event ("ph":"X").
  void complete(int pid, int tid, const std::string& name, const std::string& category, std::int64_t start_ns,
                std::int64_t dur_ns, const std::vector<TraceArg>& args);
  /// A counter sample ("ph":"C"), e.g. memory in bytes.
  void counter(int pid, const std::string& name, std::int64_t ts_ns, const std::string& series, double value);
  /// A counter sample with several series (Perfetto draws one track per series).
  void counter(int pid, const std::string& name, std::int64_t ts_ns,
               const std::vector<std::pair<std::string, double>>& series);
  /// Finishes the document and returns it.
  std::string finish();
  std::size_t event_count() const { return events_; }

private:
  void begin_event();
  std::string out_;
  std::string metadata_ = "{}";
  std::size_t events_ = 0;
};

/// JSON string escaping shared by hand-written emitters.
void append_json_string(std::string& out, const std::string& s);
/// Shortest round-trip decimal form of a double (deterministic across runs).
void append_json_number(std::string& out, double v);

}  // namespace dtsim
