// Sub-layer atoms of a dense layer (strategies/transformer_costs.hpp, kLayerAtoms), on which RaNNC's operator-level
// partitioning cuts: every op and collective carries an atom, and the atoms' passes, activations and parameters add
// up to the layer's, for GELU/unfused and SwiGLU/flash/GQA layers, TP 1-4, with and without sequence parallelism,
// under every recompute mode.
#include <gtest/gtest.h>

#include "strategies/transformer_costs.hpp"

namespace dtsim::cost {
namespace {

struct Totals {
  double flops = 0, bytes = 0, coll_bytes = 0;
  int ops = 0, colls = 0;
};
Totals totals(const std::vector<Step>& steps) {
  Totals t;
  for (const Step& s : steps) {
    if (s.kind == Step::Kind::COMPUTE) {
      for (const Op& o : s.ops) {
        t.flops += o.flops;
        t.bytes += o.bytes;
        ++t.ops;
      }
    } else {
      t.coll_bytes += s.collective_bytes;
      ++t.colls;
    }
  }
  return t;
}
void expect_equal(const Totals& a, const Totals& b, const std::string& what) {
  EXPECT_NEAR(a.flops, b.flops, 1e-9 * b.flops + 1e-6) << what;
  EXPECT_NEAR(a.bytes, b.bytes, 1e-9 * b.bytes + 1e-6) << what;
  EXPECT_NEAR(a.coll_bytes, b.coll_bytes, 1e-9 * b.coll_bytes + 1e-6) << what;
  EXPECT_EQ(a.ops, b.ops) << what;
  EXPECT_EQ(a.colls, b.colls) << what;
}
void add(Totals& a, const Totals& b) {
  a.flops += b.flops;
  a.bytes += b.bytes;
  a.coll_bytes += b.coll_bytes;
  a.ops += b.ops;
  a.colls += b.colls;
}

TEST(LayerAtoms, AtomsAddUpToTheLayer) {
  for (const char* name : {"gpt3-1.3b", "llama3-8b"})
    for (int tp : {1, 2, 4})
      for (bool sp : {false, true})
        for (Recompute rc : {Recompute::NONE, Recompute::SELECTIVE, Recompute::FULL}) {
          if (sp && tp == 1) continue;
          const TransformerSpec m = model_preset(name);
          Shape sh;
          sh.micro_batch = 2;
          sh.tp = tp;
          sh.sequence_parallel = sp;
          sh.recompute = rc;
          const std::string what =
              std::string(name) + " tp " + std::to_string(tp) + (sp ? " sp " : " ") + to_string(rc);
          const LayerPasses full = layer_passes(m, sh);
          Totals f, r, b, bi, bw;
          for (int a = 0; a < kLayerAtoms; ++a) {
            const LayerPasses one = slice_atoms(full, a, a + 1);
            add(f, totals(one.forward));
            add(r, totals(one.recompute));
            add(b, totals(one.backward));
            add(bi, totals(one.backward_input));
            add(bw, totals(one.backward_weight));
          }
          expect_equal(f, totals(full.forward), what + " forward");
          expect_equal(r, totals(full.recompute), what + " recompute");
          expect_equal(b, totals(full.backward), what + " backward");
          expect_equal(bi, totals(full.backward_input), what + " backward input");
          EXPECT_NEAR(bw.flops, totals(full.backward_weight).flops, 1e-9 * bw.flops) << what;
          // Two slices at every cut add up too, and the whole range is the layer.
          for (int cut = 1; cut < kLayerAtoms; ++cut) {
            Totals two = totals(slice_atoms(full, 0, cut).forward);
            add(two, totals(slice_atoms(full, cut, kLayerAtoms).forward));
            expect_equal(two, totals(full.forward), what + " forward cut at " + std::to_string(cut));
          }
          // Activations: kept bytes add up (no recompute, selective); full recompute keeps each slice's inputs.
          const ActivationBytes whole = layer_activation_bytes(m, sh);
          const ActivationBytes all = layer_activation_bytes_atoms(m, sh, 0, kLayerAtoms);
          EXPECT_NEAR(all.stored, whole.stored, 1e-9 * whole.stored) << what;
          EXPECT_NEAR(all.transient, whole.transient, 1e-9 * whole.transient + 1e-6) << what;
          if (rc != Recompute::FULL) {
            double stored = 0, transient = 0;
            for (int a = 0; a < kLayerAtoms; ++a) {
              stored += layer_activation_bytes_atoms(m, sh, a, a + 1).stored;
              transient += layer_activation_bytes_atoms(m, sh, a, a + 1).transient;
            }
            EXPECT_NEAR(stored, whole.stored, 1e-9 * whole.stored) << what;
            EXPECT_NEAR(transient, whole.transient, 1e-9 * whole.transient + 1e-6) << what;
          } else {
            // After the QKV projection the slice also keeps q, k, v; after the core its output.
            EXPECT_GT(layer_activation_bytes_atoms(m, sh, 1, 3).stored,
                      layer_activation_bytes_atoms(m, sh, 2, 3).stored);
            EXPECT_GT(layer_activation_bytes_atoms(m, sh, 2, 3).stored,
                      layer_activation_bytes_atoms(m, sh, 3, 5).stored);
          }
          double params = 0;
          for (int a = 0; a < kLayerAtoms; ++a) params += layer_params_per_rank_atoms(m, tp, a, a + 1);
          EXPECT_NEAR(params, layer_params_per_rank(m, tp), 1e-9 * params) << what;
        }
}

TEST(LayerAtoms, AttentionCoreHoldsNoWeightsAndTheMlpMost) {
  const TransformerSpec m = model_preset("gpt3-1.3b");
  EXPECT_EQ(layer_params_per_rank_atoms(m, 1, 1, 2), 0);
  const double h = m.hidden;
  EXPECT_DOUBLE_EQ(layer_params_per_rank_atoms(m, 1, 0, 1), 3 * h * h + 3 * h + 2 * h);  // QKV + bias + LayerNorm
  EXPECT_DOUBLE_EQ(layer_params_per_rank_atoms(m, 1, 4, 5), 4 * h * h + h);              // FC2 + bias
  Shape sh;
  EXPECT_EQ(cut_extra_bytes(m, sh, 3), 0);
  EXPECT_DOUBLE_EQ(cut_extra_bytes(m, sh, 1), 3 * m.seq_len * h * 2);  // q, k, v of one sample in fp16
}

}  // namespace
}  // namespace dtsim::cost
