#include "profiler/interpret/profile_writer.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <queue>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profiler/interpret/json_out.hpp"
#include "traces/error.hpp"

#ifndef DTSIM_VERSION
#define DTSIM_VERSION "unknown"
#endif

namespace dtsim::profiler {

namespace {

constexpr std::int64_t kNsPerSecond = 1'000'000'000;
constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

/// Sort rank of the event phases sharing (ts, pid, tid, name).
enum Phase : int { COMPLETE = 0, FLOW_START = 1, FLOW_END = 2, INSTANT = 3, COUNTER = 4 };

struct Event {
  std::int64_t ts_ns = 0;  ///< relative to the base time
  std::int64_t pid = 0;
  std::int64_t tid = 0;
  std::string name;
  int phase = COMPLETE;
  std::string text;  ///< the whole JSON object
};

struct MetaEvent {
  std::int64_t pid = 0;
  std::int64_t tid = 0;
  std::string name;
  std::string text;
};

/// One GPU activity, whatever its record type, with the API call that launched it.
struct GpuActivity {
  enum class Type { KERNEL, MEMCPY, MEMSET } type = Type::KERNEL;
  std::size_t index = 0;  ///< into the record vector of its type
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::size_t api = kNone;  ///< index into Profile::api_calls
};

using ThreadKey = std::pair<std::uint32_t, std::uint32_t>;  // (process, thread)

std::string dims(const Dim3& d) {
  std::string s = "[";
  json::append_int(s, d.x);
  s += ',';
  json::append_int(s, d.y);
  s += ',';
  json::append_int(s, d.z);
  s += ']';
  return s;
}

class Builder {
public:
  Builder(const Profile& p, const WriterOptions& o, WriteSummary& s) : p_(p), opt_(o), sum_(s) {}

  std::string run() {
    compute_time_range();
    pairing_ = pair_markers(p_.markers, max_ts_);
    sum_.unmatched_marker_ends = pairing_.unmatched_ends;
    sum_.unclosed_ranges = pairing_.unclosed_ranges;
    index_devices();
    index_api_calls();
    collect_gpu_activities();
    compute_external_ids();
    emit_api_calls();
    emit_gpu_activities();
    emit_ranges();
    if (opt_.gpu_user_annotations) emit_gpu_annotations();
    if (opt_.memory_counters) emit_memory();
    emit_metadata();
    return assemble();
  }

private:
  // ---- time ----
  void see(std::int64_t ts) {
    if (ts <= 0) return;  // CUPTI's "no timestamp"
    min_ts_ = std::min(min_ts_, ts);
    max_ts_ = std::max(max_ts_, ts);
  }
  static bool untimed(std::int64_t start, std::int64_t end) { return start == 0 && end == 0; }

  void compute_time_range() {
    for (const auto& k : p_.kernels) see(k.start_ns), see(k.end_ns);
    for (const auto& m : p_.memcpys) see(m.start_ns), see(m.end_ns);
    for (const auto& m : p_.memsets) see(m.start_ns), see(m.end_ns);
    for (const auto& a : p_.api_calls) see(a.start_ns), see(a.end_ns);
    for (const auto& m : p_.markers) see(m.timestamp_ns);
    for (const auto& m : p_.memory) see(m.timestamp_ns);
    if (min_ts_ == std::numeric_limits<std::int64_t>::max()) min_ts_ = max_ts_ = 0;
    base_ = min_ts_ / kNsPerSecond * kNsPerSecond;
    sum_.base_time_ns = base_;
  }

  std::int64_t duration(std::int64_t start, std::int64_t end) {
    if (end < start) {
      ++sum_.negative_durations;
      return 0;
    }
    return end - start;
  }

  // ---- indexes ----
  void index_devices() {
    for (const auto& d : p_.devices) devices_.emplace(d.id, &d);  // first record of a device wins
  }

  void index_api_calls() {
    for (std::size_t i = 0; i < p_.api_calls.size(); ++i) {
      const auto& a = p_.api_calls[i];
      auto& by_corr = a.domain == ApiDomain::RUNTIME ? runtime_by_corr_ : driver_by_corr_;
      by_corr.emplace(a.correlation_id, i);
    }
    for (const auto& e : p_.external_correlations) {
      auto [it, inserted] =
          explicit_external_.emplace(e.correlation_id, std::make_pair(e.external_kind, e.external_id));
      if (!inserted) it->second = std::min(it->second, std::make_pair(e.external_kind, e.external_id));
    }
  }

  std::size_t find_api(std::uint32_t runtime_corr, std::uint32_t corr) const {
    if (runtime_corr != 0)
      if (auto it = runtime_by_corr_.find(runtime_corr); it != runtime_by_corr_.end()) return it->second;
    if (auto it = runtime_by_corr_.find(corr); it != runtime_by_corr_.end()) return it->second;
    if (auto it = driver_by_corr_.find(corr); it != driver_by_corr_.end()) return it->second;
    return kNone;
  }

  void collect_gpu_activities() {
    auto add = [&](GpuActivity::Type type, std::size_t i, std::uint32_t device, std::uint32_t stream,
                   std::int64_t start, std::int64_t end, std::uint32_t runtime_corr, std::uint32_t corr) {
      if (untimed(start, end)) {
        ++sum_.untimed_records;
        return;
      }
      GpuActivity g{type, i, device, stream, start, end, find_api(runtime_corr, corr)};
      if (g.api == kNone) ++sum_.unlinked_gpu_activities;
      gpu_.push_back(g);
    };
    for (std::size_t i = 0; i < p_.kernels.size(); ++i) {
      const auto& k = p_.kernels[i];
      add(GpuActivity::Type::KERNEL, i, k.device_id, k.stream_id, k.start_ns, k.end_ns, 0, k.correlation_id);
    }
    for (std::size_t i = 0; i < p_.memcpys.size(); ++i) {
      const auto& m = p_.memcpys[i];
      add(GpuActivity::Type::MEMCPY, i, m.device_id, m.stream_id, m.start_ns, m.end_ns, m.runtime_correlation_id,
          m.correlation_id);
    }
    for (std::size_t i = 0; i < p_.memsets.size(); ++i) {
      const auto& m = p_.memsets[i];
      add(GpuActivity::Type::MEMSET, i, m.device_id, m.stream_id, m.start_ns, m.end_ns, 0, m.correlation_id);
    }
  }

  /// External id of every API call: an explicit external correlation, else the innermost NVTX range open on its
  /// thread when it started (a sweep over calls in time order with a heap of open ranges, latest start on top).
  void compute_external_ids() {
    api_external_.assign(p_.api_calls.size(), 0);
    std::map<ThreadKey, std::vector<std::size_t>> calls_by_thread;
    for (std::size_t i = 0; i < p_.api_calls.size(); ++i) {
      const auto& a = p_.api_calls[i];
      if (auto it = explicit_external_.find(a.correlation_id); it != explicit_external_.end()) {
        api_external_[i] = it->second.second;
        continue;
      }
      calls_by_thread[{a.process_id, a.thread_id}].push_back(i);
    }
    std::map<ThreadKey, std::vector<const NvtxRange*>> ranges_by_thread;
    for (const auto& r : pairing_.ranges) ranges_by_thread[{r.process_id, r.thread_id}].push_back(&r);  // sorted
    for (auto& [thread, calls] : calls_by_thread) {
      auto rit = ranges_by_thread.find(thread);
      if (rit == ranges_by_thread.end()) continue;
      const auto& ranges = rit->second;
      std::sort(calls.begin(), calls.end(), [&](std::size_t a, std::size_t b) {
        return std::tie(p_.api_calls[a].start_ns, p_.api_calls[a].correlation_id) <
               std::tie(p_.api_calls[b].start_ns, p_.api_calls[b].correlation_id);
      });
      // Top of the heap: latest start, then earliest end (the inner of two ranges opened at the same instant).
      auto outer_first = [](const NvtxRange* a, const NvtxRange* b) {
        return std::tie(a->start_ns, b->end_ns, a->id) < std::tie(b->start_ns, a->end_ns, b->id);
      };
      std::priority_queue<const NvtxRange*, std::vector<const NvtxRange*>, decltype(outer_first)> open(outer_first);
      std::size_t next = 0;
      for (std::size_t i : calls) {
        const std::int64_t t = p_.api_calls[i].start_ns;
        while (next < ranges.size() && ranges[next]->start_ns <= t) open.push(ranges[next++]);
        while (!open.empty() && open.top()->end_ns < t) open.pop();  // closed before t, hence before later calls
        if (!open.empty()) api_external_[i] = open.top()->id;
      }
    }
  }

  std::uint64_t gpu_external(const GpuActivity& g, std::uint32_t own_corr) const {
    if (g.api != kNone) return api_external_[g.api];
    if (auto it = explicit_external_.find(own_corr); it != explicit_external_.end()) return it->second.second;
    return 0;
  }

  // ---- event text ----
  void push(std::int64_t abs_ts, std::int64_t pid, std::int64_t tid, std::string name, int phase, std::string text) {
    events_.push_back({abs_ts - base_, pid, tid, std::move(name), phase, std::move(text)});
  }

  void complete(const char* cat, const std::string& name, std::int64_t pid, std::int64_t tid, std::int64_t start,
                std::int64_t dur, const json::Members& args) {
    std::string t = "{\"ph\":\"X\",\"cat\":";
    json::append_string(t, cat);
    t += ",\"name\":";
    json::append_string(t, name);
    t += ",\"pid\":";
    json::append_int(t, pid);
    t += ",\"tid\":";
    json::append_int(t, tid);
    t += ",\"ts\":";
    json::append_us(t, start - base_);
    t += ",\"dur\":";
    json::append_us(t, dur);
    if (!args.empty()) {
      t += ",\"args\":{";
      t += args.str();
      t += '}';
    }
    t += '}';
    push(start, pid, tid, name, COMPLETE, std::move(t));
  }

  void flow(bool start, std::uint32_t id, std::int64_t pid, std::int64_t tid, std::int64_t ts) {
    std::string t = "{\"ph\":\"";
    t += start ? 's' : 'f';
    t += "\",\"id\":";
    json::append_uint(t, id);
    t += ",\"pid\":";
    json::append_int(t, pid);
    t += ",\"tid\":";
    json::append_int(t, tid);
    t += ",\"ts\":";
    json::append_us(t, ts - base_);
    t += ",\"cat\":\"ac2g\",\"name\":\"ac2g\"";
    if (!start) t += ",\"bp\":\"e\"";
    t += '}';
    push(ts, pid, tid, "ac2g", start ? FLOW_START : FLOW_END, std::move(t));
  }

  std::string api_name(const ApiRecord& a) const {
    if (!a.name.empty()) return strip_api_version(a.name);
    if (auto it = p_.api_names.find({a.domain, a.cbid}); it != p_.api_names.end() && !it->second.empty())
      return strip_api_version(it->second);
    return std::string(a.domain == ApiDomain::RUNTIME ? "cudaRuntimeApi_cbid_" : "cuDriverApi_cbid_") +
           std::to_string(a.cbid);
  }

  std::uint32_t cpu_pid(std::uint32_t pid) const { return pid != 0 ? pid : p_.process_id; }

  // ---- emitters ----
  void emit_api_calls() {
    for (std::size_t i = 0; i < p_.api_calls.size(); ++i) {
      const auto& a = p_.api_calls[i];
      json::Members args;
      if (api_external_[i] != 0) args.uinteger("External id", api_external_[i]);
      args.uinteger("cbid", a.cbid).uinteger("correlation", a.correlation_id);
      const auto pid = cpu_pid(a.process_id);
      complete(a.domain == ApiDomain::RUNTIME ? "cuda_runtime" : "cuda_driver", api_name(a), pid, a.thread_id,
               a.start_ns, duration(a.start_ns, a.end_ns), args);
      threads_.insert({pid, a.thread_id});
      ++sum_.api_calls;
    }
  }

  const std::string& kernel_name(const std::string& raw) {
    auto [it, inserted] = demangled_.try_emplace(raw);
    if (inserted) it->second = opt_.demangle ? opt_.demangle(raw) : raw;
    return it->second;
  }

  static double bandwidth_GBps(std::uint64_t bytes, std::int64_t dur_ns) {
    return static_cast<double>(bytes) / static_cast<double>(dur_ns);  // bytes per ns = GB/s
  }

  void emit_gpu_activities() {
    std::vector<bool> flow_started(p_.api_calls.size(), false);
    for (const auto& g : gpu_) {
      const std::uint32_t linked_corr = g.api != kNone ? p_.api_calls[g.api].correlation_id : 0;
      const std::int64_t dur = duration(g.start_ns, g.end_ns);
      json::Members args;
      std::string name;
      const char* cat = nullptr;
      switch (g.type) {
        case GpuActivity::Type::KERNEL: {
          const auto& k = p_.kernels[g.index];
          cat = "kernel";
          name = kernel_name(k.name);
          if (const auto ext = gpu_external(g, k.correlation_id)) args.uinteger("External id", ext);
          args.uinteger("device", k.device_id)
              .uinteger("context", k.context_id)
              .uinteger("stream", k.stream_id)
              .uinteger("correlation", linked_corr ? linked_corr : k.correlation_id)
              .uinteger("registers per thread", k.registers_per_thread)
              .integer("shared memory", k.static_shared_memory_bytes + k.dynamic_shared_memory_bytes);
          if (auto it = devices_.find(k.device_id); it != devices_.end() && it->second->sm_count > 0) {
            const double blocks_per_sm =
                static_cast<double>(k.grid.volume()) / static_cast<double>(it->second->sm_count);
            args.real("blocks per SM", blocks_per_sm);
            const std::uint32_t warp = it->second->warp_size ? it->second->warp_size : 32;
            args.real("warps per SM",
                      blocks_per_sm * static_cast<double>(k.block.volume()) / static_cast<double>(warp));
          }
          args.raw("grid", dims(k.grid)).raw("block", dims(k.block));
          if (is_nccl_kernel(name)) {
            args.integer("nccl", 1);
            ++sum_.nccl_kernels;
          }
          ++sum_.kernels;
          break;
        }
        case GpuActivity::Type::MEMCPY: {
          const auto& m = p_.memcpys[g.index];
          cat = "gpu_memcpy";
          name = memcpy_event_name(m);
          if (const auto ext = gpu_external(g, m.correlation_id)) args.uinteger("External id", ext);
          if (m.peer_to_peer) {
            args.uinteger("fromDevice", m.src_device_id)
                .uinteger("inDevice", m.device_id)
                .uinteger("toDevice", m.dst_device_id)
                .uinteger("fromContext", m.src_context_id)
                .uinteger("inContext", m.context_id)
                .uinteger("toContext", m.dst_context_id);
          } else {
            args.uinteger("device", m.device_id).uinteger("context", m.context_id);
          }
          args.uinteger("stream", m.stream_id)
              .uinteger("correlation", linked_corr ? linked_corr : m.correlation_id)
              .uinteger("bytes", m.bytes);
          if (dur > 0) args.real("memory bandwidth (GB/s)", bandwidth_GBps(m.bytes, dur));
          else args.text("memory bandwidth (GB/s)", "N/A");
          ++sum_.memcpys;
          break;
        }
        case GpuActivity::Type::MEMSET: {
          const auto& m = p_.memsets[g.index];
          cat = "gpu_memset";
          name = memset_event_name(m);
          if (const auto ext = gpu_external(g, m.correlation_id)) args.uinteger("External id", ext);
          args.uinteger("device", m.device_id)
              .uinteger("context", m.context_id)
              .uinteger("stream", m.stream_id)
              .uinteger("correlation", linked_corr ? linked_corr : m.correlation_id)
              .uinteger("bytes", m.bytes);
          if (dur > 0) args.real("memory bandwidth (GB/s)", bandwidth_GBps(m.bytes, dur));
          else args.text("memory bandwidth (GB/s)", "N/A");
          ++sum_.memsets;
          break;
        }
      }
      complete(cat, name, g.device, g.stream, g.start_ns, dur, args);
      streams_.insert({g.device, g.stream});
      if (opt_.flows && g.api != kNone) {
        const auto& a = p_.api_calls[g.api];
        if (!flow_started[g.api]) {
          flow(true, a.correlation_id, cpu_pid(a.process_id), a.thread_id, a.start_ns);
          flow_started[g.api] = true;
        }
        flow(false, a.correlation_id, g.device, g.stream, g.start_ns);
        ++sum_.flows;
      }
    }
  }

  void emit_ranges() {
    for (const auto& r : pairing_.ranges) {
      json::Members args;
      args.uinteger("External id", r.id);
      if (!r.domain.empty()) args.text("domain", r.domain);
      if (!r.complete) args.integer("incomplete", 1);
      const auto pid = cpu_pid(r.process_id);
      complete("user_annotation", r.name, pid, r.thread_id, r.start_ns, duration(r.start_ns, r.end_ns), args);
      threads_.insert({pid, r.thread_id});
      ++sum_.ranges;
    }
    for (const auto& m : pairing_.instants) {
      const auto pid = cpu_pid(m.process_id);
      std::string t = "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":";
      json::append_string(t, m.name);
      t += ",\"pid\":";
      json::append_int(t, pid);
      t += ",\"tid\":";
      json::append_int(t, m.thread_id);
      t += ",\"ts\":";
      json::append_us(t, m.timestamp_ns - base_);
      json::Members args;
      args.uinteger("External id", m.id);
      if (!m.domain.empty()) args.text("domain", m.domain);
      t += ",\"args\":{" + args.str() + "}}";
      push(m.timestamp_ns, pid, m.thread_id, m.name, INSTANT, std::move(t));
      threads_.insert({pid, m.thread_id});
      ++sum_.instants;
    }
  }

  /// For every NVTX range: the GPU work launched from its thread while it was open, one span per stream.
  void emit_gpu_annotations() {
    // GPU activities by launching call, and calls by thread in start order.
    std::vector<std::pair<std::size_t, std::size_t>> gpu_by_api;  // (api index, gpu_ index)
    for (std::size_t j = 0; j < gpu_.size(); ++j)
      if (gpu_[j].api != kNone) gpu_by_api.emplace_back(gpu_[j].api, j);
    if (gpu_by_api.empty()) return;
    std::sort(gpu_by_api.begin(), gpu_by_api.end());
    std::map<ThreadKey, std::vector<std::size_t>> calls_by_thread;
    for (const auto& [api, j] : gpu_by_api) {
      const auto& a = p_.api_calls[api];
      auto& v = calls_by_thread[{a.process_id, a.thread_id}];
      if (v.empty() || v.back() != api) v.push_back(api);
    }
    for (auto& [thread, calls] : calls_by_thread)
      std::sort(calls.begin(), calls.end(), [&](std::size_t a, std::size_t b) {
        return std::tie(p_.api_calls[a].start_ns, a) < std::tie(p_.api_calls[b].start_ns, b);
      });
    for (const auto& r : pairing_.ranges) {
      auto it = calls_by_thread.find({r.process_id, r.thread_id});
      if (it == calls_by_thread.end()) continue;
      const auto& calls = it->second;
      auto first = std::lower_bound(calls.begin(), calls.end(), r.start_ns,
                                    [&](std::size_t api, std::int64_t t) { return p_.api_calls[api].start_ns < t; });
      std::map<std::pair<std::uint32_t, std::uint32_t>, std::pair<std::int64_t, std::int64_t>> spans;
      for (auto c = first; c != calls.end() && p_.api_calls[*c].start_ns <= r.end_ns; ++c) {
        auto lo = std::lower_bound(gpu_by_api.begin(), gpu_by_api.end(), std::make_pair(*c, std::size_t{0}));
        for (; lo != gpu_by_api.end() && lo->first == *c; ++lo) {
          const auto& g = gpu_[lo->second];
          auto [sit, inserted] = spans.try_emplace({g.device, g.stream}, g.start_ns, g.end_ns);
          if (!inserted) {
            sit->second.first = std::min(sit->second.first, g.start_ns);
            sit->second.second = std::max(sit->second.second, g.end_ns);
          }
        }
      }
      for (const auto& [lane, span] : spans) {
        json::Members args;
        args.uinteger("External id", r.id);
        complete("gpu_user_annotation", r.name, lane.first, lane.second, span.first, duration(span.first, span.second),
                 args);
        ++sum_.gpu_annotations;
      }
    }
  }

  void emit_memory() {
    const MemoryUsage usage = memory_usage(p_.memory);
    sum_.unmatched_releases = usage.unmatched_releases;
    for (const auto& s : usage.samples) {
      std::string t = "{\"ph\":\"C\",\"cat\":\"gpu_memory\",\"name\":\"GPU Memory\",\"pid\":";
      json::append_uint(t, s.device_id);
      t += ",\"ts\":";
      json::append_us(t, s.timestamp_ns - base_);
      t += ",\"args\":{\"Bytes In Use\":";
      json::append_uint(t, s.bytes_in_use);
      t += "}}";
      push(s.timestamp_ns, s.device_id, 0, "GPU Memory", COUNTER, std::move(t));
      memory_devices_.insert(s.device_id);
      ++sum_.memory_samples;
    }
  }

  void meta(const char* what, std::int64_t pid, std::int64_t tid, const char* key, const std::string* text,
            std::int64_t number) {
    std::string t = "{\"name\":\"";
    t += what;
    t += "\",\"ph\":\"M\",\"ts\":0.000,\"pid\":";
    json::append_int(t, pid);
    t += ",\"tid\":";
    json::append_int(t, tid);
    t += ",\"args\":{";
    json::append_string(t, key);
    t += ':';
    if (text) json::append_string(t, *text);
    else json::append_int(t, number);
    t += "}}";
    meta_.push_back({pid, tid, what, std::move(t)});
  }

  void emit_metadata() {
    std::map<ThreadKey, std::string> thread_names;
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::string> stream_names;
    for (const auto& n : p_.names) {
      if (n.object == NameRecord::Object::THREAD) thread_names[{cpu_pid(n.process_id), n.thread_id}] = n.name;
      if (n.object == NameRecord::Object::STREAM) stream_names[{n.device_id, n.stream_id}] = n.name;
    }
    std::set<std::uint32_t> cpu_pids;
    for (const auto& [pid, tid] : threads_) cpu_pids.insert(pid);
    const std::string cpu_label = "CPU";
    for (std::uint32_t pid : cpu_pids) {
      const std::string name =
          pid == p_.process_id && !p_.process_name.empty() ? p_.process_name : "process " + std::to_string(pid);
      meta("process_name", pid, 0, "name", &name, 0);
      meta("process_labels", pid, 0, "labels", &cpu_label, 0);
      meta("process_sort_index", pid, 0, "sort_index", nullptr, 0);
    }
    for (const auto& [pid, tid] : threads_) {
      std::string name = "thread " + std::to_string(tid);
      if (auto it = thread_names.find({pid, tid}); it != thread_names.end() && !it->second.empty())
        name += " (" + it->second + ")";
      meta("thread_name", pid, tid, "name", &name, 0);
    }
    std::set<std::uint32_t> gpus = memory_devices_;
    for (const auto& [device, stream] : streams_) gpus.insert(device);
    for (std::uint32_t d : gpus) {
      const std::string name = "GPU " + std::to_string(d);
      auto it = devices_.find(d);
      const std::string label = it != devices_.end() && !it->second->name.empty() ? it->second->name : name;
      meta("process_name", d, 0, "name", &name, 0);
      meta("process_labels", d, 0, "labels", &label, 0);
      meta("process_sort_index", d, 0, "sort_index", nullptr, 1 + static_cast<std::int64_t>(d));
    }
    for (const auto& [device, stream] : streams_) {
      std::string name = "stream " + std::to_string(stream);
      if (auto it = stream_names.find({device, stream}); it != stream_names.end() && !it->second.empty())
        name += " " + it->second;
      meta("thread_name", device, stream, "name", &name, 0);
    }
  }

  // ---- document ----
  std::string device_properties() const {
    std::string out = "[";
    bool first = true;
    for (const auto& [id, d] : devices_) {
      json::Members m;
      m.uinteger("id", d->id).text("name", d->name);
      auto opt = [&](const char* key, std::uint64_t v) {
        if (v != 0) m.uinteger(key, v);
      };
      opt("totalGlobalMem", d->total_memory_bytes);
      m.uinteger("computeMajor", d->compute_major).uinteger("computeMinor", d->compute_minor);
      opt("maxThreadsPerBlock", d->max_threads_per_block);
      opt("maxThreadsPerMultiprocessor", std::uint64_t{d->max_warps_per_sm} * d->warp_size);
      opt("regsPerBlock", d->registers_per_block);
      opt("warpSize", d->warp_size);
      opt("sharedMemPerBlock", d->shared_memory_per_block_bytes);
      opt("numSms", d->sm_count);
      opt("regsPerMultiprocessor", d->registers_per_sm);
      opt("sharedMemPerMultiprocessor", d->shared_memory_per_sm_bytes);
      opt("clockRate", d->core_clock_khz);
      opt("l2CacheSize", d->l2_cache_bytes);
      opt("memoryBandwidth", d->memory_bandwidth_kBps * 1000);
      out += first ? "\n  {" : ",\n  {";
      out += m.str();
      out += '}';
      first = false;
    }
    out += first ? "]" : "\n]";
    return out;
  }

  std::string overhead_block() const {
    const auto& s = p_.stats;
    json::Members overhead;
    overhead.uinteger("records", s.records)
        .uinteger("unsupportedRecords", s.unsupported_records)
        .uinteger("recordsWithoutTimestamps", s.records_without_timestamps)
        .uinteger("buffersRequested", s.buffers_requested)
        .uinteger("buffersCompleted", s.buffers_completed)
        .uinteger("bufferBytes", s.buffer_bytes)
        .uinteger("droppedRecords", s.dropped_records)
        .integer("conversionNs", s.conversion_ns);
    json::Members interp;
    interp.uinteger("unlinkedGpuActivities", sum_.unlinked_gpu_activities)
        .uinteger("untimedGpuActivities", sum_.untimed_records)
        .uinteger("negativeDurations", sum_.negative_durations)
        .uinteger("unmatchedMarkerEnds", sum_.unmatched_marker_ends)
        .uinteger("unclosedRanges", sum_.unclosed_ranges)
        .uinteger("unmatchedReleases", sum_.unmatched_releases);
    json::Members top;
    top.text("version", DTSIM_VERSION)
        .raw("overhead", "{" + overhead.str() + "}")
        .raw("interpretation", "{" + interp.str() + "}");
    return "{" + top.str() + "}";
  }

  std::string assemble() {
    std::sort(meta_.begin(), meta_.end(), [](const MetaEvent& a, const MetaEvent& b) {
      return std::tie(a.pid, a.tid, a.name, a.text) < std::tie(b.pid, b.tid, b.name, b.text);
    });
    std::sort(events_.begin(), events_.end(), [](const Event& a, const Event& b) {
      return std::tie(a.ts_ns, a.pid, a.tid, a.name, a.phase, a.text) <
             std::tie(b.ts_ns, b.pid, b.tid, b.name, b.phase, b.text);
    });
    std::string out = "{\"schemaVersion\":1,\n\"deviceProperties\":";
    out += device_properties();
    if (p_.distributed) {
      const auto& d = *p_.distributed;
      json::Members m;
      if (!d.backend.empty()) m.text("backend", d.backend);
      m.integer("rank", d.rank).integer("world_size", d.world_size);
      if (d.local_rank >= 0) m.integer("local_rank", d.local_rank);
      out += ",\n\"distributedInfo\":{" + m.str() + "}";
    }
    out += ",\n\"dtsimProfiler\":" + overhead_block();
    out += ",\n\"displayTimeUnit\":\"ms\",\n\"baseTimeNanoseconds\":";
    json::append_int(out, base_);
    out += ",\n\"traceEvents\":[";
    bool first = true;
    auto add = [&](const std::string& text) {
      out += first ? "\n" : ",\n";
      out += text;
      first = false;
    };
    for (const auto& m : meta_) add(m.text);
    for (const auto& e : events_) add(e.text);
    out += "\n]}\n";
    sum_.events = meta_.size() + events_.size();
    return out;
  }

  const Profile& p_;
  const WriterOptions& opt_;
  WriteSummary& sum_;
  std::int64_t min_ts_ = std::numeric_limits<std::int64_t>::max();
  std::int64_t max_ts_ = 0;
  std::int64_t base_ = 0;
  MarkerPairing pairing_;
  std::map<std::uint32_t, const DeviceInfo*> devices_;
  std::unordered_map<std::uint32_t, std::size_t> runtime_by_corr_;
  std::unordered_map<std::uint32_t, std::size_t> driver_by_corr_;
  std::unordered_map<std::uint32_t, std::pair<std::uint32_t, std::uint64_t>> explicit_external_;  // (kind, id)
  std::vector<std::uint64_t> api_external_;
  std::vector<GpuActivity> gpu_;
  std::unordered_map<std::string, std::string> demangled_;
  std::set<ThreadKey> threads_;                                // CPU lanes (pid, tid)
  std::set<std::pair<std::uint32_t, std::uint32_t>> streams_;  // GPU lanes (device, stream)
  std::set<std::uint32_t> memory_devices_;
  std::vector<Event> events_;
  std::vector<MetaEvent> meta_;
};

}  // namespace

ProfileWriter::ProfileWriter(WriterOptions options) : options_(std::move(options)) {}

std::string ProfileWriter::to_json(const Profile& profile, WriteSummary* summary) const {
  WriteSummary local;
  WriteSummary& s = summary ? *summary : local;
  s = WriteSummary{};
  return Builder(profile, options_, s).run();
}

WriteSummary ProfileWriter::write_file(const Profile& profile, const std::string& path) const {
  WriteSummary summary;
  const std::string text = to_json(profile, &summary);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot open '" + tmp + "' for writing");
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error("cannot write '" + tmp + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot rename '" + tmp + "' to '" + path + "'");
  }
  return summary;
}

std::string format_overhead(const CollectionStats& s, const WriteSummary& w) {
  std::ostringstream os;
  os << s.records << " records in " << s.buffers_completed << " buffers (" << s.buffer_bytes / (1024ULL * 1024ULL)
     << " MiB), " << s.dropped_records << " dropped, " << s.unsupported_records << " of unsupported kinds, "
     << s.records_without_timestamps << " untimed; conversion " << static_cast<double>(s.conversion_ns) / 1e6 << " ms; "
     << w.events << " trace events (" << w.kernels << " kernels, " << w.memcpys << " memcpys, " << w.memsets
     << " memsets, " << w.api_calls << " API calls, " << w.ranges << " NVTX ranges)";
  if (w.unlinked_gpu_activities || w.unmatched_marker_ends || w.unclosed_ranges || w.unmatched_releases ||
      w.negative_durations)
    os << "; not interpreted: " << w.unlinked_gpu_activities << " GPU activities without API call, "
       << w.unmatched_marker_ends << " NVTX ends without start, " << w.unclosed_ranges << " unclosed ranges, "
       << w.unmatched_releases << " frees of memory allocated before profiling, " << w.negative_durations
       << " negative durations";
  return os.str();
}

}  // namespace dtsim::profiler
