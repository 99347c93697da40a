#include "sim/model/task_graph.hpp"

#include <algorithm>

namespace dtsim::sim {

const char* stream_name(Stream s) {
  switch (s) {
    case Stream::COMPUTE: return "compute";
    case Stream::TP: return "tp-comm";
    case Stream::PP: return "pp-comm";
    case Stream::DP: return "dp-comm";
    case Stream::HOST: return "host";
    case Stream::TO_HOST: return "copy-to-host";
    case Stream::FROM_HOST: return "copy-from-host";
  }
  return "?";
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::FORWARD: return "forward";
    case Phase::BACKWARD: return "backward";
    case Phase::RECOMPUTE: return "recompute";
    case Phase::GRAD_SYNC: return "grad-sync";
    case Phase::OPTIMIZER: return "optimizer";
    case Phase::OTHER: return "other";
  }
  return "?";
}

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::WEIGHTS: return "weights";
    case MemCategory::GRADIENTS: return "gradients";
    case MemCategory::OPTIMIZER: return "optimizer";
    case MemCategory::RESERVED: return "reserved";
    case MemCategory::ACTIVATIONS: return "activations";
    case MemCategory::RECOMPUTE: return "recompute";
    case MemCategory::GATHERED_PARAMS: return "gathered_params";
    case MemCategory::GRAD_BUFFERS: return "grad_buffers";
  }
  return "?";
}

void TaskGraph::memory(std::int32_t task, bool at_end, MemCategory category, double bytes) {
  if (bytes == 0) return;
  DTSIM_ASSERT(task >= 0 && static_cast<std::size_t>(task) < tasks_.size(), "memory event on task " << task);
  mem_.push_back({bytes, task, at_end, category});
}

std::int32_t TaskGraph::add(const Task& t) {
  DTSIM_ASSERT(!finalized_, "add after finalize");
  tasks_.push_back(t);
  return static_cast<std::int32_t>(tasks_.size() - 1);
}

void TaskGraph::add_exchange(Exchange x) {
  DTSIM_ASSERT(!finalized_, "add_exchange after finalize");
  const auto n = static_cast<std::size_t>(x.n());
  DTSIM_ASSERT(x.ranks.size() == n && x.pieces && x.pieces->bytes.size() == n * n && x.pieces->piece.size() == n * n,
               "malformed exchange");
  exchange_of_.resize(tasks_.size(), {-1, -1});
  const auto e = static_cast<std::int32_t>(exchanges_.size());
  for (std::size_t j = 0; j < n; ++j) {
    const auto t = static_cast<std::size_t>(x.tasks[j]);
    DTSIM_ASSERT(t < tasks_.size() && tasks_[t].kind == TaskKind::DELAY && exchange_of_[t].first < 0,
                 "an exchange member's task must be a DELAY of no other exchange");
    exchange_of_[t] = {e, static_cast<std::int32_t>(j)};
  }
  exchanges_.push_back(std::move(x));
}

void TaskGraph::depend(std::int32_t before, std::int32_t after) {
  DTSIM_ASSERT(before >= 0 && after >= 0 && before != after && static_cast<std::size_t>(before) < tasks_.size() &&
                   static_cast<std::size_t>(after) < tasks_.size(),
               "bad dependency " << before << " -> " << after);
  edges_.emplace_back(before, after);
}

void TaskGraph::release_at_least(std::int32_t task, double t_s) {
  DTSIM_ASSERT(task >= 0 && static_cast<std::size_t>(task) < tasks_.size() && t_s >= 0,
               "bad release " << t_s << " of task " << task);
  if (release_.size() < tasks_.size()) release_.resize(tasks_.size(), 0.0);
  auto& r = release_[static_cast<std::size_t>(task)];
  r = std::max(r, t_s);
}

std::int32_t TaskGraph::intern(const std::string& name) {
  auto [it, inserted] = name_ids_.emplace(name, static_cast<std::int32_t>(names_.size()));
  if (inserted) names_.push_back(name);
  return it->second;
}

void TaskGraph::set_kernels(std::int32_t task, std::vector<KernelSpec> kernels) {
  DTSIM_ASSERT(task >= 0 && static_cast<std::size_t>(task) < tasks_.size(), "set_kernels of unknown task " << task);
  if (kernels_.size() <= static_cast<std::size_t>(task)) kernels_.resize(tasks_.size());
  kernels_[task] = std::move(kernels);
}

const std::vector<KernelSpec>& TaskGraph::kernels(std::int32_t task) const {
  static const std::vector<KernelSpec> none;
  return task >= 0 && static_cast<std::size_t>(task) < kernels_.size() ? kernels_[task] : none;
}

void TaskGraph::finalize() {
  DTSIM_ASSERT(!finalized_, "finalize called twice");
  finalized_ = true;
  const std::size_t n = tasks_.size();
  // CSR by counting (linear; a global sort of tens of millions of edges is not), each task's successors in
  // ascending order without duplicates; the edge list is released.
  succ_begin_.assign(n + 1, 0);
  for (const auto& e : edges_) succ_begin_[e.first + 1]++;
  for (std::size_t i = 0; i < n; ++i) succ_begin_[i + 1] += succ_begin_[i];
  succ_.resize(edges_.size());
  // succ_begin_[a] serves as a's cursor (no second array): after the fill it holds a's end, i.e. a + 1's begin.
  for (const auto& [a, b] : edges_) succ_[succ_begin_[a]++] = b;
  for (std::size_t i = n; i > 0; --i) succ_begin_[i] = succ_begin_[i - 1];
  succ_begin_[0] = 0;
  std::vector<std::pair<std::int32_t, std::int32_t>>().swap(edges_);
  std::int32_t out = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto b = succ_.begin() + succ_begin_[i], e = succ_.begin() + succ_begin_[i + 1];
    std::sort(b, e);
    const auto last = std::unique(b, e);
    succ_begin_[i] = out;
    for (auto it = b; it != last; ++it) succ_[out++] = *it;
  }
  succ_begin_[n] = out;
  succ_.resize(out);
  succ_.shrink_to_fit();
  edge_count_ = succ_.size();
  // Acyclicity (Kahn): every task must become ready.
  std::vector<std::int32_t> indeg = pred_count(), queue;
  for (std::size_t i = 0; i < n; ++i)
    if (indeg[i] == 0) queue.push_back(static_cast<std::int32_t>(i));
  std::size_t seen = 0;
  while (!queue.empty()) {
    auto v = queue.back();
    queue.pop_back();
    ++seen;
    for (auto* s = succ_begin(v); s != succ_end(v); ++s)
      if (--indeg[*s] == 0) queue.push_back(*s);
  }
  DTSIM_ASSERT(seen == n, "task graph has a cycle (" << n - seen << " tasks never become ready)");
}

void TaskGraph::release_edges() {
  DTSIM_ASSERT(finalized_, "release_edges before finalize");
  std::vector<std::int32_t>().swap(succ_);
  std::vector<std::int32_t>().swap(succ_begin_);
  std::vector<double>().swap(release_);
  released_ = true;
}

std::vector<std::int32_t> TaskGraph::pred_count() const {
  DTSIM_ASSERT(finalized_ && !released_, "pred_count before finalize or after release_edges");
  std::vector<std::int32_t> n(tasks_.size(), 0);
  for (const std::int32_t s : succ_) ++n[s];
  return n;
}

bool TaskGraph::uses_host_copies() const {
  return std::any_of(tasks_.begin(), tasks_.end(), [](const Task& t) { return is_host_copy(t.stream); });
}

}  // namespace dtsim::sim
