#include "studies/report/pareto.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "traces/text.hpp"
#include "traces/units.hpp"

namespace dtsim::sim {
namespace {

/// Text that reads back to the same double: whole numbers as integers, others shortest ("" for NaN).
std::string shortest(double v) {
  if (!std::isfinite(v)) return "";
  char buf[32];
  if (v == std::trunc(v) && std::fabs(v) < 1e15) {  // byte counts and whole numbers without an exponent
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string fixed(double v, const char* fmt) { return std::isfinite(v) ? format_number(fmt, v) : "-"; }

}  // namespace

bool ParetoGroup::on_front(const SweepRow& r) const {
  for (const ParetoPoint& p : front) {
    if (p.row == &r) return true;
    for (const SweepRow* d : p.duplicates)
      if (d == &r) return true;
  }
  return false;
}

std::vector<ParetoGroup> pareto_fronts(const std::vector<SweepRow>& rows) {
  std::map<std::pair<std::string, int>, std::vector<const SweepRow*>> by_group;
  for (const SweepRow& r : rows) by_group[{r.model, r.gpus}].push_back(&r);
  std::vector<ParetoGroup> groups;
  for (auto& [key, members] : by_group) {
    ParetoGroup g;
    g.model = key.first;
    g.gpus = key.second;
    std::set<std::string> clusters;
    std::vector<const SweepRow*> cand;
    for (const SweepRow* r : members) {
      clusters.insert(r->cluster);
      g.counts.add(*r);
      if (r->usable()) cand.push_back(r);
    }
    g.clusters.assign(clusters.begin(), clusters.end());
    // Increasing memory, then decreasing throughput, then index and id: the first row of a memory level is its
    // fastest, and a row joins the front only when it is strictly faster than everything using less memory.
    std::sort(cand.begin(), cand.end(), [](const SweepRow* a, const SweepRow* b) {
      return std::make_tuple(a->peak_memory_bytes, -a->tokens_per_s, a->index, a->id) <
             std::make_tuple(b->peak_memory_bytes, -b->tokens_per_s, b->index, b->id);
    });
    for (const SweepRow* r : cand) {
      if (g.front.empty() || r->tokens_per_s > g.front.back().row->tokens_per_s) {
        g.front.push_back({r, {}});
      } else if (r->tokens_per_s == g.front.back().row->tokens_per_s &&
                 r->peak_memory_bytes == g.front.back().row->peak_memory_bytes) {
        g.front.back().duplicates.push_back(r);
      }
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

std::string pareto_table(const std::vector<ParetoGroup>& groups) {
  std::string out;
  for (const ParetoGroup& g : groups) {
    std::string clusters;
    for (const auto& c : g.clusters) {
      if (!clusters.empty()) clusters += ", ";
      clusters += c;
    }
    char head[512];
    std::snprintf(head, sizeof head,
                  "%s on %d GPUs (%s): %d scenarios, %d ran and fit, %d over capacity, %d oom, %d failed, %d crashed\n",
                  g.model.c_str(), g.gpus, clusters.c_str(), g.counts.total, g.counts.ok_fit, g.counts.ok_over,
                  g.counts.oom, g.counts.failed, g.counts.crashed);
    if (!out.empty()) out += '\n';
    out += head;
    if (g.front.empty()) {
      out += "  no Pareto front: no scenario of this group ran and fit in memory\n";
      continue;
    }
    std::size_t w = 8;
    for (const ParetoPoint& p : g.front) w = std::max(w, p.row->strategy().size());
    char line[1024];
    std::snprintf(line, sizeof line, "  %-*s %13s %6s %8s  %s\n", static_cast<int>(w), "strategy", "tokens/s", "MFU",
                  "peak GB", "id");
    out += line;
    for (const ParetoPoint& p : g.front) {
      const SweepRow& r = *p.row;
      std::string id = r.id;
      if (!p.duplicates.empty()) {
        id += " (same as";
        for (const SweepRow* d : p.duplicates) id += " " + d->id;
        id += ")";
      }
      std::snprintf(line, sizeof line, "  %-*s %13s %6s %8s  %s\n", static_cast<int>(w), r.strategy().c_str(),
                    fixed(r.tokens_per_s, "%.1f").c_str(), fixed(100 * r.mfu, "%.1f%%").c_str(),
                    fixed(r.peak_memory_bytes / units::kGB, "%.2f").c_str(), id.c_str());
      out += line;
    }
  }
  return out;
}

nlohmann::json pareto_json(const std::vector<ParetoGroup>& groups, const std::string& source) {
  using nlohmann::json;
  auto counts_json = [](const StatusCounts& c) {
    return json{{"total", c.total}, {"ok_fit", c.ok_fit}, {"ok_over_capacity", c.ok_over},
                {"oom", c.oom},     {"failed", c.failed}, {"crashed", c.crashed}};
  };
  StatusCounts all;
  json jg = json::array();
  for (const ParetoGroup& g : groups) {
    all += g.counts;
    json front = json::array();
    for (const ParetoPoint& p : g.front) {
      json row = to_json(*p.row);
      row["strategy"] = p.row->strategy();
      row["duplicates"] = json::array();
      for (const SweepRow* d : p.duplicates) row["duplicates"].push_back(d->id);
      front.push_back(std::move(row));
    }
    jg.push_back({{"model", g.model},
                  {"gpus", g.gpus},
                  {"clusters", g.clusters},
                  {"counts", counts_json(g.counts)},
                  {"front", std::move(front)}});
  }
  return {{"source", source},
          {"objectives", {{"tokens_per_s", "max"}, {"peak_memory_bytes", "min"}}},
          {"candidates", "status ok and fits"},
          {"counts", counts_json(all)},
          {"groups", std::move(jg)}};
}

std::string pareto_csv(const std::vector<ParetoGroup>& groups) {
  std::string out =
      "model,gpus,rank,id,strategy,planner,cluster,tp,pp,dp,vp,mbs,gbs,zero,recompute,tp_layout,sequence_parallel,"
      "tokens_per_s,samples_per_s,mfu,iteration_time_s,peak_memory_bytes,memory_capacity_bytes,duplicates\n";
  for (const ParetoGroup& g : groups)
    for (std::size_t k = 0; k < g.front.size(); ++k) {
      const SweepRow& r = *g.front[k].row;
      std::string dups;
      for (const SweepRow* d : g.front[k].duplicates) {
        if (!dups.empty()) dups += ' ';
        dups += d->id;
      }
      const std::vector<std::string> f = {g.model,
                                          std::to_string(g.gpus),
                                          std::to_string(k + 1),
                                          r.id,
                                          r.strategy(),
                                          r.planner,
                                          r.cluster,
                                          std::to_string(r.tp),
                                          std::to_string(r.pp),
                                          std::to_string(r.dp),
                                          std::to_string(r.vp),
                                          std::to_string(r.mbs),
                                          std::to_string(r.gbs),
                                          std::to_string(r.zero),
                                          r.recompute,
                                          r.tp_layout,
                                          r.sequence_parallel ? "true" : "false",
                                          shortest(r.tokens_per_s),
                                          shortest(r.samples_per_s),
                                          shortest(r.mfu),
                                          shortest(r.iteration_time_s),
                                          shortest(r.peak_memory_bytes),
                                          shortest(r.memory_capacity_bytes),
                                          dups};
      for (std::size_t i = 0; i < f.size(); ++i) {
        if (i) out += ',';
        out += csv_field(f[i]);
      }
      out += "\n";
    }
  return out;
}

}  // namespace dtsim::sim
