// `dtsim simulate`: one training iteration of a model, cluster and plan (or several jobs sharing a cluster, --jobs),
// over dtsim::simulate and dtsim::simulate_jobs (dtsim/dtsim.hpp).
#include "cli/commands.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/options.hpp"
#include "cli/sim_flags.hpp"
#include "dtsim/dtsim.hpp"
#include "traces/units.hpp"

namespace dtsim::cli {
namespace {

/// The plan given by the flags (no --plan): TP/PP/DP degrees (DP defaults to what fills the cluster), batch,
/// schedule, recompute, ZeRO, sequence parallelism, TP layout, explicit stages, rank order, DP overlap and bucket.
ParallelPlan plan_from_flags(const po::variables_map& vm, const ClusterSpec& cluster) {
  // Degrees and sizes are positive: checked here, before the default --dp divides the cluster by them.
  for (const char* flag : {"tp", "pp", "cp", "ep", "etp", "dp", "mbs", "gbs", "tp-overlap-chunks"})
    if (vm.count(flag) && vm[flag].as<int>() < 1)
      throw ConfigError(std::string("--") + flag + " must be positive, got " + std::to_string(vm[flag].as<int>()));
  ParallelPlan plan;
  plan.tp = vm.count("tp") ? vm["tp"].as<int>() : 1;
  plan.pp = vm.count("pp") ? vm["pp"].as<int>() : 1;
  plan.cp = vm.count("cp") ? vm["cp"].as<int>() : 1;
  if (vm.count("cp-kind")) plan.cp_kind = cp_kind_from_string(vm["cp-kind"].as<std::string>(), "--cp-kind");
  plan.ep = vm.count("ep") ? vm["ep"].as<int>() : 1;
  plan.etp = vm.count("etp") ? vm["etp"].as<int>() : 0;
  if (vm.count("dispatcher")) {
    plan.dispatcher = dispatcher_from_string(vm["dispatcher"].as<std::string>(), "--dispatcher");
  }
  if (vm.count("routing")) plan.routing = routing_from_string(vm["routing"].as<std::string>(), "--routing");
  if (vm.count("stage-replicas"))
    plan.stage_replicas = parse_int_list(vm["stage-replicas"].as<std::string>(), "--stage-replicas");
  if (plan.has_stage_replicas() && !vm.count("pp")) plan.pp = static_cast<int>(plan.stage_replicas.size());
  if (vm.count("dp")) {
    plan.dp = vm["dp"].as<int>();
  } else {
    for (int r : plan.stage_replicas)
      if (r < 1) throw ConfigError("--stage-replicas entries must be positive integers, got " + std::to_string(r));
    const int per_copy = plan.pipeline_copy_gpus();
    if (per_copy <= 0 || cluster.total_gpus() % per_copy != 0)
      throw ConfigError("simulate: one pipeline copy needs " + std::to_string(per_copy) +
                        " GPUs, which does not divide the " + std::to_string(cluster.total_gpus()) +
                        " GPUs; give --dp explicitly");
    plan.dp = cluster.total_gpus() / per_copy;
  }
  plan.micro_batch_size = vm.count("mbs") ? vm["mbs"].as<int>() : 1;
  if (!vm.count("gbs")) throw ConfigError("simulate: --gbs (global batch size) is required without --plan");
  plan.global_batch_size = vm["gbs"].as<int>();
  if (vm.count("schedule")) set_schedule(plan, vm["schedule"].as<std::string>(), "--schedule");
  if (vm.count("recompute")) plan.recompute = recompute_from_string(vm["recompute"].as<std::string>(), "--recompute");
  if (vm.count("optimizer-offload")) plan.optimizer_offload_fraction = vm["optimizer-offload"].as<double>();
  plan.overlap_optimizer_offload = vm.count("overlap-optimizer-offload") > 0;
  if (vm.count("offload-activations")) plan.offload_activation_layers = vm["offload-activations"].as<int>();
  if (vm.count("recompute-num-layers")) {  // Megatron's --recompute-method block --recompute-num-layers N
    plan.recompute_num_layers = vm["recompute-num-layers"].as<int>();
    if (!vm.count("recompute")) plan.recompute = Recompute::FULL;
  }
  if (vm.count("recompute-modules")) {  // Megatron-Core's --recompute-modules: selective recompute of those modules
    plan.recompute_modules =
        recompute_modules_from_string(vm["recompute-modules"].as<std::string>(), "--recompute-modules");
    if (!vm.count("recompute")) plan.recompute = Recompute::SELECTIVE;
  }
  if (vm.count("zero")) plan.zero_stage = vm["zero"].as<int>();
  plan.fp32_grads = vm.count("fp32-grads") > 0;
  plan.sequence_parallel = vm.count("sequence-parallel") > 0;
  if (vm.count("tp-layout")) {
    std::string spec = vm["tp-layout"].as<std::string>();
    if (spec.rfind("2.5d:", 0) == 0) {
      plan.tp_depth = parse_int_list(spec.substr(5), "--tp-layout 2.5d:D").at(0);
      spec = "2.5d";
    } else if (spec == "2.5d") {
      throw ConfigError("--tp-layout 2.5d needs its depth: 2.5d:D (tp = q^2 D)");
    }
    plan.tp_layout = tp_layout_from_string(spec, "--tp-layout");
  }
  if (vm.count("layers-per-stage"))
    plan.layers_per_stage = parse_int_list(vm["layers-per-stage"].as<std::string>(), "--layers-per-stage");
  if (vm.count("pipeline-layout")) {
    if (vm.count("layers-per-stage")) throw ConfigError("give --pipeline-layout or --layers-per-stage, not both");
    plan.pipeline_layout = vm["pipeline-layout"].as<std::string>();
    plan.layers_per_stage = parse_pipeline_layout(plan.pipeline_layout, "--pipeline-layout").layers;
  }
  if (vm.count("rank-order"))
    plan.rank_order = rank_order_from_string(vm["rank-order"].as<std::string>(), "--rank-order");
  plan.dp_overlap = vm.count("no-dp-overlap") == 0;
  if (vm.count("dp-bucket-mb")) {
    const double mb = vm["dp-bucket-mb"].as<double>();
    if (!(mb > 0) || !std::isfinite(mb))
      throw ConfigError("--dp-bucket-mb: dp bucket size must be a positive finite number of MiB, got " +
                        std::to_string(mb));
    plan.dp_bucket_bytes = mb * units::kMiB;
  }
  if (vm.count("precision")) plan.precision = precision_from_string(vm["precision"].as<std::string>(), "--precision");
  plan.tp_comm_overlap = vm.count("tp-comm-overlap") > 0;
  if (vm.count("tp-overlap-chunks")) plan.tp_overlap_chunks = vm["tp-overlap-chunks"].as<int>();
  plan.overlap_param_gather = vm.count("overlap-param-gather") > 0;
  plan.pp_comm_overlap = vm.count("pp-comm-overlap") > 0;
  plan.overlap_moe_comm = vm.count("overlap-moe-comm") > 0;
  plan.moe_grouped_gemm = vm.count("sequential-experts") == 0;
  if (vm.count("fsdp-prefetch")) plan.fsdp_prefetch = vm["fsdp-prefetch"].as<int>();
  plan.megatron_fsdp = vm.count("megatron-fsdp") > 0;
  plan.fsdp_float8_all_gather = vm.count("fsdp-float8-all-gather") > 0;
  plan.torch_compile = vm.count("torch-compile") > 0;
  plan.fsdp_double_buffer = vm.count("fsdp-double-buffer") > 0;
  plan.cuda_graphs = vm.count("cuda-graphs") > 0;
  // Flags that act only with others: validate() refuses each that would have no effect.
  for (const char* flag :
       {"tp-overlap-chunks", "fsdp-prefetch", "cp-kind", "etp", "dispatcher", "overlap-optimizer-offload"})
    if (vm.count(flag)) {
      std::string key = flag;
      std::replace(key.begin(), key.end(), '-', '_');
      plan.given_options.push_back(key);
    }
  return plan;
}

/// The flags that describe the plan (refused with --plan and with --jobs).
const char* const kPlanFlags[] = {"tp",
                                  "pp",
                                  "dp",
                                  "mbs",
                                  "gbs",
                                  "schedule",
                                  "recompute",
                                  "recompute-modules",
                                  "recompute-num-layers",
                                  "optimizer-offload",
                                  "overlap-optimizer-offload",
                                  "offload-activations",
                                  "zero",
                                  "sequence-parallel",
                                  "layers-per-stage",
                                  "pipeline-layout",
                                  "stage-replicas",
                                  "rank-order",
                                  "no-dp-overlap",
                                  "dp-bucket-mb",
                                  "tp-layout",
                                  "cp",
                                  "cp-kind",
                                  "ep",
                                  "etp",
                                  "dispatcher",
                                  "routing",
                                  "fp32-grads",
                                  "precision",
                                  "tp-comm-overlap",
                                  "tp-overlap-chunks",
                                  "overlap-param-gather",
                                  "pp-comm-overlap",
                                  "overlap-moe-comm",
                                  "sequential-experts",
                                  "fsdp-prefetch",
                                  "fsdp-float8-all-gather",
                                  "torch-compile",
                                  "megatron-fsdp",
                                  "fsdp-double-buffer",
                                  "cuda-graphs"};

/// A file of a dtsim Chakra export: "<prefix>.<rank>.et" or "<prefix>.comm_group.json".
bool is_chakra_export_file(const std::filesystem::directory_entry& e) {
  if (!e.is_regular_file()) return false;
  const std::string n = e.path().filename().string();
  if (n.size() > 16 && n.ends_with(".comm_group.json")) return true;
  if (!n.ends_with(".et")) return false;
  const std::string stem = n.substr(0, n.size() - 3);
  const auto dot = stem.rfind('.');
  return dot != std::string::npos && dot > 0 && dot + 1 < stem.size() &&
         stem.find_first_not_of("0123456789", dot + 1) == std::string::npos;
}

/// The files of a previous export in --export-chakra DIR, replaced whole by this run's; ConfigError (before the
/// simulation) when DIR holds anything else, so a user's directory is never mixed with or emptied by an export.
std::vector<std::filesystem::path> previous_chakra_export(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> old;
  if (!fs::exists(dir, ec)) return old;
  if (!fs::is_directory(dir, ec))
    throw ConfigError("simulate: --export-chakra '" + dir + "' exists and is not a directory");
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!is_chakra_export_file(e))
      throw ConfigError("simulate: --export-chakra '" + dir + "' holds '" + e.path().filename().string() +
                        "', which is not part of a dtsim Chakra export; give an empty or new directory");
    old.push_back(e.path());
  }
  if (ec) throw ConfigError("simulate: --export-chakra '" + dir + "' cannot be read: " + ec.message());
  std::sort(old.begin(), old.end());
  return old;
}

/// `simulate --jobs FILE`: several jobs sharing --cluster.
int simulate_jobs_cli(const po::variables_map& vm, std::ostream& out) {
  for (const char* flag : {"model", "plan", "seq-len", "attention"})
    if (vm.count(flag)) throw ConfigError(std::string("simulate: --") + flag + " cannot be combined with --jobs");
  for (const char* flag : kPlanFlags)
    if (vm.count(flag)) throw ConfigError(std::string("simulate: --") + flag + " cannot be combined with --jobs");
  const auto wall0 = std::chrono::steady_clock::now();
  const JobsResult r =
      simulate_jobs(vm["cluster"].as<std::string>(), vm["jobs"].as<std::string>(), value_or(vm, "calibration"),
                    simulate_options(vm, "simulate"), vm.count("no-alone") == 0);
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), r.files);
  if (!vm.count("quiet")) {
    out << r.text;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    char line[120];
    std::snprintf(line, sizeof line, "simulated %zu jobs in %.2f s wall\n", r.jobs.size(), wall);
    out << line;
  }
  return 0;
}

}  // namespace

int cmd_simulate(int argc, char** argv, std::ostream& out) {
  po::options_description desc(
      "dtsim simulate: simulate one training iteration on SimGrid\n"
      "example: dtsim simulate --model gpt3-175b --cluster dgx-a100:1024 --tp 8 --pp 8 --dp 16 --mbs 1 --gbs 1536 "
      "--schedule 1f1b --out out/\n\noptions");
  // clang-format off
  desc.add_options()
    ("help,h", "this help")
    ("model", po::value<std::string>(), "model preset (see 'dtsim presets') or model JSON file")
    ("cluster", po::value<std::string>(), "cluster preset NAME:GPUS (e.g. dgx-a100:64) or cluster JSON file")
    ("plan", po::value<std::string>(), "plan JSON file (the plan flags below are then not allowed)")
    ("jobs", po::value<std::string>(),
     "jobs JSON file: several plans sharing --cluster, each on its own GPUs (replaces --model and the plan flags)")
    ("no-alone", "with --jobs, do not also simulate each job alone (no slowdown figures)")
    ("tp", po::value<int>(), "tensor-parallel degree (default 1)")
    ("pp", po::value<int>(), "pipeline-parallel degree (default 1)")
    ("dp", po::value<int>(), "data-parallel degree (default: GPUs / (tp * cp * pp))")
    ("cp", po::value<int>(), "context-parallel degree: ranks that split each sequence (default 1)")
    ("cp-kind", po::value<std::string>(),
     "context parallelism: ring (p2p ring attention, default) | a2a (Ulysses all-to-all) | allgather (KV all-gather)")
    ("ep", po::value<int>(), "expert-parallel degree of MoE layers, carved from the dp x cp ranks (default 1)")
    ("etp", po::value<int>(), "expert tensor-parallel degree (default: tp)")
    ("dispatcher", po::value<std::string>(), "MoE token dispatcher: alltoall (default) | allgather | deepep (= flex) | hybridep")
    ("routing", po::value<std::string>(),
     "MoE token routing: balanced (default: each token's experts drawn at random, the most loaded EP rank sets the "
     "pace) | exact (every expert exactly its share) | skew:S (Zipf exponent over the experts) | loads:f1,f2,... | "
     "loads:FILE; optional ,cf:X[:pad] capacity factor")
    ("seq-len", po::value<int>(), "override the model's sequence length (tokens per sample)")
    ("attention", po::value<std::string>(), "override the model's attention kernels: flash | unfused")
    ("mbs", po::value<int>(), "micro-batch size (default 1)")
    ("gbs", po::value<int>(), "global batch size in samples (required without --plan)")
    ("schedule", po::value<std::string>(),
     "pipeline schedule: gpipe | 1f1b | 1f1b:dapple | interleaved:V | zb-h1 | zb-h2 | dualpipev | dualpipe | custom:FILE "
     "(default 1f1b)")
    ("recompute", po::value<std::string>(), "activation recompute: none | selective | full (default none)")
    ("recompute-modules", po::value<std::string>(),
     "selective recompute of these Megatron-Core modules (implies --recompute selective): comma-separated "
     "core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts; or op_sac alone, torchtitan's op-level "
     "selective AC of dense blocks")
    ("recompute-num-layers", po::value<int>(),
     "N: full recompute of only the first N layers of every model chunk, the rest keep their activations (implies "
     "--recompute full; Megatron --recompute-method block --recompute-num-layers)")
    ("zero", po::value<int>(), "ZeRO stage: 0 | 1 | 2 | 3 (3 = FSDP full sharding; default 0)")
    ("optimizer-offload", po::value<double>(),
     "fraction (0-1] of the optimizer states kept in host memory and stepped by the CPU (Megatron-Core "
     "--optimizer-cpu-offload --optimizer-offload-fraction)")
    ("overlap-optimizer-offload", "overlap the offloaded step's gradient and parameter copies with the CPU step")
    ("offload-activations", po::value<int>(),
     "N: the first N layers of every model chunk keep their activations in host memory between forward and backward "
     "(Megatron-Core --cpu-offloading --cpu-offloading-num-layers)")
    ("sequence-parallel", "Megatron sequence parallelism (needs tp > 1)")
    ("fp32-grads", "keep and reduce gradients in fp32 (Megatron-LM's default for bf16; FSDP2 with an fp32 reduce dtype)")
    ("tp-layout", po::value<std::string>(),
     "tensor-parallel layout: 1d (Megatron, default) | 2d (tp = q^2) | 2.5d:D (tp = q^2 D) | 3d (tp = q^3)")
    ("layers-per-stage", po::value<std::string>(), "explicit layers per stage, e.g. 13,12,12,11")
    ("pipeline-layout", po::value<std::string>(),
     "Megatron-Core pipeline layout, e.g. 'Et*4|(t*4|)*14tmL' (t layer, E embedding, m MTP, L loss, | next chunk)")
    ("stage-replicas", po::value<std::string>(),
     "devices per stage inside one pipeline copy (stage replication), e.g. 2,1,1; GPUs = tp*dp*sum")
    ("rank-order", po::value<std::string>(), "axes innermost first (default tp,dp,pp)")
    ("no-dp-overlap", "start the gradient all-reduce only after the whole backward pass")
    ("dp-bucket-mb", po::value<double>(), "gradient bucket size in MiB (default: the stack's; Megatron: max(40M, 1M x DP) parameters on the first stage's first chunk, one bucket per chunk elsewhere; others 25)")
    ("precision", po::value<std::string>(),
     "linear-layer GEMM precision: bf16 (default) | fp8 (= fp8-delayed, Transformer Engine) | fp8-current "
     "(= fp8-tensorwise) | fp8-rowwise | mxfp8 | nvfp4 (Blackwell)")
    ("tp-comm-overlap", "overlap TP all-gathers / reduce-scatters with their GEMMs in chunks (Megatron "
     "--tp-comm-overlap, async TP; needs --sequence-parallel)")
    ("tp-overlap-chunks", po::value<int>(), "pieces per chunked TP collective (default: Transformer Engine's: tp for all-gathers, 4 for forward reduce-scatters; a backward reduce-scatter runs whole beside its weight gradient)")
    ("overlap-param-gather", "ZeRO-1/2: all-gather each layer's updated parameters during the next forward")
    ("pp-comm-overlap", "pipeline sends and receives run beside the compute even where the stack blocks them (its "
     "p2p_sync: Megatron's 1F1B, Megatron-LM before 2023-06)")
    ("overlap-moe-comm", "MoE, 1f1b / interleaved: each steady-state forward runs with the next backward, the "
     "expert-parallel all-to-alls of one under the other's compute (Megatron-Core --overlap-moe-expert-parallel-comm)")
    ("sequential-experts", "MoE: each local expert's MLP issued in turn by the host (Megatron's SequentialMLP, its "
     "default without --moe-grouped-gemm) instead of one grouped GEMM")
    ("fsdp-prefetch", po::value<int>(), "ZeRO-3/FSDP: layers whose parameter all-gather may run ahead (default 1)")
    ("fsdp-float8-all-gather", "ZeRO-3/FSDP2 with FP8 tensorwise linears: gather the layers' linear weights in FP8 "
     "(torchao enable_fsdp_float8_all_gather)")
    ("torch-compile", "the model runs under torch.compile: the stack's eager composite norms (torchtitan's RMSNorm) "
     "fuse into one kernel")
    ("megatron-fsdp", "ZeRO 2/3 as Megatron-FSDP runs them (Megatron-Core --use-megatron-fsdp): every micro-batch's "
     "gradients reduce-scattered per layer at 2 and 3; at 3 each layer's gather prefetches the next 500 M parameters")
    ("fsdp-double-buffer", "Megatron-FSDP: gathered parameters and gradients in two persistent buffers of the largest "
     "layer's size (--fsdp-double-buffer; prefetches one layer ahead at most)")
    ("cuda-graphs", "capture every layer pass in a CUDA graph: one host launch per layer pass")
    ("no-interference", "overlapped kernels and collectives do not slow each other down")
    ("no-receive-bound", "analytic network: an all-to-all member's down-links take the pieces addressed to it all at once")
    ("nccl-proto", po::value<std::string>(),
     "ring collectives' NCCL protocol: auto (NCCL's tuning model picks LL, LL128 or Simple by size; its latency is a "
     "floor) | off (route latencies and the calibration's step overheads only) | ll | ll128 | simple (forced, as "
     "NCCL_PROTO); default: the calibration's network.nccl_protocol (auto)")
    ("gpu-speed-cv", po::value<double>(),
     "per-GPU speed variability: the spread (coefficient of variation) of sustained GPU speed across the fleet; each "
     "rank waits for the job's slowest GPU (strategies/straggler_model.hpp). 0 = off; default: the calibration's "
     "compute.gpu_speed_cv (0.015, Sinha et al. SC'22)")
    ("calibration", po::value<std::string>(), "calibration JSON file (default: the built-in one for the GPU)")
    ("stack", po::value<std::string>(),
     "software stack whose host, p2p, attention-kernel and per-iteration costs apply: megatron-core (default) | "
     "megatron-lm | megatron-deepspeed | torchtitan | a profile .json")
    ("collectives", po::value<std::string>()->default_value("flow"), "collective lowering: flow | steps")
    ("fold", po::value<std::string>()->default_value("auto"), "symmetry folding: auto | none")
    ("collective-algo", po::value<std::string>()->default_value("auto"),
     "all-reduce algorithm: auto (the calibration's size table, else hierarchical across nodes with several GPUs "
     "per node, else ring) | ring | hierarchical | tree | nvls")
    ("network", po::value<std::string>()->default_value("flow"),
     "network fidelity: flow (SimGrid, links shared) | analytic (alpha-beta, contention-free, no SimGrid)")
    ("engine", po::value<std::string>()->default_value("auto"),
     "flow engine: auto (SimGrid up to 64 simulated ranks, else maxmin) | simgrid | maxmin (dtsim's own max-min "
     "engine: the same sharing model without SimGrid's per-activity costs)")
    ("channels", po::value<int>()->default_value(1),
     "parallel flows per ring transfer (NCCL channels): more channels take a larger share of contended links")
    ("single-nic-rings",
     "rings over several GPUs per node cross each node through one NIC (default: through every member's NIC, as "
     "NCCL's channels do)")
    ("out", po::value<std::string>(), "write summary.json and trace.json into this directory")
    ("no-trace", "with --out, skip trace.json")
    ("trace-ranks", po::value<std::string>()->default_value("auto"),
     "ranks in trace.json: auto (every simulated rank up to 64; above, per pipeline stage its representative, "
     "busiest and largest-memory ranks) | all | global ranks and ranges, e.g. 0-7,64")
    ("trace-links", po::value<std::string>()->implicit_value("auto"),
     "add one load counter track per network link to trace.json (and trace.pftrace); --trace-links=N keeps the N "
     "links that carried the most bytes, =all every used link; bare: all up to 64 traced ranks, else the 32 busiest")
    ("perfetto", "with --out, also write trace.pftrace: Perfetto's protobuf format, every simulated rank (and with "
     "--trace-links every used link), for runs whose trace.json is bounded")
    ("max-memory", po::value<std::string>(),
     "refuse, before it starts, a run whose estimated memory is above SIZE (e.g. 8GB, 512MiB; none: no limit; "
     "default: 90% of this machine's memory)")
    ("export-chakra", po::value<std::string>(),
     "also write the simulated iteration as Chakra execution traces into this directory: dtsim.<rank>.et per rank "
     "and dtsim.comm_group.json (ASTRA-sim's --workload-configuration DIR/dtsim, --comm-group-configuration); "
     "simulates every rank (--fold none)")
    ("quiet,q", "print nothing on success");
  // clang-format on
  auto vm = parse(desc, argc, argv);
  if (vm.count("help")) {
    out << desc << "\n";
    return 0;
  }
  if (!vm.count("cluster")) throw ConfigError("simulate: --cluster is required (e.g. dgx-a100:8)");
  if (vm.count("jobs") && vm.count("export-chakra"))
    throw ConfigError("simulate: --export-chakra exports one job; it cannot be combined with --jobs");
  if (vm.count("jobs")) return simulate_jobs_cli(vm, out);
  if (!vm.count("model")) throw ConfigError("simulate: --model is required (see 'dtsim presets')");
  if (vm.count("plan"))
    for (const char* flag : kPlanFlags)
      if (vm.count(flag)) throw ConfigError(std::string("simulate: --") + flag + " cannot be combined with --plan");
  const auto wall0 = std::chrono::steady_clock::now();
  Inputs in = load_inputs({vm["model"].as<std::string>(), vm["cluster"].as<std::string>(),
                           vm.count("plan") ? vm["plan"].as<std::string>() : "", value_or(vm, "calibration")});
  if (vm.count("seq-len")) in.model.seq_len = vm["seq-len"].as<int>();
  if (vm.count("attention"))
    in.model.attention = attention_kind_from_string(vm["attention"].as<std::string>(), "--attention");
  if (vm.count("nccl-proto")) {
    in.calibration.nccl_protocol = vm["nccl-proto"].as<std::string>();
    in.calibration.validate("simulate: --nccl-proto");
  }
  if (vm.count("gpu-speed-cv")) {
    in.calibration.gpu_speed_cv = vm["gpu-speed-cv"].as<double>();
    in.calibration.validate("simulate: --gpu-speed-cv");
  }
  if (!vm.count("plan")) in.plan = plan_from_flags(vm, in.cluster);
  if (vm.count("stack")) in.plan.stack = vm["stack"].as<std::string>();  // also over a --plan file's own
  SimulateOptions opt = simulate_options(vm, "simulate");
  opt.trace = vm.count("out") && !vm.count("no-trace");
  opt.trace_links = vm.count("trace-links") > 0;
  if (opt.trace_links) opt.trace_link_count = vm["trace-links"].as<std::string>();
  opt.trace_ranks = vm["trace-ranks"].as<std::string>();
  opt.perfetto = vm.count("out") && vm.count("perfetto");
  opt.max_memory_bytes = parse_max_memory(vm, "simulate");
  opt.export_chakra = vm.count("export-chakra") > 0;
  const auto old_export = opt.export_chakra ? previous_chakra_export(vm["export-chakra"].as<std::string>())
                                            : std::vector<std::filesystem::path>{};
  SimulateResult r = simulate(in, opt);
  if (opt.export_chakra) {  // the export's files ("chakra/...") go to their own directory
    Files chakra, rest;
    for (auto& f : r.files) {
      if (f.first.rfind("chakra/", 0) == 0) chakra.emplace_back(f.first.substr(7), std::move(f.second));
      else rest.push_back(std::move(f));
    }
    const std::string dir = vm["export-chakra"].as<std::string>();
    write_files(dir, chakra);
    // A previous export is replaced whole: its files that this one did not rewrite (more ranks, another prefix) go.
    for (const auto& p : old_export)
      if (std::none_of(chakra.begin(), chakra.end(), [&](const auto& f) { return p.filename() == f.first; })) {
        std::error_code ec;
        std::filesystem::remove(p, ec);
      }
    r.files = std::move(rest);
  }
  if (vm.count("out")) write_files(vm["out"].as<std::string>(), r.files);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (!vm.count("quiet")) {
    out << r.text;
    char line[200];
    std::snprintf(line, sizeof line, "\nsimulated in %.2f s wall (%s engine, %.0f activities/s)\n", wall,
                  r.engine.c_str(), static_cast<double>(r.activities) / wall);
    out << line;
    if (vm.count("out")) {
      out << "wrote " << vm["out"].as<std::string>() << "/summary.json";
      for (std::size_t k = 1; k < r.files.size(); ++k)
        out << (k + 1 < r.files.size() ? ", " : " and ") << r.files[k].first;
      if (r.files.size() > 1) out << " (open in https://ui.perfetto.dev)";
      out << "\n";
    }
    if (opt.export_chakra)
      out << "wrote Chakra traces of " << r.ranks.size() << " ranks to " << vm["export-chakra"].as<std::string>() << "/"
          << opt.chakra_prefix << ".<rank>.et and " << opt.chakra_prefix << ".comm_group.json\n";
  }
  return 0;
}

}  // namespace dtsim::cli
