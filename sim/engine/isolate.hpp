// Running a computation in a child process: SimGrid allows one engine per process, so comparisons of several
// simulations (sweep points, a job alone versus shared) each run in their own fork.
#pragma once
#include <functional>
#include <vector>

namespace dtsim::sim {

/// Runs `fn` in a forked child and returns the doubles it produced. Throws std::runtime_error if the child
/// fails (an exception inside it, a crash, or a short result).
std::vector<double> run_isolated(const std::function<std::vector<double>()>& fn, std::size_t expected_values);

}  // namespace dtsim::sim
