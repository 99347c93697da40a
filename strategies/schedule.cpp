#include "strategies/schedule.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "traces/error.hpp"

namespace dtsim::sched {
namespace {
using Kind = PipeOp::Kind;

std::vector<PipeOp> gpipe(int m) {
  std::vector<PipeOp> o;
  o.reserve(2 * static_cast<std::size_t>(m));
  for (int i = 0; i < m; ++i) o.push_back({Kind::F, i});
  for (int i = 0; i < m; ++i) o.push_back({Kind::B, i});
  return o;
}

std::vector<PipeOp> one_f_one_b(int p, int m, int s, bool dapple) {
  std::vector<PipeOp> o;
  o.reserve(2 * static_cast<std::size_t>(m));
  const int warmup = std::min(dapple ? p - s : p - s - 1, m);
  for (int i = 0; i < warmup; ++i) o.push_back({Kind::F, i});
  if (dapple) {  // early backward: B(j) as soon as possible, then the next forward
    for (int j = 0; j < m; ++j) {
      o.push_back({Kind::B, j});
      if (warmup + j < m) o.push_back({Kind::F, warmup + j});
    }
    return o;
  }
  for (int j = 0; j < m - warmup; ++j) {
    o.push_back({Kind::F, warmup + j});
    o.push_back({Kind::B, j});
  }
  for (int j = m - warmup; j < m; ++j) o.push_back({Kind::B, j});
  return o;
}

std::vector<PipeOp> interleaved(int p, int m, int v, int s, int extra_warmup = 0) {
  const int total = m * v;
  auto fwd = [&](int k) { return PipeOp{Kind::F, (k / (p * v)) * p + k % p, (k % (p * v)) / p}; };
  auto bwd = [&](int k) { return PipeOp{Kind::B, (k / (p * v)) * p + k % p, v - 1 - (k % (p * v)) / p}; };
  int warmup = m == p ? total : std::min((p - s - 1) * 2 + (v - 1) * p + extra_warmup, total);
  std::vector<PipeOp> o;
  o.reserve(2 * static_cast<std::size_t>(total));
  for (int k = 0; k < warmup; ++k) o.push_back(fwd(k));
  const int steady = total - warmup;
  for (int k = 0; k < steady; ++k) {
    o.push_back(fwd(warmup + k));
    o.push_back(bwd(k));
  }
  for (int k = steady; k < total; ++k) o.push_back(bwd(k));
  return o;
}

std::vector<PipeOp> zb_h1(int p, int m, int s) {
  const int warmup = std::min(p - s - 1, m), delay = s;
  std::vector<PipeOp> o;
  o.reserve(3 * static_cast<std::size_t>(m));
  int w = 0;
  for (int i = 0; i < warmup; ++i) o.push_back({Kind::F, i});
  for (int j = 0; j < m; ++j) {
    if (warmup + j < m) o.push_back({Kind::F, warmup + j});
    o.push_back({Kind::B, j});
    if (j >= delay) o.push_back({Kind::W, w++});
  }
  while (w < m) o.push_back({Kind::W, w++});
  return o;
}

// List scheduling of all stages together with unit pass times: each stage, when it can start something,
// takes B before F before W; F only while fewer than lim_b[s] micro-batches wait for B and fewer than
// lim_w[s] wait for W. Ties between stages go to the lower stage. Deterministic.
std::vector<std::vector<PipeOp>> list_schedule(int p, int m, const std::vector<int>& lim_b,
                                               const std::vector<int>& lim_w) {
  std::map<std::tuple<int, int, int>, double> done;  // (kind, mb, stage) -> end time
  std::vector<double> t(p, 0.0);
  std::vector<int> nf(p, 0), nb(p, 0), nw(p, 0);
  std::vector<std::vector<PipeOp>> orders(p);
  auto end_of = [&](Kind k, int i, int s) -> const double* {
    auto it = done.find({static_cast<int>(k), i, s});
    return it == done.end() ? nullptr : &it->second;
  };
  for (int count = 0; count < 3 * m * p; ++count) {
    int best_s = -1;
    PipeOp best_op;
    double best_t = 0;
    for (int s = 0; s < p; ++s) {
      struct Cand {
        Kind k;
        int i;
        double start;
      };
      std::vector<Cand> cands;
      if (nf[s] < m && nf[s] - nb[s] < lim_b[s] && nf[s] - nw[s] < lim_w[s]) {
        const double* r = s > 0 ? end_of(Kind::F, nf[s], s - 1) : nullptr;
        if (s == 0 || r) cands.push_back({Kind::F, nf[s], std::max(t[s], r ? *r : 0.0)});
      }
      if (nb[s] < nf[s]) {
        const double* r = s < p - 1 ? end_of(Kind::B, nb[s], s + 1) : end_of(Kind::F, nb[s], s);
        if (r) cands.push_back({Kind::B, nb[s], std::max({t[s], *r, *end_of(Kind::F, nb[s], s)})});
      }
      if (nw[s] < nb[s]) cands.push_back({Kind::W, nw[s], t[s]});
      if (cands.empty()) continue;
      double st = cands.front().start;
      for (const auto& c : cands) st = std::min(st, c.start);
      const Cand* pick = nullptr;
      for (Kind k : {Kind::B, Kind::F, Kind::W})
        for (const auto& c : cands)
          if (!pick && c.k == k && c.start <= st) pick = &c;
      if (best_s < 0 || pick->start < best_t) {
        best_s = s;
        best_op = {pick->k, pick->i, 0};
        best_t = pick->start;
      }
    }
    DTSIM_ASSERT(best_s >= 0, "list scheduling stalled (p=" << p << ", m=" << m << ")");
    t[best_s] = best_t + 1.0;
    done[{static_cast<int>(best_op.kind), best_op.microbatch, best_s}] = t[best_s];
    orders[best_s].push_back(best_op);
    (best_op.kind == Kind::F ? nf : best_op.kind == Kind::B ? nb : nw)[best_s]++;
  }
  return orders;
}

// DeepSeek's DualPipeV (github.com/deepseek-ai/DualPipe, dualpipe/dualpipev.py, DualPipeV.step), rank s of n: chunk
// 0 runs model chunk s (phase 0, towards the last rank), chunk 1 model chunk 2n-1-s (phase 1, back to rank 0, which
// computes the loss). Its eight steps, pass for pass and exchange for exchange: a backward with zero bubble
// (enable_zb) leaves its W to a later _weight_chunk (first in, first out), otherwise its W follows at once;
// _forward_backward_chunk is F with_next B W. _recv_* and _send_* append to the pending exchanges, which
// _commit_and_wait_comm posts (and waits for) before the next compute: at that pass's index.
// Bidirectional DualPipe (dualpipe/dualpipe.py, DualPipe.step) runs the same eight steps on each half of the ranks
// with half_rank = min(s, n-1-s) in place of s, n/2 ranks and m/2 micro-batches per direction, the middle two ranks
// in the last rank's part; a phase is a direction, mirrored on the second half (phase ^= is_in_second_half).
// Chunk c of the order is direction c (ParallelPlan::model_chunk); direction 1 runs micro-batches m/2..m-1.
struct DualPipeV {
  int n, m, s;
  bool bi = false;  // bidirectional DualPipe
  std::vector<PipeOp> o;
  Exchanges ex;
  std::vector<PipeOp> pending_sends, pending_recvs, deferred;  // deferred: W passes of zero-bubble backwards
  std::size_t next_w = 0;
  int f_id[2] = {0, 0}, b_id[2] = {0, 0}, send_f[2] = {0, 0}, send_b[2] = {0, 0}, recv_f[2] = {0, 0},
      recv_b[2] = {0, 0};
  bool first() const { return s == 0; }
  bool last() const { return s == n - 1; }
  bool second_half() const { return bi && s >= n / 2; }
  /// The direction (dtsim chunk) of a phase, and the first micro-batch of a direction.
  int dir(int ph) const { return ph ^ static_cast<int>(second_half()); }
  int base(int d) const { return bi && d == 1 ? m / 2 : 0; }

  void commit() {
    const std::size_t at = o.size();
    if (ex.sends.size() <= at) ex.sends.resize(at + 1), ex.recvs.resize(at + 1);
    for (const auto& op : pending_sends) ex.sends[at].push_back(op);
    for (const auto& op : pending_recvs) ex.recvs[at].push_back(op);
    pending_sends.clear();
    pending_recvs.clear();
  }
  void recv_forward(int ph) {
    const int d = dir(ph);
    if ((first() && d == 0) || (last() && d == 1)) return;
    pending_recvs.push_back({Kind::F, base(d) + recv_f[d]++, d});
  }
  void send_forward(int ph) {
    const int d = dir(ph);
    if ((first() && d == 1) || (last() && d == 0)) return;
    pending_sends.push_back({Kind::F, base(d) + send_f[d]++, d});
  }
  void recv_backward(int ph) {
    const int d = dir(ph);
    if ((first() && d == 1) || (last() && d == 0)) return;
    pending_recvs.push_back({Kind::B, base(d) + recv_b[d]++, d});
  }
  void send_backward(int ph) {
    const int d = dir(ph);
    if ((first() && d == 0) || (last() && d == 1)) return;
    pending_sends.push_back({Kind::B, base(d) + send_b[d]++, d});
  }
  void f_compute(int ph) {
    const int d = dir(ph);
    o.push_back({Kind::F, base(d) + f_id[d]++, d});
  }
  void b_compute(int ph, bool zb) {
    const int d = dir(ph), i = base(d) + b_id[d]++;
    o.push_back({Kind::B, i, d});
    if (zb) deferred.push_back({Kind::W, i, d});
    else o.push_back({Kind::W, i, d});
  }
  void forward_chunk(int ph, bool recv = true, bool send = true) {
    if (recv) recv_forward(ph);
    commit();
    f_compute(ph);
    if (send) send_forward(ph);
  }
  void backward_chunk(int ph, bool zb = false, bool recv = true, bool send = true) {
    if (recv) recv_backward(ph);
    commit();
    b_compute(ph, zb);
    if (send) send_backward(ph);
  }
  void forward_backward_chunk(int ph0, int ph1, bool recv0 = true) {
    if (recv0) recv_forward(ph0);
    recv_backward(ph1);
    commit();
    f_compute(ph0);
    o.back().with_next = true;
    b_compute(ph1, false);
    send_forward(ph0);
    send_backward(ph1);
  }
  void weight_chunk() {
    commit();
    DTSIM_ASSERT(next_w < deferred.size(), "dualpipe: no deferred weight pass on rank " << s);
    o.push_back(deferred[next_w++]);
  }

  void step() {
    // DualPipeV: n ranks, rank s, m micro-batches, the last rank in the middle of the V. DualPipe: num_half_ranks,
    // half_rank, half_num_chunks, is_middle_rank.
    const int nn = bi ? n / 2 : n, h = bi ? std::min(s, n - 1 - s) : s, mm = bi ? m / 2 : m;
    const bool mid = bi ? (s == n / 2 - 1 || s == n / 2) : last();
    for (int i = 0; i < (nn - h - 1) * 2; ++i) forward_chunk(0);  // step 1: nF0
    recv_forward(0);                                              // step 2: nF0F1
    for (int i = 0; i < h + 1; ++i) {
      forward_chunk(0, false, bi && mid);  // DualPipe's middle ranks send at once; DualPipeV's last keeps it
      recv_forward(0);
      forward_chunk(1, true, !mid || i < h);
      if (!bi || !mid) send_forward(0);
    }
    for (int i = 0; i < nn - h - 1; ++i) {  // step 3: nB1W1F1
      backward_chunk(1, true);
      recv_forward(1);
      weight_chunk();
      forward_chunk(1, false);
    }
    for (int i = 0; i < mm - 2 * nn + h + 1; ++i) {  // step 4 (main): nF0B1F1B0
      if (i == 0 && mid) {  // "we don't overlap these two chunks to further reduce bubble size"
        forward_chunk(0, false, false);
        send_forward(1);
        backward_chunk(1, false, true, false);
        send_forward(0);
        send_backward(1);
      } else {
        forward_backward_chunk(0, 1, i != 0);
      }
      forward_backward_chunk(1, 0);
    }
    for (int i = 0; i < nn - h - 1; ++i) {  // step 5: nB1F1B0
      backward_chunk(1);
      forward_backward_chunk(1, 0);
    }
    bool zb = false;  // step 6: nB1B0, the second half with zero bubble
    for (int i = 0; i < h + 1; ++i) {
      if (i == (h + 1) / 2 && h % 2 == 1) zb = true;
      backward_chunk(1, zb);
      if (i == (h + 1) / 2 && h % 2 == 0) zb = true;
      backward_chunk(0, zb);
    }
    for (int i = 0; i < nn - h - 1; ++i) {  // step 7: nWB0
      weight_chunk();
      backward_chunk(0, true);
    }
    for (int i = 0; i < h + 1; ++i) weight_chunk();  // step 8: nW
    commit();
    ex.sends.resize(o.size() + 1);
    ex.recvs.resize(o.size() + 1);
    DTSIM_ASSERT(next_w == deferred.size(), "dualpipe: deferred weight passes left on rank " << s);
  }
};

DualPipeV dualpipe_run(int n, int m, int s, bool bidirectional) {
  DualPipeV d{n, m, s, bidirectional, {}, {}, {}, {}, {}, 0};
  d.o.reserve(6 * static_cast<std::size_t>(m));
  d.step();
  return d;
}

// Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm; pipeline_parallel/combined_1f1b.py): a forward
// followed by the backward of another micro-batch or chunk runs together with it. Without pipelining
// (combined_1f1b_schedule_for_no_pipelining) the forward of micro-batch i+1 runs with the backward of i; the
// interleaved schedule warms up one forward more.
void pair_forwards_with_backwards(std::vector<PipeOp>* order) {
  for (std::size_t i = 0; i + 1 < order->size(); ++i) {
    PipeOp& a = (*order)[i];
    const PipeOp& b = (*order)[i + 1];
    if (a.kind == Kind::F && b.kind == Kind::B && (a.microbatch != b.microbatch || a.chunk != b.chunk))
      a.with_next = true;
  }
}

std::vector<std::vector<PipeOp>> zb_h2(int p, int m) {
  std::vector<int> lim_b(p), lim_w(p, 2 * p - 1);
  for (int s = 0; s < p; ++s) lim_b[s] = 2 * (p - s) - 1;
  return list_schedule(p, m, lim_b, lim_w);
}
}  // namespace

Exchanges dualpipe_exchanges(int p, int m, int stage, bool bidirectional) {
  DTSIM_ASSERT(p > 0 && m > 0 && stage >= 0 && stage < p, "bad pipeline shape p=" << p << " m=" << m << " s=" << stage);
  return dualpipe_run(p, m, stage, bidirectional).ex;
}

std::vector<PipeOp> stage_order(Schedule schedule, int p, int m, int stage, bool dapple_warmup) {
  DTSIM_ASSERT(p > 0 && m > 0 && stage >= 0 && stage < p, "bad pipeline shape p=" << p << " m=" << m << " s=" << stage);
  switch (schedule) {
    case Schedule::GPIPE: return gpipe(m);
    case Schedule::ONE_F_ONE_B: return one_f_one_b(p, m, stage, dapple_warmup);
    case Schedule::ZB_H1: return zb_h1(p, m, stage);
    case Schedule::ZB_H2: return zb_h2(p, m)[stage];
    case Schedule::DUALPIPEV: return dualpipe_run(p, m, stage, false).o;
    case Schedule::DUALPIPE: return dualpipe_run(p, m, stage, true).o;
    case Schedule::INTERLEAVED:
    case Schedule::CUSTOM: break;
  }
  DTSIM_ASSERT(false, "stage_order(" << to_string(schedule) << ") needs the plan");
  return {};
}

std::vector<std::vector<PipeOp>> plan_orders(const ParallelPlan& plan) {
  const int p = plan.pp, m = plan.num_microbatches();
  std::vector<std::vector<PipeOp>> orders;
  switch (plan.schedule) {
    case Schedule::CUSTOM: orders = plan.custom_order; break;
    case Schedule::ZB_H2: orders = zb_h2(p, m); break;
    case Schedule::INTERLEAVED:
      // Megatron-Core's combined 1F1B warms up one forward more (schedules.py, overlap_moe_expert_parallel_comm).
      for (int s = 0; s < p; ++s)
        orders.push_back(interleaved(p, m, plan.virtual_stages, s, plan.overlap_moe_comm ? 1 : 0));
      break;
    default:
      for (int s = 0; s < p; ++s) orders.push_back(stage_order(plan.schedule, p, m, s, plan.dapple_warmup));
  }
  if (plan.overlap_moe_comm)
    for (int s = 0; s < p; ++s) {
      auto& o = orders[static_cast<std::size_t>(s)];
      // Forwards paired only with their own backward: one forward more in the warm-up.
      if (plan.schedule == Schedule::ONE_F_ONE_B && m > 1 && o[0].kind == Kind::F && o[1].kind == Kind::B) {
        o.clear();
        o.push_back({Kind::F, 0});
        for (int j = 0; j < m; ++j) {
          if (j + 1 < m) o.push_back({Kind::F, j + 1});
          o.push_back({Kind::B, j});
        }
      }
      pair_forwards_with_backwards(&o);
    }
  return orders;
}

void validate_orders(const std::vector<std::vector<PipeOp>>& orders, int p, int m, int v, bool split,
                     const std::string& ctx, bool v_shape, bool bidirectional) {
  v_shape = v_shape || bidirectional;
  // DualPipe: micro-batch i runs only on its direction's chunk, through model chunks of positions 0..p-1.
  auto runs_on = [&](int i, int c) { return !bidirectional || c == (2 * i >= m ? 1 : 0); };
  if (static_cast<int>(orders.size()) != p)
    throw ConfigError(ctx + ": " + std::to_string(orders.size()) + " stages listed but pp is " + std::to_string(p));
  // Completeness: every pass once.
  for (int s = 0; s < p; ++s) {
    std::map<std::tuple<int, int, int>, int> seen;
    for (const auto& op : orders[s]) {
      const std::string where = ctx + ": stage " + std::to_string(s) + " pass " + to_string(op);
      if (op.microbatch >= m)
        throw ConfigError(where + " names micro-batch " + std::to_string(op.microbatch) + " but there are " +
                          std::to_string(m));
      if (op.chunk >= v)
        throw ConfigError(where + " names chunk " + std::to_string(op.chunk) + " but there are " + std::to_string(v));
      if (op.kind == Kind::W && !split) throw ConfigError(where + ": W passes need every stage to list them");
      if (!runs_on(op.microbatch, op.chunk))
        throw ConfigError(where + ": under dualpipe micro-batch " + std::to_string(op.microbatch) + " runs on chunk " +
                          std::to_string(2 * op.microbatch >= m ? 1 : 0) + " only");
      if (seen[{static_cast<int>(op.kind), op.microbatch, op.chunk}]++) throw ConfigError(where + " appears twice");
    }
    for (int c = 0; c < v; ++c)
      for (int i = 0; i < m; ++i)
        for (Kind k : {Kind::F, Kind::B, Kind::W}) {
          if ((k == Kind::W && !split) || !runs_on(i, c)) continue;
          if (!seen.count({static_cast<int>(k), i, c}))
            throw ConfigError(ctx + ": stage " + std::to_string(s) + " lacks pass " + to_string(PipeOp{k, i, c}));
        }
  }
  // Deadlock: run the orders with the pipeline dependencies until nothing can advance.
  std::map<std::tuple<int, int, int>, bool> done;  // (kind, mb, model chunk k = c*p + s)
  auto is_done = [&](Kind k, int i, int chunk) { return done.count({static_cast<int>(k), i, chunk}) > 0; };
  std::vector<std::size_t> pos(p, 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      while (pos[s] < orders[s].size()) {
        const PipeOp& op = orders[s][pos[s]];
        const int k = v_shape ? (op.chunk == 0 ? s : 2 * p - 1 - s) : op.chunk * p + s;
        const int place = bidirectional ? k % p : k, last = bidirectional ? p - 1 : v * p - 1;
        bool ready = true;
        if (op.kind == Kind::F) ready = place == 0 || is_done(Kind::F, op.microbatch, k - 1);
        if (op.kind == Kind::B)
          ready = is_done(Kind::F, op.microbatch, k) && (place == last || is_done(Kind::B, op.microbatch, k + 1));
        if (op.kind == Kind::W) ready = is_done(Kind::B, op.microbatch, k);
        if (!ready) break;
        done[{static_cast<int>(op.kind), op.microbatch, k}] = true;
        ++pos[s];
        progress = true;
      }
    }
  }
  std::ostringstream blocked;
  bool stuck = false;
  for (int s = 0; s < p; ++s)
    if (pos[s] < orders[s].size()) {
      blocked << (stuck ? ", " : "") << "stage " << s << " at " << to_string(orders[s][pos[s]]) << " (pass "
              << pos[s] + 1 << ")";
      stuck = true;
    }
  if (stuck) throw ConfigError(ctx + ": the order deadlocks; blocked: " + blocked.str());
}

void validate_orders(const std::vector<std::vector<PipeOp>>& orders, const ParallelPlan& plan) {
  validate_orders(orders, plan.pp, plan.num_microbatches(), plan.virtual_stages, plan.split_backward(),
                  plan.schedule == Schedule::CUSTOM ? "custom schedule '" + plan.custom_source + "'"
                                                    : "schedule " + plan.schedule_name(),
                  plan.schedule == Schedule::DUALPIPEV, plan.bidirectional());
}

int max_in_flight(const std::vector<PipeOp>& order, bool split) {
  int held = 0, peak = 0;
  for (const auto& op : order) {
    if (op.kind == Kind::F) held++;
    if ((op.kind == Kind::B && !split) || (op.kind == Kind::W && split)) held--;
    peak = std::max(peak, held);
  }
  return peak;
}

int max_in_flight(Schedule schedule, int p, int m, int stage) {
  const bool split = schedule == Schedule::ZB_H1 || schedule == Schedule::ZB_H2 || schedule == Schedule::DUALPIPEV ||
                     schedule == Schedule::DUALPIPE;
  return max_in_flight(stage_order(schedule, p, m, stage), split);
}

}  // namespace dtsim::sched
