#include "validate/calibrate/host_issue.hpp"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "traces/text.hpp"

namespace dtsim::sim {
namespace {

using Interval = std::pair<std::int64_t, std::int64_t>;

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

bool is_launch(std::string_view name) {
  return contains(name, "Launch") || contains(name, "Memcpy") || contains(name, "Memset");
}

/// Sorted, disjoint union of `v`.
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const auto& [s, e] : v) {
    if (!out.empty() && s <= out.back().second) out.back().second = std::max(out.back().second, e);
    else out.emplace_back(s, e);
  }
  return out;
}

std::int64_t length(const std::vector<Interval>& u) {
  std::int64_t sum = 0;
  for (const auto& [s, e] : u) sum += e - s;
  return sum;
}

/// Length of the intersection of two sorted, disjoint unions.
std::int64_t overlap(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::int64_t sum = 0;
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const std::int64_t s = std::max(a[i].first, b[j].first), e = std::min(a[i].second, b[j].second);
    if (e > s) sum += e - s;
    (a[i].second < b[j].second ? i : j) += 1;
  }
  return sum;
}

}  // namespace

HostIssueMeasurement measure_host_issue(const ImportedTrace& trace, const std::string& source) {
  HostIssueMeasurement m;
  m.source = source;
  using Thread = std::pair<std::int64_t, std::int64_t>;
  std::map<Thread, std::size_t> launches;
  std::unordered_set<std::int64_t> device_to_host;  // correlation ids of device-to-host GPU copies
  std::vector<Interval> gpu;
  for (const TraceEvent& e : trace.events) {
    if (e.kind == TraceEventKind::RUNTIME && is_launch(e.name)) ++launches[{e.pid, e.tid}];
    if (e.kind == TraceEventKind::MEMCPY && e.correlation >= 0 && contains(e.name, "DtoH"))
      device_to_host.insert(e.correlation);
    if (e.kind == TraceEventKind::KERNEL || e.kind == TraceEventKind::MEMCPY || e.kind == TraceEventKind::MEMSET)
      gpu.emplace_back(e.start_ns, e.start_ns + e.dur_ns);
  }
  if (launches.empty()) {
    m.why_not = "no launch call (cudaLaunchKernel, cudaMemcpyAsync, ...) in the trace";
    return m;
  }
  // The thread with the most launches; ties to the smaller (pid, tid), so the choice is deterministic.
  const auto issuing = std::max_element(launches.begin(), launches.end(),
                                        [](const auto& a, const auto& b) { return a.second < b.second; });
  std::tie(m.pid, m.tid) = issuing->first;
  m.launches = issuing->second;
  std::vector<Interval> ops, waits;
  for (const TraceEvent& e : trace.events) {
    if (e.pid != m.pid || e.tid != m.tid) continue;
    if (e.kind == TraceEventKind::CPU_OP) ops.emplace_back(e.start_ns, e.start_ns + e.dur_ns);
    if (e.kind != TraceEventKind::RUNTIME) continue;
    const bool copy = contains(e.name, "Memcpy");
    if (contains(e.name, "Synchronize") || (copy && !contains(e.name, "Async")) ||
        (copy && device_to_host.count(e.correlation) > 0))
      waits.emplace_back(e.start_ns, e.start_ns + e.dur_ns);
  }
  const auto busy = merged(std::move(ops));
  const auto blocked = merged(std::move(waits));
  m.busy_s = static_cast<double>(length(busy)) * 1e-9;
  m.blocked_s = static_cast<double>(overlap(busy, blocked)) * 1e-9;
  const auto gpu_union = merged(std::move(gpu));
  if (!gpu_union.empty()) {
    const auto span = gpu_union.back().second - gpu_union.front().first;
    if (span > 0) m.gpu_busy_fraction = static_cast<double>(length(gpu_union)) / static_cast<double>(span);
  }
  if (m.launches < kMinHostLaunches) {
    m.why_not = std::to_string(m.launches) + " launches on the issuing thread, fewer than " +
                std::to_string(kMinHostLaunches) + " to average over";
  } else if (!(m.busy_s > m.blocked_s)) {
    m.why_not = "no CPU operator time on the issuing thread outside calls that wait for the GPU";
  } else {
    m.usable = true;
    m.host_issue_s = (m.busy_s - m.blocked_s) / static_cast<double>(m.launches);
  }
  return m;
}

double median_host_issue_s(const std::vector<HostIssueMeasurement>& measurements) {
  std::vector<double> v;
  for (const auto& m : measurements)
    if (m.usable) v.push_back(m.host_issue_s);
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

nlohmann::json host_issue_json(const std::vector<HostIssueMeasurement>& measurements) {
  nlohmann::json per = nlohmann::json::array();
  for (const auto& m : measurements)
    per.push_back({{"source", m.source},
                   {"launches", m.launches},
                   {"busy_s", m.busy_s},
                   {"blocked_s", m.blocked_s},
                   {"gpu_busy_fraction", m.gpu_busy_fraction},
                   {"host_issue_s", m.usable ? nlohmann::json(m.host_issue_s) : nlohmann::json(nullptr)},
                   {"not_measured", m.why_not}});
  return {{"method",
           "validate/calibrate/host_issue.hpp: CPU-operator time of the issuing thread outside calls that "
           "wait for the GPU, per launch; a stack value, not applied to this calibration"},
          {"median_s", median_host_issue_s(measurements)},
          {"traces", per}};
}

std::string host_issue_text(const std::vector<HostIssueMeasurement>& measurements) {
  std::string out;
  for (const auto& m : measurements) {
    out += "host issue: " + m.source + ": ";
    if (!m.usable) {
      out += "not measured (" + m.why_not + ")\n";
      continue;
    }
    out += std::to_string(m.launches) + " launches on thread ";
    out += std::to_string(m.pid);
    out += "/";
    out += std::to_string(m.tid);
    out += format_number(", busy %.1f ms", m.busy_s * 1e3);
    out += format_number(" (blocked %.1f ms)", m.blocked_s * 1e3);
    out += format_number(", %.1f us per launch", m.host_issue_s * 1e6);
    out += format_number(", GPU busy %.0f%%\n", 100 * m.gpu_busy_fraction);
  }
  return out;
}

}  // namespace dtsim::sim
