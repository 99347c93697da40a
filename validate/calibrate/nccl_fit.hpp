// Fitting the calibration's message-size network segments to nccl-tests measurements.
//
// Model (what the simulator does for one ring collective over n GPUs of one link class, flow or steps form):
//   T(S) = steps * (alpha * lf + o + (S/n) / (B * bf)),  steps = 2(n-1) (all-reduce) or n-1 (all-gather,
//   reduce-scatter), alpha and B the link class's latency and calibrated bandwidth, o the per-step overhead.
// Within each message-size segment a least-squares line T = A + C*S gives lf = (A/steps - o)/alpha and
// bf = steps / (n B C). Segments of the collective size S: <= 64 KiB, <= 1 MiB, <= 16 MiB, larger (a segment
// with fewer than two sizes is merged into the next); they are stored by per-step message size S/n, which is
// what the simulator looks factors up by. The link class is "intra" when the n GPUs fit in one node, else "inter".
#pragma once
#include <string>
#include <vector>

#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/nccl_tests.hpp"

namespace dtsim::sim {

struct FitPoint {
  double bytes = 0, measured_s = 0, predicted_s = 0;
};

struct NcclFit {
  Calibration calibration;  ///< the base calibration with the fitted segments of the link class
  std::string link;         ///< "intra" or "inter"
  std::vector<FitPoint> points;
  double max_rel_error = 0, mean_rel_error = 0;
};

/// `op` and `ranks` override what the log says (needed when it does not say).
NcclFit fit_nccl_tests(const NcclTestsRun& run, const ClusterSpec& cluster, const Calibration& base, std::string op,
                       int ranks, const std::string& source);

}  // namespace dtsim::sim
