// Unit tests of dtsim::tp (strategies/tp_layouts): 1-D / 2-D / 2.5-D / 3-D tensor-parallel layouts against
// the closed forms of seed-algorithms.md §2. Expected values are computed from the formulas, never hard-coded.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "strategies/tp_layouts.hpp"
#include "traces/error.hpp"

using dtsim::tp::Collective;
using dtsim::tp::Layout;
using dtsim::tp::LinearShape;

namespace {

void expect_rel(double got, double want, double rel = 1e-12) {
  EXPECT_NEAR(got, want, rel * std::abs(want)) << "got " << got << " want " << want;
}

double sum_sent(const std::vector<Collective>& v) {
  double s = 0;
  for (const auto& c : v) s += dtsim::tp::ring_bytes_sent(c);
  return s;
}

const std::vector<LinearShape> kShapes = {
    {4096, 1024, 4096, 2}, {2048 * 8, 12288, 3 * 12288, 2}, {512, 4096, 1024, 4}, {1000, 777, 333, 2}};

}  // namespace

// §2 [Δ]: 3-D total per device = 2(q−1)/q³·(B·h_in + B·h_out + h_in·h_out)·e over 6 collectives.
TEST(TpLayouts, ThreeDOracle) {
  for (int q : {2, 3, 4, 5, 8}) {
    for (const auto& s : kShapes) {
      const auto c = dtsim::tp::linear_cost(Layout::D3, q * q * q, 1, s);
      const double q3 = static_cast<double>(q) * q * q;
      const double want =
          2.0 * (q - 1) / q3 * (s.batch_tokens * s.h_in + s.batch_tokens * s.h_out + s.h_in * s.h_out) * s.elem_bytes;
      expect_rel(c.comm_bytes_per_device, want);
      expect_rel(sum_sent(c.forward) + sum_sent(c.backward), want);
      ASSERT_EQ(c.forward.size(), 3u);
      ASSERT_EQ(c.backward.size(), 3u);
      for (const auto& k : c.forward) EXPECT_EQ(k.group_size, q);
      for (const auto& k : c.backward) EXPECT_EQ(k.group_size, q);
      // Memory: 1/q³ of X, A and Y.
      expect_rel(c.weight_bytes_per_device, s.h_in * s.h_out * s.elem_bytes / q3);
      expect_rel(c.activation_in_bytes_per_device, s.batch_tokens * s.h_in * s.elem_bytes / q3);
      expect_rel(c.activation_out_bytes_per_device, s.batch_tokens * s.h_out * s.elem_bytes / q3);
    }
  }
  // q = 1: no communication.
  EXPECT_EQ(dtsim::tp::linear_cost(Layout::D3, 1, 1, kShapes[0]).comm_bytes_per_device, 0.0);
}

// §2 [D][T]: Megatron layer = one all-reduce of [B, h] forward per attention / MLP block pair (2 per layer),
// one per pair backward; total 8·B·h·(t−1)/t·e per device per layer.
TEST(TpLayouts, OneDMegatronLayer) {
  const double B = 2048 * 4, h = 4096, ffn = 4 * 4096, e = 2;
  for (int t : {2, 4, 8, 6}) {
    const auto L = dtsim::tp::transformer_layer_cost(Layout::D1, t, 1, B, h, ffn, e);
    ASSERT_EQ(L.forward.size(), 2u);
    ASSERT_EQ(L.backward.size(), 2u);
    for (const auto* list : {&L.forward, &L.backward})
      for (const auto& k : *list) {
        EXPECT_EQ(k.kind, "all-reduce");
        EXPECT_EQ(k.axis, "tp");
        EXPECT_EQ(k.group_size, t);
        EXPECT_EQ(k.count, 1);
        expect_rel(k.bytes, B * h * e);
      }
    expect_rel(L.comm_bytes_per_device, 8.0 * B * h * (t - 1) / t * e);
    // Attention pair (QKV, proj) and MLP pair (FFN-in, FFN-out): one forward all-reduce each.
    EXPECT_EQ(L.linears[0].forward.size() + L.linears[1].forward.size(), 1u);
    EXPECT_EQ(L.linears[2].forward.size() + L.linears[3].forward.size(), 1u);
    expect_rel(L.weight_bytes_per_device, (3 * h * h + h * h + 2 * h * ffn) * e / t);
  }
}

// §2 [D] 2-D SUMMA, [Δ] exact volume: 3 products × 2 operands, q broadcasts / reduces of one block each:
// 3(q−1)/q²·(B·h_in + h_in·h_out)·e; 2.5-D adds d (B/d tokens) and the depth all-reduce of dA.
TEST(TpLayouts, TwoDAndTwoHalfDClosedForm) {
  for (int q : {2, 3, 4, 8}) {
    for (const auto& s : kShapes) {
      const double e = s.elem_bytes, q2 = static_cast<double>(q) * q;
      const auto c = dtsim::tp::linear_cost(Layout::D2, q * q, 1, s);
      const double want2 = 3.0 * (q - 1) / q2 * (s.batch_tokens * s.h_in + s.h_in * s.h_out) * e;
      expect_rel(c.comm_bytes_per_device, want2);
      expect_rel(sum_sent(c.forward) + sum_sent(c.backward), want2);
      // Docs' coefficient: 6(q−1)/q per tensor of size S/q when B·h_in = h_in·h_out = S.
      const LinearShape sq{s.h_out, s.h_in, s.h_out, e};
      const double S = sq.batch_tokens * sq.h_in * e;
      expect_rel(dtsim::tp::linear_cost(Layout::D2, q * q, 1, sq).comm_bytes_per_device, 6.0 * (q - 1) / q * S / q);
      expect_rel(c.weight_bytes_per_device, s.h_in * s.h_out * e / q2);

      for (int d : {1, 2, 4}) {
        const auto c25 = dtsim::tp::linear_cost(Layout::D2_5, q * q * d, d, s);
        const double want25 = 3.0 * (q - 1) / q2 * (s.batch_tokens * s.h_in / d + s.h_in * s.h_out) * e +
                              2.0 * (d - 1) / d * s.h_in * s.h_out / q2 * e;
        expect_rel(c25.comm_bytes_per_device, want25);
        expect_rel(c25.activation_in_bytes_per_device, s.batch_tokens * s.h_in * e / (d * q2));
        expect_rel(c25.weight_bytes_per_device, s.h_in * s.h_out * e / q2);
        if (d == 1) expect_rel(c25.comm_bytes_per_device, c.comm_bytes_per_device);
      }
    }
  }
}

TEST(TpLayouts, DegreeValidation) {
  using dtsim::tp::valid_degree;
  EXPECT_FALSE(valid_degree(Layout::D3, 12, 1));
  EXPECT_TRUE(valid_degree(Layout::D3, 27, 1));
  EXPECT_TRUE(valid_degree(Layout::D3, 64, 1));
  EXPECT_TRUE(valid_degree(Layout::D3, 1, 1));
  EXPECT_TRUE(valid_degree(Layout::D1, 7, 1));
  EXPECT_FALSE(valid_degree(Layout::D1, 0, 1));
  EXPECT_TRUE(valid_degree(Layout::D2, 16, 1));
  EXPECT_FALSE(valid_degree(Layout::D2, 8, 1));
  EXPECT_TRUE(valid_degree(Layout::D2_5, 32, 2));   // 4²·2
  EXPECT_FALSE(valid_degree(Layout::D2_5, 32, 4));  // 8 is not a square
  EXPECT_FALSE(valid_degree(Layout::D2_5, 18, 4));  // not divisible
  EXPECT_THROW(dtsim::tp::linear_cost(Layout::D3, 12, 1, kShapes[0]), dtsim::ConfigError);
  EXPECT_THROW(dtsim::tp::linear_cost(Layout::D1, 4, 1, LinearShape{0, 1, 1, 2}), dtsim::ConfigError);

  for (Layout l : {Layout::D1, Layout::D2, Layout::D2_5, Layout::D3})
    EXPECT_EQ(dtsim::tp_layout_from_string(dtsim::to_string(l), "test"), l);
  EXPECT_THROW(dtsim::tp_layout_from_string("4d", "test"), dtsim::ConfigError);
  try {
    dtsim::tp_layout_from_string("4d", "test");
    FAIL();
  } catch (const dtsim::Error& err) {
    const std::string msg = err.what();
    EXPECT_NE(msg.find("'4d'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2.5d"), std::string::npos) << msg;
  }
}

// §2 table, "compute" column: 1/p of the FLOPs in every layout, for a linear and for a whole layer.
TEST(TpLayouts, FlopsDividedByDevices) {
  struct Case {
    Layout l;
    int p, d;
  };
  const Case cases[] = {{Layout::D1, 8, 1}, {Layout::D2, 16, 1}, {Layout::D2_5, 32, 2}, {Layout::D3, 64, 1}};
  const double B = 4096, h = 2048, ffn = 5504, e = 2;
  for (const auto& k : cases) {
    for (const auto& s : kShapes) {
      const auto c = dtsim::tp::linear_cost(k.l, k.p, k.d, s);
      expect_rel(c.flops_per_device, 2.0 * s.batch_tokens * s.h_in * s.h_out / k.p);
      expect_rel(sum_sent(c.forward) + sum_sent(c.backward), c.comm_bytes_per_device);
    }
    const auto L = dtsim::tp::transformer_layer_cost(k.l, k.p, k.d, B, h, ffn, e);
    const double total = 2.0 * B * (h * 3 * h + h * h + h * ffn + ffn * h);
    expect_rel(L.flops_per_device, total / k.p);
    expect_rel(sum_sent(L.forward) + sum_sent(L.backward), L.comm_bytes_per_device);
  }
}

// §2 [A]: 3-D exists because its per-device traffic shrinks with q³; on 64 devices a large layer sends
// less than under 1-D (and 2-D).
TEST(TpLayouts, ThreeDBeatsOneDOn64Devices) {
  const double B = 2048 * 8, h = 12288, ffn = 4 * 12288, e = 2;
  const auto l1 = dtsim::tp::transformer_layer_cost(Layout::D1, 64, 1, B, h, ffn, e);
  const auto l2 = dtsim::tp::transformer_layer_cost(Layout::D2, 64, 1, B, h, ffn, e);
  const auto l3 = dtsim::tp::transformer_layer_cost(Layout::D3, 64, 1, B, h, ffn, e);
  EXPECT_GT(l3.comm_bytes_per_device, 0.0);
  EXPECT_LT(l3.comm_bytes_per_device, l1.comm_bytes_per_device);
  EXPECT_LT(l3.comm_bytes_per_device, l2.comm_bytes_per_device);
  // 3-D alternates input/output axes between consecutive linears.
  EXPECT_EQ(l3.forward[0].axis, "input");
  EXPECT_EQ(l3.forward[3].axis, "output");
}
