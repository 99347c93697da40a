// Unit tests of the interpretation layer: synthetic CUPTI-like records -> Kineto-vocabulary JSON, read back with
// nlohmann::json and checked field by field.
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "profiler/interpret/analysis.hpp"
#include "profiler/interpret/json_out.hpp"
#include "profiler/interpret/profile_writer.hpp"
#include "traces/error.hpp"

namespace dtsim::profiler {
namespace {

using Json = nlohmann::json;

constexpr std::int64_t kBase = 1'700'000'000'000'000'000;  // a whole second, as CUPTI's clock reads
constexpr std::int64_t T0 = kBase + 123'456'789;           // first record
constexpr std::uint32_t kPid = 4242;
constexpr std::uint32_t kTid = 4243;

ApiRecord runtime_call(const char* name, std::uint32_t cbid, std::uint32_t corr, std::int64_t start, std::int64_t end) {
  ApiRecord a;
  a.domain = ApiDomain::RUNTIME;
  a.name = name;
  a.cbid = cbid;
  a.correlation_id = corr;
  a.start_ns = start;
  a.end_ns = end;
  a.process_id = kPid;
  a.thread_id = kTid;
  return a;
}

MarkerRecord marker(MarkerRecord::Kind kind, std::uint32_t id, std::int64_t ts, const char* name = "") {
  MarkerRecord m;
  m.kind = kind;
  m.id = id;
  m.timestamp_ns = ts;
  m.name = name;
  m.process_id = kPid;
  m.thread_id = kTid;
  return m;
}

MemoryRecord mem(MemoryRecord::Op op, std::uint64_t address, std::uint64_t bytes, std::int64_t ts,
                 MemoryKind kind = MemoryKind::DEVICE, std::uint32_t device = 0) {
  MemoryRecord r;
  r.op = op;
  r.address = address;
  r.bytes = bytes;
  r.timestamp_ns = ts;
  r.memory_kind = kind;
  r.device_id = device;
  return r;
}

/// One process, two GPUs: a runtime kernel launch, an async copy, a memset, an NCCL kernel launched through the
/// driver API, nested NVTX ranges ("step" > "forward"), and device memory traffic.
Profile sample_profile() {
  Profile p;
  p.process_id = kPid;
  p.process_name = "train.py";
  DeviceInfo d0;
  d0.id = 0;
  d0.name = "NVIDIA H100 80GB HBM3";
  d0.total_memory_bytes = 85'045'231'616;
  d0.sm_count = 132;
  d0.compute_major = 9;
  d0.compute_minor = 0;
  d0.core_clock_khz = 1'980'000;
  d0.warp_size = 32;
  d0.max_threads_per_block = 1024;
  d0.max_warps_per_sm = 64;
  d0.registers_per_block = 65536;
  d0.registers_per_sm = 65536;
  d0.shared_memory_per_block_bytes = 49152;
  d0.shared_memory_per_sm_bytes = 233472;
  d0.l2_cache_bytes = 52'428'800;
  DeviceInfo d1 = d0;
  d1.id = 1;
  p.devices = {d1, d0};  // out of order on purpose

  // NVTX: "step" [T0+500, T0+20000] contains "forward" [T0+900, T0+4000], same thread.
  p.markers.push_back(marker(MarkerRecord::Kind::START, 1, T0 + 500, "step"));
  p.markers.push_back(marker(MarkerRecord::Kind::START, 2, T0 + 900, "forward"));
  p.markers.push_back(marker(MarkerRecord::Kind::END, 2, T0 + 4000));
  p.markers.push_back(marker(MarkerRecord::Kind::END, 1, T0 + 20000));

  // Runtime launch (corr 10) of a kernel on device 0, stream 7.
  p.api_calls.push_back(runtime_call("cudaLaunchKernel_v7000", 211, 10, T0 + 1000, T0 + 3000));
  KernelRecord k;
  k.name = "_Z6squarePfi";
  k.start_ns = T0 + 5000;
  k.end_ns = T0 + 6500;
  k.device_id = 0;
  k.context_id = 1;
  k.stream_id = 7;
  k.correlation_id = 10;
  k.grid = {4, 1, 1};
  k.block = {256, 1, 1};
  k.registers_per_thread = 32;
  k.static_shared_memory_bytes = 1024;
  k.dynamic_shared_memory_bytes = 512;
  p.kernels.push_back(k);

  // Async copy: runtime call corr 11, driver-level correlation 12 on the copy record.
  p.api_calls.push_back(runtime_call("cudaMemcpyAsync_v3020", 41, 11, T0 + 6000, T0 + 6800));
  MemcpyRecord c;
  c.kind = MemcpyKind::HTOD;
  c.src_kind = MemoryKind::PAGEABLE;
  c.dst_kind = MemoryKind::DEVICE;
  c.bytes = 4096;
  c.start_ns = T0 + 7000;
  c.end_ns = T0 + 8024;
  c.device_id = 0;
  c.context_id = 1;
  c.stream_id = 7;
  c.correlation_id = 12;
  c.runtime_correlation_id = 11;
  p.memcpys.push_back(c);

  // Memset, corr 13.
  p.api_calls.push_back(runtime_call("cudaMemsetAsync_v3020", 51, 13, T0 + 8100, T0 + 8200));
  MemsetRecord s;
  s.memory_kind = MemoryKind::DEVICE;
  s.bytes = 1 << 20;
  s.start_ns = T0 + 9000;
  s.end_ns = T0 + 10000;
  s.device_id = 0;
  s.context_id = 1;
  s.stream_id = 7;
  s.correlation_id = 13;
  p.memsets.push_back(s);

  // NCCL kernel launched through the driver API (corr 20), on device 1 stream 9, outside any NVTX range.
  ApiRecord drv;
  drv.domain = ApiDomain::DRIVER;
  drv.cbid = 307;
  drv.correlation_id = 20;
  drv.start_ns = T0 + 30000;
  drv.end_ns = T0 + 31000;
  drv.process_id = kPid;
  drv.thread_id = kTid + 1;
  p.api_calls.push_back(drv);
  p.api_names[{ApiDomain::DRIVER, 307}] = "cuLaunchKernel";
  KernelRecord n;
  n.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  n.start_ns = T0 + 32000;
  n.end_ns = T0 + 52000;
  n.device_id = 1;
  n.context_id = 2;
  n.stream_id = 9;
  n.correlation_id = 20;
  n.grid = {2, 1, 1};
  n.block = {512, 1, 1};
  p.kernels.push_back(n);

  // Device memory on device 0: +1000, +500, -1000; pinned host memory and a release of unknown memory ignored.
  p.memory.push_back(mem(MemoryRecord::Op::ALLOCATION, 0xA000, 1000, T0 + 100));
  p.memory.push_back(mem(MemoryRecord::Op::ALLOCATION, 0xB000, 500, T0 + 200));
  p.memory.push_back(mem(MemoryRecord::Op::ALLOCATION, 0xC000, 777, T0 + 250, MemoryKind::PINNED));
  p.memory.push_back(mem(MemoryRecord::Op::RELEASE, 0xA000, 1000, T0 + 300));
  p.memory.push_back(mem(MemoryRecord::Op::RELEASE, 0xF000, 64, T0 + 400));

  p.stats.records = 23;
  p.stats.buffers_completed = 2;
  p.stats.dropped_records = 5;
  return p;
}

Json parse(const std::string& text) { return Json::parse(text); }

std::vector<Json> events_of(const Json& doc, const std::string& ph, const std::string& cat = "") {
  std::vector<Json> out;
  for (const auto& e : doc["traceEvents"])
    if (e.value("ph", "") == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  return out;
}

Json the_event(const Json& doc, const std::string& cat, const std::string& name) {
  std::vector<Json> hits;
  for (const auto& e : events_of(doc, "X", cat))
    if (e["name"] == name) hits.push_back(e);
  EXPECT_EQ(hits.size(), 1u) << cat << " / " << name;
  return hits.empty() ? Json::object() : hits.front();
}

/// Microseconds as written -> nanoseconds relative to the base (exact for three decimals).
std::int64_t ns(const Json& us) { return static_cast<std::int64_t>(std::llround(us.get<double>() * 1000.0)); }

TEST(ProfileWriter, TopLevelKinetoBlocks) {
  Profile p = sample_profile();
  p.distributed = DistributedInfo{3, 8, 1, "nccl"};
  const Json doc = parse(ProfileWriter().to_json(p));
  EXPECT_EQ(doc["schemaVersion"], 1);
  EXPECT_EQ(doc["displayTimeUnit"], "ms");
  EXPECT_EQ(doc["baseTimeNanoseconds"].get<std::int64_t>(), kBase);
  ASSERT_EQ(doc["deviceProperties"].size(), 2u);
  const auto& d = doc["deviceProperties"][0];
  EXPECT_EQ(d["id"], 0);  // sorted by id
  EXPECT_EQ(doc["deviceProperties"][1]["id"], 1);
  EXPECT_EQ(d["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(d["totalGlobalMem"].get<std::uint64_t>(), 85'045'231'616u);
  EXPECT_EQ(d["computeMajor"], 9);
  EXPECT_EQ(d["computeMinor"], 0);
  EXPECT_EQ(d["numSms"], 132);
  EXPECT_EQ(d["warpSize"], 32);
  EXPECT_EQ(d["maxThreadsPerBlock"], 1024);
  EXPECT_EQ(d["maxThreadsPerMultiprocessor"], 2048);
  EXPECT_EQ(d["regsPerBlock"], 65536);
  EXPECT_EQ(d["regsPerMultiprocessor"], 65536);
  EXPECT_EQ(d["sharedMemPerBlock"], 49152);
  EXPECT_EQ(d["sharedMemPerMultiprocessor"], 233472);
  EXPECT_EQ(d["clockRate"], 1'980'000);
  EXPECT_FALSE(d.contains("memoryBandwidth"));  // not reported -> omitted
  const auto& dist = doc["distributedInfo"];
  EXPECT_EQ(dist["backend"], "nccl");
  EXPECT_EQ(dist["rank"], 3);
  EXPECT_EQ(dist["world_size"], 8);
  EXPECT_EQ(dist["local_rank"], 1);
  const auto& over = doc["dtsimProfiler"]["overhead"];
  EXPECT_EQ(over["records"], 23);
  EXPECT_EQ(over["buffersCompleted"], 2);
  EXPECT_EQ(over["droppedRecords"], 5);
  EXPECT_EQ(doc["dtsimProfiler"]["interpretation"]["unmatchedReleases"], 1);

  p.distributed.reset();
  EXPECT_FALSE(parse(ProfileWriter().to_json(p)).contains("distributedInfo"));
}

TEST(ProfileWriter, CategoriesAndLanes) {
  WriteSummary sum;
  const Json doc = parse(ProfileWriter().to_json(sample_profile(), &sum));
  std::map<std::string, int> cats;
  for (const auto& e : events_of(doc, "X")) {
    ++cats[e["cat"].get<std::string>()];
    for (const char* key : {"name", "pid", "tid", "ts", "dur"}) EXPECT_TRUE(e.contains(key)) << e.dump();
  }
  const std::map<std::string, int> expected = {
      {"kernel", 2},      {"gpu_memcpy", 1},      {"gpu_memset", 1},         {"cuda_runtime", 3},
      {"cuda_driver", 1}, {"user_annotation", 2}, {"gpu_user_annotation", 2}};
  EXPECT_EQ(cats, expected);
  EXPECT_EQ(sum.kernels, 2u);
  EXPECT_EQ(sum.nccl_kernels, 1u);
  EXPECT_EQ(sum.api_calls, 4u);
  EXPECT_EQ(sum.events, doc["traceEvents"].size());

  // GPU events: pid = device, tid = stream. CPU events: pid = process, tid = thread.
  const Json k = the_event(doc, "kernel", "square(float*, int)");
  EXPECT_EQ(k["pid"], 0);
  EXPECT_EQ(k["tid"], 7);
  const Json launch = the_event(doc, "cuda_runtime", "cudaLaunchKernel");
  EXPECT_EQ(launch["pid"], kPid);
  EXPECT_EQ(launch["tid"], kTid);
  EXPECT_EQ(launch["args"]["cbid"], 211);
  const Json drv = the_event(doc, "cuda_driver", "cuLaunchKernel");  // name from Profile::api_names
  EXPECT_EQ(drv["tid"], kTid + 1);
}

TEST(ProfileWriter, MicrosecondsWithNanosecondPrecision) {
  const std::string text = ProfileWriter().to_json(sample_profile());
  // Kernel: T0 + 5000 - base = 123'461'789 ns -> 123461.789 us; 1500 ns -> 1.500 us (always three decimals).
  EXPECT_NE(text.find("\"ts\":123461.789,\"dur\":1.500"), std::string::npos) << text;
  // Memcpy of 1024 ns.
  EXPECT_NE(text.find("\"ts\":123463.789,\"dur\":1.024"), std::string::npos);
  const Json doc = parse(text);
  const Json k = the_event(doc, "kernel", "square(float*, int)");
  EXPECT_EQ(ns(k["ts"]), T0 + 5000 - kBase);
  EXPECT_EQ(ns(k["dur"]), 1500);
  // Every ts/dur is written with exactly three decimals.
  std::size_t pos = 0;
  int checked = 0;
  while ((pos = text.find("\"ts\":", pos)) != std::string::npos) {
    pos += 5;
    const auto end = text.find_first_of(",}", pos);
    const std::string v = text.substr(pos, end - pos);
    ASSERT_NE(v.find('.'), std::string::npos) << v;
    EXPECT_EQ(v.size() - v.find('.'), 4u) << v;
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST(ProfileWriter, KernelArgs) {
  const Json doc = parse(ProfileWriter().to_json(sample_profile()));
  const Json a = the_event(doc, "kernel", "square(float*, int)")["args"];
  EXPECT_EQ(a["device"], 0);
  EXPECT_EQ(a["context"], 1);
  EXPECT_EQ(a["stream"], 7);
  EXPECT_EQ(a["correlation"], 10);
  EXPECT_EQ(a["grid"], Json::array({4, 1, 1}));
  EXPECT_EQ(a["block"], Json::array({256, 1, 1}));
  EXPECT_EQ(a["registers per thread"], 32);
  EXPECT_EQ(a["shared memory"], 1536);
  EXPECT_DOUBLE_EQ(a["blocks per SM"].get<double>(), 4.0 / 132.0);
  EXPECT_DOUBLE_EQ(a["warps per SM"].get<double>(), 4.0 / 132.0 * 256.0 / 32.0);
  EXPECT_FALSE(a.contains("nccl"));
}

TEST(ProfileWriter, NcclKernelsMarked) {
  const Json doc = parse(ProfileWriter().to_json(sample_profile()));
  int nccl = 0;
  for (const auto& e : events_of(doc, "X", "kernel")) {
    const bool named_nccl = e["name"].get<std::string>().rfind("nccl", 0) == 0;
    EXPECT_EQ(e["args"].contains("nccl"), named_nccl) << e.dump();
    if (named_nccl) {
      EXPECT_EQ(e["args"]["nccl"], 1);
      EXPECT_EQ(e["pid"], 1);
      EXPECT_EQ(e["tid"], 9);
      ++nccl;
    }
  }
  EXPECT_EQ(nccl, 1);
}

TEST(ProfileWriter, CopiesAndSets) {
  const Json doc = parse(ProfileWriter().to_json(sample_profile()));
  const Json c = the_event(doc, "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(c["args"]["bytes"], 4096);
  EXPECT_DOUBLE_EQ(c["args"]["memory bandwidth (GB/s)"].get<double>(), 4.0);  // 4096 B / 1024 ns
  EXPECT_EQ(c["args"]["correlation"], 11);  // the runtime call's id, the one the flow and cuda_runtime event use
  const Json s = the_event(doc, "gpu_memset", "Memset (Device)");
  EXPECT_EQ(s["args"]["bytes"], 1 << 20);
  EXPECT_EQ(s["args"]["stream"], 7);
}

TEST(ProfileWriter, FlowsLinkLaunchesToGpuWork) {
  const Json doc = parse(ProfileWriter().to_json(sample_profile()));
  std::map<std::int64_t, Json> starts, ends;
  for (const auto& e : events_of(doc, "s")) {
    EXPECT_EQ(e["cat"], "ac2g");
    EXPECT_EQ(e["name"], "ac2g");
    EXPECT_TRUE(starts.emplace(e["id"].get<std::int64_t>(), e).second) << "one start per call";
  }
  for (const auto& e : events_of(doc, "f")) {
    EXPECT_EQ(e["cat"], "ac2g");
    EXPECT_EQ(e["bp"], "e");
    ends.emplace(e["id"].get<std::int64_t>(), e);
  }
  EXPECT_EQ(starts.size(), 4u);
  EXPECT_EQ(ends.size(), 4u);
  // Each GPU activity: an "f" at its start on its lane, an "s" at its launching call's start on the call's lane,
  // both with id = the "correlation" arg of both events.
  std::map<std::int64_t, Json> api_by_corr;
  for (const auto& e : doc["traceEvents"])
    if (e.value("cat", "") == "cuda_runtime" || e.value("cat", "") == "cuda_driver")
      api_by_corr[e["args"]["correlation"].get<std::int64_t>()] = e;
  for (const char* cat : {"kernel", "gpu_memcpy", "gpu_memset"}) {
    for (const auto& g : events_of(doc, "X", cat)) {
      const auto corr = g["args"]["correlation"].get<std::int64_t>();
      ASSERT_TRUE(ends.count(corr)) << g.dump();
      ASSERT_TRUE(starts.count(corr)) << g.dump();
      ASSERT_TRUE(api_by_corr.count(corr)) << g.dump();
      const auto& f = ends[corr];
      const auto& s = starts[corr];
      const auto& api = api_by_corr[corr];
      EXPECT_EQ(f["pid"], g["pid"]);
      EXPECT_EQ(f["tid"], g["tid"]);
      EXPECT_EQ(ns(f["ts"]), ns(g["ts"]));
      EXPECT_EQ(s["pid"], api["pid"]);
      EXPECT_EQ(s["tid"], api["tid"]);
      EXPECT_EQ(ns(s["ts"]), ns(api["ts"]));
    }
  }
  EXPECT_EQ(the_event(doc, "cuda_driver", "cuLaunchKernel")["args"]["correlation"], 20);
  EXPECT_TRUE(starts.count(20));

  WriterOptions no_flows;
  no_flows.flows = false;
  const Json quiet = parse(ProfileWriter(no_flows).to_json(sample_profile()));
  EXPECT_TRUE(events_of(quiet, "s").empty());
  EXPECT_TRUE(events_of(quiet, "f").empty());
}

TEST(ProfileWriter, NvtxNestingAndExternalIds) {
  const Json doc = parse(ProfileWriter().to_json(sample_profile()));
  const Json step = the_event(doc, "user_annotation", "step");
  const Json fwd = the_event(doc, "user_annotation", "forward");
  EXPECT_EQ(step["pid"], kPid);
  EXPECT_EQ(fwd["tid"], step["tid"]);
  EXPECT_EQ(ns(step["ts"]), T0 + 500 - kBase);
  EXPECT_EQ(ns(step["dur"]), 19500);
  EXPECT_EQ(ns(fwd["ts"]), T0 + 900 - kBase);
  EXPECT_EQ(ns(fwd["dur"]), 3100);
  // Nesting: forward lies inside step.
  EXPECT_GE(ns(fwd["ts"]), ns(step["ts"]));
  EXPECT_LE(ns(fwd["ts"]) + ns(fwd["dur"]), ns(step["ts"]) + ns(step["dur"]));
  EXPECT_EQ(step["args"]["External id"], 1);
  EXPECT_EQ(fwd["args"]["External id"], 2);
  // The launch inside "forward" takes the innermost range's id, and so does its kernel; the copy issued after
  // "forward" closed belongs to "step"; the driver launch on another thread to none.
  EXPECT_EQ(the_event(doc, "cuda_runtime", "cudaLaunchKernel")["args"]["External id"], 2);
  EXPECT_EQ(the_event(doc, "kernel", "square(float*, int)")["args"]["External id"], 2);
  EXPECT_EQ(the_event(doc, "cuda_runtime", "cudaMemcpyAsync")["args"]["External id"], 1);
  EXPECT_EQ(the_event(doc, "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)")["args"]["External id"], 1);
  EXPECT_FALSE(the_event(doc, "cuda_driver", "cuLaunchKernel")["args"].contains("External id"));

  // GPU annotations: per range and stream, the span of the GPU work launched inside the range.
  std::map<std::string, Json> gpu_ann;
  for (const auto& e : events_of(doc, "X", "gpu_user_annotation")) gpu_ann[e["name"]] = e;
  ASSERT_EQ(gpu_ann.size(), 2u);
  const Json& gf = gpu_ann["forward"];
  EXPECT_EQ(gf["pid"], 0);
  EXPECT_EQ(gf["tid"], 7);
  EXPECT_EQ(ns(gf["ts"]), T0 + 5000 - kBase);  // exactly the kernel
  EXPECT_EQ(ns(gf["dur"]), 1500);
  EXPECT_EQ(gf["args"]["External id"], 2);
  const Json& gs = gpu_ann["step"];
  EXPECT_EQ(ns(gs["ts"]), T0 + 5000 - kBase);                   // kernel start ...
  EXPECT_EQ(ns(gs["ts"]) + ns(gs["dur"]), T0 + 10000 - kBase);  // ... to memset end
}

TEST(ProfileWriter, ExplicitExternalCorrelationWins) {
  Profile p = sample_profile();
  p.external_correlations.push_back({10, 777, 1});
  const Json doc = parse(ProfileWriter().to_json(p));
  EXPECT_EQ(the_event(doc, "cuda_runtime", "cudaLaunchKernel")["args"]["External id"], 777);
  EXPECT_EQ(the_event(doc, "kernel", "square(float*, int)")["args"]["External id"], 777);
}

TEST(ProfileWriter, MemoryCounterRunningSum) {
  WriteSummary sum;
  const Json doc = parse(ProfileWriter().to_json(sample_profile(), &sum));
  std::vector<std::uint64_t> values;
  std::vector<std::int64_t> times;
  for (const auto& e : events_of(doc, "C")) {
    EXPECT_EQ(e["name"], "GPU Memory");
    EXPECT_EQ(e["pid"], 0);
    values.push_back(e["args"]["Bytes In Use"].get<std::uint64_t>());
    times.push_back(ns(e["ts"]));
  }
  EXPECT_EQ(values, (std::vector<std::uint64_t>{1000, 1500, 500}));
  EXPECT_EQ(times, (std::vector<std::int64_t>{T0 + 100 - kBase, T0 + 200 - kBase, T0 + 300 - kBase}));
  EXPECT_EQ(sum.unmatched_releases, 1u);
  EXPECT_EQ(sum.memory_samples, 3u);
}

TEST(ProfileWriter, MetadataNamesEveryLane) {
  Profile p = sample_profile();
  NameRecord thread_name;
  thread_name.object = NameRecord::Object::THREAD;
  thread_name.process_id = kPid;
  thread_name.thread_id = kTid;
  thread_name.name = "main";
  p.names.push_back(thread_name);
  const Json doc = parse(ProfileWriter().to_json(p));
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> threads;
  std::map<std::int64_t, std::string> processes;
  bool metadata_first = true, seen_other = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "M") {
      seen_other = true;
      continue;
    }
    if (seen_other) metadata_first = false;
    if (e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["name"] == "thread_name") threads[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  EXPECT_TRUE(metadata_first);
  EXPECT_EQ(processes[0], "GPU 0");
  EXPECT_EQ(processes[1], "GPU 1");
  EXPECT_EQ(processes[kPid], "train.py");
  EXPECT_EQ((threads[{0, 7}]), "stream 7");
  EXPECT_EQ((threads[{1, 9}]), "stream 9");
  EXPECT_EQ((threads[{kPid, kTid}]), "thread 4243 (main)");
  EXPECT_EQ((threads[{kPid, kTid + 1}]), "thread 4244");
}

TEST(ProfileWriter, DeterministicAndSorted) {
  const Profile p = sample_profile();
  const std::string a = ProfileWriter().to_json(p);
  EXPECT_EQ(a, ProfileWriter().to_json(p));
  // Records arrive in buffer order, which varies from run to run: the output must not depend on it.
  Profile shuffled = p;
  std::reverse(shuffled.api_calls.begin(), shuffled.api_calls.end());
  std::reverse(shuffled.kernels.begin(), shuffled.kernels.end());
  std::reverse(shuffled.markers.begin(), shuffled.markers.end());
  std::reverse(shuffled.memory.begin(), shuffled.memory.end());
  std::reverse(shuffled.devices.begin(), shuffled.devices.end());
  EXPECT_EQ(a, ProfileWriter().to_json(shuffled));
  // After the metadata, events are sorted by (ts, pid, tid, name).
  const Json doc = parse(a);
  std::tuple<std::int64_t, std::int64_t, std::int64_t, std::string> prev{-1, 0, 0, ""};
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M") continue;
    std::tuple<std::int64_t, std::int64_t, std::int64_t, std::string> key{ns(e["ts"]), e["pid"], e.value("tid", 0),
                                                                          e["name"]};
    EXPECT_LE(prev, key) << e.dump();
    prev = key;
  }
}

TEST(ProfileWriter, DemanglerIsPluggable) {
  WriterOptions raw;
  raw.demangle = {};
  const Json doc = parse(ProfileWriter(raw).to_json(sample_profile()));
  the_event(doc, "kernel", "_Z6squarePfi");
  WriterOptions upper;
  upper.demangle = [](const std::string& s) { return "k:" + s; };
  const Json doc2 = parse(ProfileWriter(upper).to_json(sample_profile()));
  the_event(doc2, "kernel", "k:_Z6squarePfi");
}

TEST(ProfileWriter, IncompleteAndInstantMarkers) {
  Profile p = sample_profile();
  p.markers.push_back(marker(MarkerRecord::Kind::START, 9, T0 + 40000, "never closed"));
  p.markers.push_back(marker(MarkerRecord::Kind::END, 99, T0 + 41000));  // no start
  p.markers.push_back(marker(MarkerRecord::Kind::INSTANT, 5, T0 + 45000, "checkpoint"));
  WriteSummary sum;
  const Json doc = parse(ProfileWriter().to_json(p, &sum));
  const Json open = the_event(doc, "user_annotation", "never closed");
  EXPECT_EQ(open["args"]["incomplete"], 1);
  // Ends at the last timestamp of the profile (the end of the NCCL kernel, T0 + 52000).
  EXPECT_EQ(ns(open["ts"]) + ns(open["dur"]), T0 + 52000 - kBase);
  EXPECT_EQ(sum.unclosed_ranges, 1u);
  EXPECT_EQ(sum.unmatched_marker_ends, 1u);
  const auto instants = events_of(doc, "i", "cpu_instant_event");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["name"], "checkpoint");
  EXPECT_EQ(instants[0]["s"], "t");
  EXPECT_EQ(instants[0]["tid"], kTid);
}

TEST(ProfileWriter, UntimedAndUnlinkedActivities) {
  Profile p = sample_profile();
  KernelRecord untimed = p.kernels[0];
  untimed.start_ns = untimed.end_ns = 0;
  p.kernels.push_back(untimed);
  KernelRecord orphan = p.kernels[0];
  orphan.correlation_id = 999;
  orphan.name = "orphan";
  p.kernels.push_back(orphan);
  WriteSummary sum;
  const Json doc = parse(ProfileWriter().to_json(p, &sum));
  EXPECT_EQ(sum.untimed_records, 1u);
  EXPECT_EQ(sum.unlinked_gpu_activities, 1u);
  EXPECT_EQ(events_of(doc, "X", "kernel").size(), 3u);
  EXPECT_EQ(the_event(doc, "kernel", "orphan")["args"]["correlation"], 999);
  EXPECT_EQ(events_of(doc, "f").size(), 4u);  // no flow for the orphan
}

TEST(ProfileWriter, ArbitraryBytesInNamesStillParse) {
  Profile p = sample_profile();
  p.markers.push_back(marker(MarkerRecord::Kind::INSTANT, 6, T0 + 50, "bad \xff\xfe utf8 \"quoted\"\n\x01"));
  const std::string text = ProfileWriter().to_json(p);
  const Json doc = parse(text);  // throws if not valid JSON/UTF-8
  const auto instants = events_of(doc, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["name"], "bad \xEF\xBF\xBD\xEF\xBF\xBD utf8 \"quoted\"\n\x01");
}

TEST(ProfileWriter, EmptyProfileIsAValidDocument) {
  WriteSummary sum;
  const Json doc = parse(ProfileWriter().to_json(Profile{}, &sum));
  EXPECT_TRUE(doc["traceEvents"].empty());
  EXPECT_TRUE(doc["deviceProperties"].empty());
  EXPECT_EQ(doc["baseTimeNanoseconds"], 0);
  EXPECT_EQ(sum.events, 0u);
}

TEST(ProfileWriter, WriteFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("dtsim_profile_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "p.json").string();
  const auto sum = ProfileWriter().write_file(sample_profile(), path);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), ProfileWriter().to_json(sample_profile()));
  EXPECT_EQ(sum.kernels, 2u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_THROW(ProfileWriter().write_file(sample_profile(), (dir / "missing" / "p.json").string()), dtsim::Error);
  std::filesystem::remove_all(dir);
  const std::string line = format_overhead(sample_profile().stats, sum);
  EXPECT_NE(line.find("5 dropped"), std::string::npos) << line;
}

TEST(ProfileAnalysis, Names) {
  EXPECT_EQ(strip_api_version("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(strip_api_version("cudaMemcpyAsync_ptsz_v7000"), "cudaMemcpyAsync_ptsz");
  EXPECT_EQ(strip_api_version("cuLaunchKernel"), "cuLaunchKernel");
  EXPECT_EQ(strip_api_version("cuMemAlloc_v2"), "cuMemAlloc");
  EXPECT_EQ(strip_api_version("foo_vx1"), "foo_vx1");
  EXPECT_EQ(strip_api_version("foo_v"), "foo_v");
  EXPECT_EQ(cxa_demangle("_Z6squarePfi"), "square(float*, int)");
  EXPECT_EQ(cxa_demangle("plain_c_kernel"), "plain_c_kernel");
  EXPECT_EQ(cxa_demangle("_Znot a symbol"), "_Znot a symbol");
  EXPECT_TRUE(is_nccl_kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)"));
  EXPECT_FALSE(is_nccl_kernel("void at::native::nccl_like()"));
  MemcpyRecord p2p;
  p2p.kind = MemcpyKind::PTOP;
  p2p.src_kind = p2p.dst_kind = MemoryKind::DEVICE;
  EXPECT_EQ(memcpy_event_name(p2p), "Memcpy PtoP (Device -> Device)");
  MemsetRecord ms;
  ms.memory_kind = MemoryKind::MANAGED;
  EXPECT_EQ(memset_event_name(ms), "Memset (Managed)");
  EXPECT_STREQ(memory_kind_name(MemoryKind::DEVICE_STATIC), "Device Static");
  EXPECT_STREQ(memcpy_kind_name(MemcpyKind::DTOH), "DtoH");
}

TEST(ProfileAnalysis, MarkerPairingIgnoresInputOrder) {
  std::vector<MarkerRecord> m = {marker(MarkerRecord::Kind::END, 2, 30), marker(MarkerRecord::Kind::START, 1, 10, "a"),
                                 marker(MarkerRecord::Kind::START, 2, 20, "b"), marker(MarkerRecord::Kind::END, 1, 40)};
  const auto r = pair_markers(m, 100);
  ASSERT_EQ(r.ranges.size(), 2u);
  EXPECT_EQ(r.ranges[0].name, "a");
  EXPECT_EQ(r.ranges[0].end_ns, 40);
  EXPECT_EQ(r.ranges[1].name, "b");
  EXPECT_EQ(r.ranges[1].start_ns, 20);
  EXPECT_EQ(r.ranges[1].end_ns, 30);
  EXPECT_TRUE(r.ranges[1].complete);
}

TEST(ProfileAnalysis, MemoryUsage) {
  // A block freed and re-allocated at the same address and instant; a second device; managed memory ignored.
  std::vector<MemoryRecord> recs = {
      mem(MemoryRecord::Op::ALLOCATION, 0x10, 100, 5),
      mem(MemoryRecord::Op::RELEASE, 0x10, 100, 10),
      mem(MemoryRecord::Op::ALLOCATION, 0x10, 300, 10),
      mem(MemoryRecord::Op::ALLOCATION, 0x10, 50, 7, MemoryKind::DEVICE, 1),
      mem(MemoryRecord::Op::ALLOCATION, 0x99, 1 << 20, 8, MemoryKind::MANAGED),
      mem(MemoryRecord::Op::RELEASE, 0x10, 300, 20),
  };
  const auto u = memory_usage(recs);
  std::vector<std::tuple<std::int64_t, std::uint32_t, std::uint64_t>> got;
  for (const auto& s : u.samples) got.emplace_back(s.timestamp_ns, s.device_id, s.bytes_in_use);
  // At one instant releases come first: the address is free again before it is handed out anew.
  const std::vector<std::tuple<std::int64_t, std::uint32_t, std::uint64_t>> want = {
      {5, 0, 100}, {7, 1, 50}, {10, 0, 0}, {10, 0, 300}, {20, 0, 0}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(u.peak_bytes.at(0), 300u);
  EXPECT_EQ(u.peak_bytes.at(1), 50u);
  EXPECT_EQ(u.unmatched_releases, 0u);
}

TEST(ProfileAnalysis, Environment) {
  std::map<std::string, std::string> env;
  auto lookup = [&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_FALSE(parse_distributed_env(lookup).has_value());
  env = {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}};
  auto d = parse_distributed_env(lookup);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->rank, 2);
  EXPECT_EQ(d->world_size, 4);
  EXPECT_EQ(d->local_rank, 0);
  env["RANK"] = "5";
  env["WORLD_SIZE"] = "16";  // torchrun's variables win
  d = parse_distributed_env(lookup);
  EXPECT_EQ(d->rank, 5);
  EXPECT_EQ(d->world_size, 16);
  EXPECT_EQ(d->local_rank, -1);
  env = {{"RANK", "x"}, {"WORLD_SIZE", "2"}};
  EXPECT_FALSE(parse_distributed_env(lookup).has_value());
  env = {{"RANK", "2"}, {"WORLD_SIZE", "2"}};  // rank out of range
  EXPECT_FALSE(parse_distributed_env(lookup).has_value());

  EXPECT_EQ(expand_output_path("", 77, std::nullopt), "dtsim_profile.77.json");
  EXPECT_EQ(expand_output_path("out/r%r_p%p.json", 77, 3), "out/r3_p77.json");
  EXPECT_EQ(expand_output_path("100%%_%x.json", 1, std::nullopt), "100%_%x.json");
}

TEST(ProfileJson, Microseconds) {
  auto us = [](std::int64_t v) {
    std::string s;
    profiler::json::append_us(s, v);
    return s;
  };
  EXPECT_EQ(us(0), "0.000");
  EXPECT_EQ(us(5), "0.005");
  EXPECT_EQ(us(1000), "1.000");
  EXPECT_EQ(us(123456789), "123456.789");
  EXPECT_EQ(us(-1500), "-1.500");
  EXPECT_EQ(us(std::numeric_limits<std::int64_t>::min()), "-9223372036854775.808");
}

}  // namespace
}  // namespace dtsim::profiler
