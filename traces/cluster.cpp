#include "traces/cluster.hpp"

#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <utility>

#include "traces/error.hpp"
#include "traces/json_util.hpp"
#include "traces/limits.hpp"
#include "traces/units.hpp"

namespace dtsim {
using json_util::get;
using json_util::get_or;

namespace {
constexpr long kMaxGpus = limits::kMaxGpus;
}  // namespace

int ClusterSpec::leaf_of(int gpu_id) const {
  if (inter.topology == "fat-tree") return node_of(gpu_id) / inter.nodes_per_leaf;
  if (inter.topology == "rail") return (node_of(gpu_id) / inter.nodes_per_leaf) * inter.nics_per_node + nic_of(gpu_id);
  return 0;
}

int ClusterSpec::num_leaves() const {
  if (inter.topology == "switch") return 1;
  const int groups =
      static_cast<int>((static_cast<std::int64_t>(num_nodes) + inter.nodes_per_leaf - 1) / inter.nodes_per_leaf);
  return inter.topology == "rail" ? groups * inter.nics_per_node : groups;
}

double GpuSpec::peak_flops(DType d) const {
  switch (d) {
    case DType::FP16: return peak_fp16_flops;
    case DType::BF16: return peak_bf16_flops;
    case DType::FP32: return peak_fp32_flops;
  }
  return 0;
}

void ClusterSpec::validate() const {
  const std::string ctx = "cluster '" + name + "'";
  if (num_nodes <= 0) throw ConfigError(ctx + ": num_nodes must be positive");
  if (gpus_per_node <= 0) throw ConfigError(ctx + ": gpus_per_node must be positive");
  if (static_cast<long long>(num_nodes) * gpus_per_node > kMaxGpus)
    throw ConfigError(ctx + ": " + std::to_string(num_nodes) + " x " + std::to_string(gpus_per_node) +
                      " GPUs is more than the supported " + std::to_string(kMaxGpus));
  const std::string gctx = ctx + ": gpu '" + gpu.name + "'";
  limits::check(gpu.peak_fp16_flops, limits::kPeakFlops, gctx, "peak_fp16_flops");
  limits::check(gpu.peak_bf16_flops, limits::kPeakFlops, gctx, "peak_bf16_flops");
  limits::check(gpu.peak_fp32_flops, limits::kPeakFlops, gctx, "peak_fp32_flops");
  limits::check_or_zero(gpu.peak_fp8_flops, limits::kPeakFlops, gctx, "peak_fp8_flops");
  limits::check_or_zero(gpu.peak_fp4_flops, limits::kPeakFlops, gctx, "peak_fp4_flops");
  limits::check(gpu.hbm_Bps, limits::kBandwidth, ctx, "gpu.hbm_Bps");
  limits::check(gpu.memory_bytes, limits::kDeviceMemory, ctx, "gpu.memory_bytes");
  limits::check_or_zero(gpu.board_power_w, limits::kBoardPower, ctx, "gpu.board_power_w");
  limits::check_or_zero(gpu.sm_count, limits::kSmCount, ctx, "gpu.sm_count");
  if (gpu.sm_count != std::floor(gpu.sm_count))
    throw ConfigError(ctx + ": gpu.sm_count must be a whole number, got " + limits::number(gpu.sm_count));
  limits::check(intra.bandwidth_Bps, limits::kBandwidth, ctx, "intra_node.bandwidth_Bps");
  limits::check(intra.latency_s, limits::kLatency, ctx, "intra_node.latency_s");
  if (intra.kind != "nvswitch")
    throw ConfigError(ctx + ": intra_node.kind '" + intra.kind + "' is not supported (known: nvswitch)");
  if (num_nodes > 1 || inter.nics_per_node > 0) {
    if (inter.nics_per_node <= 0) throw ConfigError(ctx + ": inter_node.nics_per_node must be positive");
    limits::check(inter.nic_bandwidth_Bps, limits::kBandwidth, ctx, "inter_node.nic_bandwidth_Bps");
    limits::check(inter.latency_s, limits::kLatency, ctx, "inter_node.latency_s");
    if (inter.nics_per_node > gpus_per_node || gpus_per_node % inter.nics_per_node != 0)
      throw ConfigError(ctx + ": gpus_per_node " + std::to_string(gpus_per_node) +
                        " must be a multiple of inter_node.nics_per_node " + std::to_string(inter.nics_per_node));
  }
  if (has_graph()) {
    const int nv = static_cast<int>(graph.vertices.size());
    std::vector<int> seen(total_gpus(), 0);
    for (const auto& v : graph.vertices) {
      if (v.gpu >= total_gpus())
        throw ConfigError(ctx + ": graph vertex '" + v.name + "' is GPU " + std::to_string(v.gpu) +
                          " but the cluster has " + std::to_string(total_gpus()) + " GPUs");
      if (v.gpu >= 0 && seen[v.gpu]++)
        throw ConfigError(ctx + ": GPU " + std::to_string(v.gpu) + " appears twice in the graph");
    }
    for (int g = 0; g < total_gpus(); ++g)
      if (!seen[g]) throw ConfigError(ctx + ": GPU " + std::to_string(g) + " is missing from the graph");
    for (std::size_t i = 0; i < graph.links.size(); ++i) {
      const auto& l = graph.links[i];
      if (l.a < 0 || l.b < 0 || l.a >= nv || l.b >= nv || l.a == l.b)
        throw ConfigError(ctx + ": graph link " + std::to_string(i) + " does not join two different vertices");
      limits::check(l.bandwidth_Bps, limits::kBandwidth, ctx, "graph link " + std::to_string(i) + " bandwidth_Bps");
      limits::check(l.latency_s, limits::kLatency, ctx, "graph link " + std::to_string(i) + " latency_s");
    }
  }
  if (inter.topology != "switch" && inter.topology != "fat-tree" && inter.topology != "rail")
    throw ConfigError(ctx + ": inter_node.topology '" + inter.topology +
                      "' is not known (known: switch, fat-tree, rail)");
  // Fat-tree and rail fields are refused on a topology that does not use them (one rule: no silent no-ops).
  if (inter.topology == "switch" && (inter.leaves_per_pod != 0 || inter.nodes_per_leaf != 0))
    throw ConfigError(ctx + ": inter_node." + (inter.leaves_per_pod != 0 ? "leaves_per_pod" : "nodes_per_leaf") +
                      " needs the fat-tree or rail topology (topology is 'switch')");
  if (inter.topology != "switch") {
    if (inter.nodes_per_leaf <= 0) throw ConfigError(ctx + ": inter_node.nodes_per_leaf must be positive");
    limits::check(inter.oversubscription, limits::kOversubscription, ctx, "inter_node.oversubscription");
    limits::check(inter.spine_latency_s, limits::kLatency, ctx, "inter_node.spine_latency_s");
    if (inter.leaves_per_pod < 0 || (inter.leaves_per_pod > 0 && inter.topology != "fat-tree"))
      throw ConfigError(ctx + ": inter_node.leaves_per_pod needs the fat-tree topology and must not be negative");
    limits::check(inter.pod_oversubscription, limits::kOversubscription, ctx, "inter_node.pod_oversubscription");
  }
}

namespace {
// Vendor datasheet peaks (dense, no sparsity). A100 SXM4 80GB: 312 TFLOP/s FP16/BF16 tensor, 19.5 FP32, no FP8,
// 2,039 GB/s HBM2e, 80 GiB. H100 SXM5 80GB: 989 TFLOP/s FP16/BF16 tensor, 1,979 FP8 tensor (the datasheet's 3,958 is
// with 2:4 sparsity), 67 FP32, 3,350 GB/s HBM3, 80 GiB (NVIDIA H100 Tensor Core GPU datasheet).
// Fields: name, FP16, BF16, FP32, FP8, FP4 (0 = no such tensor cores), HBM bandwidth, capacity, board power (TDP, W;
// 0 = not stated), streaming multiprocessors (0 = not stated). Board power from the same datasheets: A100 SXM4 400 W,
// A100 PCIe 300 W, V100 SXM2 300 W, H100 SXM5 and H200 SXM "up to 700 W", H800 SXM5 700 W (as the H100 SXM5 board: an
// estimate); the Blackwell parts below. Streaming multiprocessors: V100 80, A100 108, H100 SXM5 132 (NVIDIA's Volta,
// Ampere and Hopper architecture whitepapers); H200, H800, GH200 and the 96 GB H100 carry the H100 SXM5's GH100
// configuration (132; the H200 was seen with 132 by PyTorch on the lent machine,
// tests/data/h200/moe_summary_2026-12-04.json); B200 and GB200 148, B300 and GB300 160 (NVIDIA's "Inside NVIDIA
// Blackwell Ultra" blog, 2025: 160 SMs against Blackwell's 148; not measured).
const std::vector<GpuSpec>& gpus() {
  static const std::vector<GpuSpec> list = {
      {"a100-sxm4-80gb", 312e12, 312e12, 19.5e12, 0, 0, 2039e9, 80 * units::kGiB, 400, 108},
      {"h100-sxm5-80gb", 989e12, 989e12, 67e12, 1979e12, 0, 3350e9, 80 * units::kGiB, 700, 132},
      // H800 SXM5 80GB: the H100 SXM5's GH100 die and HBM3 for the Chinese market, with NVLink cut to 400 GB/s per GPU
      // (the dgx-h800 preset). 989 TFLOP/s dense BF16 and 3.4 TB/s HBM as MegaScale-MoE's Table 4 lists it (arXiv
      // 2505.11432); FP8 and FP32 as the H100 SXM5 (same silicon: an estimate, no H800 datasheet retrieved).
      {"h800-sxm5-80gb", 989e12, 989e12, 67e12, 1979e12, 0, 3350e9, 80 * units::kGiB, 700, 132},
      // V100 SXM2 32GB: 125 TFLOP/s FP16 tensor (no BF16: the FP16 figure is used), 15.7 FP32, 900 GB/s HBM2.
      {"v100-sxm2-32gb", 125e12, 125e12, 15.7e12, 0, 0, 900e9, 32 * units::kGiB, 300, 80},
      // A100 PCIe 80GB: same tensor-core peaks as the SXM part, 1,935 GB/s HBM2e.
      {"a100-pcie-80gb", 312e12, 312e12, 19.5e12, 0, 0, 1935e9, 80 * units::kGiB, 300, 108},
      // B200 (SXM, HGX/DGX B200 at 1,000 W): 2,250 TFLOP/s dense FP16/BF16 tensor (the 4,500 figure is with 2:4
      // sparsity), 80 TFLOP/s FP32, 8 TB/s HBM3e, 180 GB. Sources: NVIDIA DGX B200 datasheet / product page
      // (nvidia.com/en-us/data-center/dgx-b200: 8 GPUs, 1,440 GB HBM3e in total = 180 GB each, 64 TB/s in total =
      // 8 TB/s each, 72 PFLOP/s FP8 training with sparsity = 4,500 TFLOP/s dense FP8 per GPU, 144 PFLOP/s FP4 inference
      // with sparsity = 9,000 TFLOP/s dense FP4 per GPU); NVIDIA Blackwell architecture technical brief as tabulated by
      // glennklockwood.com/garden/processors/B200 (HGX B200 at 1,000 W: BF16 2,250 dense / 4,500 sparse, FP32 80);
      // MLCommons inference v6.0 system description "NVIDIA B200-SXM-180GB" (Nebius). The 180 GB are stored as 180 GiB,
      // as the other presets store their "80GB" (the package carries 192 GB of HBM3e, of which the datasheet lists 180
      // GB): the usable capacity is an estimate. No B200 measurement calibrates these.
      {"b200-sxm-180gb", 2250e12, 2250e12, 80e12, 4500e12, 9000e12, 8000e9, 180 * units::kGiB, 1000, 148},
      // H200 SXM 141GB (Hopper, the H100's GH100 die with HBM3e): 989 TFLOP/s dense FP16/BF16 tensor and 1,979 dense
      // FP8 (the NVIDIA H200 product page, nvidia.com/en-us/data-center/h200, lists 1,979 and 3,958 with 2:4 sparsity;
      // reproduced e.g. by lzwjava.github.io/nvidia-h200-gpu-specs-en: "FP8 Tensor Core 3,958 TFLOPS*", "*include
      // sparsity"), no FP4, 141 GB HBM3e at 4.8 TB/s (same pages; MLCommons inference v4.1 system description
      // "NVIDIA H200-SXM-141GB", 141 GB HBM3e, 18x 4th Gen NVLink 900 GB/s). FP32 67 TFLOP/s as on the H100 SXM
      // (same silicon and SM count; not on the pages retrieved here: an estimate). The 141 GB are stored as
      // 141 GiB, as the other presets store their "80GB".
      {"h200-sxm-141gb", 989e12, 989e12, 67e12, 1979e12, 0, 4800e9, 141 * units::kGiB, 700, 132},
      // B300 (Blackwell Ultra, HGX/DGX B300 SXM): per GPU = the 8-GPU HGX B300 figures / 8. NVIDIA HGX platform table
      // (nvidia.com/en-us/data-center/hgx, as reproduced by fibermall.com/blog/?p=17161): FP16/BF16 36 PFLOP/s and
      // FP8 72 PFLOP/s with sparsity = 2,250 and 4,500 TFLOP/s dense per GPU; FP32 600 TFLOP/s = 75 per GPU; "up to
      // 2.3 TB" of HBM3e (8 x 288 GB). Dense FP4: Blackwell Ultra's FP4 sparsity gain is 4/3, not 2 (GB300
      // NVL72: 1,440 PFLOP/s sparse, 1,080 dense), so DGX B300's 144 PFLOP/s sparse FP4
      // (aiwiki.ai/wiki/nvidia_dgx_b300) gives 18 sparse and 13.5 dense per GPU;
      // glennklockwood.com/garden/processors/B300 tabulates 13,125 dense / 18,000 sparse and
      // verda.com/blog/gb300-nvl72-architecture 14 PFLOP/s dense: 13.5 is an estimate within them. HBM3e 8 TB/s
      // (glennklockwood.com B300: "8 TB/s (max)"; acecloud.ai/blog/nvidia-hgx-b300: "up to 8 TB/s per GPU"; verda.com
      // lists 7.7). Capacity: 270 GB usable of the 288 GB package (verda.com per-GPU table; as b200-sxm-180gb keeps the
      // B200's 180 of 192 GB), stored as 270 GiB: an estimate of the usable capacity. Board power 1,100 W: an
      // estimate between the sources: glennklockwood.com/garden/processors/B300 ("1400 W maximum") and kad8.com's
      // B300-vs-B200 table (1,400 W vs 1,000 W) give the GB300 figure, while NVIDIA's DGX B300 system power (14.5 kW
      // vs 14.3 kW for DGX B200, docs.nvidia.com as quoted by thedailyscout.com "NVIDIA GPUs push 1,200W") leaves the
      // HGX part little above the B200's 1,000 W.
      {"b300", 2250e12, 2250e12, 75e12, 4500e12, 13500e12, 8000e9, 270 * units::kGiB, 1100, 160},
      // GB200 (the Blackwell GPU of a GB200 NVL72 rack, 1,200 W): per GPU = the NVL72 rack figures / 72. NVIDIA GB200
      // NVL72 product page (nvidia.com/en-us/data-center/gb200-nvl72): FP4 1,440 PFLOP/s, FP8/FP6 720, FP16/BF16 360
      // (all with sparsity) = 10,000 / 5,000 / 2,500 TFLOP/s dense per GPU; FP32 5,760 TFLOP/s = 80 per GPU; up to
      // 13.4 TB HBM3e at 576 TB/s = 186 GB at 8 TB/s per GPU. Rack figures as reproduced by aiwiki.ai/wiki/
      // nvidia_gb200_nvl72 (1,440 PF FP4, 720 PF FP8, 13.4 TB, 130 TB/s NVLink); per-superchip (2 GPUs) 40 PF sparse /
      // 20 dense FP4, 160 TFLOP/s FP32 at hmc-tech.com/gpus/nvidia-b200-vs-nvidia-gb200; 2,500 dense FP16/BF16 and
      // 10,000 dense FP4 in glennklockwood.com/garden/processors/B200 (GB200 variant at 1,200 W). 186 GB per GPU is
      // also what MLCommons inference v6.1 lists ("NVIDIA GB200", 186 GB HBM3e; Crusoe GB200-NVL72 system).
      // Stored as 186 GiB.
      {"gb200", 2500e12, 2500e12, 80e12, 5000e12, 10000e12, 8000e9, 186 * units::kGiB, 1200, 148},
      // GB300 (the Blackwell Ultra GPU of a GB300 NVL72 rack, 1,400 W): per GPU = the NVL72 rack figures / 72. NVIDIA
      // GB300 NVL72 product page (nvidia.com/en-us/data-center/gb300-nvl72), as reproduced by glennklockwood.com/
      // garden/processors/B300 ("1.1 EF dense FP4", "360 PF FP8 for training", "20 TB HBM at 576 TB/s", "72
      // ConnectX-8 NICs") and verda.com/blog/gb300-nvl72-architecture (dense rack: FP4 1,080, FP8 360, FP16/BF16 180
      // PFLOP/s; per GPU 15 / 5 / 2.5 PFLOP/s, 279 GB, 8 TB/s): 15,000 dense FP4, 5,000 dense FP8, 2,500 dense
      // FP16/BF16 TFLOP/s, 8 TB/s, 279 GB (verda's per-GPU figure; 20 TB / 72 = 278; stored as 279 GiB). FP32: 6
      // PFLOP/s per rack / 72 = 83 TFLOP/s (verda's rack table halves it to 3 as if it were a sparse figure; its
      // per-GPU table gives 80): an estimate.
      {"gb300", 2500e12, 2500e12, 6e15 / 72, 5000e12, 15000e12, 8000e9, 279 * units::kGiB, 1400, 160},
      // GH200 (the Hopper GPU of a GH200 Grace Hopper Superchip, 96 GB HBM3 part; the GPU of CSCS Alps' Clariden
      // nodes): the H100's GH100 die, so the H100 SXM's dense tensor peaks, 989 TFLOP/s FP16/BF16 and 1,979 FP8 (the
      // NVIDIA GH200 datasheet lists them with 2:4 sparsity, 1,979 / 3,958), no FP4; 96 GB HBM3 at 4 TB/s (NVIDIA GH200
      // datasheet / product page nvidia.com/en-us/data-center/grace-hopper-superchip, as reproduced by naddod.com/blog/
      // nvidia-dgx-gh200-ai-supercomputer: "96GB of HBM3 with a bandwidth of 4TB/s", later 144 GB HBM3e at 4.9 TB/s;
      // spheron.network/blog/nvidia-gh200-guide: "96 GB of HBM3 on the GPU side"; enterpriseai.news 2023-05-29: "H100
      // GPUs, each with 96GB HBM3 memory for this variant"). FP32 67 TFLOP/s as on the H100 SXM (same silicon; not on
      // the pages retrieved here: an estimate; the module's higher power budget may clock higher than the 700 W H100,
      // not modelled). Capacity: 102,625,181,696 bytes = 97,871 MiB, what nvidia-smi reports for the 96 GB part and
      // what SAILOR's cluster config lists for its "GH-96" GPU (basic_cluster_config.json mem_per_gpu).
      // Board power not stated (0): the GH200 module's 450-1,000 W budget is shared by the Grace CPU, its LPDDR5X and
      // the GPU, and the share a job gets is not published.
      {"gh200", 989e12, 989e12, 67e12, 1979e12, 0, 4000e9, 102625181696.0, 0, 132},
      // H100 96GB HBM2e at 500 W (Meta's Grand Teton hosts, the GPU of the torchtitan H100 benchmark tables): the
      // torchtitan page (benchmarks/llama3_h100_202412_torchtitan.md) gives "96GB HBM2e" at 2.4 TB/s and a "default
      // 500W power limit", and notes its peak lies between the SXM's and the NVL's. Tensor peaks as the H100 SXM5 at
      // its datasheet clock (same GH100 configuration assumed: an estimate); what the 500 W limit leaves of them is
      // the device model's (traces/device_model.hpp), not a different peak. FP32 as the H100 SXM5. Stored as 96 GiB.
      {"h100-96gb-500w", 989e12, 989e12, 67e12, 1979e12, 0, 2400e9, 96 * units::kGiB, 500, 132},
  };
  return list;
}

// Other names gpu_preset() accepts for a preset; not listed by gpu_preset_names() (one line per GPU in `dtsim
// presets`). The spec keeps the preset's own name, so the calibration and every output name the preset.
const std::vector<std::pair<const char*, const char*>>& gpu_aliases() {
  static const std::vector<std::pair<const char*, const char*>> list = {{"b200", "b200-sxm-180gb"}};
  return list;
}

struct ClusterPreset {
  const char* name;
  const char* gpu;
  int gpus_per_node;
  double nvlink_Bps;  // per GPU per direction
  double nvlink_latency_s;
  int nics;
  double nic_Bps;
  double ib_latency_s;
};
// DGX A100: NVLink3 600 GB/s bidirectional per GPU through NVSwitch (300 GB/s each way), 8 x HDR 200 Gb/s.
// DGX H100: NVLink4 900 GB/s bidirectional (450 GB/s each way), 8 x NDR 400 Gb/s.
// DGX B200: NVLink5 1.8 TB/s bidirectional per GPU (900 GB/s each way; two NVSwitch chips, 14.4 TB/s in total for
// 8 GPUs, DGX B200 datasheet), 8 x ConnectX-7 400 Gb/s (DGX B200 datasheet; MLCommons Nebius B200 system: "8x
// ConnectX-7 IB NDR 400Gb/s"). Latencies as DGX H100 (estimates).
// DGX H200: 8 x H200 (1,128 GB in total), NVLink4 900 GB/s bidirectional per GPU (450 GB/s each way; MLCommons
// inference v4.1 "H200-SXM-141GBx8": "18x 4th Gen NVLink, 900GB/s"), 8 x ConnectX-7 400 Gb/s for the compute fabric
// as DGX H100 (NVIDIA DGX H200 datasheet; the MLCommons H200 system lists "10x 400Gbe Infiniband", the other two
// being the storage/in-band ports of the DGX design).
// DGX B300: 8 x B300, NVLink5 1.8 TB/s bidirectional per GPU (900 GB/s each way; 14.4 TB/s in total), 8 x
// ConnectX-8 800 Gb/s, one per GPU (NVIDIA HGX/DGX B300: "networking bandwidth 1.6 TB/s" for 8 GPUs, as reproduced
// by fibermall.com/blog/?p=17161; acecloud.ai/blog/nvidia-hgx-b300: "8x ConnectX-8 SuperNICs", "up to 800 Gb/s per
// GPU"; rillor.com/insights/connectx-7-vs-connectx-8-and-nvlink5).
// GB200 NVL72 / GB300 NVL72: the whole 72-GPU NVLink domain is one "node" behind one non-blocking NVSwitch fabric (9
// NVLink switch trays, 130 TB/s = 72 x 1.8 TB/s; every GPU one switch hop from every other), NVLink5 900 GB/s per GPU
// per direction. Scale-out: one NIC per GPU, 72 per rack: ConnectX-7 400 Gb/s on GB200 (18 compute trays of 4 GPUs,
// 4 ConnectX-7 per tray: docs.nvidia.com/multi-node-nvlink-systems/multi-node-tuning-guide/system.html; MLCommons
// inference v6.1 Crusoe GB200-NVL72: 4 BlueField-3 [ConnectX-7] per 4-GPU node), ConnectX-8 800 Gb/s on GB300 (4
// ConnectX-8 per 4-GPU compute tray: docs.nvidia.com/enterprise-reference-architectures/nvl72-ai-factory/latest/
// components.html; glennklockwood.com: "72 ConnectX-8 NICs"). NVLink latency through the switch trays as inside a
// DGX (estimate). Use them in multiples of 72 GPUs ("gb200-nvl72:576" = 8 racks) or with fewer GPUs per rack
// ("gb200-nvl72:576@64" = 9 racks of 64; a count that is a multiple of 64 but not of 72 takes 64 per rack, any
// other multiple of 4 the fewest racks that share it evenly).
// Clariden (CSCS Alps, HPE Cray EX254n GH200 blades; alias alps-gh200): 4 GH200 per node, "four Grace-Hopper modules
// and four corresponding network interface cards (NICs)" per node on HPE Slingshot 11 (CSCS documentation,
// docs.cscs.ch/alps/hardware, "NVIDIA GH200 GPU Nodes"; eth-cscs/cscs-docs docs/alps/hardware.md). Inside a node the
// four GPUs are joined all-to-all by NVLink4, no NVSwitch: each GPU's 18 links (25 GB/s per direction each) split 6 per
// peer = 150 GB/s per pair per direction, 450 GB/s per GPU. Modelled as the "nvswitch" fabric at the GPU's aggregate
// 450 GB/s per direction: exact for traffic that spreads over all three peers (NCCL's ring channels over the mesh,
// all-to-all), optimistic by up to 3x for one pair talking alone (a single point-to-point transfer gets 150 GB/s
// on the real mesh); the explicit-graph alternative (as dgx1-v100) would under-rate NCCL's multi-channel rings instead.
// Between nodes: one Slingshot-11 (Cassini) NIC per GPU at 200 Gb/s per direction (Slingshot 11's line rate; the CSCS
// page lists the NIC count, not the speed). Slingshot's dragonfly is modelled as a full-bisection switch (the default
// "switch" fabric; a fat-tree can be named): global-link tapering and adaptive routing are not modelled. Latencies as
// DGX H100 (estimates).
// Latencies are one-way wire+switch estimates (NVLink ~1 us, InfiniBand ~2 us through one switch); software
// overheads of collectives come from the calibration file, not from here.
const std::vector<ClusterPreset>& cluster_presets() {
  static const std::vector<ClusterPreset> list = {
      {"dgx-a100", "a100-sxm4-80gb", 8, 300e9, 1e-6, 8, 200 * units::kGbit_Bps, 2e-6},
      {"dgx-h100", "h100-sxm5-80gb", 8, 450e9, 1e-6, 8, 400 * units::kGbit_Bps, 2e-6},
      {"dgx-h200", "h200-sxm-141gb", 8, 450e9, 1e-6, 8, 400 * units::kGbit_Bps, 2e-6},
      // HGX H800: NVLink 400 GB/s per GPU (MegaScale-MoE Table 4) = 200 GB/s per direction; the DeepSeek-V3 report
      // (arXiv 2412.19437, sec. 3.2.2) measures 160 GB/s over it and 50 GB/s (400 Gb/s) of InfiniBand per GPU.
      {"dgx-h800", "h800-sxm5-80gb", 8, 200e9, 1e-6, 8, 400 * units::kGbit_Bps, 2e-6},
      {"dgx-b200", "b200-sxm-180gb", 8, 900e9, 1e-6, 8, 400 * units::kGbit_Bps, 2e-6},
      {"dgx-b300", "b300", 8, 900e9, 1e-6, 8, 800 * units::kGbit_Bps, 2e-6},
      {"gb200-nvl72", "gb200", 72, 900e9, 1e-6, 72, 400 * units::kGbit_Bps, 2e-6},
      {"gb300-nvl72", "gb300", 72, 900e9, 1e-6, 72, 800 * units::kGbit_Bps, 2e-6},
      {"clariden", "gh200", 4, 450e9, 1e-6, 4, 200 * units::kGbit_Bps, 2e-6},
      // Meta Grand Teton with the 500 W H100 96GB (the torchtitan H100 tables): "8 GPUs per host fully connected
      // with NVLink" and a "400 Gbps" RDMA backend per GPU (torchtitan benchmarks/llama3_h100_202412_torchtitan.md);
      // NVLink4 at 450 GB/s per direction as DGX H100 (an estimate: the page gives no NVLink figure).
      {"grand-teton-h100", "h100-96gb-500w", 8, 450e9, 1e-6, 8, 400 * units::kGbit_Bps, 2e-6},
      {"dgx1-v100", "v100-sxm2-32gb", 8, 25e9, 1e-6, 4, 100 * units::kGbit_Bps, 2e-6},  // graph built below
      {"pcie-a100", "a100-pcie-80gb", 8, 32e9, 2e-6, 4, 200 * units::kGbit_Bps, 2e-6},  // graph built below
  };
  return list;
}

// The host side of each preset's GPUs (HostSpec), from the systems' specification sheets; per GPU = the node's
// figures / its GPUs. Host-memory bandwidth is the DIMM peak (channels x transfer rate x 8 bytes; sustained STREAM
// bandwidth is lower). PCIe Gen4 x16 32 GB/s and Gen5 x16 64 GB/s per direction; NVLink-C2C 900 GB/s bidirectional
// (450 each way; Transformer Engine's CPU-offloading guide, nvidia.github.io/TransformerEngine ... cpu_offloading).
//  DGX A100 (80 GB): 2 x EPYC 7742, 8 x DDR4-3200 each (409.6 GB/s), 2 TB, PCIe Gen4 (DGX A100 datasheet).
//  DGX H100 / H200 / H800 HGX: 2 x Xeon 8480C, 8 x DDR5-4800 each (614.4 GB/s), 2 TB, PCIe Gen5 (DGX H100/H200
//    datasheets; HGX H800 hosts assumed alike). Grand Teton: as DGX H100 (an estimate).
//  DGX B200: 2 x Xeon 8570, 8 x DDR5-5600 each (716.8 GB/s), 2 TB (4 TB optional), PCIe Gen5 (DGX B200 datasheet).
//  DGX B300: 2 x Xeon 6776P, 2 TB; DDR5-6400 x 8 per socket (819.2 GB/s) and PCIe Gen5 are estimates.
//  GB200 / GB300 NVL72: one Grace (480 GB LPDDR5X, 512 GB/s) per two GPUs, each GPU on NVLink-C2C (NVIDIA GB200 /
//    GB300 NVL72 product pages; TE's guide: "480 GB LPDDR5X memory and two Blackwell GPUs").
//  GH200 (Alps / Clariden): one Grace per GPU, 128 GB LPDDR5X at 500 GB/s (GH200 datasheet, Alps nodes of 4 x 128
//    GB), NVLink-C2C.
//  DGX-1 V100: 2 x Xeon E5-2698 v4, 4 x DDR4-2400 each (153.6 GB/s), 512 GB, PCIe Gen3 x16 16 GB/s.
//  PCIe A100 servers: as DGX A100's host, PCIe Gen4 (an estimate).
HostSpec host_of_preset(const std::string& preset) {
  struct Host {
    const char* preset;
    double link_Bps, node_memory_bytes, node_memory_Bps;
    int node_gpus;
  };
  static const Host list[] = {
      {"dgx-a100", 32e9, 2048 * units::kGiB, 409.6e9, 8},
      {"dgx-h100", 64e9, 2048 * units::kGiB, 614.4e9, 8},
      {"dgx-h200", 64e9, 2048 * units::kGiB, 614.4e9, 8},
      {"dgx-h800", 64e9, 2048 * units::kGiB, 614.4e9, 8},
      {"grand-teton-h100", 64e9, 2048 * units::kGiB, 614.4e9, 8},
      {"dgx-b200", 64e9, 2048 * units::kGiB, 716.8e9, 8},
      {"dgx-b300", 64e9, 2048 * units::kGiB, 819.2e9, 8},
      {"gb200-nvl72", 450e9, 480e9, 512e9, 2},
      {"gb300-nvl72", 450e9, 480e9, 512e9, 2},
      {"clariden", 450e9, 128e9, 500e9, 1},
      {"dgx1-v100", 16e9, 512 * units::kGiB, 153.6e9, 8},
      {"pcie-a100", 32e9, 2048 * units::kGiB, 409.6e9, 8},
  };
  for (const Host& h : list)
    if (preset == h.preset) return {h.link_Bps, h.node_memory_bytes / h.node_gpus, h.node_memory_Bps / h.node_gpus};
  return {};
}

// Other names load_cluster() accepts for a cluster preset (not listed by cluster_preset_names()).
const std::vector<std::pair<const char*, const char*>>& cluster_aliases() {
  static const std::vector<std::pair<const char*, const char*>> list = {{"alps-gh200", "clariden"}};
  return list;
}

template <typename List, typename Fn>
std::string names_of(const List& list, Fn fn) {
  std::string s;
  for (const auto& e : list) s += (s.empty() ? "" : ", ") + std::string(fn(e));
  return s;
}
}  // namespace

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> v;
  for (const auto& g : gpus()) v.push_back(g.name);
  return v;
}

GpuSpec gpu_preset(const std::string& name) {
  for (const auto& g : gpus())
    if (g.name == name) return g;
  for (const auto& [alias, preset] : gpu_aliases())
    if (name == alias) return gpu_preset(preset);
  throw ConfigError(
      "unknown gpu preset '" + name + "' (known: " + names_of(gpus(), [](const GpuSpec& g) { return g.name; }) +
      "; aliases: " + names_of(gpu_aliases(), [](const auto& a) { return std::string(a.first) + " = " + a.second; }) +
      ")");
}

namespace {
// PCIe part of a two-socket server: four switches (GPUs 2s and 2s+1 and NIC s on switch s), switches 0-1 on
// CPU 0 and 2-3 on CPU 1, the sockets joined by UPI/QPI; every NIC on the cluster's InfiniBand switch.
void add_pcie_tree(TopologyGraph& g, const std::string& prefix, const int gpu[8], int ib, double pcie_Bps,
                   double socket_Bps, double nic_Bps) {
  auto vertex = [&](const std::string& name) {
    g.vertices.push_back({name, -1});
    return static_cast<int>(g.vertices.size() - 1);
  };
  auto link = [&](int a, int b, double bw, double lat, const char* kind) { g.links.push_back({a, b, bw, lat, kind}); };
  const int cpu[2] = {vertex(prefix + "cpu0"), vertex(prefix + "cpu1")};
  link(cpu[0], cpu[1], socket_Bps, 1e-6, "upi");
  for (int s = 0; s < 4; ++s) {
    const int sw = vertex(prefix + "pcie" + std::to_string(s)), nic = vertex(prefix + "nic" + std::to_string(s));
    link(sw, cpu[s / 2], pcie_Bps, 1e-6, "pcie");
    const std::ptrdiff_t pair = 2 * static_cast<std::ptrdiff_t>(s);
    link(gpu[pair], sw, pcie_Bps, 0.5e-6, "pcie");
    link(gpu[pair + 1], sw, pcie_Bps, 0.5e-6, "pcie");
    link(nic, sw, pcie_Bps, 0.5e-6, "pcie");
    link(nic, ib, nic_Bps, 1e-6, "ib");
  }
}

std::string node_prefix(int n) {
  std::string p = "n";
  p += std::to_string(n);
  p += '.';
  return p;
}
}  // namespace

ClusterSpec dgx1_v100(int nodes) {
  ClusterSpec c;
  c.name = "dgx1-v100:" + std::to_string(8 * nodes);
  c.gpu = gpu_preset("v100-sxm2-32gb");
  c.num_nodes = nodes;
  c.gpus_per_node = 8;
  // Defaults used for collective latency terms: NVLink2 and EDR InfiniBand.
  c.intra = {"nvswitch", 25e9, 1e-6};
  c.inter.nics_per_node = 4;
  c.inter.nic_bandwidth_Bps = 100 * units::kGbit_Bps;
  c.inter.latency_s = 2e-6;
  auto& g = c.graph;
  g.vertices.push_back({"ib-switch", -1});
  const int ib = 0;
  // Hybrid cube-mesh, after NVIDIA's DGX-1 V100 system architecture paper: six NVLink2 links per GPU (25 GB/s
  // per direction each); two fully connected quads {0..3}, {4..7} joined GPU i <-> i+4, with doubled links on
  // 0-3, 1-2 (within quads) and on the i <-> i+4 pairs. The pair multiplicities are our reading of the
  // figure; check against `nvidia-smi topo -m` on a real DGX-1.
  const int nvlinks[][3] = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {1, 2, 2}, {1, 3, 1}, {2, 3, 1}, {4, 5, 1}, {4, 6, 1},
                            {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 1}, {0, 4, 2}, {1, 5, 2}, {2, 6, 2}, {3, 7, 2}};
  for (int n = 0; n < nodes; ++n) {
    const std::string p = node_prefix(n);
    int gpu[8];
    for (int i = 0; i < 8; ++i) {
      g.vertices.push_back({p + "gpu" + std::to_string(i), 8 * n + i});
      gpu[i] = static_cast<int>(g.vertices.size() - 1);
    }
    for (const auto& l : nvlinks) g.links.push_back({gpu[l[0]], gpu[l[1]], l[2] * 25e9, 1e-6, "nvlink"});
    // PCIe gen3 x16 (~16 GB/s per direction), QPI ~20 GB/s, one EDR NIC per PCIe switch.
    add_pcie_tree(g, p, gpu, ib, 16e9, 20e9, 100 * units::kGbit_Bps);
  }
  return c;
}

ClusterSpec pcie_a100(int nodes) {
  ClusterSpec c;
  c.name = "pcie-a100:" + std::to_string(8 * nodes);
  c.gpu = gpu_preset("a100-pcie-80gb");
  c.num_nodes = nodes;
  c.gpus_per_node = 8;
  c.intra = {"nvswitch", 32e9, 2e-6};  // defaults for latency terms only: PCIe gen4
  c.inter.nics_per_node = 4;
  c.inter.nic_bandwidth_Bps = 200 * units::kGbit_Bps;
  c.inter.latency_s = 2e-6;
  auto& g = c.graph;
  g.vertices.push_back({"ib-switch", -1});
  for (int n = 0; n < nodes; ++n) {
    const std::string p = node_prefix(n);
    int gpu[8];
    for (int i = 0; i < 8; ++i) {
      g.vertices.push_back({p + "gpu" + std::to_string(i), 8 * n + i});
      gpu[i] = static_cast<int>(g.vertices.size() - 1);
    }
    // PCIe gen4 x16 (~32 GB/s per direction), UPI ~40 GB/s (vendor figures, rounded), one HDR NIC per switch.
    add_pcie_tree(g, p, gpu, 0, 32e9, 40e9, 200 * units::kGbit_Bps);
  }
  return c;
}

std::vector<std::string> cluster_preset_names() {
  std::vector<std::string> v;
  for (const auto& c : cluster_presets()) v.emplace_back(c.name);
  return v;
}

ClusterSpec load_cluster(const std::string& spec) {
  bool is_file = spec.find('/') != std::string::npos || (spec.size() > 5 && spec.substr(spec.size() - 5) == ".json");
  ClusterSpec c;
  if (is_file) {
    c = cluster_from_json(json_util::read_file(spec), "cluster file '" + spec + "'");
  } else {
    std::string base = spec;
    long n_gpus = -1;
    std::vector<std::string> parts;
    {
      std::string item;
      std::stringstream ss(spec);
      while (std::getline(ss, item, ':')) parts.push_back(item);
      if (!spec.empty() && spec.back() == ':') parts.emplace_back();  // "dgx-a100:" has an empty GPU count
    }
    // NAME:GPUS[...]:nics:N:GBPS: the nodes' scale-out NICs as the cluster has them (N per node, GBPS Gb/s each per
    // direction) in place of the preset's, e.g. BLOOM's Jean Zay nodes (8 A100, 4 Omni-Path 100 Gb/s links):
    // dgx-a100:384:nics:4:100. It may precede a fabric (dgx-a100:1024:nics:4:100:fat-tree:16:2).
    int nics_override = 0;
    double nic_gbps_override = 0;
    if (parts.size() > 2 && parts[2] == "nics") {
      if (parts.size() < 5)
        throw ConfigError("cluster '" + spec + "': nics needs NICS_PER_NODE:GBPS (e.g. nics:4:100)");
      char* end = nullptr;
      const long n = std::strtol(parts[3].c_str(), &end, 10);
      if (parts[3].empty() || *end != '\0' || n < 1 || n > 1024)
        throw ConfigError("cluster '" + spec + "': NICs per node '" + parts[3] + "' is not an integer from 1 to 1024");
      const double g = std::strtod(parts[4].c_str(), &end);
      if (parts[4].empty() || *end != '\0' || !(g > 0 && g <= 1e5))
        throw ConfigError("cluster '" + spec + "': NIC rate '" + parts[4] + "' Gb/s is not a number in (0, 100000]");
      nics_override = static_cast<int>(n);
      nic_gbps_override = g;
      parts.erase(parts.begin() + 2, parts.begin() + 5);
    }
    if (parts.size() > 2) {  // NAME:GPUS:FABRIC:ARGS...
      const std::string& fabric = parts[2];
      auto num = [&](std::size_t i, const char* what) {
        if (i >= parts.size()) throw ConfigError("cluster '" + spec + "': " + fabric + " needs " + what);
        char* end = nullptr;
        double v = std::strtod(parts[i].c_str(), &end);
        if (parts[i].empty() || *end != '\0')
          throw ConfigError("cluster '" + spec + "': " + what + " '" + parts[i] + "' is not a number");
        return v;
      };
      auto count = [&](std::size_t i, const char* what) {  // an int field: no cast of 1e20 or nan to int
        const double v = num(i, what);
        if (!(v >= 0 && v <= kMaxGpus) || v != std::floor(v))
          throw ConfigError("cluster '" + spec + "': " + what + " '" + parts[i] + "' is not an integer from 0 to " +
                            std::to_string(kMaxGpus));
        return static_cast<int>(v);
      };
      if (fabric != "fat-tree" && fabric != "rail" && fabric != "switch")
        throw ConfigError("cluster '" + spec + "': unknown fabric '" + fabric +
                          "' (known: switch, fat-tree:NODES_PER_LEAF:OVERSUB[:LEAVES_PER_POD:POD_OVERSUB], "
                          "rail:NODES_PER_RAIL:OVERSUB)");
      c.inter.topology = fabric;
      if (fabric != "switch") {
        c.inter.nodes_per_leaf = count(3, "nodes per leaf");
        c.inter.oversubscription = parts.size() > 4 ? num(4, "oversubscription") : 1.0;
        if (fabric == "fat-tree" && parts.size() > 5) {  // three levels: ...:LEAVES_PER_POD[:POD_OVERSUB]
          c.inter.leaves_per_pod = count(5, "leaves per pod");
          c.inter.pod_oversubscription = parts.size() > 6 ? num(6, "pod oversubscription") : 1.0;
          if (parts.size() > 7) throw ConfigError("cluster '" + spec + "': too many fields");
        } else if (parts.size() > 5) {
          throw ConfigError("cluster '" + spec + "': too many fields");
        }
      } else if (parts.size() > 3) {
        throw ConfigError("cluster '" + spec + "': the switch fabric takes no arguments");
      }
    }
    long per_node = -1;  // NAME:GPUS@PER_NODE: the job uses PER_NODE GPUs of each node (NVL72 racks: 64 of 72)
    if (parts.size() > 1) {
      base = parts[0];
      std::string count = parts[1];
      if (const auto at = count.find('@'); at != std::string::npos) {
        const std::string pn = count.substr(at + 1);
        count.resize(at);
        char* end = nullptr;
        per_node = std::strtol(pn.c_str(), &end, 10);
        if (pn.empty() || *end != '\0' || per_node <= 0 || per_node > kMaxGpus)
          throw ConfigError("cluster '" + spec + "': GPUs per node '" + pn +
                            "' after '@' is not an integer from 1 to " + std::to_string(kMaxGpus));
      }
      char* end = nullptr;
      n_gpus = std::strtol(count.c_str(), &end, 10);
      if (count.empty() || *end != '\0' || n_gpus <= 0 || n_gpus > kMaxGpus)
        throw ConfigError("cluster '" + spec + "': GPU count '" + count + "' is not an integer from 1 to " +
                          std::to_string(kMaxGpus));
    }
    for (const auto& [alias, preset] : cluster_aliases())
      if (base == alias) base = preset;
    const ClusterPreset* p = nullptr;
    for (const auto& cp : cluster_presets())
      if (base == cp.name) p = &cp;
    if (!p)
      throw ConfigError(
          "unknown cluster preset '" + base +
          "' (known: " + names_of(cluster_presets(), [](const ClusterPreset& x) { return x.name; }) + "; aliases: " +
          names_of(cluster_aliases(), [](const auto& a) { return std::string(a.first) + " = " + a.second; }) +
          "; use NAME:GPUS, e.g. dgx-a100:64)");
    if (n_gpus < 0) n_gpus = p->gpus_per_node;
    c.name = spec;
    c.gpu = gpu_preset(p->gpu);
    if (per_node > p->gpus_per_node)
      throw ConfigError("cluster '" + spec + "': " + std::to_string(per_node) + " GPUs per node, but a " + base +
                        " node has " + std::to_string(p->gpus_per_node));
    // NVL72 racks not used whole: NVIDIA's training recipes run 64 of each rack's 72 GPUs (the rest spares), so a
    // count that is a multiple of 64 but not of 72 takes 64 per rack unless '@' says otherwise.
    // Any other multiple of 4 (a compute tray holds 4 GPUs) takes the fewest racks that share it evenly -- the
    // largest multiple of 4 from 36 to 68 that divides it (136 = 2 racks of 68, 200 = 5 of 40), so a job never spans
    // more than twice the racks it needs; other counts are refused and '@' states the split (gb200-nvl72:152@8).
    if (per_node < 0 && p->gpus_per_node == 72 && n_gpus > 72 && n_gpus % 72 != 0) {
      if (n_gpus % 64 == 0) {
        per_node = 64;
      } else {
        if (n_gpus % 4 != 0)
          throw ConfigError("cluster '" + spec + "': " + std::to_string(n_gpus) + " GPUs on " + base +
                            " racks is not a multiple of 4 (a compute tray holds 4 GPUs)");
        for (long d = 68; d >= 36 && per_node < 0; d -= 4)
          if (n_gpus % d == 0) per_node = d;
        if (per_node < 0)
          throw ConfigError("cluster '" + spec + "': " + std::to_string(n_gpus) + " GPUs on " + base +
                            " racks does not split evenly into racks of 36 to 72 GPUs; say the GPUs per rack with "
                            "NAME:GPUS@PER_NODE (e.g. " +
                            base + ":" + std::to_string(n_gpus) + "@" + std::to_string(n_gpus % 8 == 0 ? 8 : 4) + ")");
      }
    }
    const long node_gpus = per_node > 0 ? per_node : p->gpus_per_node;
    if (n_gpus <= node_gpus) {
      c.num_nodes = 1;
      c.gpus_per_node = static_cast<int>(n_gpus);
    } else {
      if (n_gpus % node_gpus != 0)
        throw ConfigError("cluster '" + spec + "': " + std::to_string(n_gpus) + " GPUs is not a whole number of " +
                          std::to_string(node_gpus) + "-GPU nodes (NAME:GPUS@PER_NODE uses fewer GPUs per node)");
      c.num_nodes = static_cast<int>(n_gpus / node_gpus);
      c.gpus_per_node = static_cast<int>(node_gpus);
    }
    if (nics_override > 0 && (nics_override > p->gpus_per_node || p->gpus_per_node % nics_override != 0))
      throw ConfigError("cluster '" + spec + "': " + std::to_string(nics_override) + " NICs per node do not divide a " +
                        base + " node's " + std::to_string(p->gpus_per_node) + " GPUs evenly");
    if (base == "dgx1-v100" || base == "pcie-a100") {
      if (nics_override > 0) throw ConfigError("cluster '" + spec + "': " + base + " has its own NICs in its graph");
      if (n_gpus % 8 != 0) throw ConfigError("cluster '" + spec + "': " + base + " comes in whole 8-GPU nodes");
      if (c.inter.topology != "switch") throw ConfigError("cluster '" + spec + "': " + base + " has its own fabric");
      ClusterSpec d =
          base == "dgx1-v100" ? dgx1_v100(static_cast<int>(n_gpus / 8)) : pcie_a100(static_cast<int>(n_gpus / 8));
      d.name = spec;
      d.host = host_of_preset(base);
      d.validate();
      return d;
    }
    c.intra = {"nvswitch", p->nvlink_Bps, p->nvlink_latency_s};
    c.host = host_of_preset(base);  // per GPU: a node used in part still gives each GPU its own share
    const int node_nics = nics_override > 0 ? nics_override : p->nics;
    int nics = node_nics * c.gpus_per_node / p->gpus_per_node;  // a node used in part: its share of the NICs
    c.inter.nics_per_node = nics > 0 ? nics : 1;
    c.inter.nic_bandwidth_Bps = nics_override > 0 ? nic_gbps_override * 1e9 / 8 : p->nic_Bps;
    c.inter.latency_s = p->ib_latency_s;
    if (c.inter.topology != "switch") c.inter.spine_latency_s = p->ib_latency_s / 2;  // one more switch hop
  }
  c.validate();
  return c;
}

nlohmann::json to_json(const ClusterSpec& c) {
  nlohmann::json j = {
      {"schema_version", 1},
      {"name", c.name},
      {"gpu",
       {{"name", c.gpu.name},
        {"peak_fp16_flops", c.gpu.peak_fp16_flops},
        {"peak_bf16_flops", c.gpu.peak_bf16_flops},
        {"peak_fp32_flops", c.gpu.peak_fp32_flops},
        {"peak_fp8_flops", c.gpu.peak_fp8_flops},
        {"peak_fp4_flops", c.gpu.peak_fp4_flops},
        {"hbm_Bps", c.gpu.hbm_Bps},
        {"memory_bytes", c.gpu.memory_bytes},
        {"board_power_w", c.gpu.board_power_w},
        {"sm_count", c.gpu.sm_count}}},
      {"num_nodes", c.num_nodes},
      {"gpus_per_node", c.gpus_per_node},
      {"intra_node",
       {{"kind", c.intra.kind}, {"bandwidth_Bps", c.intra.bandwidth_Bps}, {"latency_s", c.intra.latency_s}}},
      {"inter_node",
       {{"nics_per_node", c.inter.nics_per_node},
        {"nic_bandwidth_Bps", c.inter.nic_bandwidth_Bps},
        {"latency_s", c.inter.latency_s},
        {"topology", c.inter.topology},
        {"nodes_per_leaf", c.inter.nodes_per_leaf},
        {"oversubscription", c.inter.oversubscription},
        {"spine_latency_s", c.inter.spine_latency_s},
        {"leaves_per_pod", c.inter.leaves_per_pod},
        {"pod_oversubscription", c.inter.pod_oversubscription}}}};
  if (c.host.known())
    j["host"] = {
        {"link_Bps", c.host.link_Bps}, {"memory_bytes", c.host.memory_bytes}, {"memory_Bps", c.host.memory_Bps}};
  if (c.has_graph()) {
    nlohmann::json vs = nlohmann::json::array(), ls = nlohmann::json::array();
    for (const auto& v : c.graph.vertices) {
      nlohmann::json jv = {{"name", v.name}};
      if (v.gpu >= 0) jv["gpu"] = v.gpu;
      vs.push_back(jv);
    }
    for (const auto& l : c.graph.links)
      ls.push_back({{"between", {c.graph.vertices[l.a].name, c.graph.vertices[l.b].name}},
                    {"bandwidth_Bps", l.bandwidth_Bps},
                    {"latency_s", l.latency_s},
                    {"kind", l.kind}});
    j["graph"] = {{"vertices", vs}, {"links", ls}};
  }
  return j;
}

GpuSpec gpu_from_json(const nlohmann::json& gj, const std::string& gctx) {
  json_util::reject_unknown(
      gj, gctx,
      {"name", "preset", "peak_fp16_flops", "peak_bf16_flops", "peak_fp32_flops", "peak_fp8_flops", "peak_fp4_flops",
       "hbm_Bps", "memory_bytes", "board_power_w", "sm_count"});
  GpuSpec g;
  if (gj.contains("preset")) g = gpu_preset(get<std::string>(gj, gctx, "preset"));
  g.name = get_or<std::string>(gj, gctx, "name", g.name.empty() ? "custom" : g.name);
  for (auto [f, v] :
       {std::pair{"peak_fp16_flops", &g.peak_fp16_flops}, std::pair{"peak_bf16_flops", &g.peak_bf16_flops},
        std::pair{"peak_fp32_flops", &g.peak_fp32_flops}, std::pair{"peak_fp8_flops", &g.peak_fp8_flops},
        std::pair{"peak_fp4_flops", &g.peak_fp4_flops}, std::pair{"hbm_Bps", &g.hbm_Bps},
        std::pair{"memory_bytes", &g.memory_bytes}, std::pair{"board_power_w", &g.board_power_w},
        std::pair{"sm_count", &g.sm_count}})
    *v = get_or<double>(gj, gctx, f, *v);
  return g;
}

ClusterSpec cluster_from_json(const nlohmann::json& j, const std::string& ctx) {
  json_util::check_schema_version(j, ctx, 1);
  json_util::reject_unknown(
      j, ctx,
      {"schema_version", "name", "gpu", "num_nodes", "gpus_per_node", "intra_node", "inter_node", "graph", "host"});
  ClusterSpec c;
  c.name = get_or<std::string>(j, ctx, "name", "custom");
  auto gj = get<nlohmann::json>(j, ctx, "gpu");
  c.gpu = gj.is_string() ? gpu_preset(gj.get<std::string>()) : gpu_from_json(gj, ctx + ".gpu");
  c.num_nodes = get<int>(j, ctx, "num_nodes");
  c.gpus_per_node = get<int>(j, ctx, "gpus_per_node");
  auto ij = get<nlohmann::json>(j, ctx, "intra_node");
  json_util::reject_unknown(ij, ctx + ".intra_node", {"kind", "bandwidth_Bps", "latency_s"});
  c.intra.kind = get_or<std::string>(ij, ctx + ".intra_node", "kind", "nvswitch");
  c.intra.bandwidth_Bps = get<double>(ij, ctx + ".intra_node", "bandwidth_Bps");
  c.intra.latency_s = get<double>(ij, ctx + ".intra_node", "latency_s");
  if (c.num_nodes > 1 || j.contains("inter_node")) {
    auto nj = get<nlohmann::json>(j, ctx, "inter_node");
    const std::string ic = ctx + ".inter_node";
    json_util::reject_unknown(nj, ic,
                              {"nics_per_node", "nic_bandwidth_Bps", "latency_s", "topology", "nodes_per_leaf",
                               "oversubscription", "spine_latency_s", "leaves_per_pod", "pod_oversubscription"});
    c.inter.nics_per_node = get<int>(nj, ic, "nics_per_node");
    c.inter.nic_bandwidth_Bps = get<double>(nj, ic, "nic_bandwidth_Bps");
    c.inter.latency_s = get<double>(nj, ic, "latency_s");
    c.inter.topology = get_or<std::string>(nj, ic, "topology", "switch");
    c.inter.nodes_per_leaf = get_or<int>(nj, ic, "nodes_per_leaf", 0);
    c.inter.oversubscription = get_or<double>(nj, ic, "oversubscription", 1.0);
    c.inter.spine_latency_s = get_or<double>(nj, ic, "spine_latency_s", 0.0);
    c.inter.leaves_per_pod = get_or<int>(nj, ic, "leaves_per_pod", 0);
    c.inter.pod_oversubscription = get_or<double>(nj, ic, "pod_oversubscription", 1.0);
  }
  if (j.contains("host")) {
    auto hj = get<nlohmann::json>(j, ctx, "host");
    const std::string hc = ctx + ".host";
    json_util::reject_unknown(hj, hc, {"link_Bps", "memory_bytes", "memory_Bps"});
    c.host.link_Bps = get<double>(hj, hc, "link_Bps");
    c.host.memory_bytes = get<double>(hj, hc, "memory_bytes");
    c.host.memory_Bps = get<double>(hj, hc, "memory_Bps");
    limits::check(c.host.link_Bps, limits::kBandwidth, ctx, "host.link_Bps");
    limits::check(c.host.memory_Bps, limits::kBandwidth, ctx, "host.memory_Bps");
    if (!(c.host.memory_bytes > 0) || c.host.memory_bytes > 1e15)
      throw ConfigError(hc + ".memory_bytes must be a positive number of bytes up to 1e15");
  }
  if (j.contains("graph")) {
    const std::string gc = ctx + ".graph";
    auto graph_j = get<nlohmann::json>(j, ctx, "graph");
    json_util::reject_unknown(graph_j, gc, {"vertices", "links"});
    std::map<std::string, int> index;
    auto vj = get<nlohmann::json>(graph_j, gc, "vertices");
    if (!vj.is_array()) throw ConfigError(gc + ": 'vertices' must be a list");
    for (std::size_t i = 0; i < vj.size(); ++i) {
      const std::string vc = gc + ".vertices[" + std::to_string(i) + "]";
      json_util::reject_unknown(vj[i], vc, {"name", "gpu"});
      TopologyGraph::Vertex v{get<std::string>(vj[i], vc, "name"), get_or<int>(vj[i], vc, "gpu", -1)};
      if (!index.emplace(v.name, static_cast<int>(i)).second)
        throw ConfigError(vc + ": vertex '" + v.name + "' is defined twice");
      c.graph.vertices.push_back(v);
    }
    auto lj = get<nlohmann::json>(graph_j, gc, "links");
    if (!lj.is_array()) throw ConfigError(gc + ": 'links' must be a list");
    for (std::size_t i = 0; i < lj.size(); ++i) {
      const std::string lc = gc + ".links[" + std::to_string(i) + "]";
      json_util::reject_unknown(lj[i], lc, {"between", "bandwidth_Bps", "latency_s", "kind"});
      auto ends = get<std::vector<std::string>>(lj[i], lc, "between");
      if (ends.size() != 2) throw ConfigError(lc + ": 'between' must name two vertices");
      for (const auto& e : ends)
        if (!index.count(e)) throw ConfigError(lc + ": unknown vertex '" + e + "'");
      c.graph.links.push_back({index[ends[0]], index[ends[1]], get<double>(lj[i], lc, "bandwidth_Bps"),
                               get<double>(lj[i], lc, "latency_s"), get_or<std::string>(lj[i], lc, "kind", "link")});
    }
  }
  return c;
}

}  // namespace dtsim
