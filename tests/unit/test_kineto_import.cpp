// Tests of the Kineto (PyTorch profiler) importer, on the real traces under DTSIM_SHARED_DIR/traces (skipped when
// absent) and on synthetic and damaged inputs.
//
// The expected numbers in kTraces were computed independently of the importer by a short Python script
// (python3 + gzip + json + decimal, reproduced at the end of this file). Spans there are those of the imported
// events (ph "X" of the mapped categories); PROVENANCE.md's approximate spans are over every event, "Trace" spans
// and instant events included, hence a little larger (e.g. negative_queue rank0: 1.232 s here, ~1.26 s there).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "traces/archive.hpp"
#include "traces/error.hpp"
#include "traces/kineto_import.hpp"
#include "traces/trace_events.hpp"

#ifndef DTSIM_SHARED_DIR
#define DTSIM_SHARED_DIR "../shared"
#endif

namespace fs = std::filesystem;
using dtsim::ImportedTrace;
using dtsim::TraceEvent;
using dtsim::TraceEventKind;

namespace {

std::string shared_trace(const std::string& rel) { return std::string(DTSIM_SHARED_DIR) + "/traces/" + rel; }

const char* const kHta = "HolisticTraceAnalysis/tests/data/";
const char* const kDlrm = "param/et_replay/tests/inputs/dlrm_kineto.tar.gz";

// ------------------------------------------------------------------------------------------------------------
// Expected values per shared Kineto trace
// ------------------------------------------------------------------------------------------------------------
struct Expected {
  std::string path;    ///< relative to DTSIM_SHARED_DIR/traces; "<archive>:<member>" for archive members
  std::size_t events;  ///< imported events (ph "X" of a mapped category)
  std::size_t kernels, runtime, cpu_ops, user_annotations, memcpy, memset, gpu_annotations;
  std::size_t collective_kernels;  ///< kernels named nccl*/rccl*
  std::size_t streams;             ///< distinct (device, stream) over GPU-side events
  std::int64_t span_ns;            ///< last end - first start
  std::int64_t origin_ns;          ///< earliest ts, exact
  int rank, world_size;
  std::size_t devices;
  std::string device0;
  std::size_t kernels_with_correlation, kernels_linked;  ///< linked: a RUNTIME event has the same correlation
  std::string vendor;
  std::map<std::string, std::size_t> ops;  ///< collective kernels per comm.op ("" = unknown)
};

std::string dlrm_member(int rank, const char* stamp) {
  return std::string(kDlrm) + ":dlrm_kineto/worker" + std::to_string(rank) + "_step_12." + stamp + ".pt.trace.json";
}

const std::vector<Expected>& expected_traces() {
  static const std::vector<Expected> kTraces = {
      {std::string(kHta) + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
       112,
       14,
       21,
       70,
       3,
       2,
       0,
       2,
       0,
       1,
       9583086,
       4203669603187439,
       -1,
       0,
       4,
       "AMD Radeon Graphics",
       14,
       14,
       "amd",
       {}},
      {std::string(kHta) + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
       826,
       79,
       361,
       359,
       8,
       16,
       3,
       0,
       0,
       2,
       43425365000,
       1695835542514261000,
       0,
       0,
       8,
       "NVIDIA A100-PG509-200",
       79,
       79,
       "nvidia",
       {}},
      {std::string(kHta) + "critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
       796,
       79,
       331,
       359,
       8,
       16,
       3,
       0,
       0,
       2,
       41579901000,
       1694039968955744000,
       0,
       0,
       8,
       "NVIDIA A100-PG509-200",
       79,
       79,
       "nvidia",
       {}},
      // CUPTI range-profiler run: its per-kernel records are "cuda_profiler_range" (counters), not kernels.
      {std::string(kHta) + "cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz",
       2245,
       0,
       1862,
       375,
       8,
       0,
       0,
       0,
       0,
       0,
       11843640000,
       1679055451546825000,
       0,
       0,
       8,
       "NVIDIA A100-PG509-200",
       0,
       0,
       "nvidia",
       {}},
      {std::string(kHta) + "df_index_resolver/df_index_resolver.json.gz",
       123378,
       19370,
       42373,
       56680,
       2035,
       2040,
       880,
       0,
       2020,
       2,
       1738039000,
       1669783687384669000,
       1,
       2,
       2,
       "Tesla V100-SXM2-32GB",
       19370,
       19370,
       "nvidia",
       {{"all-reduce", 2020}}},
      {std::string(kHta) + "execution_trace/benchmark_simple_add_trace.json.gz",
       55,
       4,
       15,
       28,
       8,
       0,
       0,
       0,
       0,
       1,
       19814287000,
       1689360788493697000,
       0,
       0,
       8,
       "NVIDIA A100-PG509-200",
       4,
       4,
       "nvidia",
       {}},
      {std::string(kHta) + "nccl_parser_config/nccl_data.json.gz",
       26932,
       2700,
       8740,
       14346,
       42,
       960,
       114,
       30,
       21,
       2,
       684372939,
       4458676416788066,
       0,
       2,
       8,
       "NVIDIA A100-PG509-200",
       2700,
       2700,
       "nvidia",
       {{"all-reduce", 15}, {"broadcast", 6}}},
      // PROVENANCE: 6,080 kernels, 80 NCCL. Kernels are all NCCL SendRecv; their op comes from the enclosing
      // nccl:* annotation of the launch; 5 launches fall outside the profiled window (op unknown).
      {std::string(kHta) + "negative_queue_length_values_check/rank0.json.gz",
       67216,
       6080,
       33924,
       25185,
       360,
       1390,
       277,
       0,
       80,
       6,
       1232469000,
       1683564901548726000,
       0,
       16,
       8,
       "NVIDIA A100-SXM4-80GB",
       6080,
       5375,
       "nvidia",
       {{"", 5}, {"all-gather", 10}, {"all-reduce", 10}, {"all-to-all", 45}, {"reduce-scatter", 10}}},
      {std::string(kHta) + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
       45419,
       4350,
       15329,
       23910,
       70,
       1600,
       145,
       15,
       0,
       1,
       495002377,
       1712195495502094565,
       0,
       1,
       8,
       "Tesla V100-SXM2-32GB",
       4350,
       4350,
       "nvidia",
       {}},
      {std::string(kHta) + "trace_diff/control/control.json.gz",
       74936,
       8568,
       24692,
       40506,
       288,
       228,
       654,
       0,
       60,
       4,
       465275000,
       1661203462598738000,
       3,
       8,
       8,
       "NVIDIA A100-PG509-200",
       8568,
       8568,
       "nvidia",
       {{"all-reduce", 18}, {"all-to-all", 42}}},
      {std::string(kHta) + "trace_diff/test/test.json.gz",
       68323,
       9876,
       21167,
       31236,
       288,
       4856,
       900,
       0,
       64,
       4,
       745341000,
       1661938466265032000,
       1,
       2,
       2,
       "Tesla V100-SXM2-16GB",
       9876,
       9330,
       "nvidia",
       {{"", 1}, {"all-reduce", 21}, {"all-to-all", 42}}},
      {std::string(kHta) + "trace_filter/sampled_rank-0.json.gz",
       4810,
       1154,
       1204,
       2329,
       73,
       40,
       10,
       0,
       10,
       5,
       1230289000,
       1682725898079292000,
       0,
       128,
       0,
       "",
       1154,
       1154,
       "nvidia",
       {{"all-gather", 2}, {"all-reduce", 4}, {"all-to-all", 4}}},
      {std::string(kHta) + "trace_filter/sampled_rank-1.json.gz",
       4675,
       1104,
       1154,
       2302,
       65,
       40,
       10,
       0,
       10,
       5,
       1238593000,
       1682725898079484000,
       1,
       128,
       0,
       "",
       1104,
       1104,
       "nvidia",
       {{"all-gather", 2}, {"all-reduce", 4}, {"all-to-all", 4}}},
      {std::string(kHta) + "triton_example/triton_example.json.gz",
       7,
       1,
       2,
       3,
       1,
       0,
       0,
       0,
       0,
       1,
       13336315805,
       2413669096090100,
       -1,
       0,
       8,
       "NVIDIA A100-PG509-200",
       1,
       1,
       "nvidia",
       {}},
      {"param/et_replay/tests/inputs/linear_kineto.json.gz",
       61949,
       8716,
       14515,
       36998,
       80,
       0,
       1640,
       0,
       0,
       1,
       2003701000,
       1689180447559714000,
       -1,
       0,
       8,
       "NVIDIA GeForce RTX 2080 Ti",
       8716,
       8716,
       "nvidia",
       {}},
      {"param/et_replay/tests/inputs/resnet_kineto.json.gz",
       75547,
       9628,
       25928,
       39416,
       90,
       123,
       362,
       0,
       0,
       3,
       16172052000,
       1689179597340751000,
       -1,
       0,
       8,
       "NVIDIA GeForce RTX 2080 Ti",
       9628,
       9628,
       "nvidia",
       {}},
      {dlrm_member(0, "1694128201545"),
       2459,
       245,
       525,
       1633,
       40,
       16,
       0,
       0,
       8,
       4,
       14504000,
       1694128201426674000,
       0,
       8,
       8,
       "Tesla V100-SXM2-32GB",
       245,
       245,
       "nvidia",
       {{"all-reduce", 3}, {"all-to-all", 5}}},
      {dlrm_member(1, "1694128201556"),
       2526,
       310,
       527,
       1633,
       40,
       16,
       0,
       0,
       8,
       4,
       19951000,
       1694128201421205000,
       1,
       8,
       8,
       "Tesla V100-SXM2-32GB",
       310,
       246,
       "nvidia",
       {{"all-reduce", 3}, {"all-to-all", 5}}},
      {dlrm_member(2, "1694128201554"),
       2448,
       246,
       513,
       1633,
       40,
       16,
       0,
       0,
       8,
       4,
       13066000,
       1694128201428092000,
       2,
       8,
       8,
       "Tesla V100-SXM2-32GB",
       246,
       246,
       "nvidia",
       {{"all-reduce", 3}, {"all-to-all", 5}}},
      {dlrm_member(3, "1694128201557"),
       2551,
       315,
       541,
       1633,
       40,
       16,
       6,
       0,
       8,
       4,
       19362000,
       1694128201421900000,
       3,
       8,
       8,
       "Tesla V100-SXM2-32GB",
       315,
       251,
       "nvidia",
       {{"all-reduce", 3}, {"all-to-all", 5}}},
      {dlrm_member(4, "1694128201547"),
       2469,
       251,
       523,
       1633,
       40,
       16,
       6,
       0,
       8,
       4,
       18022000,
       1694128201424049000,
       4,
       8,
       8,
       "Tesla V100-SXM2-32GB",
       251,
       251,
       "nvidia",
       {{"all-reduce", 3}, {"all-to-all", 5}}},
      {dlrm_member(5, "1694128201549"),
       2439,
       245,
       505,
       1633,
       40,
       16,
       0,
       0,
       8,
       4,
       17841000,
       1694128201424195000,
       5,
       8,
       8,
       "Tesla V100-SXM2-32GB",
       245,
       245,
       "nvidia",
       {{"all-reduce", 3}, {"all-to-all", 5}}},
      {dlrm_member(6, "1694128201553"),
       2450,
       246,
       515,
       1633,
       40,
       16,
       0,
       0,
       8,
       4,
       13138000,
       1694128201428080000,
       6,
       8,
       8,
       "Tesla V100-SXM2-32GB",
       246,
       246,
       "nvidia",
       {{"all-reduce", 3}, {"all-to-all", 5}}},
      {dlrm_member(7, "1694128201553"),
       2439,
       246,
       504,
       1633,
       40,
       16,
       0,
       0,
       8,
       4,
       12558000,
       1694128201428718000,
       7,
       8,
       8,
       "Tesla V100-SXM2-32GB",
       246,
       246,
       "nvidia",
       {{"all-reduce", 3}, {"all-to-all", 5}}},
  };
  return kTraces;
}

/// Imports the trace an Expected entry names (a file, or one member of an archive).
ImportedTrace load_expected(const Expected& x) {
  const auto colon = x.path.find(".tar.gz:");
  if (colon == std::string::npos) return dtsim::import_kineto(shared_trace(x.path));
  const std::string archive = shared_trace(x.path.substr(0, colon + 7));
  const std::string source = shared_trace(x.path);
  for (ImportedTrace& t : dtsim::import_kineto_archive(archive))
    if (t.source == source) return std::move(t);
  ADD_FAILURE() << "no member " << source;
  return {};
}

std::string file_of(const Expected& x) {
  const auto colon = x.path.find(".tar.gz:");
  return shared_trace(colon == std::string::npos ? x.path : x.path.substr(0, colon + 7));
}

// ------------------------------------------------------------------------------------------------------------
// Checks shared by several tests
// ------------------------------------------------------------------------------------------------------------
bool sorted_as_documented(const TraceEvent& a, const TraceEvent& b) {  // a <= b in (start, kind, pid, tid, name)
  if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
  if (a.kind != b.kind) return a.kind < b.kind;
  if (a.pid != b.pid) return a.pid < b.pid;
  if (a.tid != b.tid) return a.tid < b.tid;
  return a.name <= b.name;
}

/// Structural invariants every import must satisfy, whatever the input.
void check_invariants(const ImportedTrace& t) {
  if (t.events.empty()) return;
  EXPECT_EQ(t.events.front().start_ns, 0) << t.source;
  std::size_t unsorted = 0, bad = 0;
  for (std::size_t k = 0; k < t.events.size(); ++k) {
    const TraceEvent& e = t.events[k];
    if (k > 0 && !sorted_as_documented(t.events[k - 1], e)) ++unsorted;
    if (e.start_ns < 0 || e.dur_ns < 0) ++bad;
    if (!e.is_gpu() && e.device != -1) ++bad;  // CPU side: no device
    if (!e.collective && (!e.comm.op.empty() || e.comm.bytes != 0)) ++bad;
  }
  EXPECT_EQ(unsorted, 0u) << t.source;
  EXPECT_EQ(bad, 0u) << t.source;
}

bool same_event(const TraceEvent& a, const TraceEvent& b) {
  return a.kind == b.kind && a.name == b.name && a.start_ns == b.start_ns && a.dur_ns == b.dur_ns && a.pid == b.pid &&
         a.tid == b.tid && a.device == b.device && a.correlation == b.correlation && a.external_id == b.external_id &&
         a.collective == b.collective && a.comm.op == b.comm.op && a.comm.bytes == b.comm.bytes &&
         a.comm.group_size == b.comm.group_size && a.comm.process_group == b.comm.process_group &&
         std::equal(a.grid, a.grid + 3, b.grid) && std::equal(a.block, a.block + 3, b.block) &&
         a.input_dims == b.input_dims && a.input_types == b.input_types;
}

void expect_identical(const ImportedTrace& a, const ImportedTrace& b) {
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.vendor, b.vendor);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.origin_ns, b.origin_ns);
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.devices.size(), b.devices.size());
  for (std::size_t k = 0; k < a.devices.size(); ++k) {
    EXPECT_EQ(a.devices[k].name, b.devices[k].name);
    EXPECT_EQ(a.devices[k].sm_count, b.devices[k].sm_count);
  }
  ASSERT_EQ(a.events.size(), b.events.size());
  std::size_t differ = 0;
  for (std::size_t k = 0; k < a.events.size(); ++k) differ += !same_event(a.events[k], b.events[k]);
  EXPECT_EQ(differ, 0u);
}

std::size_t count_kind(const ImportedTrace& t, TraceEventKind kind) {
  return static_cast<std::size_t>(
      std::count_if(t.events.begin(), t.events.end(), [&](const TraceEvent& e) { return e.kind == kind; }));
}

// ------------------------------------------------------------------------------------------------------------
// Every shared Kineto trace against the independently computed numbers
// ------------------------------------------------------------------------------------------------------------
void expect_independent_counts(const ImportedTrace& t, const Expected& x) {
  EXPECT_EQ(t.format, "kineto");
  EXPECT_EQ(t.vendor, x.vendor);
  EXPECT_EQ(t.events.size(), x.events);
  EXPECT_EQ(count_kind(t, TraceEventKind::KERNEL), x.kernels);
  EXPECT_EQ(count_kind(t, TraceEventKind::RUNTIME), x.runtime);
  EXPECT_EQ(count_kind(t, TraceEventKind::CPU_OP), x.cpu_ops);
  EXPECT_EQ(count_kind(t, TraceEventKind::USER_ANNOTATION), x.user_annotations);
  EXPECT_EQ(count_kind(t, TraceEventKind::MEMCPY), x.memcpy);
  EXPECT_EQ(count_kind(t, TraceEventKind::MEMSET), x.memset);
  EXPECT_EQ(count_kind(t, TraceEventKind::GPU_ANNOTATION), x.gpu_annotations);

  std::size_t collective_kernels = 0, with_corr = 0;
  std::set<std::pair<int, std::int64_t>> streams;
  std::map<std::string, std::size_t> ops;
  std::int64_t first = INT64_MAX, last = INT64_MIN;
  for (const TraceEvent& e : t.events) {
    first = std::min(first, e.start_ns);
    last = std::max(last, e.start_ns + e.dur_ns);
    if (e.is_gpu()) streams.insert({e.device, e.tid});
    if (e.kind != TraceEventKind::KERNEL) continue;
    if (e.collective) {
      ++collective_kernels;
      ++ops[e.comm.op];
    }
    if (e.correlation >= 0) ++with_corr;
  }
  EXPECT_EQ(collective_kernels, x.collective_kernels);
  EXPECT_EQ(ops, x.ops);
  EXPECT_EQ(streams.size(), x.streams);
  EXPECT_NEAR(static_cast<double>(last - first), static_cast<double>(x.span_ns), 1000.0);
  EXPECT_EQ(t.origin_ns, x.origin_ns);
  EXPECT_EQ(t.rank, x.rank);
  EXPECT_EQ(t.world_size, x.world_size);
  ASSERT_EQ(t.devices.size(), x.devices);
  if (x.devices > 0) {
    EXPECT_EQ(t.devices[0].name, x.device0);
  }
  EXPECT_EQ(with_corr, x.kernels_with_correlation);
  check_invariants(t);
}

// Correlation links: a kernel's correlation id names the runtime call that launched it. Kernels whose launch
// happened before the profiling window have no partner; the exact counts come from the Python script.
void expect_kernels_link_to_their_launch(const ImportedTrace& t, const Expected& x) {
  std::map<std::int64_t, const TraceEvent*> runtime;
  for (const TraceEvent& e : t.events)
    if (e.kind == TraceEventKind::RUNTIME && e.correlation >= 0) runtime.emplace(e.correlation, &e);
  std::size_t with_corr = 0, linked = 0, launch_after_kernel = 0;
  for (const TraceEvent& e : t.events) {
    if (e.kind != TraceEventKind::KERNEL || e.correlation < 0) continue;
    ++with_corr;
    auto it = runtime.find(e.correlation);
    if (it == runtime.end()) continue;
    ++linked;
    const TraceEvent& r = *it->second;
    EXPECT_FALSE(r.is_gpu());
    EXPECT_EQ(r.device, -1);
    if (r.start_ns > e.start_ns) ++launch_after_kernel;
  }
  EXPECT_EQ(linked, x.kernels_linked);
  if (with_corr > 0) {
    const double ratio = static_cast<double>(linked) / static_cast<double>(with_corr);
    EXPECT_GE(ratio, 0.75) << linked << " of " << with_corr << " kernels have their launch in the trace";
    // A kernel cannot start before the host call that launched it (same clock domain in Kineto traces).
    EXPECT_EQ(launch_after_kernel, 0u);
  }
}

// One test per trace, the trace imported twice: parsing a shared trace dominates (up to 30 s under ASan), so the
// counts, the launch links and determinism share the two imports (they were three tests and four imports each).
class SharedTrace : public ::testing::TestWithParam<std::size_t> {};

TEST_P(SharedTrace, MatchesIndependentCountsLinksLaunchesAndReimportsIdentically) {
  const Expected& x = expected_traces()[GetParam()];
  if (!fs::exists(file_of(x))) GTEST_SKIP() << "shared trace absent: " << file_of(x);
  const ImportedTrace a = load_expected(x);
  SCOPED_TRACE(x.path);
  {
    SCOPED_TRACE("independent counts");
    expect_independent_counts(a, x);
  }
  {
    SCOPED_TRACE("kernels link to their runtime launch");
    expect_kernels_link_to_their_launch(a, x);
  }
  SCOPED_TRACE("a second import is identical");
  expect_identical(a, load_expected(x));
}

std::string param_name(const ::testing::TestParamInfo<std::size_t>& info) {
  std::string p = expected_traces()[info.param].path;
  p = p.substr(p.find_last_of('/') + 1);
  std::string out;
  for (char c : p) out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out.substr(0, 48) + "_" + std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllKinetoTraces, SharedTrace, ::testing::Range<std::size_t>(0, expected_traces().size()),
                         param_name);

// Every Kineto file in the shared HTA data folder is covered by the table (catches a new file nobody checked).
TEST(KinetoShared, TableCoversEveryHtaKinetoFile) {
  const fs::path dir = shared_trace(kHta);
  if (!fs::exists(dir)) GTEST_SKIP() << "shared traces absent: " << dir;
  std::set<std::string> in_table;
  for (const Expected& x : expected_traces()) in_table.insert(x.path);
  std::size_t seen = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().string().find(".json") == std::string::npos) continue;
    const std::string rel = std::string(kHta) + fs::relative(entry.path(), dir).generic_string();
    if (rel.find("benchmark_simple_add_et.json.gz") != std::string::npos) continue;  // a PyTorch ET, not Kineto
    ++seen;
    EXPECT_TRUE(in_table.count(rel)) << rel << " is not in the expected table";
  }
  EXPECT_EQ(seen, 14u);
}

// ------------------------------------------------------------------------------------------------------------
// Specific traces
// ------------------------------------------------------------------------------------------------------------
TEST(KinetoShared, ArchiveHoldsEightRanksInMemberOrder) {
  const std::string path = shared_trace(kDlrm);
  if (!fs::exists(path)) GTEST_SKIP() << "shared trace absent: " << path;
  const std::vector<ImportedTrace> ranks = dtsim::import_kineto_archive(path);
  ASSERT_EQ(ranks.size(), 8u);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_EQ(ranks[r].rank, static_cast<int>(r));
    EXPECT_EQ(ranks[r].world_size, 8);
    EXPECT_EQ(ranks[r].source.rfind(path + ":dlrm_kineto/worker" + std::to_string(r) + "_", 0), 0u) << ranks[r].source;
    if (r > 0) {
      EXPECT_LT(ranks[r - 1].source, ranks[r].source);
    }
    // One DLRM step: 3 all-reduce + 5 all-to-all NCCL kernels on every rank.
    std::size_t coll = 0;
    for (const TraceEvent& e : ranks[r].events) coll += e.kind == TraceEventKind::KERNEL && e.collective;
    EXPECT_EQ(coll, 8u);
  }
}

TEST(KinetoShared, NcclDataCarriesCollectiveMetadata) {
  const std::string path = shared_trace(std::string(kHta) + "nccl_parser_config/nccl_data.json.gz");
  if (!fs::exists(path)) GTEST_SKIP() << "shared trace absent: " << path;
  const ImportedTrace t = dtsim::import_kineto(path);
  double allreduce_bytes = 0;
  std::size_t allreduce = 0, rpc = 0, rpc_wait = 0;
  const TraceEvent* bcast_long = nullptr;
  const TraceEvent* first_allreduce = nullptr;
  for (const TraceEvent& e : t.events) {
    if (e.kind == TraceEventKind::KERNEL && e.collective) {
      EXPECT_EQ(e.comm.group_size, 2) << e.name;
      EXPECT_EQ(e.comm.process_group, "0") << e.name;
      EXPECT_GT(e.comm.bytes, 0) << e.name;
      EXPECT_EQ(e.tid, 40) << "NCCL stream";
      if (e.comm.op == "all-reduce") {
        ++allreduce;
        allreduce_bytes += e.comm.bytes;
        if (e.correlation == 60047) first_allreduce = &e;
      }
      if (e.correlation == 19878) bcast_long = &e;
    }
    if (e.kind == TraceEventKind::CPU_OP && e.name == "record_param_comms") {
      ++rpc;
      EXPECT_TRUE(e.collective);
      if (e.comm.op.empty()) ++rpc_wait;  // "Collective name": "wait" is no collective of ours
    }
  }
  EXPECT_EQ(allreduce, 15u);
  // Sum of "In msg nelems" of the 15 all-reduce kernels (76,671,096 floats) x 4 bytes.
  EXPECT_DOUBLE_EQ(allreduce_bytes, 76671096.0 * 4);
  EXPECT_EQ(rpc, 27u);
  EXPECT_EQ(rpc_wait, 6u);
  ASSERT_NE(first_allreduce, nullptr);
  EXPECT_DOUBLE_EQ(first_allreduce->comm.bytes, 6637568.0 * 4);
  EXPECT_EQ(first_allreduce->start_ns, 4458677009853422 - 4458676416788066);  // ts 4458677009853.422 us
  EXPECT_EQ(first_allreduce->dur_ns, 2636669);                                // dur 2636.669 us
  EXPECT_EQ(first_allreduce->external_id, 12945);
  EXPECT_EQ(first_allreduce->grid[0], 8);
  EXPECT_EQ(first_allreduce->block[0], 544);
  ASSERT_NE(bcast_long, nullptr);
  EXPECT_EQ(bcast_long->comm.op, "broadcast");
  EXPECT_DOUBLE_EQ(bcast_long->comm.bytes, 53.0 * 8);  // 53 "Long" elements
  EXPECT_EQ(bcast_long->start_ns, 4458676425938828 - 4458676416788066);
  EXPECT_EQ(bcast_long->dur_ns, 7775);
  EXPECT_EQ(t.metadata.at("baseTimeNanoseconds"), "1711964646000000000");
  EXPECT_EQ(t.metadata.at("displayTimeUnit"), "ms");
  EXPECT_EQ(t.metadata.at("distributedInfo.nccl_version"), "2.17.1");
  EXPECT_EQ(t.devices.at(0).sm_count, 108);
  EXPECT_EQ(t.devices.at(0).compute_major, 8);
  EXPECT_DOUBLE_EQ(t.devices.at(0).total_memory_bytes, 42297524224.0);
}

TEST(KinetoShared, NanosecondTimestampsKeepEveryDigit) {
  const std::string path =
      shared_trace(std::string(kHta) + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz");
  if (!fs::exists(path)) GTEST_SKIP() << "shared trace absent: " << path;
  const ImportedTrace t = dtsim::import_kineto(path);
  EXPECT_EQ(t.metadata.at("displayTimeUnit"), "ns");
  // {"cat": "kernel", "name": "void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<...",
  //  "ts": 1712195495505582.988, "dur": 4.928, "correlation": 135071}: a double holds that ts only to 0.25 us.
  const TraceEvent* k = nullptr;
  std::size_t not_whole_us = 0;
  for (const TraceEvent& e : t.events) {
    if (e.kind == TraceEventKind::KERNEL && e.correlation == 135071) k = &e;
    not_whole_us += (e.start_ns + t.origin_ns) % 1000 != 0;
  }
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->start_ns + t.origin_ns, 1712195495505582988);
  EXPECT_EQ(k->dur_ns, 4928);
  EXPECT_EQ(k->grid[1], 106);
  EXPECT_GT(not_whole_us, t.events.size() / 2);
}

// Operator shapes (record_shapes=True): the first aten::addmm of the A100 control trace, checked against the raw
// JSON (External id 310: bias [512], input [1024, 1705], weight^T [1705, 512], beta, alpha).
TEST(KinetoShared, CpuOpsKeepInputDimsAndTypes) {
  const std::string path = shared_trace(std::string(kHta) + "trace_diff/control/control.json.gz");
  if (!fs::exists(path)) GTEST_SKIP() << "shared trace absent: " << path;
  const ImportedTrace t = dtsim::import_kineto(path);
  const TraceEvent* addmm = nullptr;
  std::size_t with_dims = 0, kernels_with_dims = 0;
  for (const TraceEvent& e : t.events) {
    if (e.kind == TraceEventKind::CPU_OP && e.name == "aten::addmm" && e.external_id == 310) addmm = &e;
    if (e.kind == TraceEventKind::CPU_OP && !e.input_types.empty()) ++with_dims;
    if (e.kind != TraceEventKind::CPU_OP && (!e.input_dims.empty() || !e.input_types.empty())) ++kernels_with_dims;
  }
  ASSERT_NE(addmm, nullptr);
  const std::vector<std::vector<std::int64_t>> dims = {{512}, {1024, 1705}, {1705, 512}, {}, {}};
  EXPECT_EQ(addmm->input_dims, dims);
  const std::vector<std::string> types = {"float", "float", "float", "Scalar", "Scalar"};
  EXPECT_EQ(addmm->input_types, types);
  EXPECT_EQ(with_dims, 36468u);  // CPU ops with "Input Dims" (independent count, python3 + json)
  EXPECT_EQ(kernels_with_dims, 0u);
  // A trace recorded without shapes leaves them empty.
  const std::string plain = shared_trace(std::string(kHta) + "nccl_parser_config/nccl_data.json.gz");
  if (fs::exists(plain))
    for (const TraceEvent& e : dtsim::import_kineto(plain).events) {
      EXPECT_TRUE(e.input_dims.empty());
      EXPECT_TRUE(e.input_types.empty());
    }
}

TEST(KinetoShared, AmdMi250TraceImports) {
  const std::string path = shared_trace(std::string(kHta) + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz");
  if (!fs::exists(path)) GTEST_SKIP() << "shared trace absent: " << path;
  const ImportedTrace t = dtsim::import_kineto(path);
  EXPECT_EQ(t.vendor, "amd");
  ASSERT_EQ(t.devices.size(), 4u);
  EXPECT_EQ(t.devices[0].sm_count, 104);
  EXPECT_EQ(t.devices[0].compute_major, 9);
  EXPECT_DOUBLE_EQ(t.devices[0].total_memory_bytes, 68702699520.0);
  std::size_t hip = 0, kernels = 0;
  for (const TraceEvent& e : t.events) {
    if (e.kind == TraceEventKind::RUNTIME) hip += e.name.rfind("hip", 0) == 0;
    if (e.kind == TraceEventKind::KERNEL) {
      ++kernels;
      EXPECT_EQ(e.device, 2);
      EXPECT_EQ(e.tid, 0);
      EXPECT_GE(e.correlation, 118);
    }
  }
  EXPECT_EQ(hip, 21u);
  EXPECT_EQ(kernels, 14u);
}

TEST(KinetoShared, ExecutionTraceIsRefusedCleanly) {
  const std::string path = shared_trace(std::string(kHta) + "execution_trace/benchmark_simple_add_et.json.gz");
  if (!fs::exists(path)) GTEST_SKIP() << "shared trace absent: " << path;
  try {
    dtsim::import_kineto(path);
    FAIL() << "a PyTorch execution trace was imported as Kineto";
  } catch (const dtsim::FormatError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": not a Kineto trace (no 'traceEvents' array)");
  }
}

// ------------------------------------------------------------------------------------------------------------
// Helpers: exact conversions and names
// ------------------------------------------------------------------------------------------------------------
TEST(KinetoHelpers, MicrosecondTextToNanoseconds) {
  using dtsim::kineto::us_text_to_ns;
  EXPECT_EQ(us_text_to_ns("12"), 12000);
  EXPECT_EQ(us_text_to_ns("0"), 0);
  EXPECT_EQ(us_text_to_ns("-3"), -3000);
  EXPECT_EQ(us_text_to_ns("4.928"), 4928);
  EXPECT_EQ(us_text_to_ns("1712195495505582.988"), 1712195495505582988);
  EXPECT_EQ(us_text_to_ns("30669.0"), 30669000);
  EXPECT_EQ(us_text_to_ns("0.0004"), 0);  // 0.4 ns
  EXPECT_EQ(us_text_to_ns("0.0005"), 1);  // 0.5 ns: half away from zero
  EXPECT_EQ(us_text_to_ns("-0.0005"), -1);
  EXPECT_EQ(us_text_to_ns("0.0014999"), 1);
  EXPECT_EQ(us_text_to_ns("2.0015"), 2002);
  EXPECT_EQ(us_text_to_ns("1.5e3"), 1500000);
  EXPECT_EQ(us_text_to_ns("1.5E-3"), 2);
  EXPECT_EQ(us_text_to_ns("25e-1"), 2500);
  EXPECT_EQ(us_text_to_ns("0.000000000000000000000000001"), 0);
  // 25 significant digits: the dropped tail only matters through rounding.
  EXPECT_EQ(us_text_to_ns("1712195495505582.9884999999"), 1712195495505582988);
  EXPECT_EQ(us_text_to_ns("1712195495505582.9885000001"), 1712195495505582989);
  EXPECT_EQ(us_text_to_ns("9223372036854775.807"), INT64_MAX);
  EXPECT_EQ(us_text_to_ns("9223372036854775.808"), std::nullopt);
  EXPECT_EQ(us_text_to_ns("1e300"), std::nullopt);
  EXPECT_EQ(us_text_to_ns("abc"), std::nullopt);
  EXPECT_EQ(us_text_to_ns(""), std::nullopt);
  EXPECT_EQ(us_text_to_ns("1.2.3"), std::nullopt);
  EXPECT_EQ(us_text_to_ns("1e"), std::nullopt);
}

TEST(KinetoHelpers, CollectiveNamesAreNormalised) {
  using dtsim::kineto::normalize_collective_op;
  EXPECT_EQ(normalize_collective_op("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"),
            "all-reduce");
  EXPECT_EQ(normalize_collective_op("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"), "all-reduce");
  EXPECT_EQ(normalize_collective_op("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"), "reduce-scatter");
  EXPECT_EQ(normalize_collective_op("ncclDevKernel_AllGather_RING_LL"), "all-gather");
  EXPECT_EQ(normalize_collective_op("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"),
            "broadcast");
  EXPECT_EQ(normalize_collective_op("ncclKernel_Reduce_RING_LL_Sum_float"), "reduce");
  EXPECT_EQ(normalize_collective_op("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)"), "");
  EXPECT_EQ(normalize_collective_op("ncclDevKernel_Generic"), "");
  EXPECT_EQ(normalize_collective_op("allreduce"), "all-reduce");
  EXPECT_EQ(normalize_collective_op("_allgather_base"), "all-gather");
  EXPECT_EQ(normalize_collective_op("all_gather_into_tensor_coalesced"), "all-gather");
  EXPECT_EQ(normalize_collective_op("_reduce_scatter_base"), "reduce-scatter");
  EXPECT_EQ(normalize_collective_op("alltoall_base"), "all-to-all");
  EXPECT_EQ(normalize_collective_op("all_to_all"), "all-to-all");
  EXPECT_EQ(normalize_collective_op("send"), "send");
  EXPECT_EQ(normalize_collective_op("recv"), "recv");
  EXPECT_EQ(normalize_collective_op("barrier"), "");
  EXPECT_EQ(normalize_collective_op("wait"), "");
}

TEST(KinetoHelpers, DtypeSizes) {
  using dtsim::kineto::dtype_size_bytes;
  EXPECT_EQ(dtype_size_bytes("Float"), 4);
  EXPECT_EQ(dtype_size_bytes("Long"), 8);
  EXPECT_EQ(dtype_size_bytes("BFloat16"), 2);
  EXPECT_EQ(dtype_size_bytes("Half"), 2);
  EXPECT_EQ(dtype_size_bytes("Byte"), 1);
  EXPECT_EQ(dtype_size_bytes("Double"), 8);
  EXPECT_EQ(dtype_size_bytes("Float8_e4m3fn"), 1);
  EXPECT_EQ(dtype_size_bytes("float16"), 2);
  EXPECT_EQ(dtype_size_bytes("Quaternion"), 0);
  EXPECT_EQ(dtype_size_bytes(""), 0);
}

// ------------------------------------------------------------------------------------------------------------
// Synthetic documents through parse_kineto
// ------------------------------------------------------------------------------------------------------------
TEST(KinetoSynthetic, OldAndNewVocabulariesAndFields) {
  const std::string text = R"J({
    "schemaVersion": 1, "traceName": "t.json", "record_shapes": true, "someNull": null, "INFO": ["ignored"],
    "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8, "pg_config": [{"pg_size": 8}]},
    "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85000000000, "numSms": 132,
                          "computeMajor": 9, "computeMinor": 0}],
    "traceEvents": [
      {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "ts": 5, "args": {"name": "python"}},
      {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 100, "tid": 101, "ts": 1000.5, "dur": 20,
       "args": {"External id": 9, "Input Dims": [[2, 3], [3, 4]]}},
      {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 101, "ts": 1001, "dur": 3,
       "args": {"correlation": 77, "External id": 9}},
      {"ph": "X", "cat": "Kernel", "name": "gemm", "pid": 0, "tid": "stream 7", "ts": 1010, "dur": 5.25,
       "args": {"correlation": 77, "External id": 9, "device": 0, "grid": [4, 2, 1], "block": [128, 1, 1]}},
      {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 9, "ts": 1003, "dur": 1,
       "args": {"stream": 13, "device": 0}},
      {"ph": "X", "cat": "Memset", "name": "Memset", "pid": 0, "tid": 9, "ts": 1003, "dur": 1, "args": {}},
      {"ph": "X", "cat": "python_function", "name": "f", "pid": 100, "tid": 101, "ts": 900, "dur": 1000},
      {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "x", "ts": 1, "dur": 99999},
      {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 999, "dur": 1},
      {"ph": "s", "cat": "ac2g", "id": 77, "pid": 100, "tid": 101, "ts": 1001},
      {"ph": "i", "name": "Iteration Start", "pid": "Traces", "tid": "", "ts": 10},
      {"ph": "C", "name": "mem", "pid": 1, "ts": 1002, "args": {"bytes": 5}}
    ]})J";
  const ImportedTrace t = dtsim::parse_kineto(text, "synthetic.json");
  EXPECT_EQ(t.source, "synthetic.json");
  EXPECT_EQ(t.vendor, "nvidia");
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.world_size, 8);
  EXPECT_EQ(t.metadata.at("schemaVersion"), "1");
  EXPECT_EQ(t.metadata.at("traceName"), "t.json");
  EXPECT_EQ(t.metadata.at("record_shapes"), "true");
  EXPECT_EQ(t.metadata.at("someNull"), "null");
  EXPECT_EQ(t.metadata.at("distributedInfo.backend"), "nccl");
  EXPECT_EQ(t.metadata.count("INFO"), 0u);
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.devices[0].sm_count, 132);
  EXPECT_EQ(t.devices[0].compute_major, 9);
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.origin_ns, 1000500);
  // Sorted by start, then kind (MEMCPY before MEMSET at the same start).
  const TraceEvent& op = t.events[0];
  EXPECT_EQ(op.kind, TraceEventKind::CPU_OP);
  EXPECT_EQ(op.start_ns, 0);
  EXPECT_EQ(op.dur_ns, 20000);
  EXPECT_EQ(op.external_id, 9);
  EXPECT_EQ(op.device, -1);
  const TraceEvent& rt = t.events[1];
  EXPECT_EQ(rt.kind, TraceEventKind::RUNTIME);
  EXPECT_EQ(rt.start_ns, 500);
  EXPECT_EQ(rt.correlation, 77);
  EXPECT_EQ(t.events[2].kind, TraceEventKind::MEMCPY);
  EXPECT_EQ(t.events[2].tid, 13);  // "stream" wins over tid on the GPU
  EXPECT_EQ(t.events[3].kind, TraceEventKind::MEMSET);
  EXPECT_EQ(t.events[3].device, 0);  // no "device": the pid
  const TraceEvent& k = t.events[4];
  EXPECT_EQ(k.kind, TraceEventKind::KERNEL);
  EXPECT_EQ(k.start_ns, 9500);
  EXPECT_EQ(k.dur_ns, 5250);
  EXPECT_EQ(k.tid, 7);  // "stream 7"
  EXPECT_EQ(k.device, 0);
  EXPECT_EQ(k.grid[0], 4);
  EXPECT_EQ(k.grid[1], 2);
  EXPECT_EQ(k.block[0], 128);
  EXPECT_FALSE(k.collective);
}

// Shapes of every form met in traces: tensors, 0-dim tensors, scalars, TensorLists given as nested lists (newer
// PyTorch) or as [] with type "TensorList"; odd entries (objects, strings, non-integers) become [] without failing.
TEST(KinetoSynthetic, InputDimsAndTypesOfCpuOps) {
  const ImportedTrace t = dtsim::parse_kineto(R"J({"traceEvents": [
      {"ph":"X","cat":"cpu_op","name":"aten::bmm","pid":1,"tid":1,"ts":1,"dur":9,
       "args":{"Input Dims":[[8,64,32],[8,32,16]],"Input type":["c10::Half","c10::Half"]}},
      {"ph":"X","cat":"cpu_op","name":"aten::_foreach_add_","pid":1,"tid":1,"ts":2,"dur":1,
       "args":{"Input Dims":[[[4,5],[6]],[],[]],"Input type":["TensorList","Scalar",""],"Input Strides":[[1]]}},
      {"ph":"X","cat":"cpu_op","name":"aten::odd","pid":1,"tid":1,"ts":3,"dur":1,
       "args":{"Input Dims":[{"a":[1]},"x",[2,1.5],[3,[4]],7,[5]],"Input type":["float",{"b":1},["c"],7]}},
      {"ph":"X","cat":"cpu_op","name":"aten::none","pid":1,"tid":1,"ts":4,"dur":1,
       "args":{"Input Dims":"n/a","Input type":5}},
      {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":5,"dur":1,
       "args":{"Input Dims":[[1]],"Input type":["float"]}}
    ]})J",
                                              "dims.json");
  ASSERT_EQ(t.events.size(), 5u);
  using Dims = std::vector<std::vector<std::int64_t>>;
  using Types = std::vector<std::string>;
  EXPECT_EQ(t.events[0].input_dims, (Dims{{8, 64, 32}, {8, 32, 16}}));
  EXPECT_EQ(t.events[0].input_types, (Types{"c10::Half", "c10::Half"}));
  EXPECT_EQ(t.events[1].input_dims, (Dims{{}, {}, {}}));
  EXPECT_EQ(t.events[1].input_types, (Types{"TensorList", "Scalar", ""}));
  EXPECT_EQ(t.events[2].input_dims, (Dims{{}, {}, {}, {}, {}, {5}}));
  EXPECT_EQ(t.events[2].input_types, (Types{"float", "", "", ""}));
  EXPECT_TRUE(t.events[3].input_dims.empty());
  EXPECT_TRUE(t.events[3].input_types.empty());
  EXPECT_EQ(t.events[4].kind, TraceEventKind::KERNEL);  // only CPU ops keep shapes
  EXPECT_TRUE(t.events[4].input_dims.empty());
}

TEST(KinetoSynthetic, LegacyBareArrayIsAccepted) {
  const ImportedTrace t = dtsim::parse_kineto(
      R"([{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":2},
          {"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":4,"dur":1}])",
      "legacy.json");
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].name, "op");
  EXPECT_EQ(t.events[1].start_ns, 6000);
  EXPECT_EQ(t.rank, -1);
  EXPECT_EQ(t.vendor, "");
}

TEST(KinetoSynthetic, SortTiesAreBrokenByKindPidTidName) {
  const ImportedTrace t = dtsim::parse_kineto(
      R"({"traceEvents":[
          {"ph":"X","cat":"kernel","name":"b","pid":0,"tid":7,"ts":10,"dur":1},
          {"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":10,"dur":1},
          {"ph":"X","cat":"kernel","name":"z","pid":0,"tid":3,"ts":10,"dur":1},
          {"ph":"X","cat":"cpu_op","name":"y","pid":9,"tid":9,"ts":10,"dur":1},
          {"ph":"X","cat":"cpu_op","name":"x","pid":2,"tid":9,"ts":10,"dur":1}]})",
      "ties.json");
  std::vector<std::string> names;
  for (const TraceEvent& e : t.events) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"x", "y", "z", "a", "b"}));
}

TEST(KinetoSynthetic, CollectiveInfoFlowsFromCpuToKernel) {
  // Old PyTorch: the kernel has no collective args; the launch sits inside "nccl:all_to_all" and a
  // record_param_comms with sizes on the same thread. New PyTorch: the launch's External id names the
  // record_param_comms.
  const std::string text = R"J({"traceEvents":[
      {"ph":"X","cat":"user_annotation","name":"nccl:all_to_all","pid":1,"tid":2,"ts":100,"dur":50,"args":{"External id":1}},
      {"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1,"tid":2,"ts":101,"dur":40,
       "args":{"External id":2,"Collective name":"","In msg nelems":1024,"Out msg nelems":1024,"dtype":"BFloat16",
               "Group size":8,"Process Group Description":"ep_group"}},
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":2,"ts":110,"dur":5,"args":{"correlation":500,"External id":2}},
      {"ph":"X","cat":"kernel","name":"ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)","pid":0,"tid":30,"ts":120,"dur":10,
       "args":{"correlation":500,"External id":2,"device":0,"stream":30}},
      {"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1,"tid":3,"ts":200,"dur":40,
       "args":{"External id":7,"Collective name":"allreduce","In msg nelems":10,"Out msg nelems":10,"dtype":"Float",
               "Group size":2,"Process Group Name":"3"}},
      {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":4,"ts":210,"dur":5,"args":{"correlation":600,"External id":7}},
      {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","pid":0,"tid":31,"ts":220,"dur":10,
       "args":{"correlation":600,"device":0,"stream":31}},
      {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllGather_RING_LL","pid":0,"tid":31,"ts":300,"dur":10,
       "args":{"correlation":999,"device":0,"stream":31,"Collective name":"_allgather_base","In msg nelems":4,
               "Out msg nelems":16,"dtype":"Long","Group size":4,"Process Group Name":"5"}}
    ]})J";
  const ImportedTrace t = dtsim::parse_kineto(text, "coll.json");
  std::map<std::int64_t, const TraceEvent*> kernels;
  for (const TraceEvent& e : t.events)
    if (e.kind == TraceEventKind::KERNEL) kernels[e.correlation] = &e;
  ASSERT_EQ(kernels.size(), 3u);
  const TraceEvent& a2a = *kernels.at(500);
  EXPECT_TRUE(a2a.collective);
  EXPECT_EQ(a2a.comm.op, "all-to-all");    // from the enclosing annotation
  EXPECT_DOUBLE_EQ(a2a.comm.bytes, 2048);  // 1024 bf16 from record_param_comms (by External id)
  EXPECT_EQ(a2a.comm.group_size, 8);
  EXPECT_EQ(a2a.comm.process_group, "ep_group");
  const TraceEvent& ar = *kernels.at(600);
  EXPECT_EQ(ar.comm.op, "all-reduce");
  EXPECT_DOUBLE_EQ(ar.comm.bytes, 40);
  EXPECT_EQ(ar.comm.group_size, 2);
  EXPECT_EQ(ar.comm.process_group, "3");
  const TraceEvent& ag = *kernels.at(999);
  EXPECT_EQ(ag.comm.op, "all-gather");
  EXPECT_DOUBLE_EQ(ag.comm.bytes, 16 * 8);  // the gathered output
  EXPECT_EQ(ag.comm.group_size, 4);
  for (const TraceEvent& e : t.events) {
    if (e.kind == TraceEventKind::USER_ANNOTATION) {
      EXPECT_EQ(e.comm.op, "all-to-all");
    }
  }
}

TEST(KinetoSynthetic, AmdHipTraceWithoutDeviceProperties) {
  const ImportedTrace t = dtsim::parse_kineto(
      R"({"traceEvents":[
          {"ph":"X","cat":"cuda_runtime","name":"hipLaunchKernel","pid":5,"tid":5,"ts":1,"dur":1,"args":{"stream":"0x0","correlation":3}},
          {"ph":"X","cat":"kernel","name":"k","pid":2,"tid":0,"ts":3,"dur":1,"args":{"device":2,"stream":"0x1f","correlation":3}}]})",
      "hip.json");
  EXPECT_EQ(t.vendor, "amd");
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].tid, 5);   // CPU side keeps its tid
  EXPECT_EQ(t.events[1].tid, 31);  // hex stream
  EXPECT_EQ(t.events[1].device, 2);

  // Vendor evidence, strongest first: device names, runtime calls, the tracer named at the top level.
  auto vendor = [](const std::string& text) { return dtsim::parse_kineto(text, "v.json").vendor; };
  const std::string cuda_call = R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1,"dur":1})";
  EXPECT_EQ(vendor(R"({"traceName":"rocm_vs_cuda.json","traceEvents":[)" + cuda_call + "]}"), "nvidia");
  EXPECT_EQ(vendor(R"({"deviceProperties":[{"name":"AMD Instinct MI300X"}],"traceEvents":[)" + cuda_call + "]}"),
            "amd");
  EXPECT_EQ(vendor(R"({"deviceProperties":[{"name":"Tesla V100-SXM2-16GB"}],"traceEvents":[]})"), "nvidia");
  EXPECT_EQ(vendor(R"({"tracer":"roctracer","traceEvents":[]})"), "amd");
  EXPECT_EQ(vendor(R"({"cupti_version":18,"traceEvents":[]})"), "nvidia");
  EXPECT_EQ(vendor(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"rcclKernel","ts":1,"dur":1}]})"), "amd");
  EXPECT_EQ(vendor(R"({"traceEvents":[]})"), "");
}

// ------------------------------------------------------------------------------------------------------------
// Damaged inputs: each must import or throw dtsim::FormatError/ConfigError naming the source, on one line.
// ------------------------------------------------------------------------------------------------------------

/// A fresh directory under the system temp dir, unique per process and test; removed on destruction.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("dtsim-kineto-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string write(const std::string& name, const std::string& bytes) const {
    const fs::path p = path / name;
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

enum class Outcome { IMPORTED, REFUSED };

/// Runs `fn`; fails the test unless it returns or throws FormatError/ConfigError whose message names `source`
/// and is one line. On success the trace's invariants are checked.
template <typename Fn>
Outcome import_or_clean_error(const std::string& source, Fn&& fn, std::string* message = nullptr) {
  try {
    const ImportedTrace t = fn();
    check_invariants(t);
    return Outcome::IMPORTED;
  } catch (const dtsim::Error& e) {
    const std::string what = e.what();
    const bool typed = dynamic_cast<const dtsim::FormatError*>(&e) || dynamic_cast<const dtsim::ConfigError*>(&e);
    EXPECT_TRUE(typed) << "not a FormatError/ConfigError: " << what;
    EXPECT_NE(what.find(source), std::string::npos) << "message does not name " << source << ": " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "multi-line message: " << what;
    if (message) *message = what;
    return Outcome::REFUSED;
  } catch (const std::exception& e) {
    ADD_FAILURE() << source << ": threw a non-dtsim exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << source << ": threw something that is not a std::exception";
  }
  return Outcome::REFUSED;
}

Outcome import_file_or_clean_error(const std::string& path, std::string* message = nullptr) {
  return import_or_clean_error(
      path, [&] { return dtsim::import_kineto(path); }, message);
}

std::string message_of(const std::string& text, const std::string& source = "doc.json") {
  std::string msg;
  EXPECT_EQ(import_or_clean_error(
                source, [&] { return dtsim::parse_kineto(text, source); }, &msg),
            Outcome::REFUSED)
      << text;
  return msg;
}

const std::string kSmall =
    std::string(kHta) + "critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz";

TEST(KinetoDamaged, TruncatedJsonIsRefused) {
  const std::string src = shared_trace(kSmall);
  if (!fs::exists(src)) GTEST_SKIP() << "shared trace absent: " << src;
  const std::string json = dtsim::read_maybe_compressed(src);
  const std::size_t close = json.rfind('}');
  ASSERT_NE(close, std::string::npos);
  TempDir dir("truncated");
  const std::vector<std::size_t> cuts = {0,
                                         1,
                                         2,
                                         10,
                                         100,
                                         1000,
                                         json.size() / 7,
                                         json.size() / 3,
                                         json.size() / 2,
                                         json.size() - 1000,
                                         close - 1,
                                         close,
                                         json.size() - 1};
  for (std::size_t cut : cuts) {
    const std::string path = dir.write("cut_" + std::to_string(cut) + ".json", json.substr(0, cut));
    std::string msg;
    const Outcome o = import_file_or_clean_error(path, &msg);
    if (cut <= close) {  // the closing brace is missing: never a complete document
      EXPECT_EQ(o, Outcome::REFUSED) << "cut at " << cut;
      if (json.find_first_not_of(" \t\r\n") >= cut) {
        EXPECT_NE(msg.find("empty file"), std::string::npos) << msg;
      } else {
        // "truncated JSON at byte N (unexpected end of input)", or for a cut inside a literal or number
        // "invalid JSON at byte N: ... invalid literal": either way located at the cut.
        EXPECT_NE(msg.find("JSON at byte " + std::to_string(cut)), std::string::npos) << msg;
      }
    }
  }
}

TEST(KinetoDamaged, TruncatedGzipIsRefused) {
  const std::string src = shared_trace(kSmall);
  if (!fs::exists(src)) GTEST_SKIP() << "shared trace absent: " << src;
  const std::string gz = read_bytes(src);
  TempDir dir("truncated-gz");
  std::size_t refused = 0;
  const std::vector<std::size_t> cuts = {1,
                                         2,
                                         10,
                                         20,
                                         100,
                                         1000,
                                         gz.size() / 4,
                                         gz.size() / 2,
                                         gz.size() - 100,
                                         gz.size() - 9,
                                         gz.size() - 8,
                                         gz.size() - 4,
                                         gz.size() - 1};
  for (std::size_t cut : cuts) {
    const std::string path = dir.write("cut_" + std::to_string(cut) + ".json.gz", gz.substr(0, cut));
    std::string msg;
    if (import_file_or_clean_error(path, &msg) == Outcome::REFUSED) ++refused;
  }
  // Cuts inside the deflate data lose JSON; only the 8-byte CRC/size trailer may go unnoticed.
  EXPECT_GE(refused, cuts.size() - 3);
  // A cut inside the gzip header: the reader hands the bytes back as is; the importer still says what happened.
  std::string msg;
  EXPECT_EQ(import_file_or_clean_error(dir.write("header.json.gz", gz.substr(0, 10)), &msg), Outcome::REFUSED);
  EXPECT_NE(msg.find("truncated or corrupt gzip data"), std::string::npos) << msg;
}

TEST(KinetoDamaged, FlippedBytesImportOrRefuseCleanly) {
  const std::string src = shared_trace(kSmall);
  if (!fs::exists(src)) GTEST_SKIP() << "shared trace absent: " << src;
  const std::string json = dtsim::read_maybe_compressed(src);
  const std::string gz = read_bytes(src);
  TempDir dir("flipped");
  std::mt19937 rng(20240601);  // fixed seed: the same positions on every run
  std::size_t refused = 0, imported = 0;
  for (int round = 0; round < 60; ++round) {
    std::string bad = json;
    const int flips = 1 + round % 4;
    for (int f = 0; f < flips; ++f) {
      const std::size_t pos = std::uniform_int_distribution<std::size_t>(0, bad.size() - 1)(rng);
      const char replacements[] = {'\xff', '"', '{', ']', ',', '0', 'x', '\0', ':', '-'};
      bad[pos] = replacements[(round + f) % 10];
    }
    const std::string path = dir.write("flip_" + std::to_string(round) + ".json", bad);
    (import_file_or_clean_error(path) == Outcome::IMPORTED ? imported : refused)++;
  }
  for (int round = 0; round < 20; ++round) {
    std::string bad = gz;
    const std::size_t pos = std::uniform_int_distribution<std::size_t>(10, bad.size() - 1)(rng);
    bad[pos] = static_cast<char>(bad[pos] ^ 0x5a);
    const std::string path = dir.write("flip_" + std::to_string(round) + ".json.gz", bad);
    (import_file_or_clean_error(path) == Outcome::IMPORTED ? imported : refused)++;
  }
  EXPECT_GT(refused, 0u);
  EXPECT_EQ(refused + imported, 80u);
}

TEST(KinetoDamaged, WrongTypesAndShapes) {
  auto ev = [](const std::string& fields) {
    return R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,)" + fields + "}]}";
  };
  EXPECT_EQ(message_of(ev(R"("ts":"abc","dur":1)")), "doc.json: event #0 ('k'): 'ts' is not a number");
  EXPECT_EQ(message_of(ev(R"("ts":1,"dur":[1])")), "doc.json: event #0 ('k'): 'dur' is not a number");
  EXPECT_EQ(message_of(ev(R"("dur":1)")), "doc.json: event #0 ('k'): missing 'ts'");
  EXPECT_EQ(message_of(ev(R"("ts":1,"dur":-5)")), "doc.json: event #0 ('k'): negative 'dur'");
  EXPECT_EQ(message_of(ev(R"("ts":1e300,"dur":1)")), "doc.json: event #0 ('k'): 'ts' is out of range");
  EXPECT_EQ(message_of(ev(R"("ts":9223372036854775807,"dur":1)")), "doc.json: event #0 ('k'): 'ts' is out of range");
  EXPECT_EQ(message_of(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":5,"ts":1,"dur":1}]})"),
            "doc.json: event #0: 'name' is not a string");
  EXPECT_EQ(message_of(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":[1],"ts":1,"dur":1}]})"),
            "doc.json: event #0 ('k'): 'pid' is not an integer or a string");
  EXPECT_EQ(message_of(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"a","ts":-9000000000000000,"dur":1},
                                          {"ph":"X","cat":"kernel","name":"b","ts":9000000000000000,"dur":1}]})"),
            "doc.json: timestamps span more than the int64 nanosecond range");
  EXPECT_EQ(message_of(R"({"traceEvents":5})"), "doc.json: 'traceEvents' is not an array");
  EXPECT_EQ(message_of(R"({"traceEvents":{"a":1}})"), "doc.json: 'traceEvents' is not an array (found an object)");
  EXPECT_EQ(message_of(R"({"traceEvents":[{"ph":"X"}, 7]})"), "doc.json: traceEvents[1] is not an object");
  EXPECT_EQ(message_of(R"({"traceEvents":[[1]]})"), "doc.json: traceEvents[0] is not an object");
  EXPECT_EQ(message_of(R"({"schemaVersion":1})"), "doc.json: not a Kineto trace (no 'traceEvents' array)");
  EXPECT_EQ(message_of("5"), "doc.json: not a Kineto trace (the top level is a single value, not an object)");
  EXPECT_EQ(message_of("\"x\""), "doc.json: not a Kineto trace (the top level is a single value, not an object)");
  EXPECT_EQ(message_of(""), "doc.json: empty file");
  EXPECT_EQ(message_of(" \n\t"), "doc.json: empty file");
  EXPECT_EQ(message_of(R"({"traceEvents":[]} x)").rfind("doc.json: invalid JSON at byte 20: ", 0), 0u);
  EXPECT_EQ(message_of("hello world").rfind("doc.json: invalid JSON at byte ", 0), 0u);
  EXPECT_EQ(message_of("{\"traceEvents\":[\"\xff\"]}").rfind("doc.json: invalid JSON at byte ", 0), 0u);
  const std::string cut = R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":)";
  EXPECT_EQ(message_of(cut),
            "doc.json: truncated JSON at byte " + std::to_string(cut.size()) + " (unexpected end of input)");
  const std::string cut_string = R"({"traceEvents":[{"name":"cut inside a string)";
  EXPECT_EQ(message_of(cut_string),
            "doc.json: truncated JSON at byte " + std::to_string(cut_string.size()) + " (unexpected end of input)");
  EXPECT_EQ(message_of(R"({"a":1e99999})"), "doc.json: invalid JSON at byte 12: number overflow parsing '1e99999'");
  const std::string bad_utf8 = message_of("{\"traceEvents\":[\"\xff\"]}");
  EXPECT_EQ(bad_utf8.rfind("doc.json: invalid JSON at byte 18: ", 0), 0u) << bad_utf8;
  EXPECT_TRUE(std::all_of(bad_utf8.begin(), bad_utf8.end(), [](char c) { return c >= 0x20 && c < 0x7f; }))
      << "message is not printable ASCII";

  // Wrong types where the importer can do without the value: imported, value ignored.
  const ImportedTrace t = dtsim::parse_kineto(
      R"({"traceEvents":[
          {"ph":5,"cat":"kernel","name":"not X","ts":"?","dur":1},
          {"ph":"X","cat":7,"name":"no category","ts":"?"},
          {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1,
           "args":{"correlation":"abc","device":{},"stream":[1],"grid":"x","block":[1,"y"],"External id":null}},
          {"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":2,"dur":1,"args":7}],
          "deviceProperties":{"oops":1},"distributedInfo":[1,2]})",
      "lenient.json");
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].correlation, -1);
  EXPECT_EQ(t.events[0].device, 0);
  EXPECT_EQ(t.events[0].tid, 7);
  EXPECT_EQ(t.events[0].block[0], 1);
  EXPECT_EQ(t.events[0].block[1], 0);
  EXPECT_EQ(t.events[0].external_id, -1);
  EXPECT_TRUE(t.devices.empty());
  EXPECT_EQ(t.rank, -1);
}

TEST(KinetoDamaged, DeepNestingDoesNotExhaustTheStack) {
  const std::size_t depth = 200000;
  const std::string in_args = R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"x":)" +
                              std::string(depth, '[') + std::string(depth, ']') + "}}]}";
  const ImportedTrace t = dtsim::parse_kineto(in_args, "deep.json");
  EXPECT_EQ(t.events.size(), 1u);
  EXPECT_EQ(message_of(std::string(depth, '['), "deep.json").rfind("deep.json: ", 0), 0u);
  EXPECT_EQ(message_of(R"({"traceEvents":)" + std::string(depth, '['), "deep.json"),
            "deep.json: traceEvents[0] is not an object");
}

TEST(KinetoDamaged, FilesThatAreNotTraces) {
  TempDir dir("not-traces");
  std::string msg;
  EXPECT_EQ(import_file_or_clean_error(dir.write("empty.json", ""), &msg), Outcome::REFUSED);
  EXPECT_NE(msg.find("empty file"), std::string::npos) << msg;
  EXPECT_EQ(import_file_or_clean_error(dir.write("text.json", "not json at all\n"), &msg), Outcome::REFUSED);
  EXPECT_NE(msg.find("invalid JSON"), std::string::npos) << msg;
  EXPECT_EQ(import_file_or_clean_error(dir.write("missing.json", R"({"foo": [1, 2]})"), &msg), Outcome::REFUSED);
  EXPECT_NE(msg.find("no 'traceEvents' array"), std::string::npos) << msg;
  EXPECT_EQ(import_file_or_clean_error(dir.write("five.json", R"({"traceEvents": 5})"), &msg), Outcome::REFUSED);
  EXPECT_EQ(
      import_file_or_clean_error(dir.write("array.json", R"([{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1}])")),
      Outcome::IMPORTED);
  EXPECT_EQ(import_file_or_clean_error(dir.write("garbage.json.gz", std::string("\x1f\x8b\x08\x00garbage", 11)), &msg),
            Outcome::REFUSED);
  const std::string absent = (dir.path / "absent.json").string();
  EXPECT_EQ(import_file_or_clean_error(absent, &msg), Outcome::REFUSED);
  EXPECT_THROW(dtsim::import_kineto(absent), dtsim::ConfigError);
  // An archive with no .json member, and a plain file given as an archive.
  const std::string plain = dir.write("plain.txt", "hello");
  EXPECT_THROW(dtsim::import_kineto_archive(plain), dtsim::FormatError);
  try {
    dtsim::import_kineto_archive(plain);
  } catch (const dtsim::Error& e) {
    EXPECT_NE(std::string(e.what()).find(plain), std::string::npos) << e.what();
  }
}

TEST(KinetoDamaged, BadMemberOfAnArchiveNamesTheMember) {
  const std::string src = shared_trace(kDlrm);
  if (!fs::exists(src)) GTEST_SKIP() << "shared trace absent: " << src;
  const std::string gz = read_bytes(src);
  TempDir dir("archive");
  // Truncated archive: either the archive reader or the JSON parser refuses it, naming the file.
  for (std::size_t cut : {gz.size() / 3, gz.size() / 2, gz.size() - 2000}) {
    const std::string path = dir.write("cut_" + std::to_string(cut) + ".tar.gz", gz.substr(0, cut));
    import_or_clean_error(path, [&] {
      std::vector<ImportedTrace> ts = dtsim::import_kineto_archive(path);
      return ts.empty() ? ImportedTrace{} : ts.front();
    });
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------------------
// The script that produced kTraces (python3; only the standard library):
//
// import gzip, json, tarfile, glob, collections, re
// from decimal import Decimal, ROUND_HALF_UP
// KIND = {'cpu_op':'CPU_OP','operator':'CPU_OP','user_annotation':'USER_ANNOTATION','cuda_runtime':'RUNTIME',
//         'cuda_driver':'RUNTIME','runtime':'RUNTIME','hip_runtime':'RUNTIME','hip_driver':'RUNTIME',
//         'kernel':'KERNEL','gpu_memcpy':'MEMCPY','memcpy':'MEMCPY','gpu_memset':'MEMSET','memset':'MEMSET',
//         'gpu_user_annotation':'GPU_ANNOTATION'}
// GPU = {'KERNEL','MEMCPY','MEMSET','GPU_ANNOTATION'}
// def op_of(name):
//     s = re.sub('[^a-z0-9]', '', name.split('(')[0].lower())
//     for k, v in [('allreduce','all-reduce'),('reducescatter','reduce-scatter'),('allgather','all-gather'),
//                  ('alltoall','all-to-all'),('broadcast','broadcast')]:
//         if k in s: return v
//     if 'sendrecv' in s: return ''
//     for k in ['send','recv','reduce']:
//         if k in s: return k
//     return ''
// def analyse(d):
//     ev = [e for e in d['traceEvents'] if e.get('ph') == 'X' and isinstance(e.get('cat'), str)
//           and e['cat'].lower() in KIND]
//     for e in ev: e['kind'] = KIND[e['cat'].lower()]
//     r = {'events': len(ev)}; cnt = collections.Counter(e['kind'] for e in ev); r.update(cnt)
//     ker = [e for e in ev if e['kind'] == 'KERNEL']
//     coll = [e for e in ker if 'nccl' in e['name'].lower() or 'rccl' in e['name'].lower()]
//     r['coll'] = len(coll)
//     streams = set()
//     for e in ev:
//         if e['kind'] in GPU:
//             a = e.get('args', {})
//             streams.add((a['device'] if isinstance(a.get('device'), int) else e['pid'],
//                          a['stream'] if isinstance(a.get('stream'), int) else e['tid']))
//     r['streams'] = len(streams)
//     start = min(Decimal(str(e['ts'])) for e in ev)
//     end = max(Decimal(str(e['ts'])) + Decimal(str(e['dur'])) for e in ev)
//     r['span_ns'] = int(((end - start) * 1000).to_integral_value(ROUND_HALF_UP))
//     r['origin_ns'] = int((start * 1000).to_integral_value(ROUND_HALF_UP))
//     dist = d.get('distributedInfo', {}); r['rank'] = dist.get('rank', -1); r['world'] = dist.get('world_size', 0)
//     devs = d.get('deviceProperties', []); r['ndev'] = len(devs); r['dev0'] = devs[0]['name'] if devs else ''
//     rt_corr = set(e['args']['correlation'] for e in ev if e['kind'] == 'RUNTIME' and 'correlation' in e.get('args',
//     {})) with_corr = [e for e in ker if e.get('args', {}).get('correlation', -1) >= 0] r['ker_corr'] =
//     len(with_corr); r['ker_linked'] = sum(1 for e in with_corr if e['args']['correlation'] in rt_corr) # op per
//     collective kernel: own "Collective name" > kernel name > CPU side (the launch's External id, then # the innermost
//     enclosing nccl:* / record_param_comms with an op on the launching thread), brute force. rt = {} for e in ev:
//         if e['kind'] == 'RUNTIME' and 'correlation' in e.get('args', {}): rt.setdefault(e['args']['correlation'], e)
//     cpu = [e for e in ev if e['kind'] in ('CPU_OP','USER_ANNOTATION') and ('Collective name' in e.get('args', {})
//            or e['name'].lower().startswith(('nccl:','rccl:')))]
//     def cpu_op(e):
//         return op_of(e['args']['Collective name']) if 'Collective name' in e.get('args', {}) else
//         op_of(e['name'][5:])
//     ops = collections.Counter()
//     for k in coll:
//         a = k.get('args', {})
//         op = op_of(a['Collective name']) if 'Collective name' in a else ''
//         if not op: op = op_of(k['name'])
//         if not op and a.get('correlation') in rt:
//             r0 = rt[a['correlation']]; x = r0.get('args', {}).get('External id')
//             for c in cpu:
//                 if x is not None and c.get('args', {}).get('External id') == x and cpu_op(c): op = cpu_op(c); break
//             if not op:
//                 enc = [c for c in cpu if c['pid'] == r0['pid'] and c['tid'] == r0['tid']
//                        and Decimal(str(c['ts'])) <= Decimal(str(r0['ts'])) and cpu_op(c)
//                        and Decimal(str(c['ts'])) + Decimal(str(c['dur'])) >= Decimal(str(r0['ts'])) +
//                        Decimal(str(r0['dur']))]
//                 enc.sort(key=lambda c: Decimal(str(c['ts'])), reverse=True)
//                 if enc: op = cpu_op(enc[0])
//         ops[op] += 1
//     r['ops'] = dict(sorted(ops.items()))
//     return r
// def load(p):
//     with gzip.open(p, 'rb') as f: return json.loads(f.read(), parse_float=Decimal)
// for p in sorted(glob.glob('HolisticTraceAnalysis/tests/data/**/*.json.gz', recursive=True)) + (
//          sorted(glob.glob('param/et_replay/tests/inputs/*kineto*.json.gz'))):
//     d = load(p)
//     if isinstance(d, dict) and 'traceEvents' in d: print(p, analyse(d))
// t = tarfile.open('param/et_replay/tests/inputs/dlrm_kineto.tar.gz')
// for m in sorted((m for m in t.getmembers() if m.isfile() and m.name.endswith('.json')), key=lambda m: m.name):
//     print(m.name, analyse(json.loads(t.extractfile(m).read(), parse_float=Decimal)))
// ------------------------------------------------------------------------------------------------------------
