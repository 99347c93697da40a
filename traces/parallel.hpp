// Work split over threads where the pieces are independent and each result has its own slot, so that the output is
// the same whatever the thread count: the published-data harness's rows (validate/published/published.cpp), the
// grid planner's candidate plans (strategies/planners/grid.cpp) and the analytic engine's per-link lists and sweep
// (sim/engine/analytic_runtime.cpp).
#pragma once
#include <cstddef>
#include <functional>

namespace dtsim {

/// Threads for such work: DTSIM_THREADS when set (ConfigError unless a whole number in [1, 1024]), else the
/// machine's hardware threads, at most 8 (a simulated row of a large-scale source can take ~2 GB).
int worker_threads();

/// Calls fn(i) for every i in [0, n) on up to `threads` threads (the calling one included), each index once; fn must
/// write only to what index i owns. The first exception thrown stops the remaining indexes and is rethrown once every
/// thread has stopped. threads <= 1 (or n <= 1) runs in order on the calling thread, and so does a call made from
/// inside another parallel_for's fn (the harness's rows each simulate: threads are not multiplied).
void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& fn);

}  // namespace dtsim
