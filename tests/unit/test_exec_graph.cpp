// Unit tests of the execution-graph importers (traces/exec_graph.hpp) on the real PyTorch execution traces and
// Chakra JSON traces in ../shared/traces (see PROVENANCE.md there), plus hand-written documents and fuzzing.
//
// Expected values were derived independently with a Python script (gzip/tarfile/json) that re-implements the
// documented semantics and was compared node by node (id, kind, parent, nested, deps, flops, tensor bytes, gpu,
// thread, rf_id, duration, comm) on every file; the GEMM/convolution FLOPs below are also worked out by hand from
// the shapes in the comments. Tests skip (GTEST_SKIP) when a shared file is absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chakra_et.pb.h"
#include "traces/archive.hpp"
#include "traces/error.hpp"
#include "traces/exec_graph.hpp"

namespace fs = std::filesystem;
using dtsim::ExecGraph;
using dtsim::ExecNode;
using dtsim::ExecNodeKind;

namespace {

std::string shared(const std::string& rel) { return std::string(DTSIM_SHARED_DIR) + "/traces/" + rel; }
const std::string kEtDir = "param/et_replay/tests/inputs/";

#define REQUIRE_SHARED(path)                                                         \
  do {                                                                               \
    if (!fs::exists(path)) GTEST_SKIP() << "shared trace not available: " << (path); \
  } while (false)

/// The node with `id` (fails the test and returns a dummy when absent).
const ExecNode& node(const ExecGraph& g, std::int64_t id) {
  auto it =
      std::lower_bound(g.nodes.begin(), g.nodes.end(), id, [](const ExecNode& n, std::int64_t v) { return n.id < v; });
  if (it == g.nodes.end() || it->id != id) {
    ADD_FAILURE() << g.source << ": no node " << id;
    static const ExecNode missing{};
    return missing;
  }
  return *it;
}

std::size_t count_kind(const ExecGraph& g, ExecNodeKind kind) {
  return static_cast<std::size_t>(
      std::count_if(g.nodes.begin(), g.nodes.end(), [&](const ExecNode& n) { return n.kind == kind; }));
}

/// Top-level operators: not structure, not nested.
std::vector<const ExecNode*> top_level(const ExecGraph& g) {
  std::vector<const ExecNode*> out;
  for (const auto& n : g.nodes)
    if (n.kind != ExecNodeKind::OTHER && !n.nested) out.push_back(&n);
  return out;
}

struct Totals {
  std::size_t data_deps = 0, ctrl_deps = 0, gpu = 0, timed = 0, top = 0, top_comm = 0;
  double top_flops = 0;
  std::int64_t duration_ns = 0;
};
Totals totals(const ExecGraph& g) {
  Totals t;
  for (const auto& n : g.nodes) {
    t.data_deps += n.data_deps.size();
    t.ctrl_deps += n.ctrl_deps.size();
    t.gpu += n.gpu ? 1 : 0;
    if (n.duration_ns >= 0) {
      ++t.timed;
      t.duration_ns += n.duration_ns;
    }
  }
  for (const ExecNode* n : top_level(g)) {
    ++t.top;
    t.top_comm += n->kind == ExecNodeKind::COMMUNICATION ? 1 : 0;
    t.top_flops += n->flops;
  }
  return t;
}

using Ids = std::vector<std::int64_t>;

/// topological_order must succeed and put every dependency before its dependent.
void expect_valid_topological_order(const ExecGraph& g) {
  std::vector<std::size_t> order;
  try {
    order = dtsim::topological_order(g);
  } catch (const dtsim::Error& e) {
    ADD_FAILURE() << "topological_order failed: " << e.what();
    return;
  }
  ASSERT_EQ(order.size(), g.nodes.size());
  std::map<std::int64_t, std::size_t> position;
  for (std::size_t k = 0; k < order.size(); ++k) position[g.nodes.at(order[k]).id] = k;
  ASSERT_EQ(position.size(), g.nodes.size()) << "order is not a permutation";
  for (const auto& n : g.nodes)
    for (const auto* deps : {&n.data_deps, &n.ctrl_deps})
      for (std::int64_t d : *deps) EXPECT_LT(position.at(d), position.at(n.id)) << "node " << n.id << " dep " << d;
}

/// Runs `fn`; passes when it returns or throws a dtsim::Error whose one-line message contains `source`.
/// Anything else (another exception type, a message without the source, a multi-line message) fails.
void expect_clean(const std::function<void()>& fn, const std::string& source, const std::string& what) {
  try {
    fn();
  } catch (const dtsim::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(source), std::string::npos) << what << ": message does not name the source: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << what << ": message is not one line: " << msg;
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << what << ": leaked an nlohmann exception: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": threw a non-dtsim exception: " << e.what();
  }
}

/// Runs `fn`, expects a dtsim::FormatError, returns its message (and checks it names `source`, on one line).
std::string format_error(const std::function<void()>& fn, const std::string& source) {
  try {
    fn();
  } catch (const dtsim::FormatError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(source), std::string::npos) << "message does not name the source: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A file under the temp directory, unique per process and test, removed on destruction.
class TempFile {
public:
  TempFile(const std::string& tag, const std::string& content) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (fs::temp_directory_path() /
             ("dtsim_exec_graph_" + std::to_string(::getpid()) + "_" + info->name() + "_" + tag))
                .string();
    std::ofstream out(path_, std::ios::binary);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// ------------------------------------------------------------------------------------------------------------------
// PyTorch execution traces

TEST(PyTorchEt, SimpleAddBenchmarkStructure) {
  const std::string path = shared("HolisticTraceAnalysis/tests/data/execution_trace/benchmark_simple_add_et.json.gz");
  REQUIRE_SHARED(path);
  const ExecGraph g = dtsim::import_pytorch_et(path);
  EXPECT_EQ(g.source, path);
  EXPECT_EQ(g.format, "pytorch-et");
  EXPECT_EQ(g.schema, "1.0.1");
  EXPECT_EQ(g.rank, -1);  // no communication
  ASSERT_EQ(g.nodes.size(), 38u);
  EXPECT_TRUE(
      std::is_sorted(g.nodes.begin(), g.nodes.end(), [](const ExecNode& a, const ExecNode& b) { return a.id < b.id; }));
  EXPECT_EQ(count_kind(g, ExecNodeKind::OTHER), 10u);  // process, thread, 8 "[param|...]" annotations
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMPUTE), 28u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMMUNICATION), 0u);
  const Totals t = totals(g);
  EXPECT_EQ(t.top, 10u);
  EXPECT_EQ(t.data_deps, 8u);
  EXPECT_EQ(t.ctrl_deps, 9u);  // one thread: a chain through the 10 top-level operators

  // The process root is its own parent in the file: -1 here.
  EXPECT_EQ(node(g, 1).parent, -1);
  EXPECT_EQ(node(g, 1).name, "[pytorch|profiler|execution_trace|process]");
  EXPECT_EQ(node(g, 2).parent, 1);
  EXPECT_EQ(node(g, 2).kind, ExecNodeKind::OTHER);
  // aten::add (measure) reads the two aten::rand outputs (tensors 6 and 11); program order after aten::mul (49).
  const ExecNode& add = node(g, 58);
  EXPECT_EQ(add.name, "aten::add");
  EXPECT_EQ(add.parent, 57);
  EXPECT_FALSE(add.nested);
  EXPECT_EQ(add.data_deps, (Ids{4, 9}));
  EXPECT_EQ(add.ctrl_deps, (Ids{49}));
  EXPECT_EQ(add.rf_id, 36);
  EXPECT_EQ(add.thread, 1);
  EXPECT_TRUE(add.gpu);
  EXPECT_DOUBLE_EQ(add.tensor_bytes, 3 * 65536 * 4.0);  // three 256x256 float tensors
  EXPECT_EQ(add.duration_ns, -1);
  // aten::empty inside aten::rand: nested, no dependencies of its own.
  const ExecNode& empty = node(g, 5);
  EXPECT_TRUE(empty.nested);
  EXPECT_EQ(empty.parent, 4);
  EXPECT_TRUE(empty.data_deps.empty());
  EXPECT_TRUE(empty.ctrl_deps.empty());
  // aten::to on CPU tensors only: a dtype conversion, not a transfer.
  EXPECT_EQ(node(g, 23).kind, ExecNodeKind::COMPUTE);
  EXPECT_FALSE(node(g, 23).gpu);
  EXPECT_EQ(node(g, 23).data_deps, (Ids{17}));
  expect_valid_topological_order(g);
}

TEST(PyTorchEt, LinearModelGemmsAndCrossThreadDeps) {
  const std::string path = shared(kEtDir + "linear_et.json.gz");
  REQUIRE_SHARED(path);
  const ExecGraph g = dtsim::import_pytorch_et(path);
  EXPECT_EQ(g.schema, "1.0.1");
  ASSERT_EQ(g.nodes.size(), 931u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::OTHER), 221u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMPUTE), 710u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMMUNICATION), 0u);
  const Totals t = totals(g);
  EXPECT_EQ(t.top, 320u);
  EXPECT_EQ(t.data_deps, 420u);
  EXPECT_EQ(t.ctrl_deps, 318u);  // two threads: 320 - 2
  EXPECT_DOUBLE_EQ(t.top_flops, 62.0 * 1073741824.0);
  // aten::linear(x[512,1024], W[1024,1024], b[1024]): 2*512*1024*1024 FLOPs; its aten::addmm is nested.
  EXPECT_DOUBLE_EQ(node(g, 9).flops, 2.0 * 512 * 1024 * 1024);
  EXPECT_FALSE(node(g, 9).nested);
  EXPECT_TRUE(node(g, 14).nested);
  EXPECT_EQ(node(g, 14).name, "aten::addmm");
  EXPECT_DOUBLE_EQ(node(g, 14).flops, 2.0 * 512 * 1024 * 1024);
  // Backward aten::mm([1024,512] x [512,1024]) on thread 2 reads aten::relu's output (node 308, thread 1) and
  // aten::t's output (546): the data dependency crosses threads.
  const ExecNode& mm = node(g, 549);
  EXPECT_EQ(mm.thread, 2);
  EXPECT_EQ(node(g, 308).thread, 1);
  EXPECT_EQ(mm.data_deps, (Ids{308, 546}));
  EXPECT_EQ(mm.ctrl_deps, (Ids{546}));
  EXPECT_DOUBLE_EQ(mm.flops, 2.0 * 1024 * 512 * 1024);
  expect_valid_topological_order(g);
}

TEST(PyTorchEt, ResnetCountsConvolutionFlops) {
  const std::string path = shared(kEtDir + "resnet_et.json.gz");
  REQUIRE_SHARED(path);
  const ExecGraph g = dtsim::import_pytorch_et(path);
  EXPECT_EQ(g.schema, "1.1.0-chakra.0.0.4");
  EXPECT_EQ(g.rank, 0);
  ASSERT_EQ(g.nodes.size(), 14392u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMMUNICATION), 69u);  // 21 c10d + 27 record_param_comms + 21 nccl
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMPUTE), 10797u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::OTHER), 3526u);
  const Totals t = totals(g);
  EXPECT_EQ(t.top, 3711u);
  EXPECT_EQ(t.top_comm, 27u);  // 21 c10d collectives + 6 top-level "wait" records
  EXPECT_EQ(t.data_deps, 7819u);
  EXPECT_EQ(t.ctrl_deps, 3709u);
  // Three ResNet-50 steps at batch 32: ~2.33 TFLOP (fwd ~262 GFLOP/step, bwd twice that).
  EXPECT_DOUBLE_EQ(t.top_flops, 2332711452672.0);
  // First aten::conv2d: input [32,3,224,224], weight [64,3,7,7], output [32,64,112,112]:
  // 2 * (32*64*112*112) * (3*7*7).
  const ExecNode& conv = node(g, 1458);
  EXPECT_EQ(conv.name, "aten::conv2d");
  EXPECT_DOUBLE_EQ(conv.flops, 2.0 * 32 * 64 * 112 * 112 * 3 * 7 * 7);
  EXPECT_EQ(conv.rf_id, 974);
  EXPECT_EQ(conv.ctrl_deps, (Ids{1453}));
  EXPECT_TRUE(conv.data_deps.empty());  // no earlier top-level operator wrote its input or weight
  EXPECT_DOUBLE_EQ(conv.tensor_bytes, 122065664.0);
  expect_valid_topological_order(g);
}

TEST(PyTorchEt, Resnet2GpuCommunication) {
  const std::string path = shared(kEtDir + "1.1.0-chakra.0.0.4/resnet_2gpu_et.json.gz");
  REQUIRE_SHARED(path);
  const ExecGraph g = dtsim::import_exec_graph(path);
  EXPECT_EQ(g.format, "pytorch-et");
  EXPECT_EQ(g.schema, "1.1.0-chakra.0.0.4");
  EXPECT_EQ(g.rank, 1);  // rank argument of the first allreduce record (tensors on cuda:1)
  ASSERT_EQ(g.nodes.size(), 14392u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMMUNICATION), 69u);
  EXPECT_EQ(totals(g).top_comm, 27u);
  EXPECT_EQ(totals(g).data_deps, 7829u);

  // c10d::allreduce_ (thread 2, DDP gradient bucket): 2,049,000 floats in process group "0" of 2 ranks.
  const ExecNode& ar = node(g, 3236);
  EXPECT_EQ(ar.name, "c10d::allreduce_");
  EXPECT_EQ(ar.kind, ExecNodeKind::COMMUNICATION);
  EXPECT_FALSE(ar.nested);
  EXPECT_EQ(ar.comm.op, "all-reduce");
  EXPECT_DOUBLE_EQ(ar.comm.bytes, 2049000.0 * 4);
  EXPECT_EQ(ar.comm.group_size, 2);
  EXPECT_EQ(ar.comm.process_group, "0");
  EXPECT_EQ(ar.thread, 2);
  EXPECT_EQ(ar.rf_id, 1959);
  EXPECT_EQ(ar.ctrl_deps, (Ids{3234}));
  EXPECT_TRUE(ar.gpu);
  // Its record_param_comms and nccl:all_reduce are nested and carry the same collective.
  for (std::int64_t id : {3237, 3238}) {
    const ExecNode& inner = node(g, id);
    EXPECT_TRUE(inner.nested) << id;
    EXPECT_EQ(inner.kind, ExecNodeKind::COMMUNICATION) << id;
    EXPECT_EQ(inner.comm.op, "all-reduce") << id;
    EXPECT_DOUBLE_EQ(inner.comm.bytes, 8196000.0) << id;
    EXPECT_TRUE(inner.data_deps.empty() && inner.ctrl_deps.empty()) << id;
  }
  EXPECT_EQ(node(g, 3237).parent, 3236);
  EXPECT_EQ(node(g, 3238).name, "nccl:all_reduce");
  // c10d::broadcast_ of 53,120 floats (DDP buffer sync) reads the tensor written by node 220.
  const ExecNode& bc = node(g, 436);
  EXPECT_EQ(bc.comm.op, "broadcast");
  EXPECT_DOUBLE_EQ(bc.comm.bytes, 53120.0 * 4);
  EXPECT_EQ(bc.data_deps, (Ids{220}));
  EXPECT_EQ(bc.ctrl_deps, (Ids{220}));
  // A "wait" record directly under DistributedDataParallel.forward: top-level communication, op unknown.
  const ExecNode& wait = node(g, 604);
  EXPECT_EQ(wait.name, "record_param_comms");
  EXPECT_EQ(wait.kind, ExecNodeKind::COMMUNICATION);
  EXPECT_FALSE(wait.nested);
  EXPECT_EQ(wait.comm.op, "");
  EXPECT_EQ(wait.comm.group_size, 1);
  EXPECT_EQ(wait.parent, 7);
  // aten::convolution_backward: grad_output [32,2048,7,7], weight [2048,512,1,1], mask [1,1,0]:
  // two gradients of 2 * (32*2048*7*7) * (512*1*1) each.
  const ExecNode& cb = node(g, 3285);
  EXPECT_EQ(cb.name, "aten::convolution_backward");
  EXPECT_DOUBLE_EQ(cb.flops, 2 * 2.0 * 32 * 2048 * 7 * 7 * 512);
  EXPECT_EQ(cb.data_deps, (Ids{3088, 3259}));
  expect_valid_topological_order(g);
}

TEST(PyTorchEt, Resnet1GpuSchemas) {
  const std::string gz = shared(kEtDir + "1.0.3-chakra.0.0.4/resnet_1gpu_et.json.gz");
  const std::string tgz = shared(kEtDir + "resnet_1gpu_et.json.tar.gz");
  REQUIRE_SHARED(gz);
  REQUIRE_SHARED(tgz);
  const ExecGraph a = dtsim::import_pytorch_et(gz);
  EXPECT_EQ(a.schema, "1.0.3-chakra.0.0.4");
  EXPECT_EQ(a.rank, 0);
  EXPECT_EQ(a.nodes.size(), 14391u);
  EXPECT_EQ(count_kind(a, ExecNodeKind::COMMUNICATION), 69u);
  EXPECT_EQ(totals(a).data_deps, 7837u);
  expect_valid_topological_order(a);
  // A tar.gz holding one .json member: auto-detected, the source names the member.
  const ExecGraph b = dtsim::import_exec_graph(tgz);
  EXPECT_EQ(b.source, tgz + ":resnet_1gpu_et.json");
  EXPECT_EQ(b.schema, "1.1.1-chakra.0.0.4");
  EXPECT_EQ(b.rank, 0);
  EXPECT_EQ(b.nodes.size(), 14392u);
  EXPECT_EQ(totals(b).top_comm, 27u);
  EXPECT_EQ(totals(b).data_deps, 7843u);
  EXPECT_DOUBLE_EQ(totals(b).top_flops, 2332711452672.0);
  expect_valid_topological_order(b);
}

TEST(PyTorchEt, Gpt2LargeTrace) {
  const std::string path = shared(kEtDir + "hf_GPT2_et.json.tar.gz");
  REQUIRE_SHARED(path);
  const ExecGraph g = dtsim::import_pytorch_et(path);
  EXPECT_EQ(g.schema, "1.1.0-chakra.0.0.4");
  EXPECT_EQ(g.rank, -1);
  ASSERT_EQ(g.nodes.size(), 27156u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMPUTE), 21558u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::OTHER), 5598u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMMUNICATION), 0u);
  const Totals t = totals(g);
  EXPECT_EQ(t.top, 8581u);
  EXPECT_EQ(t.data_deps, 11588u);
  EXPECT_EQ(t.ctrl_deps, 8579u);
  EXPECT_EQ(t.gpu, 20424u);
  EXPECT_DOUBLE_EQ(t.top_flops, 2516900904960.0);
  // aten::addmm(b[3840], x[512,1280], W[1280,3840]) (c_attn): 2*512*1280*3840; reads aten::view 76's output.
  EXPECT_DOUBLE_EQ(node(g, 82).flops, 2.0 * 512 * 1280 * 3840);
  EXPECT_EQ(node(g, 82).data_deps, (Ids{76}));
  // aten::matmul([1,20,512,64] x [1,20,64,512]): batch 20, 2*20*512*64*512; its aten::bmm is nested.
  EXPECT_DOUBLE_EQ(node(g, 118).flops, 2.0 * 20 * 512 * 64 * 512);
  EXPECT_EQ(node(g, 118).data_deps, (Ids{102, 115}));
  EXPECT_TRUE(node(g, 131).nested);
  EXPECT_EQ(node(g, 131).name, "aten::bmm");
  // lm_head aten::linear([1,512,1280], W[50257,1280]): 2*512*50257*1280.
  EXPECT_DOUBLE_EQ(node(g, 9295).flops, 2.0 * 512 * 50257 * 1280);
  // nll_loss_backward on the autograd thread reads forward tensors from thread 1 (aten::view 9323, ones_like 9340).
  EXPECT_EQ(node(g, 9349).thread, 2);
  EXPECT_EQ(node(g, 9349).data_deps, (Ids{9323, 9340}));
  expect_valid_topological_order(g);
}

TEST(PyTorchEt, DlrmArchiveEightRanks) {
  const std::string path = shared(kEtDir + "dlrm_pytorch_et.tar.gz");
  REQUIRE_SHARED(path);
  const std::vector<ExecGraph> graphs = dtsim::import_exec_graph_archive(path);
  ASSERT_EQ(graphs.size(), 8u);
  // Archive order is dlrm_eg_2..7, 0, 1; each rank comes from its own all_to_allv records.
  const std::vector<int> ranks = {2, 3, 4, 5, 6, 7, 0, 1};
  for (std::size_t i = 0; i < graphs.size(); ++i) {
    const ExecGraph& g = graphs[i];
    EXPECT_EQ(g.source, path + ":dlrm_pytorch_et/dlrm_eg_" + std::to_string(ranks[i]) + ".json");
    EXPECT_EQ(g.rank, ranks[i]) << g.source;
    EXPECT_EQ(g.schema, "1.0.1");
    EXPECT_EQ(g.nodes.size(), 1675u);
    EXPECT_EQ(count_kind(g, ExecNodeKind::COMMUNICATION), 29u);
    EXPECT_EQ(count_kind(g, ExecNodeKind::MEMORY), 45u);
    EXPECT_EQ(totals(g).top_comm, 13u);
    EXPECT_EQ(totals(g).top, 650u);
    EXPECT_EQ(totals(g).data_deps, ranks[i] == 4 ? 725u : 723u);
    expect_valid_topological_order(g);
  }
  const ExecGraph& r2 = graphs[0];
  // c10d::alltoall_base_ of 6,144 floats with 8 input splits of 768 (schema 1.0.1: no pg_size attribute).
  const ExecNode& a2a = node(r2, 724);
  EXPECT_EQ(a2a.comm.op, "all-to-all");
  EXPECT_DOUBLE_EQ(a2a.comm.bytes, 6144.0 * 4);
  EXPECT_EQ(a2a.comm.group_size, 8);
  EXPECT_EQ(a2a.data_deps, (Ids{719, 720}));
  EXPECT_EQ(node(r2, 725).comm.op, "all-to-all");  // its record_param_comms ("all_to_allv")
  // c10d::allreduce_: bytes from the record's input tensor, group size not recorded in 1.0.1.
  const ExecNode& ar = node(r2, 1246);
  EXPECT_EQ(ar.comm.op, "all-reduce");
  EXPECT_DOUBLE_EQ(ar.comm.bytes, 1576964.0);
  EXPECT_EQ(ar.comm.group_size, 0);
  // aten::to moving the batch from the host to cuda:2.
  const ExecNode& to = node(r2, 519);
  EXPECT_EQ(to.name, "aten::to");
  EXPECT_EQ(to.kind, ExecNodeKind::MEMORY);
  EXPECT_DOUBLE_EQ(to.tensor_bytes, 1664.0);
  EXPECT_EQ(to.data_deps, (Ids{488}));
  // A multi-member archive is not one graph.
  const std::string msg = format_error([&] { dtsim::import_exec_graph(path); }, path);
  EXPECT_TRUE(contains(msg, "8 .json / .et members")) << msg;
}

TEST(PyTorchEt, HandWrittenSemantics) {
  // Two threads; a matmul with a nested bmm; an in-place add; a host copy; an allreduce with its record and nccl
  // child on thread 2; a linear reading the host tensor; an undefined tensor that must not create a dependency.
  const std::string text = R"js({"schema": "1.1.0-chakra.0.0.4", "nodes": [
    {"id": 20, "name": "aten::relu", "ctrl_deps": 10,
     "inputs": {"values": [[108, 0, 0, 0, 0, ""]], "shapes": [[]], "types": ["Tensor(float)"]},
     "outputs": {"values": [], "shapes": [], "types": []},
     "attrs": [{"name": "op_schema", "type": "string", "value": "aten::relu(Tensor self) -> Tensor"}, {"name": "tid", "type": "uint64", "value": 1}]},
    {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1, "inputs": {}, "outputs": {},
     "attrs": [{"name": "tid", "type": "uint64", "value": 0}, {"name": "op_schema", "type": "string", "value": ""}]},
    {"id": 2, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1, "attrs": [{"name": "tid", "type": "uint64", "value": 1}]},
    {"id": 3, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1, "attrs": [{"name": "tid", "type": "uint64", "value": 2}]},
    {"id": 10, "name": "## forward ##", "ctrl_deps": 2, "attrs": [{"name": "op_schema", "type": "string", "value": ""}, {"name": "tid", "type": "uint64", "value": 1}]},
    {"id": 11, "name": "aten::matmul", "ctrl_deps": 10,
     "inputs": {"values": [[100, 200, 0, 30, 4, "cuda:0"], [101, 201, 0, 84, 4, "cuda:0"]], "shapes": [[5, 1, 2, 3], [4, 3, 7]], "types": ["Tensor(float)", "Tensor(float)"]},
     "outputs": {"values": [[102, 202, 0, 280, 4, "cuda:0"]], "shapes": [[5, 4, 2, 7]], "types": ["Tensor(float)"]},
     "attrs": [{"name": "rf_id", "type": "uint64", "value": 7}, {"name": "op_schema", "type": "string", "value": "aten::matmul(Tensor self, Tensor other) -> Tensor"}, {"name": "tid", "type": "uint64", "value": 1}]},
    {"id": 12, "name": "aten::bmm", "ctrl_deps": 11,
     "inputs": {"values": [[109, 200, 0, 120, 4, "cuda:0"], [110, 201, 0, 1680, 4, "cuda:0"]], "shapes": [[20, 2, 3], [20, 3, 7]], "types": ["Tensor(float)", "Tensor(float)"]},
     "outputs": {"values": [[102, 202, 0, 280, 4, "cuda:0"]], "shapes": [[20, 2, 7]], "types": ["Tensor(float)"]},
     "attrs": [{"name": "op_schema", "type": "string", "value": "aten::bmm(Tensor self, Tensor mat2) -> Tensor"}, {"name": "tid", "type": "uint64", "value": 1}]},
    {"id": 13, "name": "aten::add_", "ctrl_deps": 10,
     "inputs": {"values": [[102, 202, 0, 280, 4, "cuda:0"], [103, 203, 0, 280, 4, "cuda:0"], 1], "shapes": [[5, 4, 2, 7], [5, 4, 2, 7], []], "types": ["Tensor(float)", "Tensor(float)", "Int"]},
     "outputs": {"values": [[102, 202, 0, 280, 4, "cuda:0"]], "shapes": [[5, 4, 2, 7]], "types": ["Tensor(float)"]},
     "attrs": [{"name": "op_schema", "type": "string", "value": "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"}, {"name": "tid", "type": "uint64", "value": 1}]},
    {"id": 14, "name": "aten::copy_", "ctrl_deps": 10,
     "inputs": {"values": [[104, 204, 0, 280, 4, "cpu"], [102, 202, 0, 280, 4, "cuda:0"], false], "shapes": [[5, 4, 2, 7], [5, 4, 2, 7], []], "types": ["Tensor(float)", "Tensor(float)", "Bool"]},
     "outputs": {"values": [[104, 204, 0, 280, 4, "cpu"]], "shapes": [[5, 4, 2, 7]], "types": ["Tensor(float)"]},
     "attrs": [{"name": "op_schema", "type": "string", "value": "aten::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)"}, {"name": "tid", "type": "uint64", "value": 1}]},
    {"id": 15, "name": "c10d::allreduce_", "ctrl_deps": 3,
     "inputs": {"values": [[[102, 202, 0, 280, 4, "cuda:0"]], "<Object>"], "shapes": [[[5, 4, 2, 7]], []], "types": ["GenericList[Tensor(float)]", "Object"]},
     "outputs": {"values": [[[102, 202, 0, 280, 4, "cuda:0"]], "<Object>"], "shapes": [[[5, 4, 2, 7]], []], "types": ["GenericList[Tensor(float)]", "Object"]},
     "attrs": [{"name": "op_schema", "type": "string", "value": "c10d::allreduce_(Tensor[] tensors, ...)"}, {"name": "tid", "type": "uint64", "value": 2}]},
    {"id": 16, "name": "record_param_comms", "ctrl_deps": 15,
     "inputs": {"values": [[[102, 202, 0, 280, 4, "cuda:0"]], 5, ["7", "tp"], 3, "allreduce", [], [], 0, 1, 4],
                "shapes": [[[5, 4, 2, 7]], [], [[], []], [], [], [], [], [], [], []],
                "types": ["GenericList[Tensor(float)]", "Int", "Tuple[String,String]", "Int", "String", "GenericList[]", "GenericList[]", "Int", "Int", "Int"]},
     "outputs": {"values": [], "shapes": [], "types": []},
     "attrs": [{"name": "op_schema", "type": "string", "value": ""}, {"name": "tid", "type": "uint64", "value": 2},
               {"name": "collective_name", "type": "string", "value": "allreduce"}, {"name": "dtype", "type": "string", "value": "Float"},
               {"name": "in_msg_nelems", "type": "uint64", "value": 280}, {"name": "pg_size", "type": "uint64", "value": 4},
               {"name": "pg_name", "type": "string", "value": "7"}]},
    {"id": 17, "name": "nccl:all_reduce", "ctrl_deps": 16, "attrs": [{"name": "op_schema", "type": "string", "value": ""}, {"name": "tid", "type": "uint64", "value": 2}]},
    {"id": 18, "name": "aten::linear", "ctrl_deps": 10,
     "inputs": {"values": [[104, 204, 0, 160, 4, "cpu"], [105, 205, 0, 128, 4, "cpu"], [106, 206, 0, 8, 4, "cpu"]], "shapes": [[2, 5, 16], [8, 16], [8]], "types": ["Tensor(float)", "Tensor(float)", "Tensor(float)"]},
     "outputs": {"values": [[107, 207, 0, 80, 4, "cpu"], [108, 0, 0, 0, 0, ""]], "shapes": [[2, 5, 8], []], "types": ["Tensor(float)", "Tensor(nullptr (uninitialized))"]},
     "attrs": [{"name": "op_schema", "type": "string", "value": "aten::linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor"}, {"name": "tid", "type": "uint64", "value": 1}]}
  ]})js";
  const ExecGraph g = dtsim::parse_pytorch_et(text, "hand.json");
  EXPECT_EQ(g.source, "hand.json");
  EXPECT_EQ(g.rank, 3);  // the Int before "allreduce"
  ASSERT_EQ(g.nodes.size(), 13u);
  Ids ids;
  for (const auto& n : g.nodes) ids.push_back(n.id);
  EXPECT_EQ(ids, (Ids{1, 2, 3, 10, 11, 12, 13, 14, 15, 16, 17, 18, 20}));
  // matmul [5,1,2,3] x [4,3,7]: batch broadcast to [5,4] = 20, 2*20*2*3*7; the nested bmm has the same count.
  EXPECT_DOUBLE_EQ(node(g, 11).flops, 1680);
  EXPECT_EQ(node(g, 11).rf_id, 7);
  EXPECT_TRUE(node(g, 12).nested);
  EXPECT_DOUBLE_EQ(node(g, 12).flops, 1680);
  EXPECT_TRUE(node(g, 12).data_deps.empty());
  // In-place add reads 102 (written by the matmul, not by the nested bmm) and rewrites it.
  EXPECT_EQ(node(g, 13).data_deps, (Ids{11}));
  EXPECT_EQ(node(g, 13).ctrl_deps, (Ids{11}));
  // Host copy of the add's result: MEMORY, two 1120-byte tensors.
  EXPECT_EQ(node(g, 14).kind, ExecNodeKind::MEMORY);
  EXPECT_EQ(node(g, 14).data_deps, (Ids{13}));
  EXPECT_DOUBLE_EQ(node(g, 14).tensor_bytes, 2240);
  EXPECT_TRUE(node(g, 14).gpu);
  // The allreduce on thread 2: first op of its thread, reads the add's result.
  const ExecNode& ar = node(g, 15);
  EXPECT_EQ(ar.kind, ExecNodeKind::COMMUNICATION);
  EXPECT_EQ(ar.thread, 2);
  EXPECT_EQ(ar.data_deps, (Ids{13}));
  EXPECT_TRUE(ar.ctrl_deps.empty());
  EXPECT_EQ(ar.comm.op, "all-reduce");
  EXPECT_DOUBLE_EQ(ar.comm.bytes, 1120);
  EXPECT_EQ(ar.comm.group_size, 4);
  EXPECT_EQ(ar.comm.process_group, "7");
  EXPECT_EQ(node(g, 17).comm.op, "all-reduce");
  EXPECT_TRUE(node(g, 17).nested);
  EXPECT_DOUBLE_EQ(node(g, 17).comm.bytes, 1120);
  // linear [2,5,16] x W[8,16]^T: 2*10*8*16; reads the host tensor written by the copy; CPU only.
  EXPECT_DOUBLE_EQ(node(g, 18).flops, 2560);
  EXPECT_EQ(node(g, 18).data_deps, (Ids{14}));
  EXPECT_EQ(node(g, 18).ctrl_deps, (Ids{14}));
  EXPECT_FALSE(node(g, 18).gpu);
  // The undefined output of the linear does not make relu depend on it.
  EXPECT_TRUE(node(g, 20).data_deps.empty());
  EXPECT_EQ(node(g, 20).ctrl_deps, (Ids{18}));
  EXPECT_EQ(node(g, 10).kind, ExecNodeKind::OTHER);
  EXPECT_DOUBLE_EQ(node(g, 10).flops, 0);
  EXPECT_EQ(dtsim::topological_order(g).size(), 13u);
  // The same document is not Chakra.
  format_error([&] { dtsim::parse_chakra_json(text, "hand.json"); }, "hand.json");
}

TEST(PyTorchEt, CollectiveRecordVariants) {
  // Schema 1.0.1 records carry no attributes: the op is the String argument, the rank the Int before it, bytes the
  // larger of input and output (all-gather: the gathered output), no group size. The first record is a broadcast,
  // whose Int is the root rank: it must not set the rank.
  const std::string text = R"js({"schema": "1.0.1", "nodes": [
    {"id": 1, "name": "[pytorch|profiler|execution_graph|process]", "parent": 1, "tid": 0, "op_schema": ""},
    {"id": 2, "name": "record_param_comms", "parent": 1, "tid": 1, "op_schema": "", "rf_id": 3,
     "inputs": [[10, 11, 0, 16, 2, "cuda:5"], 1, 94000000, 0, "broadcast", [], []],
     "input_types": ["Tensor(c10::Half)", "Int", "Int", "Int", "String", "GenericList[]", "GenericList[]"],
     "outputs": [[10, 11, 0, 16, 2, "cuda:5"]], "output_types": ["Tensor(c10::Half)"]},
    {"id": 3, "name": "record_param_comms", "parent": 1, "tid": 1, "op_schema": "",
     "inputs": [[12, 13, 0, 10, 4, "cuda:5"], 2, 94000000, 5, "_allgather_base", [], []],
     "input_types": ["Tensor(float)", "Int", "Int", "Int", "String", "GenericList[]", "GenericList[]"],
     "outputs": [[14, 15, 0, 40, 4, "cuda:5"]], "output_types": ["Tensor(float)"]},
    {"id": 4, "name": "record_param_comms", "parent": 1, "tid": 1, "op_schema": "", "collective_name": "barrier",
     "dtype": "Byte", "in_msg_nelems": 1, "out_msg_nelems": 1, "pg_size": 4, "pg_desc": "dp_group",
     "inputs": [], "input_types": [], "outputs": [], "output_types": []},
    {"id": 5, "name": "aten::mm", "parent": 1, "tid": 1, "op_schema": "aten::mm(Tensor self, Tensor mat2) -> Tensor",
     "inputs": [[14, 15, 0, 40, 4, "cuda:5"], [16, 17, 0, 12, 4, "cuda:5"]], "input_shapes": [[10, 4], [4, 3]],
     "input_types": ["Tensor(float)", "Tensor(float)"], "outputs": [[18, 19, 0, 30, 4, "cuda:5"]],
     "output_shapes": [[10, 3]], "output_types": ["Tensor(float)"]}
  ]})js";
  const ExecGraph g = dtsim::parse_pytorch_et(text, "records.json");
  EXPECT_EQ(g.rank, 5);
  EXPECT_EQ(node(g, 2).comm.op, "broadcast");
  EXPECT_DOUBLE_EQ(node(g, 2).comm.bytes, 32);
  EXPECT_EQ(node(g, 2).rf_id, 3);
  EXPECT_EQ(node(g, 3).comm.op, "all-gather");
  EXPECT_DOUBLE_EQ(node(g, 3).comm.bytes, 160);
  EXPECT_EQ(node(g, 3).comm.group_size, 0);
  EXPECT_EQ(node(g, 3).ctrl_deps, (Ids{2}));
  EXPECT_EQ(node(g, 4).comm.op, "barrier");
  EXPECT_DOUBLE_EQ(node(g, 4).comm.bytes, 1);
  EXPECT_EQ(node(g, 4).comm.group_size, 4);
  EXPECT_EQ(node(g, 4).comm.process_group, "dp_group");
  EXPECT_FALSE(node(g, 4).gpu);
  // The mm reads the gathered tensor: depends on the all-gather; 2*10*4*3 FLOPs.
  EXPECT_EQ(node(g, 5).data_deps, (Ids{3}));
  EXPECT_DOUBLE_EQ(node(g, 5).flops, 240);
  EXPECT_EQ(node(g, 5).kind, ExecNodeKind::COMPUTE);
}

// ------------------------------------------------------------------------------------------------------------------
// Chakra

TEST(ChakraJson, WorkloadGraphArchive) {
  const std::string path = shared("chakra/tests/data/json_trace.tar.gz");
  REQUIRE_SHARED(path);
  const std::vector<ExecGraph> graphs = dtsim::import_exec_graph_archive(path);
  ASSERT_EQ(graphs.size(), 2u);
  const ExecGraph& g = graphs[0];
  EXPECT_EQ(g.source, path + ":jsonData/chakra.0.json");
  EXPECT_EQ(g.format, "chakra-json");
  EXPECT_EQ(g.schema, "");
  EXPECT_EQ(g.rank, 0);
  ASSERT_EQ(g.nodes.size(), 3664u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMMUNICATION), 21u);
  EXPECT_EQ(count_kind(g, ExecNodeKind::COMPUTE), 3643u);
  std::map<std::string, int> ops;
  for (const auto& n : g.nodes)
    if (n.kind == ExecNodeKind::COMMUNICATION) ++ops[n.comm.op];
  EXPECT_EQ(ops, (std::map<std::string, int>{{"all-reduce", 15}, {"broadcast", 6}}));
  const Totals t = totals(g);
  EXPECT_EQ(t.data_deps, 181878u);
  EXPECT_EQ(t.ctrl_deps, 0u);
  EXPECT_EQ(t.gpu, 1216u);              // is_cpu_op false
  EXPECT_EQ(t.timed, 3664u - 157u);     // 157 nodes have no runtime
  EXPECT_EQ(t.duration_ns, 381795000);  // sum of runtime (us) x 1000
  // The third allreduce kernel: 9,093 us on the GPU, waiting on its c10d op (3511) and 30 gradient kernels.
  const ExecNode& k = node(g, 3512);
  EXPECT_EQ(k.name.rfind("ncclKernel_AllReduce_RING_LL_Sum_float", 0), 0u);
  EXPECT_EQ(k.comm.op, "all-reduce");
  EXPECT_TRUE(k.gpu);
  EXPECT_EQ(k.duration_ns, 9093000);
  ASSERT_EQ(k.data_deps.size(), 31u);
  EXPECT_EQ(k.data_deps.front(), 3511);
  EXPECT_EQ(k.data_deps.back(), 3510);
  const ExecNode& b = node(g, 432);
  EXPECT_EQ(b.name, "c10d::broadcast_(0)");
  EXPECT_EQ(b.comm.op, "broadcast");
  EXPECT_FALSE(b.gpu);
  EXPECT_EQ(b.duration_ns, 85000);
  EXPECT_EQ(b.parent, -1);
  // Node 3686 (a kernel) depends on a node with a larger id (3688): the order must put 3688 first.
  EXPECT_EQ(node(g, 3686).data_deps.front(), 3688);
  expect_valid_topological_order(g);
  const auto order = dtsim::topological_order(g);
  const auto pos = [&](std::int64_t id) {
    for (std::size_t i = 0; i < order.size(); ++i)
      if (g.nodes[order[i]].id == id) return i;
    return order.size();
  };
  EXPECT_LT(pos(3688), pos(3686));
  EXPECT_EQ(g.nodes[order[0]].id, 216);

  // The pruned small trace keeps ctrlDeps on nodes that were pruned away: imports, but is not a valid graph.
  const ExecGraph& s = graphs[1];
  EXPECT_EQ(s.source, path + ":jsonData/small_chakra.0.json");
  EXPECT_EQ(s.nodes.size(), 7u);
  EXPECT_EQ(count_kind(s, ExecNodeKind::COMMUNICATION), 3u);
  EXPECT_EQ(node(s, 216).ctrl_deps, (Ids{3}));
  EXPECT_EQ(node(s, 435).data_deps, (Ids{432, 216, 217}));
  const std::string msg = format_error([&] { dtsim::topological_order(s); }, s.source);
  EXPECT_TRUE(contains(msg, "node 216")) << msg;
  EXPECT_TRUE(contains(msg, "missing node 3")) << msg;
}

// The protobuf form of Chakra's own feeder test trace (tests/data/feeder_tests_trace.tar.gz: chakra.0.et) and its
// JSON form (json_trace.tar.gz: jsonData/chakra.0.json) hold the same 3,664-node workload. Every reader of the .et
// (the archive, the member on its own, by name or by content) gives the graph the JSON gives: ids, kinds, data
// deps, durations, GPU flags and collective types; the .et also has what the JSON form lacks, the control deps and
// the collectives' sizes (counted with Debian's python3-protobuf on our chakra_et.proto), and the original names
// (the JSON conversion rewrote "id" and "name" inside them: "voId", "Namespace").
TEST(ChakraEt, FeederTraceMatchesItsJsonForm) {
  const std::string path = shared("chakra/tests/data/feeder_tests_trace.tar.gz");
  const std::string json_path = shared("chakra/tests/data/json_trace.tar.gz");
  REQUIRE_SHARED(path);
  REQUIRE_SHARED(json_path);
  const ExecGraph json_graph = dtsim::import_exec_graph_archive(json_path)[0];
  const std::vector<dtsim::ArchiveMember> members = dtsim::read_archive_members(path);
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members[0].name, "tests/data/chakra.0.et");
  const TempFile et("chakra.0.et", members[0].content);
  const TempFile unnamed("trace.bin", members[0].content);  // recognised by its content
  std::vector<ExecGraph> graphs = {dtsim::import_exec_graph(path),
                                   dtsim::import_exec_graph_archive(path).at(0),
                                   dtsim::import_chakra_et(path),
                                   dtsim::import_chakra_json(path),
                                   dtsim::import_exec_graph(et.path()),
                                   dtsim::import_exec_graph(unnamed.path()),
                                   dtsim::parse_chakra_et(members[0].content, "mem.0.et")};
  EXPECT_EQ(graphs[0].source, path + ":tests/data/chakra.0.et");
  for (const ExecGraph& g : graphs) {
    SCOPED_TRACE(g.source);
    EXPECT_EQ(g.format, "chakra-et");
    EXPECT_EQ(g.schema, "");  // this converter recorded only GlobalMetadata attributes (schema 1.0.1, pid, ...)
    ASSERT_EQ(g.nodes.size(), json_graph.nodes.size());
    std::size_t ctrl = 0, sized = 0;
    double bytes = 0;
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const ExecNode& a = g.nodes[i];
      const ExecNode& b = json_graph.nodes[i];
      ASSERT_EQ(a.id, b.id);
      std::string renamed = a.name;
      for (const auto& [from, to] : {std::pair<std::string, std::string>{"id", "Id"}, {"name", "Name"}})
        for (auto pos = renamed.find(from); pos != std::string::npos; pos = renamed.find(from, pos + to.size()))
          renamed.replace(pos, from.size(), to);
      EXPECT_EQ(renamed, b.name) << a.id;
      EXPECT_EQ(a.kind, b.kind) << a.id;
      EXPECT_EQ(a.data_deps, b.data_deps) << a.id;
      EXPECT_EQ(a.duration_ns, b.duration_ns) << a.id;
      EXPECT_EQ(a.gpu, b.gpu) << a.id;
      EXPECT_EQ(a.comm.op, b.comm.op) << a.id;
      EXPECT_TRUE(b.ctrl_deps.empty());
      EXPECT_EQ(b.comm.bytes, 0.0);  // the JSON form dropped comm_size
      ctrl += a.ctrl_deps.size();
      if (a.comm.bytes > 0) {
        ++sized;
        bytes += a.comm.bytes;
      }
    }
    EXPECT_EQ(ctrl, 3664u);
    // The 7 collective kernels with a comm_size attribute (102,441,032 bytes in all, python3-protobuf count).
    EXPECT_EQ(sized, 7u);
    EXPECT_EQ(bytes, 102441032.0);
    EXPECT_EQ(node(g, 435).comm.op, "broadcast");
    EXPECT_EQ(node(g, 435).comm.bytes, 212480.0);
    EXPECT_EQ(count_kind(g, ExecNodeKind::COMMUNICATION), 21u);
  }
  EXPECT_EQ(graphs[4].rank, 0);  // chakra.0.et
  // A PyTorch-ET reader refuses it, saying what it is.
  EXPECT_TRUE(contains(format_error([&] { dtsim::import_pytorch_et(path); }, path),
                       "not a PyTorch execution trace (it is a Chakra protobuf trace)"));
}

namespace pb = dtsim::chakra;

/// A length-delimited .et stream of `messages` (Chakra's protolib encodeMessage).
std::string et_stream(const std::vector<const google::protobuf::MessageLite*>& messages) {
  std::string out;
  for (const auto* m : messages) {
    std::string body = m->SerializeAsString();
    for (std::uint64_t n = body.size();; n >>= 7) {
      out.push_back(static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
      if (n < 0x80) break;
    }
    out += body;
  }
  return out;
}

pb::AttributeProto* attr(pb::Node& n, const std::string& name) {
  pb::AttributeProto* a = n.add_attr();
  a->set_name(name);
  return a;
}

// Every field the reader takes, written with our generated classes: the integer attributes in several of
// AttributeProto's integer kinds, as Chakra's writers vary (ASTRA-sim's examples use int64 and uint64 for comm_size).
TEST(ChakraEt, EveryFieldIsRead) {
  pb::GlobalMetadata md;
  md.set_version("0.0.4");
  pb::Node mm, ar, send, meta;
  mm.set_id(5);
  mm.set_name("aten::mm");
  mm.set_type(pb::COMP_NODE);
  mm.set_duration_micros(12);
  attr(mm, "is_cpu_op")->set_bool_val(false);
  attr(mm, "rf_id")->set_uint32_val(77);
  attr(mm, "tid")->set_sint64_val(3);
  ar.set_id(6);
  ar.set_name("allreduce");
  ar.set_type(pb::COMM_COLL_NODE);
  ar.add_data_deps(5);
  ar.add_ctrl_deps(9);
  attr(ar, "comm_type")->set_int64_val(pb::ALL_REDUCE);
  attr(ar, "comm_size")->set_uint64_val(1 << 20);
  attr(ar, "pg_name")->set_string_val("tp0");
  attr(ar, "comm_group_size")->set_fixed32_val(8);
  send.set_id(7);
  send.set_name("send to 1");
  send.set_type(pb::COMM_SEND_NODE);
  send.add_data_deps(6);
  attr(send, "tensor_size")->set_int32_val(4096);
  meta.set_id(9);
  meta.set_name("root");
  meta.set_type(pb::METADATA_NODE);
  const ExecGraph g = dtsim::parse_chakra_et(et_stream({&md, &send, &mm, &ar, &meta}), "job.3.et");
  EXPECT_EQ(g.format, "chakra-et");
  EXPECT_EQ(g.schema, "0.0.4");
  EXPECT_EQ(g.rank, 3);
  ASSERT_EQ(g.nodes.size(), 4u);  // sorted by id
  const ExecNode& a = node(g, 5);
  EXPECT_EQ(a.kind, ExecNodeKind::COMPUTE);
  EXPECT_EQ(a.duration_ns, 12000);
  EXPECT_TRUE(a.gpu);
  EXPECT_EQ(a.rf_id, 77);
  EXPECT_EQ(a.thread, 3);
  const ExecNode& b = node(g, 6);
  EXPECT_EQ(b.kind, ExecNodeKind::COMMUNICATION);
  EXPECT_EQ(b.comm.op, "all-reduce");
  EXPECT_EQ(b.comm.bytes, 1 << 20);
  EXPECT_EQ(b.comm.process_group, "tp0");
  EXPECT_EQ(b.comm.group_size, 8);
  EXPECT_EQ(b.data_deps, (std::vector<std::int64_t>{5}));
  EXPECT_EQ(b.ctrl_deps, (std::vector<std::int64_t>{9}));
  EXPECT_EQ(b.duration_ns, -1);
  EXPECT_EQ(node(g, 7).comm.op, "send");
  EXPECT_EQ(node(g, 7).comm.bytes, 4096);
  EXPECT_EQ(node(g, 9).kind, ExecNodeKind::OTHER);
  EXPECT_EQ(dtsim::topological_order(g).size(), 4u);
}

// Malformed input: one line naming the source, the message and its byte offset.
TEST(ChakraEt, MalformedStreamsAreRefused) {
  pb::GlobalMetadata md;
  md.set_version("0.0.4");
  pb::Node n;
  n.set_id(1);
  n.set_name("k");
  n.set_type(pb::COMP_NODE);
  n.set_duration_micros(5);
  const std::string good = et_stream({&md, &n, &n});
  auto refused = [](const std::string& bytes, const std::string& expected) {
    const std::string msg = format_error([&] { dtsim::parse_chakra_et(bytes, "bad.et"); }, "bad.et");
    EXPECT_TRUE(contains(msg, expected)) << msg;
  };
  refused("", "empty file");
  refused(good.substr(0, good.size() - 3), "claims");  // truncated inside the last node
  refused(good.substr(0, good.size() - 3), "remain (truncated file?)");
  refused(good + "\x85", "truncated length prefix of node #3");
  refused(et_stream({&md, &n, &n}), "duplicate node id 1");
  std::string garbage = good;
  garbage += '\x02';
  garbage += "\xff\xff";  // a 2-byte message that is not a valid Node (a truncated varint field)
  refused(garbage, "node #3 at byte");
  pb::GlobalMetadata future;
  future.set_version("1.0.0");
  refused(et_stream({&future, &n}), "Chakra schema version '1.0.0' is not supported");
  pb::Node huge = n;
  huge.set_id(std::numeric_limits<std::uint64_t>::max());
  refused(et_stream({&md, &huge}), "id 18446744073709551615 is out of range");
  pb::Node dangling = n;
  dangling.add_data_deps(42);
  const ExecGraph g = dtsim::parse_chakra_et(et_stream({&md, &dangling}), "bad.et");  // deps are checked later
  EXPECT_TRUE(contains(format_error([&] { dtsim::topological_order(g); }, "bad.et"), "missing node 42"));
}

TEST(Archive, MemoryReadersMatchFileReaders) {
  // decompress_bytes / archive_members_of_bytes (what the fuzz target drives) give what the path readers give.
  const std::string gz = shared("HolisticTraceAnalysis/tests/data/execution_trace/benchmark_simple_add_et.json.gz");
  const std::string tgz = shared("chakra/tests/data/json_trace.tar.gz");
  REQUIRE_SHARED(gz);
  REQUIRE_SHARED(tgz);
  const auto raw = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string gz_bytes = raw(gz);
  const std::string text = dtsim::read_maybe_compressed(gz);
  EXPECT_GT(text.size(), gz_bytes.size());
  EXPECT_EQ(dtsim::decompress_bytes(gz_bytes, "add.json.gz"), text);
  EXPECT_EQ(dtsim::decompress_bytes(text, "plain.json"), text);  // not compressed: returned as is
  const std::vector<dtsim::ArchiveMember> from_file = dtsim::read_archive_members(tgz);
  const std::vector<dtsim::ArchiveMember> from_memory = dtsim::archive_members_of_bytes(raw(tgz), "t.tar.gz");
  ASSERT_GT(from_file.size(), 1u);
  ASSERT_EQ(from_memory.size(), from_file.size());
  for (std::size_t i = 0; i < from_file.size(); ++i) {
    EXPECT_EQ(from_memory[i].name, from_file[i].name);
    EXPECT_EQ(from_memory[i].content, from_file[i].content);
  }
  // Damaged: the same refusal, naming the buffer's name.
  const std::string cut = gz_bytes.substr(0, gz_bytes.size() / 2);
  const std::string msg = format_error([&] { (void)dtsim::decompress_bytes(cut, "half.json.gz"); }, "half.json.gz");
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
  const std::string tar = format_error([&] { (void)dtsim::decompress_bytes(raw(tgz), "t.tar.gz"); }, "t.tar.gz");
  EXPECT_TRUE(contains(tar, "is a tar archive")) << tar;
}

TEST(Archive, ZstdIsReadAndOtherMagicIsPlainData) {
  // "hello dtsim" compressed by zstd 1.5 (a 24-byte frame).
  const unsigned char zst[] = {0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x58, 0x59, 0x00, 0x00, 0x68, 0x65, 0x6c,
                               0x6c, 0x6f, 0x20, 0x64, 0x74, 0x73, 0x69, 0x6d, 0x0b, 0x19, 0x82, 0x3b};
  const std::string frame(reinterpret_cast<const char*>(zst), sizeof zst);
  EXPECT_EQ(dtsim::decompress_bytes(frame, "t.zst"), "hello dtsim");
  // Files starting with lrzip's, lzop's and grzip's headers: only the built-in decoders are enabled. libarchive's
  // filter_all would fork/exec the external lrzip / lzop / grzip program on them (and fail here: "unable to run
  // program"), so they are plain data: one member named after the file.
  for (const std::string& magic : {std::string("LRZI\x00\x06", 6), std::string("\x89LZO\x00\r\n\x1a\n", 9),
                                   std::string("GRZipII\x00\x02\x04:)", 12)}) {
    const std::string data = magic + std::string(60, '\x01');
    EXPECT_EQ(dtsim::decompress_bytes(data, "t.bin"), data);
    const auto members = dtsim::archive_members_of_bytes(data, "t.bin");
    ASSERT_EQ(members.size(), 1u);
    EXPECT_EQ(members[0].name, "t.bin");
    EXPECT_EQ(members[0].content, data);
  }
}

TEST(ChakraJson, JsonizerStreamAndFeederFields) {
  // chakra_jsonizer writes GlobalMetadata then one protobuf-JSON Node per line; 64-bit integers are strings and
  // default values are omitted (the METADATA node has id 0).
  const std::string stream = R"({"version": "0.0.4", "attr": [{"name": "schema", "stringVal": "1.0.2-chakra.0.0.4"}]}
{"id": "5", "name": "aten::mm", "type": "COMP_NODE", "durationMicros": "12", "attr": [{"name": "is_cpu_op", "boolVal": false}, {"name": "rf_id", "int64Val": "42"}]}
{"id": "7", "name": "send_to_1", "type": "COMM_SEND_NODE", "dataDeps": ["6"]}
{"id": "6", "name": "allreduce", "type": "COMM_COLL_NODE", "dataDeps": ["5"], "ctrlDeps": ["0"], "attr": [{"name": "comm_type", "int64Val": "0"}, {"name": "comm_size", "int64Val": "1048576"}, {"name": "is_cpu_op", "boolVal": false}]}
{"name": "root", "type": "METADATA_NODE"}
)";
  const TempFile file("trace.3.json", stream);
  const ExecGraph g = dtsim::import_exec_graph(file.path());
  EXPECT_EQ(g.format, "chakra-json");
  EXPECT_EQ(g.schema, "0.0.4");
  EXPECT_EQ(g.rank, 3);  // "<prefix>.<rank>.json"
  ASSERT_EQ(g.nodes.size(), 4u);
  EXPECT_EQ(node(g, 0).kind, ExecNodeKind::OTHER);
  EXPECT_EQ(node(g, 5).kind, ExecNodeKind::COMPUTE);
  EXPECT_EQ(node(g, 5).duration_ns, 12000);
  EXPECT_EQ(node(g, 5).rf_id, 42);
  EXPECT_TRUE(node(g, 5).gpu);
  EXPECT_EQ(node(g, 6).comm.op, "all-reduce");
  EXPECT_DOUBLE_EQ(node(g, 6).comm.bytes, 1048576);
  EXPECT_EQ(node(g, 6).data_deps, (Ids{5}));
  EXPECT_EQ(node(g, 6).ctrl_deps, (Ids{0}));
  EXPECT_EQ(node(g, 7).comm.op, "send");
  EXPECT_EQ(node(g, 7).duration_ns, -1);
  const auto order = dtsim::topological_order(g);
  std::vector<std::int64_t> ids;
  ids.reserve(order.size());
  for (std::size_t i : order) ids.push_back(g.nodes[i].id);
  EXPECT_EQ(ids, (Ids{0, 5, 6, 7}));

  // Feeder fields: comm_type 7 (REDUCE_SCATTER), comm_size, runtime in microseconds.
  const ExecGraph f = dtsim::parse_chakra_json(
      R"({"workload_graph": [{"Id": 1, "Name": "rs", "NodeType": 7, "comm_type": 7, "comm_size": 4096, "data_deps": [],
          "is_cpu_op": false, "runtime": 3}, {"Id": 2, "Name": "load", "NodeType": 2, "data_deps": [1]}]})",
      "feeder.json");
  ASSERT_EQ(f.nodes.size(), 2u);
  EXPECT_EQ(f.rank, -1);
  EXPECT_EQ(f.nodes[0].comm.op, "reduce-scatter");
  EXPECT_DOUBLE_EQ(f.nodes[0].comm.bytes, 4096);
  EXPECT_EQ(f.nodes[0].duration_ns, 3000);
  EXPECT_EQ(f.nodes[1].kind, ExecNodeKind::MEMORY);
}

TEST(ChakraJson, KinetoTraceIsRefused) {
  const std::string path = shared(kEtDir + "linear_kineto.json.gz");
  REQUIRE_SHARED(path);
  const std::string msg = format_error([&] { dtsim::import_exec_graph(path); }, path);
  EXPECT_TRUE(contains(msg, "Kineto")) << msg;
}

// ------------------------------------------------------------------------------------------------------------------
// topological_order

ExecGraph small_graph(const std::vector<std::pair<std::int64_t, Ids>>& deps) {
  ExecGraph g;
  g.source = "unit-graph";
  for (const auto& [id, d] : deps) {
    ExecNode n;
    n.id = id;
    n.name = std::to_string(id);
    n.name.insert(0, 1, 'n');  // (not "n" + ...: GCC 12 -O3 reports a false -Wrestrict on that)
    n.data_deps = d;
    g.nodes.push_back(n);
  }
  return g;
}

TEST(TopologicalOrder, DeterministicKahn) {
  // 10 <- 30, 20 <- 10, 40 independent: ready nodes are taken smallest index first.
  ExecGraph g = small_graph({{10, {30}}, {20, {10}}, {30, {}}, {40, {}}});
  g.nodes[1].ctrl_deps = {40};
  EXPECT_EQ(dtsim::topological_order(g), (std::vector<std::size_t>{2, 0, 3, 1}));
  EXPECT_TRUE(dtsim::topological_order(ExecGraph{}).empty());
}

TEST(TopologicalOrder, RejectsMissingSelfCycleDuplicate) {
  std::string msg = format_error([] { dtsim::topological_order(small_graph({{1, {}}, {2, {1, 99}}})); }, "unit-graph");
  EXPECT_TRUE(contains(msg, "node 2") && contains(msg, "missing node 99")) << msg;
  msg = format_error([] { dtsim::topological_order(small_graph({{1, {}}, {2, {2}}})); }, "unit-graph");
  EXPECT_TRUE(contains(msg, "node 2") && contains(msg, "itself")) << msg;
  // 1 -> 2 -> 3 -> 1 is a cycle; 0 waits on the cycle but is not on it; 5 is fine.
  msg = format_error(
      [] {
        dtsim::topological_order(small_graph({{0, {1}}, {1, {3}}, {2, {1}}, {3, {2}}, {5, {}}}));
      },
      "unit-graph");
  EXPECT_TRUE(contains(msg, "cycle")) << msg;
  EXPECT_FALSE(contains(msg, "node 0 ")) << msg;
  EXPECT_TRUE(contains(msg, "1 -> 3 -> 2 -> 1")) << msg;
  msg = format_error([] { dtsim::topological_order(small_graph({{1, {}}, {1, {}}})); }, "unit-graph");
  EXPECT_TRUE(contains(msg, "duplicate")) << msg;
}

// ------------------------------------------------------------------------------------------------------------------
// Bad input

TEST(ExecGraphErrors, StructuralProblemsNameTheSource) {
  const std::string src = "bad.json";
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> et_cases = {
      {R"({"schema": "1.0.1", "nodes": {}})", "'nodes' is not an array"},
      {R"({"schema": 3, "nodes": []})", "'schema' is not a string"},
      {R"({"schema": "1.0.1", "nodes": [{"id": "4", "name": "x"}]})", "'id' is not an integer"},
      {R"({"schema": "1.0.1", "nodes": [{"id": 4.5, "name": "x"}]})", "'id' is not an integer"},
      {R"({"schema": "1.0.1", "nodes": [{"id": -2, "name": "x"}]})", "negative id"},
      {R"({"schema": "1.0.1", "nodes": [{"id": 4}]})", "missing field 'name'"},
      {R"({"schema": "1.0.1", "nodes": [{"id": 4, "name": 7}]})", "'name' is not a string"},
      {R"({"schema": "1.0.1", "nodes": [{"id": 4, "name": "x", "ctrl_deps": [1]}]})", "'ctrl_deps' is not an integer"},
      {R"({"schema": "1.0.1", "nodes": [{"id": 4, "name": "x", "inputs": 5}]})", "'inputs' has the wrong type"},
      {R"({"schema": "1.0.1", "nodes": [{"id": 4, "name": "x", "inputs": {"values": 1}}]})", "'inputs.values'"},
      {R"({"schema": "1.0.1", "nodes": [{"id": 4, "name": "x", "attrs": 1}]})", "'attrs' has the wrong type"},
      {R"({"schema": "1.0.1", "nodes": [7]})", "expected a JSON object"},
      {R"({"schema": "1.0.1", "nodes": [{"id": 4, "name": "x", "parent": 9}]})", "parent node 9 does not exist"},
      {R"({"schema": "1.0.1", "nodes": [{"id": 4, "name": "a", "parent": 5}, {"id": 5, "name": "b", "parent": 4}]})",
       "parent chain loops"},
      {R"({"schema": "1.0.1", "nodes": [{"id": 4, "name": "a"}, {"id": 4, "name": "b"}]})", "duplicate node id 4"},
      {R"({"workload_graph": []})", "not a PyTorch execution trace"},
  };
  for (const auto& c : et_cases) {
    const std::string msg = format_error([&] { dtsim::parse_pytorch_et(c.text, src); }, src);
    EXPECT_TRUE(contains(msg, c.expect)) << c.text << " -> " << msg;
  }
  const std::vector<Case> chakra_cases = {
      {R"({"workload_graph": {}})", "'workload_graph' is not an array"},
      {R"({"workload_graph": [{"Id": 1, "Name": "x", "NodeType": "COMP_NODE"}]})", "'NodeType' is not an integer"},
      {R"({"workload_graph": [{"Id": 1, "Name": "x", "NodeType": 4, "data_deps": ["2"]}]})", "non-id value"},
      {R"({"workload_graph": [{"Id": 1, "Name": "x", "NodeType": 4, "data_deps": 2}]})", "'data_deps' is not an array"},
      {R"({"workload_graph": [{"Id": 1, "Name": "x", "NodeType": 4, "runtime": -5}]})", "negative duration"},
      {R"({"workload_graph": [{"Id": 1, "Name": "x", "NodeType": 4, "is_cpu_op": 1}]})",
       "'is_cpu_op' is not a boolean"},
      {R"({"workload_graph": [{"Name": "x", "NodeType": 4}]})", "missing field 'Id'"},
      {R"({"workload_graph": [{"Id": 18446744073709551615, "Name": "x", "NodeType": 4}]})", "'Id' is not an integer"},
      {R"({"version": "1"} {"id": "x1", "name": "n"})", "'id' is not an integer"},
      {R"({"version": "1"} [1])", "not an object"},
      {R"({"schema": "1.0.1", "nodes": []})", "not a Chakra JSON trace"},
  };
  for (const auto& c : chakra_cases) {
    const std::string msg = format_error([&] { dtsim::parse_chakra_json(c.text, src); }, src);
    EXPECT_TRUE(contains(msg, c.expect)) << c.text << " -> " << msg;
  }
  const std::vector<Case> any_cases = {
      {"", "empty file"},
      {"  \n\t ", "empty file"},
      {"hello", "invalid JSON at byte"},
      {"[1, 2]", "expected a JSON object"},
      {"{}", "neither a PyTorch execution trace"},
      {R"({"traceEvents": []})", "Kineto"},
      {R"({"schema": "1.0.1", "nodes": [)", "unexpected end of input"},
      {R"({"schema": "1.0.1", "nodes": []} trailing)", "invalid JSON in value 2"},
  };
  for (const auto& c : any_cases) {
    const TempFile f("case.json", c.text);
    const std::string msg = format_error([&] { dtsim::import_exec_graph(f.path()); }, f.path());
    EXPECT_TRUE(contains(msg, c.expect)) << "'" << c.text << "' -> " << msg;
  }
  // Missing file: ConfigError naming it.
  const std::string missing = (fs::temp_directory_path() / "dtsim_exec_graph_no_such_file.json").string();
  try {
    dtsim::import_exec_graph(missing);
    ADD_FAILURE() << "no error for a missing file";
  } catch (const dtsim::ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), missing)) << e.what();
  }
}

TEST(ExecGraphErrors, DeepNestingDoesNotOverflow) {
  // 200,000 nested arrays where a tensor argument is expected, and as a Chakra dependency: imported / refused
  // without recursion trouble.
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const ExecGraph g = dtsim::parse_pytorch_et(
      R"({"schema": "1.0.1", "nodes": [{"id": 1, "name": "aten::relu", "parent": 1, "op_schema": "s", "inputs": [)" +
          deep + R"js(], "input_types": ["Tensor(float)"]}]})js",
      "deep.json");
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_DOUBLE_EQ(g.nodes[0].tensor_bytes, 0);
  const std::string msg = format_error(
      [&] {
        dtsim::parse_chakra_json(
            R"({"workload_graph": [{"Id": 1, "Name": "x", "NodeType": 4, "data_deps": [)" + deep + "]}]}",
            "deep-chakra.json");
      },
      "deep-chakra.json");
  EXPECT_TRUE(contains(msg, "non-id value (array)")) << msg;
}

TEST(ExecGraphErrors, ImportIsDeterministic) {
  const std::string path = shared(kEtDir + "linear_et.json.gz");
  REQUIRE_SHARED(path);
  const ExecGraph a = dtsim::import_exec_graph(path), b = dtsim::import_exec_graph(path);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const ExecNode &x = a.nodes[i], &y = b.nodes[i];
    EXPECT_TRUE(x.id == y.id && x.name == y.name && x.kind == y.kind && x.parent == y.parent && x.nested == y.nested &&
                x.data_deps == y.data_deps && x.ctrl_deps == y.ctrl_deps && x.flops == y.flops &&
                x.tensor_bytes == y.tensor_bytes && x.comm.op == y.comm.op && x.rf_id == y.rf_id)
        << x.id;
  }
  EXPECT_EQ(dtsim::topological_order(a), dtsim::topological_order(b));
}

// ------------------------------------------------------------------------------------------------------------------
// Fuzzing: truncations and byte corruptions at deterministic positions. Each input either imports (and then
// topological_order either succeeds or throws dtsim::Error) or throws dtsim::Error naming the source.

void fuzz_text(const std::string& text, const std::function<ExecGraph(const std::string&, const std::string&)>& parse,
               const std::string& label) {
  const std::size_t n = text.size();
  std::vector<std::size_t> cuts = {0,     1,     2,         3,         n / 100,    n / 10, n / 4,
                                   n / 3, n / 2, 2 * n / 3, 3 * n / 4, 9 * n / 10, n - 2,  n - 1};
  for (std::size_t k = 1; k < 48; ++k) cuts.push_back(n * k / 48);
  for (std::size_t cut : cuts) {
    const std::string source = label + ":truncated@" + std::to_string(cut);
    expect_clean(
        [&] {
          const ExecGraph g = parse(text.substr(0, cut), source);
          dtsim::topological_order(g);
        },
        source, source);
  }
  const char replacements[] = {'{', '}', '[', ']', '"', ',', ':', '0', '-', '\0', '\xff', 'a', ' ', '\n', '9', 'e'};
  for (std::size_t k = 0; k < 240; ++k) {
    const std::size_t pos = static_cast<std::size_t>((k * 2654435761ULL) % n);
    std::string bad = text;
    bad[pos] = replacements[k % sizeof replacements];
    const std::string source = label + ":byte" + std::to_string(pos) + "=" + std::to_string(static_cast<int>(bad[pos]));
    expect_clean(
        [&] {
          const ExecGraph g = parse(bad, source);
          dtsim::topological_order(g);
        },
        source, source);
  }
}

TEST(ExecGraphFuzz, CorruptedTexts) {
  const std::string add = shared("HolisticTraceAnalysis/tests/data/execution_trace/benchmark_simple_add_et.json.gz");
  const std::string chakra = shared("chakra/tests/data/json_trace.tar.gz");
  REQUIRE_SHARED(add);
  REQUIRE_SHARED(chakra);
  fuzz_text(dtsim::read_maybe_compressed(add), dtsim::parse_pytorch_et, "add-et");
  std::string small;
  for (const auto& m : dtsim::read_archive_members(chakra))
    if (m.name == "jsonData/small_chakra.0.json") small = m.content;
  ASSERT_FALSE(small.empty());
  fuzz_text(small, dtsim::parse_chakra_json, "small-chakra");
  // A Chakra document handed to the ET parser.
  fuzz_text(small, dtsim::parse_pytorch_et, "chakra-as-et");
}

TEST(ExecGraphFuzz, JsonizerStream) {
  const std::string stream = R"js({"version": "0.0.4"}
{"id": "5", "name": "mm", "type": "COMP_NODE", "durationMicros": "12"}
{"id": "6", "name": "ar", "type": "COMM_COLL_NODE", "dataDeps": ["5"], "attr": [{"name": "comm_type", "int64Val": "0"}]}
)js";
  fuzz_text(stream, dtsim::parse_chakra_json, "jsonizer");
}

TEST(ExecGraphFuzz, CorruptedFiles) {
  const std::string add = shared("HolisticTraceAnalysis/tests/data/execution_trace/benchmark_simple_add_et.json.gz");
  const std::string tgz = shared("chakra/tests/data/json_trace.tar.gz");
  REQUIRE_SHARED(add);
  REQUIRE_SHARED(tgz);
  for (const std::string& original : {add, tgz}) {
    const std::string bytes = read_bytes(original);
    const std::size_t n = bytes.size();
    int k = 0;
    for (std::size_t cut : {std::size_t{1}, std::size_t{10}, n / 8, n / 2, n - 9, n - 1}) {
      const TempFile f("trunc" + std::to_string(k++) + (original == add ? ".json.gz" : ".tar.gz"),
                       bytes.substr(0, cut));
      expect_clean([&] { dtsim::import_exec_graph_archive(f.path()); }, f.path(), "truncated " + original);
      expect_clean([&] { dtsim::import_exec_graph(f.path()); }, f.path(), "truncated " + original);
    }
    for (std::size_t i = 0; i < 12; ++i) {
      std::string bad = bytes;
      const std::size_t pos = (i * 40503u + 3) % n;
      bad[pos] = static_cast<char>(bad[pos] ^ 0x5a);
      const TempFile f("flip" + std::to_string(i) + (original == add ? ".json.gz" : ".tar.gz"), bad);
      expect_clean(
          [&] {
            for (const auto& g : dtsim::import_exec_graph_archive(f.path())) dtsim::topological_order(g);
          },
          f.path(), "corrupted " + original);
    }
  }
}

}  // namespace
