// Perfetto protobuf trace writer (trace.pftrace): the compact binary counterpart of ChromeTraceWriter.
// Writes Perfetto's native TracePacket format (the subset in perfetto_trace.proto, field numbers as upstream):
// process, thread and counter tracks described once by TrackDescriptor packets, slices as TrackEvent
// SLICE_BEGIN / SLICE_END pairs, counter values as TYPE_COUNTER events; event names, categories and argument
// names are interned (sent once, then referred to by a small integer). Packets are serialized one at a time and
// appended to the output (a Trace is `repeated TracePacket packet = 1`, so concatenated length-delimited field-1
// records are a valid Trace): memory holds the bytes, never the packets as message objects.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "traces/chrome_trace.hpp"  // TraceArg

namespace dtsim {

class PerfettoTraceWriter {
public:
  enum class CounterUnit { NONE, BYTES };

  PerfettoTraceWriter();
  ~PerfettoTraceWriter();
  PerfettoTraceWriter(const PerfettoTraceWriter&) = delete;
  PerfettoTraceWriter& operator=(const PerfettoTraceWriter&) = delete;

  /// A process track (pid > 0: Perfetto reserves pid 0); returns its track uuid.
  std::uint64_t process_track(int pid, const std::string& name, int sort_index);
  /// A thread track of process `pid` (tid unique in the trace); returns its uuid.
  std::uint64_t thread_track(std::uint64_t process_uuid, int pid, int tid, const std::string& name, int sort_index);
  /// A counter track under `parent_uuid` (a process track, or 0 for a top-level track); returns its uuid.
  std::uint64_t counter_track(std::uint64_t parent_uuid, const std::string& name, CounterUnit unit);

  /// Opens a slice on a thread track. Slices on one track must nest (each ends before the one it is in) and be
  /// written in time order per track, ends before begins at equal times; the reader sorts packets by time and
  /// keeps the written order at equal times.
  void slice_begin(std::uint64_t track, std::int64_t ts_ns, const std::string& name,
                   const std::vector<std::string>& categories, const std::vector<TraceArg>& args);
  /// Closes the innermost open slice of the track.
  void slice_end(std::uint64_t track, std::int64_t ts_ns);
  void counter(std::uint64_t track, std::int64_t ts_ns, double value);
  void counter(std::uint64_t track, std::int64_t ts_ns, std::int64_t value);

  /// Reserves room for a trace of about `bytes` (saves the copies of a growing buffer on large traces).
  void reserve(std::size_t bytes);
  /// Finishes the trace and returns its bytes (the writer is then empty).
  std::string finish();
  std::size_t packet_count() const { return packets_; }

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::size_t packets_ = 0;
};

}  // namespace dtsim
