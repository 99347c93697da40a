// Oracle tests of the activations Transformer Engine keeps under its low-precision recipes: each linear layer's input
// is saved quantized for its weight gradient (transformer_engine/pytorch/module/linear.py: saved_inputmat is the
// column-wise quantized input), so the QKV, FC1, FC2 and expert inputs cost the format's bytes instead of bf16's,
// while the attention core keeps its own bf16 output beside the projection's quantized copy. torchao's Float8
// linears (tensorwise, rowwise) keep the bf16 inputs. Checked against the closed form.
#include <gtest/gtest.h>

#include "strategies/transformer_costs.hpp"
#include "tests/support/cost_shape.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

using namespace dtsim;

using dtsim::testing::layer_shape;

// A dense Llama layer: (e - q) per element of the QKV and FC1 inputs (replicated, or 1/t with SP) and of the FC2
// input (1/t), q per element of the projection's copy of the core output (1/t).
TEST(Fp8SavedInputs, DenseLayerClosedForm) {
  const TransformerSpec m = model_preset("llama3-8b");
  for (int tp : {1, 4})
    for (bool sp : {false, true}) {
      if (sp && tp == 1) continue;
      const double T = static_cast<double>(m.seq_len), h = m.hidden, f = m.ffn_hidden, e = 2;
      const double rep = sp ? 1.0 / tp : 1.0;
      const double bf16 = cost::layer_activation_bytes(m, layer_shape(tp, sp, Precision::BF16)).stored;
      for (Precision p : {Precision::FP8_DELAYED, Precision::MXFP8, Precision::NVFP4}) {
        const double q = cost::precision_bytes(p, e);
        const double expected = bf16 - 2 * T * h * (e - q) * rep - T * f * (e - q) / tp + T * h * q / tp;
        const double got = cost::layer_activation_bytes(m, layer_shape(tp, sp, p)).stored;
        EXPECT_NEAR(got, expected, 1e-9 * bf16) << to_string(p) << " tp " << tp << " sp " << sp;
        EXPECT_LT(got, bf16);
      }
      // torchao's casts keep the bf16 inputs.
      for (Precision p : {Precision::FP8_CURRENT, Precision::FP8_ROWWISE})
        EXPECT_DOUBLE_EQ(cost::layer_activation_bytes(m, layer_shape(tp, sp, p)).stored, bf16) << to_string(p);
    }
}

// The per-atom split (pipeline cuts inside a layer) sums to the same layer.
TEST(Fp8SavedInputs, AtomsSumToTheLayer) {
  const TransformerSpec m = model_preset("llama3-8b");
  for (Precision p : {Precision::BF16, Precision::FP8_DELAYED, Precision::NVFP4}) {
    const cost::Shape sh = layer_shape(2, true, p);
    EXPECT_NEAR(cost::layer_activation_bytes_atoms(m, sh, 0, kLayerAtoms).stored,
                cost::layer_activation_bytes(m, sh).stored, 1e-9 * cost::layer_activation_bytes(m, sh).stored)
        << to_string(p);
  }
}

// MoE: the QKV input, the permuted tokens (expert FC1 input) and the experts' activation output (FC2 input) are
// quantized; the router's (the block's normalised input), the unpermute's and the activation's own inputs stay bf16.
TEST(Fp8SavedInputs, MoeExpertInputs) {
  const TransformerSpec m = model_preset("mixtral-8x7b");
  cost::Shape sh = layer_shape(1, false, Precision::BF16);
  const double bf16 = cost::layer_activation_bytes(m, sh, true).stored;
  sh.precision = Precision::FP8_DELAYED;
  const double fp8 = cost::layer_activation_bytes(m, sh, true).stored;
  const double T = static_cast<double>(m.seq_len), h = m.hidden, e = 2, q = 1;
  const double N = T * m.moe.top_k;  // routed token-slots of one micro-batch on the only EP rank
  const double fe = static_cast<double>(m.moe.expert_ffn_hidden);
  const double expected = bf16 - T * h * (e - q) + T * h * q - N * h * (e - q) - N * fe * (e - q);
  EXPECT_NEAR(fp8, expected, 1e-9 * bf16);
}
