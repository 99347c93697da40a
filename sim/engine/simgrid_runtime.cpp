#include "sim/engine/simgrid_runtime.hpp"

#include <simgrid/plugins/load.h>
#include <simgrid/version.h>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <set>

#include "traces/error.hpp"

namespace sg4 = simgrid::s4u;

namespace dtsim::sim {

std::string simgrid_version() {
  return std::to_string(SIMGRID_VERSION_MAJOR) + "." + std::to_string(SIMGRID_VERSION_MINOR) + "." +
         std::to_string(SIMGRID_VERSION_PATCH);
}

namespace {
// Compute and delay tasks run as Execs on dedicated hosts of this speed: amount = duration * speed.
constexpr double kHostSpeed = 1e9;
// A task whose predecessors end before its release time (TaskGraph::release_s) waits on its rank's HOST timer
// host, an exec of (release - now) * speed; the host has this many cores so that concurrent waits do not share
// one (each runs at the per-core speed). Host-stream DELAYs (host_sync_each_pass) never overlap, and a run has
// either releases or those DELAYs.
constexpr int kReleaseCores = 4096;

struct Endpoints {
  sg4::Host* compute = nullptr;
  sg4::Host* timer[kNumStreams] = {};
  sg4::Host* nvl = nullptr;         // NVSwitch port
  sg4::Host* nvl_mirror = nullptr;  // sink sharing the port's links (folded axes)
  sg4::Host* net = nullptr;         // NIC
  sg4::Host* net_mirror = nullptr;
};

class Runner {
public:
  Runner(const TaskGraph& g, EngineResult& res) : g_(g), res_(res) {}

  void build_platform(const Platform& pf) {
    pf_ = &pf;
    // A full zone with an explicit route for every (source, destination) pair the task graph uses: routing is
    // the Platform's (one source of truth for both engines), and only the pairs needed exist.
    auto* zone = sg4::create_full_zone("cluster");
    for (const auto& l : pf.links) {
      links_.push_back(zone->create_link(l.name, l.bandwidth_Bps)->set_latency(l.latency_s)->seal());
    }
    res_.link_stats = initial_link_stats(pf);
    res_.links = links_.size();
    link_active_.assign(links_.size(), 0);
    link_since_.assign(links_.size(), 0);
    ep_.resize(pf.nvl.size());
    const bool copies = g_.uses_host_copies();  // the copy streams' timers only where something runs on them
    for (std::size_t i = 0; i < pf.nvl.size(); ++i) {
      const std::string id = std::to_string(i);
      Endpoints& e = ep_[i];
      e.compute = zone->create_host("gpu" + id, kHostSpeed);
      for (int s = 1; s < kNumStreams; ++s)
        if (copies || !is_host_copy(static_cast<Stream>(s)))
          e.timer[s] = zone->create_host("timer" + id + "." + stream_name(static_cast<Stream>(s)), kHostSpeed);
      if (g_.has_releases()) e.timer[static_cast<int>(Stream::HOST)]->set_core_count(kReleaseCores);
      // A mirror shares its rank's port: flows to it leave through the rank's up-link and arrive through the
      // rank's own down-link (see lowering.hpp, symmetry folding).
      e.nvl = zone->create_host("nvl" + id, kHostSpeed);
      e.nvl_mirror = zone->create_host("nvl-mirror" + id, kHostSpeed);
      if (pf.net[i].up >= 0 || pf.graph_mode) {
        e.net = zone->create_host("net" + id, kHostSpeed);
        e.net_mirror = zone->create_host("net-mirror" + id, kHostSpeed);
      }
    }
    std::set<std::pair<sg4::Host*, sg4::Host*>> routed;
    for (const auto& t : g_.tasks()) {
      if (t.kind != TaskKind::FLOW) continue;
      auto [from, to] = endpoints_of(t);
      DTSIM_ASSERT(from != nullptr && to != nullptr, "no network endpoint for a flow of rank " << t.rank);
      if (!routed.insert({from, to}).second) continue;
      std::vector<sg4::LinkInRoute> links;
      for (int l : pf.route(t)) links.emplace_back(links_[l]);
      zone->add_route(from->get_netpoint(), to->get_netpoint(), nullptr, nullptr, links, false);
    }
    zone->seal();
    for (auto* l : links_) sg_link_load_track(l);  // after sealing: the plugin attaches its data then
    res_.hosts = zone->get_host_count();
    interference_ = g_.interference_on;
    if (interference_) {
      const std::size_t nr = pf.nvl.size();
      active_flows_.assign(nr, 0);
      running_.assign(nr, -1);
      shadow_.assign(nr, nullptr);
      shadow_weight_.assign(nr, 0);
    }
  }

  void run() {
    const std::size_t n = g_.size();
    res_.start_s.assign(n, -1);
    res_.end_s.assign(n, -1);
    pending_ = g_.pred_count();
    acts_.resize(n);
    ids_.resize(n);  // each activity's data points at its task id here (never resized while running)
    for (std::size_t i = 0; i < n; ++i) ids_[i] = static_cast<std::int32_t>(i);
    if (g_.has_releases()) {
      waiting_.assign(n, 0);
      waits_.assign(ep_.size(), 0);
    }
    sg4::Activity::on_completion_cb([this](sg4::Activity const& a) {
      // Activities completed in earlier callbacks are fully handled by the engine now: drop our references
      // so their memory is reclaimed (the one completing now must stay referenced until we return).
      graveyard_.clear();
      const auto* data = a.get_data<std::int32_t>();
      if (data == nullptr) return;  // not one of ours
      const std::int32_t id = *data;
      if (id < 0 || static_cast<std::size_t>(id) >= res_.end_s.size()) return;
      graveyard_.push_back(std::move(acts_[id]));
      if (!waiting_.empty() && waiting_[id]) {  // its release time has come
        waiting_[id] = 0;
        --waits_[g_.tasks()[id].rank];
        ready_.push_back(id);
      } else {
        finish(id, sg4::Engine::get_clock());
      }
      drain();
      if (++completed_ == started_) collect_link_peaks();
    });
    for (std::size_t i = 0; i < n; ++i)
      if (pending_[i] == 0) make_ready(static_cast<std::int32_t>(i), 0.0);
    drain();
    sg4::Engine::get_instance()->run();
    // Retire the interference execs while the engine still exists: cancel them, let the engine process
    // the cancellations, then drop the references.
    if (interference_) {
      for (auto& sh : shadow_)
        if (sh) sh->cancel();
      sg4::Engine::get_instance()->run();
      graveyard_.clear();
      shadow_.clear();
    }
    for (std::size_t i = 0; i < n; ++i)
      DTSIM_ASSERT(res_.end_s[i] >= 0,
                   "task " << i << " (" << g_.names()[g_.tasks()[i].name] << ") never ran: the task graph deadlocked");
  }

  // The link-load plugin stops tracking when the simulation ends: read the peaks while it still runs.
  // The plugin (SimGrid 3.32 src/plugins/link_load.cpp) samples Link::get_load() in the Comm start/completion
  // callbacks, before the max-min system is solved again, so a sample can count a finishing flow and the flows
  // started in its completion callback together (1.5x the bandwidth on a ring all-gather, issue Guard). The solver
  // bounds the true load by the bandwidth, so a sample above it is that transient: it is capped at 1.
  void collect_link_peaks() {
    for (std::size_t l = 0; l < links_.size(); ++l)
      res_.link_stats[l].peak_utilization =
          std::min(1.0, sg_link_get_max_instantaneous_load(links_[l]) / links_[l]->get_bandwidth());
  }

private:
  std::pair<sg4::Host*, sg4::Host*> endpoints_of(const Task& t) const {
    const Endpoints& src = ep_[t.rank];
    const bool intra = t.path == Path::INTRA_NODE;
    sg4::Host* from = intra ? src.nvl : src.net;
    sg4::Host* to = t.mirror ? (intra ? src.nvl_mirror : src.net_mirror) : (intra ? ep_[t.peer].nvl : ep_[t.peer].net);
    return {from, to};
  }

  // Per-link bytes and busy time: every flow adds its bytes to the links of its route and keeps them busy.
  void flow_started(std::int32_t id, double now) {
    for (int l : pf_->route(g_.tasks()[id])) {
      if (link_active_[l]++ == 0) link_since_[l] = now;
      res_.link_stats[l].bytes += g_.tasks()[id].bytes;
    }
  }
  void flow_finished(std::int32_t id, double now) {
    for (int l : pf_->route(g_.tasks()[id]))
      if (--link_active_[l] == 0) res_.link_stats[l].busy_s += now - link_since_[l];
  }

  // Interference (TaskGraph::interference_on). A rank's compute exec shares its host with a "shadow" exec of weight
  // s (the running task's slowdown) while the rank has a flow in flight: SimGrid's CPU sharing then gives the task
  // 1 / (1 + s) of the speed, on the overlapping part only. While a compute task runs, the rank's own up-links (its
  // NVSwitch port and NIC) carry 1 / (1 + c) of their capacity (c = TaskGraph::collective_slowdown).
  void update_interference(std::int32_t r) {
    const std::int32_t task = running_[r];
    const double want = task >= 0 && active_flows_[r] > 0 ? g_.tasks()[task].interference : 0.0;
    // One shadow per rank for the whole run; between overlaps its weight drops to a negligible share (SimGrid's
    // suspend() keeps a suspended exec's share on the host, and a cancelled exec must stay referenced until the
    // engine retires it).
    constexpr double kIdleWeight = 1e-12;
    const double weight = want > 0 ? want : kIdleWeight;
    if (!shadow_[r]) {
      if (want <= 0) return;
      shadow_[r] = sg4::Exec::init();
      shadow_[r]->set_host(ep_[r].compute);
      shadow_[r]->set_flops_amount(1e30);
      shadow_[r]->set_priority(weight);
      shadow_[r]->start();
    } else if (shadow_weight_[r] != weight) {
      shadow_[r]->update_priority(weight);
    }
    shadow_weight_[r] = weight;
  }
  void set_uplinks(std::int32_t r, bool slowed) {
    if (g_.collective_slowdown <= 0 || pf_->graph_mode) return;
    const double f = slowed ? 1.0 / (1.0 + g_.collective_slowdown) : 1.0;
    for (int l : {pf_->nvl[r].up, pf_->net[r].up})
      if (l >= 0) links_[l]->set_bandwidth(pf_->links[l].bandwidth_Bps * f);
  }

  void finish(std::int32_t id, double now) {
    if (g_.tasks()[id].kind == TaskKind::FLOW) flow_finished(id, now);
    if (interference_) {
      const Task& t = g_.tasks()[id];
      if (t.kind == TaskKind::FLOW && t.rank >= 0) {
        --active_flows_[t.rank];
        update_interference(t.rank);
      } else if (t.kind == TaskKind::COMPUTE && running_[t.rank] == id) {
        running_[t.rank] = -1;
        update_interference(t.rank);
        set_uplinks(t.rank, false);
      }
    }
    res_.end_s[id] = now;
    for (auto* s = g_.succ_begin(id); s != g_.succ_end(id); ++s)
      if (--pending_[*s] == 0) make_ready(*s, now);
  }

  /// Every predecessor of `id` has ended: it starts now, or waits until its release time if that is later.
  void make_ready(std::int32_t id, double now) {
    const double release = g_.release_s(id);
    if (release <= now) {
      ready_.push_back(id);
      return;
    }
    const std::int32_t r = g_.tasks()[id].rank;
    DTSIM_ASSERT(r >= 0, "task " << id << " has no rank");
    ++waits_[r];
    DTSIM_ASSERT(waits_[r] <= kReleaseCores, "too many tasks of rank " << r << " wait for a release");
    waiting_[id] = 1;
    auto exec = sg4::Exec::init();
    exec->set_host(ep_[r].timer[static_cast<int>(Stream::HOST)]);
    exec->set_flops_amount((release - now) * kHostSpeed);
    exec->set_data(&ids_[id]);
    exec->start();
    acts_[id] = exec;
    ++started_;
  }

  // Starts every ready task; zero-time tasks complete at once and may make more tasks ready.
  void drain() {
    const double now = sg4::Engine::get_clock();
    while (!ready_.empty()) {
      std::int32_t id = ready_.front();
      ready_.pop_front();
      const Task& t = g_.tasks()[id];
      res_.start_s[id] = now;
      void* data = &ids_[id];
      switch (t.kind) {
        case TaskKind::JOIN: finish(id, now); break;
        case TaskKind::COMPUTE:
        case TaskKind::DELAY: {
          if (t.duration_s <= 0) {
            finish(id, now);
            break;
          }
          sg4::Host* host =
              t.kind == TaskKind::COMPUTE ? ep_[t.rank].compute : ep_[t.rank].timer[static_cast<int>(t.stream)];
          DTSIM_ASSERT(host != nullptr, "no host for task " << id);
          auto exec = sg4::Exec::init();
          exec->set_host(host);
          exec->set_flops_amount(t.duration_s * kHostSpeed);
          exec->set_data(data);
          exec->start();
          acts_[id] = exec;
          if (interference_ && t.kind == TaskKind::COMPUTE) {
            running_[t.rank] = id;
            update_interference(t.rank);
            set_uplinks(t.rank, true);
          }
          ++res_.activities;
          ++started_;
          break;
        }
        case TaskKind::FLOW: {
          auto [from, to] = endpoints_of(t);
          flow_started(id, now);
          auto comm = sg4::Comm::sendto_init(from, to);
          comm->set_payload_size(static_cast<std::uint64_t>(std::llround(t.bytes)));
          comm->set_data(data);
          comm->start();
          acts_[id] = comm;
          if (interference_ && t.rank >= 0) {
            ++active_flows_[t.rank];
            update_interference(t.rank);
          }
          ++res_.activities;
          ++started_;
          break;
        }
      }
    }
  }

  const TaskGraph& g_;
  EngineResult& res_;
  std::vector<Endpoints> ep_;
  std::vector<std::int32_t> pending_;
  std::vector<std::int32_t> ids_;  // ids_[i] == i: the payload of task i's activity
  std::vector<char> waiting_;      // per task: its activity is the wait for its release time (graphs with releases)
  std::vector<int> waits_;         // per simulated rank: its tasks waiting for their release
  std::deque<std::int32_t> ready_;
  std::vector<sg4::ActivityPtr> acts_;  // activities must stay referenced until they complete
  std::vector<sg4::ActivityPtr> graveyard_;
  std::uint64_t started_ = 0, completed_ = 0;  // SimGrid activities
  const Platform* pf_ = nullptr;
  std::vector<sg4::Link*> links_;  // same order as Platform::links
  bool interference_ = false;
  std::vector<int> active_flows_;      // per simulated rank: its flows in flight
  std::vector<std::int32_t> running_;  // per simulated rank: its running compute task, -1 if none
  std::vector<sg4::ExecPtr> shadow_;   // per simulated rank: the interference exec sharing its compute host
  std::vector<double> shadow_weight_;
  std::vector<int> link_active_;
  std::vector<double> link_since_;
};
}  // namespace

EngineResult run_on_simgrid(const TaskGraph& g, const ClusterSpec& cluster, const Calibration& cal,
                            const std::vector<int>& gpu_of_rank, const std::vector<RankShare>& share) {
  static bool used = false;
  DTSIM_ASSERT(g.exchanges().empty(), "all-to-alls as one task per member are timed by the analytic engine only");
  DTSIM_ASSERT(!used, "run_on_simgrid called twice in one process (SimGrid's engine is a singleton)");
  used = true;
  // Exact flow-level model: CM02 max-min sharing, no latency/bandwidth correction, no TCP window, no cross
  // traffic. Calibration enters through link bandwidths and latencies instead. surf/precision (SimGrid's timing
  // precision, 1e-9 s by default) at 1e-12 s: at 1e-9 s, events a few nanoseconds apart could merge, and a kernel's
  // interference overlap with a collective then differed from the max-min engine's by ~3e-9 s (tests/engine
  // maxmin_agreement.sh, its MoE case, once NCCL's protocol floors put step delays off round values).
  std::vector<std::string> args = {"dtsim",
                                   "--log=root.thresh:critical",
                                   "--cfg=network/model:CM02",
                                   "--cfg=network/latency-factor:1",
                                   "--cfg=network/bandwidth-factor:1",
                                   "--cfg=network/TCP-gamma:0",
                                   "--cfg=network/crosstraffic:0",
                                   "--cfg=surf/precision:1e-12"};
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (auto& a : args) argv.push_back(a.data());
  int argc = static_cast<int>(argv.size());
  sg4::Engine engine(&argc, argv.data());
  sg_link_load_plugin_init();
  EngineResult res;
  res.engine = "simgrid-flow";
  Runner runner(g, res);
  const Platform pf = describe_platform(cluster, cal, gpu_of_rank, share);
  runner.build_platform(pf);
  runner.run();
  count_folded_copies(pf, &res);
  return res;
}

}  // namespace dtsim::sim
