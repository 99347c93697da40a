#include "sim/engine/maxmin_runtime.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <queue>

#include "traces/error.hpp"

namespace dtsim::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A resource shared max-min fairly: a network link (capacity in bytes/s) or a host (capacity 1: one second of work
/// per second).
struct Constraint {
  double capacity = 0;
  std::vector<std::int32_t> vars;  ///< variables in their sharing phase on it
  int link = -1;                   ///< Platform link index, -1 for a host
  std::uint32_t mark = 0;          ///< component search epoch
  std::uint32_t stamp = 0;         ///< solver: invalidates stale heap entries
  double left = 0;                 ///< solver: capacity not yet given out
  double weight = 0;               ///< solver: weights of the variables not yet fixed
  int unfixed = 0;                 ///< solver: variables not yet fixed
};

/// A variable's constraints. Routes are short (a GPU's two private links where ranks fold, up to six through a
/// three-tier fat-tree), so up to kInline of them sit in the variable itself and are read with it, not through a
/// pointer to a heap block of their own (a cache miss per variable in every re-solve: an eighth of a skewed MoE
/// run's time); longer routes (explicit graphs) keep them all in `spill_`.
class ConsList {
public:
  static constexpr std::uint32_t kInline = 6;
  void clear() {
    n_ = 0;
    spill_.clear();
  }
  void push_back(std::int32_t c) {
    if (n_ < kInline) {
      in_[n_] = c;
    } else {
      if (n_ == kInline) spill_.assign(in_, in_ + kInline);
      spill_.push_back(c);
    }
    ++n_;
  }
  const std::int32_t* begin() const { return n_ <= kInline ? in_ : spill_.data(); }
  const std::int32_t* end() const { return begin() + n_; }

private:
  std::int32_t in_[kInline] = {};
  std::uint32_t n_ = 0;
  std::vector<std::int32_t> spill_;
};

/// An activity in its sharing phase: an exec (work in seconds of host time) or a flow (bytes).
struct Variable {
  ConsList cons;
  double remaining = 0;
  double rate = 0;
  double was = 0;  ///< solver: the rate before this solve
  double weight = 1;
  double since = 0;        ///< time `remaining` was last brought up to date
  std::int32_t task = -1;  ///< -1: a rank's interference shadow (never completes)
  std::uint32_t version = 0;
  std::uint32_t mark = 0;
  bool fixed = false;
  bool alive = false;
};

struct Event {
  double t;
  std::uint64_t seq;
  std::int32_t id;  ///< variable (kind VAR_DONE) or task (kinds LATENCY_DONE, RELEASED)
  std::uint32_t version;
  std::uint8_t kind;
  bool operator>(const Event& o) const { return t > o.t || (t == o.t && seq > o.seq); }
};
/// RELEASED: a task whose predecessors ended before its release time (TaskGraph::release_s) starts now.
enum : std::uint8_t { VAR_DONE = 0, LATENCY_DONE = 1, RELEASED = 2 };

class MaxMin {
  using Level = std::pair<double, std::pair<int, std::uint32_t>>;  ///< (level, (constraint, stamp))
  /// solve scans while constraints^2 <= this x variables (either way the same rates; see solve)
  static constexpr std::size_t kScanPerVariable = 16;

public:
  MaxMin(const TaskGraph& g, const Platform& pf, EngineResult& res, MaxMinSolver solver)
      : g_(g), pf_(pf), res_(res), solver_(solver) {
    nr_ = static_cast<int>(pf.nvl.size());
    // Hosts: each rank's compute host, then its timer host per communication stream (as the SimGrid adapter).
    cons_.resize(static_cast<std::size_t>(nr_) * kNumStreams + pf.links.size());
    for (int i = 0; i < nr_ * kNumStreams; ++i) cons_[i].capacity = 1;
    for (std::size_t l = 0; l < pf.links.size(); ++l) {
      auto& c = cons_[static_cast<std::size_t>(nr_) * kNumStreams + l];
      c.capacity = pf.links[l].bandwidth_Bps;
      c.link = static_cast<int>(l);
    }
    res_.link_stats = initial_link_stats(pf);
    res_.links = pf.links.size();
    // Reported as the SimGrid adapter creates them: the copy streams' only where something runs on them.
    res_.hosts = static_cast<std::uint64_t>(nr_) * (g.uses_host_copies() ? kNumStreams : kNumStreams - 2);
    link_active_.assign(pf.links.size(), 0);
    link_since_.assign(pf.links.size(), 0);
    interference_ = g.interference_on;
    if (interference_) {
      active_flows_.assign(nr_, 0);
      running_.assign(nr_, -1);
      shadow_.assign(nr_, -1);
    }
  }

  void run() {
    const std::size_t n = g_.size();
    res_.start_s.assign(n, -1);
    res_.end_s.assign(n, -1);
    pending_ = g_.pred_count();
    for (std::size_t i = 0; i < n; ++i)
      if (pending_[i] == 0) make_ready(static_cast<std::int32_t>(i));
    drain();
    resolve();
    while (!events_.empty()) {
      now_ = events_.front().t;
      while (!events_.empty() && events_.front().t == now_) {
        const Event e = events_.front();
        std::pop_heap(events_.begin(), events_.end(), std::greater<>());
        events_.pop_back();
        if (e.kind == LATENCY_DONE) {
          start_sharing(e.id);
        } else if (e.kind == RELEASED) {
          ready_.push_back(e.id);
        } else {
          Variable& v = vars_[e.id];
          if (!v.alive || v.version != e.version) continue;  // re-solved since
          complete(e.id);
        }
        drain();
      }
      resolve();
    }
    for (std::size_t i = 0; i < n; ++i)
      DTSIM_ASSERT(res_.end_s[i] >= 0,
                   "task " << i << " (" << g_.names()[g_.tasks()[i].name] << ") never ran: the task graph deadlocked");
  }

private:
  int link_con(int l) const { return nr_ * kNumStreams + l; }
  int host_con(const Task& t) const {
    return t.kind == TaskKind::COMPUTE ? t.rank : nr_ + t.rank * (kNumStreams - 1) + static_cast<int>(t.stream) - 1;
  }

  void push(double t, std::uint8_t kind, std::int32_t id, std::uint32_t version) {
    events_.push_back({t, seq_++, id, version, kind});
    std::push_heap(events_.begin(), events_.end(), std::greater<>());
    if (events_.size() > 2 * events_kept_ + 4096) compact_events();
  }
  /// Every re-solve gives each variable of the component a new completion event and leaves its old one in the heap:
  /// with F flows sharing one component (an all-to-all) that is O(F^2) stale events. Dropping them when they
  /// outnumber the rest keeps the heap O(live events); (t, seq) orders events totally, so the pops are unchanged.
  void compact_events() {
    std::erase_if(events_, [&](const Event& e) {
      return e.kind == VAR_DONE && (!vars_[e.id].alive || vars_[e.id].version != e.version);
    });
    std::make_heap(events_.begin(), events_.end(), std::greater<>());
    events_kept_ = events_.size();
  }
  /// Every predecessor of `id` has ended: it starts now, or at its release time if that is later.
  void make_ready(std::int32_t id) {
    const double release = g_.release_s(id);
    if (release > now_) push(release, RELEASED, id, 0);
    else ready_.push_back(id);
  }

  std::int32_t new_var(std::int32_t task, double amount, double weight) {
    std::int32_t id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else {
      id = static_cast<std::int32_t>(vars_.size());
      vars_.emplace_back();
    }
    Variable& v = vars_[id];
    v.cons.clear();
    v.remaining = amount;
    v.rate = 0;
    v.weight = weight;
    v.since = now_;
    v.task = task;
    ++v.version;
    v.alive = true;
    return id;
  }
  void attach(std::int32_t id, int con) {
    vars_[id].cons.push_back(con);
    cons_[con].vars.push_back(id);
    dirty_.push_back(con);
  }
  void detach(std::int32_t id) {
    Variable& v = vars_[id];
    for (int c : v.cons) {
      auto& vs = cons_[c].vars;
      auto it = std::find(vs.begin(), vs.end(), id);
      DTSIM_ASSERT(it != vs.end(), "variable not on its constraint");
      *it = vs.back();
      vs.pop_back();
      dirty_.push_back(c);
    }
    v.alive = false;
    ++v.version;
    free_.push_back(id);
  }

  // A flow's latency has elapsed: it shares its route from now on (or is done, when it carries nothing).
  void start_sharing(std::int32_t task) {
    const Task& t = g_.tasks()[task];
    const double bytes = static_cast<double>(std::llround(t.bytes));
    pf_.route_into(t, &route_);
    if (bytes <= 0 || route_.empty()) {
      finish(task);
      return;
    }
    // SimGrid's CM02 shares a link in inverse proportion to each flow's route latency (its "sharing penalty"; 1
    // without latency): flows over longer routes get less.
    const double lat = pf_.latency_s(route_);
    const std::int32_t id = new_var(task, bytes, lat > 0 ? 1.0 / lat : 1.0);
    for (int l : route_) attach(id, link_con(l));
  }

  void complete(std::int32_t id) {
    const std::int32_t task = vars_[id].task;
    detach(id);
    finish(task);
  }

  void finish(std::int32_t id) {
    const Task& t = g_.tasks()[id];
    if (t.kind == TaskKind::FLOW) {
      pf_.route_into(t, &route_);
      for (int l : route_)
        if (--link_active_[l] == 0) res_.link_stats[l].busy_s += now_ - link_since_[l];
    }
    if (interference_) {
      if (t.kind == TaskKind::FLOW && t.rank >= 0) {
        --active_flows_[t.rank];
        update_interference(t.rank);
      } else if (t.kind == TaskKind::COMPUTE && running_[t.rank] == id) {
        running_[t.rank] = -1;
        update_interference(t.rank);
        set_uplinks(t.rank, false);
      }
    }
    res_.end_s[id] = now_;
    for (auto* s = g_.succ_begin(id); s != g_.succ_end(id); ++s)
      if (--pending_[*s] == 0) make_ready(*s);
  }

  // Interference, as the SimGrid adapter: a "shadow" of weight s (the running task's slowdown) shares the rank's
  // compute host while the rank has a flow in flight; once created it stays, at a negligible weight when idle.
  void update_interference(std::int32_t r) {
    const std::int32_t task = running_[r];
    const double want = task >= 0 && active_flows_[r] > 0 ? g_.tasks()[task].interference : 0.0;
    constexpr double kIdleWeight = 1e-12;
    const double weight = want > 0 ? want : kIdleWeight;
    if (shadow_[r] < 0) {
      if (want <= 0) return;
      shadow_[r] = new_var(-1, kInf, weight);
      attach(shadow_[r], r);
    } else if (vars_[shadow_[r]].weight != weight) {
      vars_[shadow_[r]].weight = weight;
      dirty_.push_back(r);
    }
  }
  void set_uplinks(std::int32_t r, bool slowed) {
    if (g_.collective_slowdown <= 0 || pf_.graph_mode) return;
    const double f = slowed ? 1.0 / (1.0 + g_.collective_slowdown) : 1.0;
    for (int l : {pf_.nvl[r].up, pf_.net[r].up})
      if (l >= 0) {
        cons_[link_con(l)].capacity = pf_.links[l].bandwidth_Bps * f;
        dirty_.push_back(link_con(l));
      }
  }

  // Starts every ready task at now_; zero-time tasks complete at once and may make more tasks ready.
  void drain() {
    while (!ready_.empty()) {
      const std::int32_t id = ready_.front();
      ready_.pop_front();
      const Task& t = g_.tasks()[id];
      res_.start_s[id] = now_;
      switch (t.kind) {
        case TaskKind::JOIN: finish(id); break;
        case TaskKind::COMPUTE:
        case TaskKind::DELAY: {
          if (t.duration_s <= 0) {
            finish(id);
            break;
          }
          const std::int32_t v = new_var(id, t.duration_s, 1.0);
          attach(v, host_con(t));
          if (interference_ && t.kind == TaskKind::COMPUTE) {
            running_[t.rank] = id;
            update_interference(t.rank);
            set_uplinks(t.rank, true);
          }
          ++res_.activities;
          break;
        }
        case TaskKind::FLOW: {
          pf_.route_into(t, &route_);
          for (int l : route_) {
            if (link_active_[l]++ == 0) link_since_[l] = now_;
            res_.link_stats[l].bytes += t.bytes;
          }
          if (interference_ && t.rank >= 0) {
            ++active_flows_[t.rank];
            update_interference(t.rank);
          }
          ++res_.activities;
          const double lat = pf_.latency_s(route_);
          if (lat > 0) push(now_ + lat, LATENCY_DONE, id, 0);
          else start_sharing(id);
          break;
        }
      }
    }
  }

  // Re-solves the rates in every component of constraints and variables touched since the last call.
  void resolve() {
    for (int c0 : dirty_) {
      if (cons_[c0].mark == epoch_ + 1) continue;  // already solved in this call
      // Component search from c0: constraints and the variables that link them.
      comp_cons_.clear();
      comp_vars_.clear();
      ++var_epoch_;
      cons_[c0].mark = epoch_ + 1;
      comp_cons_.push_back(c0);
      // The search also readies the solve (one pass over the component, not three): each constraint's capacity,
      // stamp and its variables' weight (summed in the order of its list), each variable brought up to now.
      for (std::size_t k = 0; k < comp_cons_.size(); ++k) {
        Constraint& con = cons_[comp_cons_[k]];
        con.left = con.capacity;
        con.weight = 0;
        con.unfixed = static_cast<int>(con.vars.size());
        ++con.stamp;
        for (std::int32_t v : con.vars) {
          Variable& x = vars_[v];
          con.weight += x.weight;
          if (x.mark == var_epoch_) continue;
          x.mark = var_epoch_;
          comp_vars_.push_back(v);
          if (x.task >= 0) x.remaining = std::max(0.0, x.remaining - x.rate * (now_ - x.since));
          x.since = now_;
          x.was = x.rate;
          x.fixed = false;
          for (int c : x.cons)
            if (cons_[c].mark != epoch_ + 1) {
              cons_[c].mark = epoch_ + 1;
              comp_cons_.push_back(c);
            }
        }
      }
      solve();
    }
    dirty_.clear();
    ++epoch_;
  }

  /// A constraint's level: capacity not yet given out per weight of its unfixed variables (the heap's key and the
  /// scan's, one expression so that both pick the same constraint).
  static double level_of(const Constraint& o) { return std::max(0.0, o.left) / o.weight; }

  /// One round of progressive filling: constraint `c`'s unfixed variables take `level` times their weight, and
  /// every other constraint they cross gives that rate out (a fresh heap entry each, when `heap` is given).
  void fix(int c, double level, std::vector<Level>* heap) {
    Constraint& k = cons_[c];
    for (std::int32_t v : k.vars) {
      Variable& x = vars_[v];
      if (x.fixed) continue;
      x.fixed = true;
      x.rate = x.weight * level;
      for (int oc : x.cons) {
        Constraint& o = cons_[oc];
        o.left -= x.rate;
        o.weight -= x.weight;
        --o.unfixed;
        if (heap != nullptr && &o != &k && o.unfixed > 0) {
          ++o.stamp;
          heap->push_back({level_of(o), {oc, o.stamp}});
          std::push_heap(heap->begin(), heap->end(), std::greater<>());
        }
      }
    }
  }

  // Weighted max-min fair rates (progressive filling) for the component in comp_cons_ / comp_vars_ (readied by
  // resolve's search), then the new completion dates. Each round, the constraint of lowest level (capacity not yet
  // given out / weight of its unfixed variables; ties to the lower index) fixes its unfixed variables at that level.
  // Two ways to find it, which pick the same constraint every round (the same expression of the same values, the same
  // tie-break), so the rates are the same to the bit whichever runs:
  //  - a heap of (level, constraint, stamp), a fresh entry each time a constraint's level moves and stale entries
  //    skipped: O(V log V) for V variables, for components of many constraints with few variables each;
  //  - a scan of the constraints still unfixed each round: O(C^2 + V) for C constraints, for components of few
  //    constraints with many variables each (an all-to-all: its members' links, each shared by every pair through
  //    it), where the heap's entries, one per variable fixed, had been two thirds of a skewed MoE run's time.
  void solve() {
    const std::size_t nc = comp_cons_.size();
    const bool scan =
        solver_ == MaxMinSolver::AUTO ? nc * nc <= kScanPerVariable * comp_vars_.size() : solver_ == MaxMinSolver::SCAN;
    if (scan) {
      open_.clear();
      for (int c : comp_cons_)
        if (cons_[c].unfixed > 0) open_.push_back(c);
      for (;;) {
        int best = -1;
        double best_level = 0;
        for (std::size_t i = 0; i < open_.size();) {
          const int c = open_[i];
          const Constraint& o = cons_[c];
          if (o.unfixed == 0) {  // fixed by other constraints' rounds: drop it (order does not matter, ties do)
            open_[i] = open_.back();
            open_.pop_back();
            continue;
          }
          const double level = level_of(o);
          if (best < 0 || level < best_level || (level == best_level && c < best)) {
            best = c;
            best_level = level;
          }
          ++i;
        }
        if (best < 0) break;
        fix(best, std::max(0.0, best_level), nullptr);
      }
    } else {
      heap_.clear();
      for (int c : comp_cons_) {
        const Constraint& k = cons_[c];
        if (k.unfixed > 0) heap_.push_back({level_of(k), {c, k.stamp}});
      }
      std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
      while (!heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
        const Level top = heap_.back();
        heap_.pop_back();
        const Constraint& k = cons_[top.second.first];
        if (k.stamp != top.second.second || k.unfixed == 0) continue;
        fix(top.second.first, std::max(0.0, top.first), &heap_);
      }
    }
    for (int c : comp_cons_) {
      const Constraint& k = cons_[c];
      if (k.link < 0) continue;
      double load = 0;
      for (std::int32_t v : k.vars) load += vars_[v].rate;
      auto& st = res_.link_stats[k.link];
      st.peak_utilization = std::max(st.peak_utilization, load / pf_.links[k.link].bandwidth_Bps);
    }
    // New completion dates, where the rate moved. A variable whose rate came out the same keeps the event it has
    // (every variable with a positive rate has one, of its current version): its date is the same, and re-dating it
    // would only round it again. In an all-to-all's component most rates stay when one flow ends (93% of the skewed
    // DeepSeek-V3 run's 443 million), and re-dating them had been a third of that run's time.
    for (std::int32_t v : comp_vars_) {
      Variable& x = vars_[v];
      if (x.task < 0 || (x.rate == x.was && x.was > 0)) continue;
      ++x.version;
      if (x.remaining <= 0) push(now_, VAR_DONE, v, x.version);
      else if (x.rate > 0) push(now_ + x.remaining / x.rate, VAR_DONE, v, x.version);
    }
  }

  const TaskGraph& g_;
  const Platform& pf_;
  EngineResult& res_;
  MaxMinSolver solver_;
  int nr_ = 0;
  double now_ = 0;
  std::vector<Constraint> cons_;
  std::vector<Variable> vars_;
  std::vector<std::int32_t> free_;
  std::vector<std::int32_t> pending_;
  std::deque<std::int32_t> ready_;
  std::vector<Event> events_;    ///< a min-heap on (t, seq)
  std::size_t events_kept_ = 0;  ///< events after the last compaction
  std::uint64_t seq_ = 0;
  std::vector<int> dirty_, comp_cons_, route_;
  std::vector<std::int32_t> comp_vars_;
  std::vector<Level> heap_;
  std::vector<int> open_;  ///< solve's scan: the component's constraints not yet fixed
  std::uint32_t epoch_ = 0, var_epoch_ = 0;
  std::vector<int> link_active_;
  std::vector<double> link_since_;
  bool interference_ = false;
  std::vector<int> active_flows_;
  std::vector<std::int32_t> running_, shadow_;
};

}  // namespace

EngineResult run_maxmin(const TaskGraph& g, const ClusterSpec& cluster, const Calibration& cal,
                        const std::vector<int>& gpu_of_rank, const std::vector<RankShare>& share, MaxMinSolver solver) {
  EngineResult res;
  res.engine = "dtsim-maxmin";
  DTSIM_ASSERT(g.exchanges().empty(), "all-to-alls as one task per member are timed by the analytic engine only");
  const Platform pf = describe_platform(cluster, cal, gpu_of_rank, share);
  MaxMin m(g, pf, res, solver);
  m.run();
  count_folded_copies(pf, &res);
  return res;
}

}  // namespace dtsim::sim
