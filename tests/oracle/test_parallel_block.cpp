// Oracle tests of the parallel transformer block (TransformerSpec::parallel_block; GPT-J, PaLM section 2, MegaScale
// NSDI'24 section 3.1): y = x + Attention(LN(x)) + MLP(LN(x)). Against the standard block of the same shapes: the same
// GEMM and attention FLOPs, one norm and one bias-dropout-add fewer, one TP reduction per pass instead of two (the
// row-parallel outputs summed first), and one norm input and one normalised input fewer kept for the backward.
#include <gtest/gtest.h>

#include "strategies/transformer_costs.hpp"
#include "tests/support/cost_shape.hpp"
#include "traces/error.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

using namespace dtsim;

namespace {

struct Totals {
  double gemm_flops = 0, attention_flops = 0, memory_bytes = 0, collective_bytes = 0;
  int collectives = 0;
};

Totals totals(const std::vector<cost::Step>& steps) {
  Totals t;
  for (const auto& st : steps) {
    if (st.kind == cost::Step::Kind::TP_COLLECTIVE) {
      ++t.collectives;
      t.collective_bytes += st.collective_bytes;
      continue;
    }
    for (const auto& op : st.ops) {
      if (op.gemm) t.gemm_flops += op.flops;
      else if (op.flash) t.attention_flops += op.flops;
      else t.memory_bytes += op.bytes;
    }
  }
  return t;
}

}  // namespace

TEST(ParallelBlock, OneReductionPerPassAndOneNormFewer) {
  const TransformerSpec standard = model_preset("llama3-8b");
  TransformerSpec parallel = standard;
  parallel.parallel_block = true;
  const double T = standard.seq_len, h = standard.hidden, e = 2;
  for (int tp : {1, 2, 8})
    for (bool sp : {false, true}) {
      if (sp && tp == 1) continue;
      const cost::Shape sh = dtsim::testing::layer_shape(tp, sp);
      const auto a = cost::layer_passes(standard, sh), b = cost::layer_passes(parallel, sh);
      for (int pass = 0; pass < 2; ++pass) {
        const Totals x = totals(pass == 0 ? a.forward : a.backward), y = totals(pass == 0 ? b.forward : b.backward);
        const std::string at =
            "tp " + std::to_string(tp) + " sp " + std::to_string(sp) + " pass " + std::to_string(pass);
        EXPECT_DOUBLE_EQ(y.gemm_flops, x.gemm_flops) << at;
        EXPECT_DOUBLE_EQ(y.attention_flops, x.attention_flops) << at;
        // Standard: 2 all-reduces per pass (4 with SP: all-gather + reduce-scatter twice); parallel: half, same size.
        EXPECT_EQ(x.collectives, tp == 1 ? 0 : sp ? 4 : 2) << at;
        EXPECT_EQ(y.collectives, x.collectives / 2) << at;
        EXPECT_DOUBLE_EQ(y.collective_bytes, x.collective_bytes / 2) << at;
        // One norm (forward: read x, write LN(x); backward 1.5 times that) and one dropout-residual (read two, write
        // one, a 1-byte mask) fewer, on 1/t of the tokens with SP.
        const double Tsp = sp ? T / tp : T, norm = 2 * Tsp * h * e * (pass == 0 ? 1.0 : 1.5);
        const double dropres = Tsp * h * (3 * e + 1);
        EXPECT_NEAR(y.memory_bytes, x.memory_bytes - norm - dropres, 1e-9 * x.memory_bytes) << at;
      }
      // Stored activations: one norm input and one normalised GEMM input fewer (replicated, or 1/t with SP).
      const double rep = sp ? 1.0 / tp : 1.0;
      EXPECT_NEAR(cost::layer_activation_bytes(parallel, sh).stored,
                  cost::layer_activation_bytes(standard, sh).stored - 2 * T * h * e * rep, 1.0);
    }
}

TEST(ParallelBlock, RefusedWhereItIsNotModelled) {
  TransformerSpec moe = model_preset("mixtral-8x7b");
  moe.parallel_block = true;
  EXPECT_THROW(moe.validate(), ConfigError);
  TransformerSpec gpt = model_preset("gpt3-175b");
  gpt.parallel_block = true;
  EXPECT_NO_THROW(gpt.validate());
  cost::Shape grid = dtsim::testing::layer_shape(4, false);
  grid.layout = TpLayout::D2;
  EXPECT_THROW(cost::layer_passes(gpt, grid), ConfigError);
  // The model JSON keeps the field.
  EXPECT_TRUE(model_from_json(to_json(gpt), "model").parallel_block);
}
