// Oracle tests of dropout as a model field (TransformerSpec::attention_dropout, hidden_dropout; Megatron's
// --attention-dropout and --hidden-dropout). With dropout a GPT layer keeps a 1-byte mask per element of the
// attention's and the MLP's outputs (Korthikanti et al. 2022, the "2sbh" of 34sbh) and, with unfused attention, the
// dropout's mask and output per score (a s^2 b (1 + e)); its fused bias-dropout-add kernels write those masks. Without
// (dropout 0: PyTorch's dropout returns its input), none of it.
#include <gtest/gtest.h>

#include <string>

#include "strategies/transformer_costs.hpp"
#include "tests/support/cost_shape.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

using namespace dtsim;

namespace {
double memory_bytes(const std::vector<cost::Step>& steps) {
  double b = 0;
  for (const auto& st : steps)
    if (st.kind != cost::Step::Kind::TP_COLLECTIVE)
      for (const auto& op : st.ops)
        if (!op.gemm && !op.flash) b += op.bytes;
  return b;
}

bool has_op(const std::vector<cost::Step>& steps, const std::string& name) {
  for (const auto& st : steps)
    for (const auto& op : st.ops)
      if (op.name == name) return true;
  return false;
}
}  // namespace

TEST(Dropout, StoredActivationsLoseTheMasksAndTheScoresDropout) {
  const TransformerSpec with = model_preset("gpt3-1.3b");
  ASSERT_EQ(with.attention, AttentionKind::UNFUSED);
  ASSERT_TRUE(with.attention_dropout && with.hidden_dropout);  // presets keep Megatron's GPT dropout
  TransformerSpec no_hidden = with, no_attention = with;
  no_hidden.hidden_dropout = false;
  no_attention.attention_dropout = false;
  const double s = with.seq_len, h = with.hidden, a = with.heads, e = 2;
  for (int tp : {1, 2, 8})
    for (bool sp : {false, true}) {
      if (sp && tp == 1) continue;
      const cost::Shape sh = dtsim::testing::layer_shape(tp, sp);
      const std::string at = "tp " + std::to_string(tp) + " sp " + std::to_string(sp);
      const double full = cost::layer_activation_bytes(with, sh, false).stored;
      // Two 1-byte masks per hidden element, replicated over TP unless sequence parallel.
      EXPECT_DOUBLE_EQ(full - cost::layer_activation_bytes(no_hidden, sh, false).stored, 2 * s * h / (sp ? tp : 1))
          << at;
      // The scores' dropout mask (1) and output (e) per element of the a / tp heads' s x s scores.
      EXPECT_DOUBLE_EQ(full - cost::layer_activation_bytes(no_attention, sh, false).stored, a / tp * s * s * (1 + e))
          << at;
      EXPECT_DOUBLE_EQ(cost::embedding_activation_bytes(no_hidden, sh).stored, 0) << at;
      EXPECT_DOUBLE_EQ(cost::embedding_activation_bytes(with, sh).stored, s * h / (sp ? tp : 1)) << at;
    }
}

TEST(Dropout, KernelsLoseTheMaskWritesAndTheScoresDropout) {
  const TransformerSpec with = model_preset("gpt3-1.3b");
  TransformerSpec without = with;
  without.attention_dropout = without.hidden_dropout = false;
  const double s = with.seq_len, h = with.hidden, a = with.heads, e = 2;
  const cost::Shape sh = dtsim::testing::layer_shape(2, false);
  const auto x = cost::layer_passes(with, sh), y = cost::layer_passes(without, sh);
  const double scores = a / 2 * s * s;
  // Forward: the attention dropout (read e, write e and the mask) and the two bias-dropout-adds' mask writes.
  EXPECT_DOUBLE_EQ(memory_bytes(x.forward) - memory_bytes(y.forward), scores * (2 * e + 1) + 2 * s * h);
  // Backward: the dropout's backward (1.5 x its forward bytes) and the two bias-dropout-adds' mask reads.
  EXPECT_DOUBLE_EQ(memory_bytes(x.backward) - memory_bytes(y.backward), 1.5 * scores * (2 * e + 1) + 2 * s * h);
  EXPECT_TRUE(has_op(x.forward, "attn-dropout"));
  EXPECT_FALSE(has_op(y.forward, "attn-dropout"));
  EXPECT_TRUE(has_op(cost::embedding_passes(with, sh).forward, "embedding-dropout"));
  EXPECT_FALSE(has_op(cost::embedding_passes(without, sh).forward, "embedding-dropout"));
  // The same GEMMs either way.
  double fx = 0, fy = 0;
  for (const auto* p : {&x.forward, &x.backward})
    for (const auto& st : *p)
      for (const auto& op : st.ops) fx += op.flops;
  for (const auto* p : {&y.forward, &y.backward})
    for (const auto& st : *p)
      for (const auto& op : st.ops) fy += op.flops;
  EXPECT_DOUBLE_EQ(fx, fy);
}

TEST(Dropout, ModelJsonKeepsIt) {
  TransformerSpec m = model_preset("gpt3-1.3b");
  EXPECT_FALSE(to_json(m).contains("attention_dropout"));  // the default is not written
  m.attention_dropout = false;
  const TransformerSpec back = model_from_json(to_json(m), "model");
  EXPECT_FALSE(back.attention_dropout);
  EXPECT_TRUE(back.hidden_dropout);
}
