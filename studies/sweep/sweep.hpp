// Sweeps (`dtsim sweep SPEC.json`): a spec of models x clusters x strategy knobs (and planners) expanded into
// scenarios, filtered before any simulation, and one result row per simulated scenario.
//
// Spec (schema_version 1, unknown fields rejected; every knob is a list, a scalar counts as a one-element list):
//   {"schema_version": 1, "name": "...",
//    "models": ["gpt3-175b", "my-model.json"],                 presets or model files (relative to the spec's folder)
//    "clusters": ["dgx-a100:1024:fat-tree:16:1", "c.json"],    and/or
//    "gpus": [256, 512], "cluster_preset": "dgx-a100[:FABRIC]",  -> "dgx-a100:256[:FABRIC]" (default preset dgx-a100)
//    "calibration": "cal.json",                                optional; default: the GPU's built-in calibration
//    "stack": "megatron-core",                                 optional: every scenario's software stack (a name or a
//                                                              profile file); default: each simulation's default stack
//    "tp": [1, 2, 4, 8], "pp": [1, 2, 4], "dp": ["auto"],      "auto" = gpus / (tp cp pp)
//    "vp": [1, 2], "mbs": [1, 2], "gbs": [512],                vp = virtual stages (model chunks per stage)
//    "schedule": ["1f1b", "gpipe", "interleaved", "zb-h1"],    "interleaved" takes its chunk count from vp
//    "zero": [0, 1], "recompute": ["none", "selective", "full"],   "full:N": the first N layers of every chunk
//    "tp_layout": ["1d", "2d", "3d", "2.5d:2"], "sequence_parallel": [false, true],
//    "cp": [1, 2, 4], "cp_kind": ["ring", "a2a", "allgather"], "ep": [1, 8],   context / expert parallelism
//    "precision": ["bf16", "fp8", "fp8-current", "mxfp8"],     linear-layer GEMMs (ParallelPlan::precision)
//    "tp_comm_overlap": [false, true], "overlap_param_gather": [false, true], "cuda_graphs": [false, true],
//    "dispatcher": ["alltoall", "deepep"], "overlap_moe_comm": [false, true],   MoE token dispatch and its overlap
//    "megatron_fsdp": [false, true],                           ZeRO 2/3 as Megatron-FSDP runs them
//    "network": ["analytic", "flow"],
//    "grid_points": true,                                      false: planner scenarios only
//    "planners": ["grid", "dapple:8"],                         NAME[:TP]; TP = GPUs per device for pipeline planners
//    "random": {"samples": 1000, "seed": 1}}                   sample N valid grid points instead of all
// Defaults: tp, pp, vp, mbs [1]; dp ["auto"]; schedule ["1f1b"]; zero [0]; recompute ["none"]; tp_layout ["1d"];
// sequence_parallel [false]; cp, ep [1]; cp_kind ["ring"]; precision ["bf16"]; tp_comm_overlap, overlap_param_gather,
// cuda_graphs, overlap_moe_comm, megatron_fsdp [false]; dispatcher ["alltoall"]; network ["analytic"]; gbs is required.
// Points with an option the hardware or the plan cannot take (fp8 without FP8 tensor cores, tp_comm_overlap without
// sequence_parallel, overlap_param_gather without ZeRO 1 or 2, megatron_fsdp below ZeRO 2) are skipped by plan
// validation like any other invalid point; cp_kind with cp 1, sequence_parallel or tp_comm_overlap with tp 1, a
// dispatcher other than alltoall on a dense model are skipped as no-ops.
//
// Expansion (deterministic): for every model, cluster, gbs, network and knob combination (nested loops in that
// order) a grid point; points failing a divisibility rule or ParallelPlan::validate are skipped and counted by
// reason, duplicates (same id) likewise; with "random", N of the remaining points are drawn (seeded splitmix64,
// Floyd's algorithm) and kept in grid order. Then one scenario per planner x model x cluster x gbs x network (the
// planner runs in the worker: its best-predicted plan is simulated). Scenarios are numbered in this order
// (`index`); `id` is the FNV-1a 64 hash (16 hex digits) of the canonical JSON of the scenario's inputs (contents
// of model, cluster and calibration, network, plan knobs or planner name; cp, cp_kind, ep, precision, the three
// options, dispatcher and overlap_moe_comm enter only where they differ from the defaults, so a plan without them keeps
// its id). Last, the analytic memory pre-filter marks grid scenarios whose analytic peak (strategies/memory_model)
// exceeds the GPU's capacity; they keep their index and id but are not simulated unless the pre-filter is off.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/model/lowering.hpp"
#include "traces/calibration.hpp"
#include "traces/cluster.hpp"
#include "traces/model.hpp"
#include "traces/plan.hpp"

namespace dtsim::sim::sweep {

using Row = nlohmann::ordered_json;

struct Scenario {
  int index = 0;
  std::string id;              ///< 16 hex digits
  int model = 0, cluster = 0;  ///< into Expansion::models / clusters
  NetworkMode network = NetworkMode::ANALYTIC;
  std::string planner;       ///< "" for grid points, else "NAME" or "NAME:TP"
  ParallelPlan plan;         ///< grid points: the plan; planner scenarios: only the global batch is set
  bool prefiltered = false;  ///< analytic memory estimate over capacity (not simulated with the pre-filter on)
};

struct Expansion {
  nlohmann::json spec;  ///< as given
  std::vector<TransformerSpec> models;
  std::vector<ClusterSpec> clusters;
  std::vector<Calibration> calibrations;       ///< per cluster
  std::vector<Scenario> scenarios;             ///< in index order, pre-filtered ones included
  std::size_t grid_points = 0;                 ///< size of the knob grid (all combinations)
  std::size_t prefiltered = 0;                 ///< scenarios the memory pre-filter marks
  std::map<std::string, std::size_t> skipped;  ///< reason -> grid points dropped before numbering
};

/// Reads a spec file (FormatError / ConfigError naming the file).
nlohmann::json load_spec(const std::string& path);
/// Expands a spec; relative model/cluster/calibration paths are looked up next to `spec_dir` first. With
/// `prefilter` false the memory pre-filter is not evaluated (no scenario is marked).
Expansion expand(const nlohmann::json& spec, const std::string& spec_dir = ".", bool prefilter = true);

/// The pre-filter's figure: the largest memory::analytic_peak_bytes over the plan's stages.
double analytic_peak_bytes(const TransformerSpec& m, const ParallelPlan& plan, double reserved_bytes);

/// FNV-1a 64 of `s` as 16 lowercase hex digits.
std::string fnv1a_hex(const std::string& s);

/// The row of a scenario with its inputs filled in and every metric null (status as given).
Row row_skeleton(const Expansion& ex, const Scenario& s, const std::string& status, const std::string& error);
/// Runs one scenario (planner first, for planner scenarios) and returns its row; never throws for a scenario's
/// own failure (status "failed", the message in "error"). A flow-network scenario runs SimGrid: once per process.
Row run_scenario(const Expansion& ex, const Scenario& s);

/// The CSV header and one CSV line (memory_bytes flattened as memory_bytes.weights, ...; null as an empty field).
std::string csv_header();
std::string csv_line(const Row& row);

}  // namespace dtsim::sim::sweep
