#include "profiler/interpret/analysis.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace dtsim::profiler {

const char* memcpy_kind_name(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::HTOD: return "HtoD";
    case MemcpyKind::DTOH: return "DtoH";
    case MemcpyKind::HTOA: return "HtoA";
    case MemcpyKind::ATOH: return "AtoH";
    case MemcpyKind::ATOA: return "AtoA";
    case MemcpyKind::ATOD: return "AtoD";
    case MemcpyKind::DTOA: return "DtoA";
    case MemcpyKind::DTOD: return "DtoD";
    case MemcpyKind::HTOH: return "HtoH";
    case MemcpyKind::PTOP: return "PtoP";
    case MemcpyKind::UNKNOWN: break;
  }
  return "Unknown";
}

const char* memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::PAGEABLE: return "Pageable";
    case MemoryKind::PINNED: return "Pinned";
    case MemoryKind::DEVICE: return "Device";
    case MemoryKind::ARRAY: return "Array";
    case MemoryKind::MANAGED: return "Managed";
    case MemoryKind::DEVICE_STATIC: return "Device Static";
    case MemoryKind::MANAGED_STATIC: return "Managed Static";
    case MemoryKind::UNKNOWN: break;
  }
  return "Unknown";
}

std::string memcpy_event_name(const MemcpyRecord& r) {
  return std::string("Memcpy ") + memcpy_kind_name(r.kind) + " (" + memory_kind_name(r.src_kind) + " -> " +
         memory_kind_name(r.dst_kind) + ")";
}

std::string memset_event_name(const MemsetRecord& r) {
  return std::string("Memset (") + memory_kind_name(r.memory_kind) + ")";
}

std::string strip_api_version(std::string_view name) {
  // A trailing "_v<digits>" is the version tag; anything else is part of the name.
  const auto pos = name.rfind("_v");
  if (pos == std::string_view::npos || pos + 2 == name.size()) return std::string(name);
  for (std::size_t i = pos + 2; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return std::string(name);
  return std::string(name.substr(0, pos));
}

std::string cxa_demangle(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !out) return name;
  return out.get();
}

bool is_nccl_kernel(std::string_view demangled_name) { return demangled_name.starts_with("nccl"); }

MarkerPairing pair_markers(const std::vector<MarkerRecord>& markers, std::int64_t profile_end_ns) {
  MarkerPairing result;
  // Index the END records by id first, so that the order of the input (buffers arrive in any order) is irrelevant.
  std::unordered_map<std::uint32_t, const MarkerRecord*> ends;
  std::unordered_map<std::uint32_t, bool> start_seen;
  for (const auto& m : markers) {
    if (m.kind == MarkerRecord::Kind::END) {
      auto [it, inserted] = ends.emplace(m.id, &m);
      if (!inserted && m.timestamp_ns < it->second->timestamp_ns) it->second = &m;  // keep one deterministically
    } else if (m.kind == MarkerRecord::Kind::START) {
      start_seen[m.id] = true;
    }
  }
  for (const auto& m : markers) {
    if (m.kind == MarkerRecord::Kind::INSTANT) {
      result.instants.push_back(m);
      continue;
    }
    if (m.kind != MarkerRecord::Kind::START) continue;
    NvtxRange r;
    r.id = m.id;
    r.name = m.name;
    r.domain = m.domain;
    r.start_ns = m.timestamp_ns;
    r.process_id = m.process_id;
    r.thread_id = m.thread_id;
    if (auto it = ends.find(m.id); it != ends.end()) {
      r.end_ns = std::max(it->second->timestamp_ns, m.timestamp_ns);
    } else {
      r.end_ns = std::max(profile_end_ns, m.timestamp_ns);
      r.complete = false;
      ++result.unclosed_ranges;
    }
    result.ranges.push_back(std::move(r));
  }
  for (const auto& [id, end] : ends)
    if (!start_seen.count(id)) ++result.unmatched_ends;
  std::sort(result.ranges.begin(), result.ranges.end(), [](const NvtxRange& a, const NvtxRange& b) {
    return std::tie(a.process_id, a.thread_id, a.start_ns, b.end_ns, a.id) <
           std::tie(b.process_id, b.thread_id, b.start_ns, a.end_ns, b.id);
  });
  std::sort(result.instants.begin(), result.instants.end(), [](const MarkerRecord& a, const MarkerRecord& b) {
    return std::tie(a.timestamp_ns, a.process_id, a.thread_id, a.id, a.name) <
           std::tie(b.timestamp_ns, b.process_id, b.thread_id, b.id, b.name);
  });
  return result;
}

bool counts_as_device_memory(MemoryKind kind) {
  return kind == MemoryKind::DEVICE || kind == MemoryKind::ARRAY || kind == MemoryKind::DEVICE_STATIC;
}

MemoryUsage memory_usage(const std::vector<MemoryRecord>& records) {
  std::vector<const MemoryRecord*> order;
  order.reserve(records.size());
  for (const auto& r : records)
    if (counts_as_device_memory(r.memory_kind)) order.push_back(&r);
  // Releases before allocations at the same instant: an address freed and handed out again within one clock tick
  // must be free before its new allocation, or the release would remove the new block.
  auto op_rank = [](const MemoryRecord* r) { return r->op == MemoryRecord::Op::RELEASE ? 0 : 1; };
  std::stable_sort(order.begin(), order.end(), [&](const MemoryRecord* a, const MemoryRecord* b) {
    return std::make_tuple(a->timestamp_ns, a->device_id, op_rank(a), a->address, a->bytes) <
           std::make_tuple(b->timestamp_ns, b->device_id, op_rank(b), b->address, b->bytes);
  });
  MemoryUsage usage;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> live;  // (device, address) -> bytes
  std::map<std::uint32_t, std::uint64_t> in_use;
  for (const MemoryRecord* r : order) {
    auto& total = in_use[r->device_id];
    const auto key = std::make_pair(r->device_id, r->address);
    if (r->op == MemoryRecord::Op::ALLOCATION) {
      if (auto it = live.find(key); it != live.end()) total -= it->second;  // a release we never saw
      live[key] = r->bytes;
      total += r->bytes;
    } else {
      auto it = live.find(key);
      if (it == live.end()) {
        ++usage.unmatched_releases;
        continue;
      }
      total -= it->second;
      live.erase(it);
    }
    usage.samples.push_back({r->timestamp_ns, r->device_id, total});
    auto& peak = usage.peak_bytes[r->device_id];
    peak = std::max(peak, total);
  }
  return usage;
}

namespace {
std::optional<int> parse_int(const char* s) {
  if (!s || !*s) return std::nullopt;
  const std::string_view v(s);
  int out = 0;
  const auto res = std::from_chars(v.data(), v.data() + v.size(), out);
  if (res.ec != std::errc() || res.ptr != v.data() + v.size()) return std::nullopt;
  return out;
}
}  // namespace

std::optional<DistributedInfo> parse_distributed_env(const std::function<const char*(const char*)>& lookup) {
  struct Names {
    const char* rank;
    const char* size;
    const char* local_rank;
  };
  for (const Names& n : {Names{"RANK", "WORLD_SIZE", "LOCAL_RANK"},
                         Names{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}}) {
    const auto rank = parse_int(lookup(n.rank));
    const auto size = parse_int(lookup(n.size));
    if (!rank || !size || *rank < 0 || *size <= 0 || *rank >= *size) continue;
    DistributedInfo info;
    info.rank = *rank;
    info.world_size = *size;
    if (const auto local = parse_int(lookup(n.local_rank)); local && *local >= 0) info.local_rank = *local;
    return info;
  }
  return std::nullopt;
}

std::string expand_output_path(const std::string& pattern, std::uint32_t process_id, std::optional<int> rank) {
  if (pattern.empty()) return "dtsim_profile." + std::to_string(process_id) + ".json";
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      const char c = pattern[i + 1];
      if (c == 'p' || c == 'r' || c == '%') {
        out += c == 'p' ? std::to_string(process_id) : c == 'r' ? std::to_string(rank.value_or(0)) : "%";
        ++i;
        continue;
      }
    }
    out += pattern[i];
  }
  return out;
}

}  // namespace dtsim::profiler
