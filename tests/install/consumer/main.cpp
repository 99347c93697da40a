// dtsim_consumer: a program built against an installed dtsim (find_package(dtsim CONFIG), dtsim::dtsim) that calls
// the public API: the version, the presets, one simulation of GPT-3 1.3B on 8 A100s with the analytic network.
// Exit code 0 only if the simulated iteration time is positive and no exception escapes.
#include <cstdio>
#include <exception>

#include "dtsim/dtsim.hpp"

int main() {
  try {
    std::printf("dtsim %s\n", dtsim::version().c_str());
    const dtsim::Presets p = dtsim::presets();
    std::printf("presets: %zu models, %zu GPUs, %zu clusters\n", p.models.size(), p.gpus.size(), p.clusters.size());

    dtsim::Inputs in = dtsim::load_inputs({"gpt3-1.3b", "dgx-a100:8", "", ""});
    in.plan.tp = 2;
    in.plan.pp = 2;
    in.plan.dp = 2;
    in.plan.micro_batch_size = 1;
    in.plan.global_batch_size = 16;
    dtsim::SimulateOptions options;
    options.network = "analytic";
    options.trace = false;
    const dtsim::SimulateResult r = dtsim::simulate(in, options);
    std::printf("engine %s: iteration %.6f s, %.1f tokens/s, MFU %.3f\n", r.engine.c_str(), r.iteration_time_s,
                r.tokens_per_s, r.mfu);
    if (!(r.iteration_time_s > 0)) {
      std::fprintf(stderr, "dtsim_consumer: iteration time %g is not positive\n", r.iteration_time_s);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtsim_consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
