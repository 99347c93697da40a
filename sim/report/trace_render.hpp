// The simulated timeline as traces a person can open: trace.json (Chrome trace JSON, bounded to a selection of
// ranks and links, see trace_select.hpp) and trace.pftrace (Perfetto's protobuf format, every simulated rank).
//
// Both show one process per simulated rank (named "rank G (tp, dp, pp)", "xN" when it stands for N folded ranks)
// with one thread per stream (compute, tp, pp, dp, host) holding its tasks as slices, a memory counter per rank,
// and optionally one load counter per link (GB/s, each flow counted at its average rate from start to end).
#pragma once
#include <string>

#include "sim/report/report.hpp"
#include "sim/report/trace_select.hpp"

namespace dtsim::sim {

/// trace.json of the selected ranks and links; its metadata ("otherData") says what was kept and left out.
std::string trace_json(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep,
                       const TraceSelection& sel);

/// trace.pftrace: every simulated rank and, with `link_tracks`, every used link. Slices on one stream that overlap
/// without nesting (parallel flows of one transfer) go to extra threads of the stream ("dp 2", ...): Perfetto
/// nests the slices of a thread. Memory per category (bytes) and link loads (GB/s) are counter tracks.
std::string perfetto_trace(const Inputs& in, const Lowered& low, const EngineResult& res, const Report& rep,
                           bool link_tracks);

}  // namespace dtsim::sim
