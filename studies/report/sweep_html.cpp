#include "studies/report/sweep_html.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "studies/report/svg.hpp"
#include "traces/units.hpp"

namespace dtsim::sim {
namespace {
using svg::Canvas;
using svg::escape;
using svg::fixed;
using svg::Scale;

const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
std::string color(std::size_t i) { return kPalette[i % 10]; }
std::string fill(const std::string& c) { return "fill=\"" + c + "\""; }
std::string integer(double v) { return fixed(v, 0); }
std::string gb(double bytes) { return fixed(bytes / units::kGB, 2); }
std::string group_name(const ParetoGroup& g) { return g.model + " on " + std::to_string(g.gpus) + " GPUs"; }

struct Category {
  std::string name, color;
  std::function<double(const SweepRow&)> value;
};

std::string no_data(double w, double h, const std::string& title, const std::string& why) {
  Canvas cv(w, h, title);
  cv.text(w / 2, h / 2, why, R"(text-anchor="middle" fill="#666")");
  return cv.str();
}

/// (a) Best tokens/s per model and GPU count, GPU counts on a log axis.
std::string throughput_chart(const std::vector<SweepRow>& rows) {
  const std::string title = "best throughput vs GPU count";
  std::map<std::string, std::map<int, double>> best;
  for (const SweepRow& r : rows)
    if (r.usable()) best[r.model][r.gpus] = std::max(best[r.model][r.gpus], r.tokens_per_s);
  if (best.empty()) return no_data(760, 120, title, "no scenario ran and fit in memory");
  std::set<double> counts;
  double lo = INFINITY, hi = 0;
  for (const auto& [model, pts] : best)
    for (const auto& [g, t] : pts) counts.insert(g), lo = std::min(lo, t), hi = std::max(hi, t);
  const double W = 760, H = 400, L = 80, R = W - 230, T = 20, B = H - 56;
  Canvas cv(W, H, title);
  const Scale x = svg::log_at({counts.begin(), counts.end()}, L, R);
  const Scale y = hi / lo > 30 ? svg::logarithmic(lo, hi, B, T) : svg::linear(lo, hi, B, T, true);
  cv.axes(x, y, std::string("GPUs") + (x.ticks.size() > 1 ? " (log scale)" : ""),
          std::string("best tokens/s") + (y.log ? " (log scale)" : ""), integer);
  std::vector<Canvas::LegendEntry> legend;
  std::size_t k = 0;
  for (const auto& [model, pts] : best) {
    const std::string c = color(k++);
    std::vector<std::pair<double, double>> line;
    for (const auto& [g, t] : pts) line.push_back({x(g), y(t)});
    cv.polyline(line, "stroke=\"" + c + "\" stroke-width=\"2\"");
    for (const auto& [px, py] : line) cv.circle(px, py, 3.5, fill(c));
    legend.push_back({model, c, 'o'});
  }
  cv.legend(R + 20, T, legend);
  return cv.str();
}

double total(const std::vector<Category>& cats, const SweepRow& r) {
  double sum = 0;
  for (const Category& c : cats) sum += std::isfinite(c.value(r)) ? c.value(r) : 0;
  return sum;
}

/// (b) and (d): one horizontal bar per top strategy, stacked by category, grouped by model and GPU count; in
/// `unit`s (with the memory capacity when `capacity`), or as shares of each bar's total when `shares`. The label
/// after each bar is its total in `unit`s.
std::string stacked_bars(const std::vector<ParetoGroup>& groups, const std::vector<std::vector<const SweepRow*>>& tops,
                         const std::string& title, const std::string& x_title, double unit, const char* unit_name,
                         const std::vector<Category>& cats, bool capacity, bool shares) {
  std::size_t chars = 10, bars = 0;
  double hi = 0;
  std::set<double> caps;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    if (!tops[gi].empty()) chars = std::max(chars, group_name(groups[gi]).size());
    for (const SweepRow* r : tops[gi]) {
      ++bars;
      chars = std::max(chars, r->strategy().size());
      hi = std::max(hi, shares ? 100.0 : total(cats, *r) / unit);
      if (capacity && std::isfinite(r->memory_capacity_bytes)) {
        caps.insert(r->memory_capacity_bytes);
        hi = std::max(hi, r->memory_capacity_bytes / unit);
      }
    }
  }
  if (bars == 0) return no_data(760, 120, title, "no scenario ran and fit in memory");
  const double x0 = 16 + 6.7 * static_cast<double>(chars), x1 = x0 + 420, W = x1 + 250, T = 10;
  double yend = T;
  for (const auto& t : tops)
    if (!t.empty()) yend += 22 + 20 * static_cast<double>(t.size());
  const double H = yend + 50;
  Canvas cv(W, H, title);
  const Scale x = svg::linear(0, hi, x0, x1, true);
  for (double t : x.ticks) {
    cv.line(x(t), T, x(t), yend, R"(stroke="#e4e4e4")");
    cv.line(x(t), yend, x(t), yend + 5, R"(stroke="#333")");
    cv.text(x(t), yend + 17, svg::si(t), R"(text-anchor="middle")");
  }
  cv.line(x0, yend, x1, yend, R"(stroke="#333")");
  cv.text((x0 + x1) / 2, yend + 36, x_title, R"(text-anchor="middle" font-size="12")");
  const std::string dash = R"(stroke="#222" stroke-width="1.5" stroke-dasharray="5 3")";
  double y = T;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    if (tops[gi].empty()) continue;
    cv.text(8, y + 15, group_name(groups[gi]), R"(font-weight="bold")");
    y += 22;
    for (const SweepRow* r : tops[gi]) {
      cv.text(16, y + 13, r->strategy(), R"(font-family="monospace")");
      const double sum = total(cats, *r), den = shares ? sum / 100 : unit;
      double acc = 0;
      for (const Category& c : cats) {
        const double v = c.value(*r) / den;
        if (!(v > 0)) continue;
        cv.rect(x(acc), y + 3, x(acc + v) - x(acc), 14, fill(c.color));
        acc += v;
      }
      cv.text(x(acc) + 4, y + 14, fixed(sum / unit, 2) + " " + unit_name, R"(font-size="10" fill="#444")");
      if (capacity && caps.size() > 1 && std::isfinite(r->memory_capacity_bytes))
        cv.line(x(r->memory_capacity_bytes / unit), y, x(r->memory_capacity_bytes / unit), y + 20, dash);
      y += 20;
    }
  }
  std::vector<Canvas::LegendEntry> legend;
  legend.reserve(cats.size() + 1);
  for (const Category& c : cats) legend.push_back({c.name, c.color, 's'});
  if (capacity && !caps.empty()) {
    legend.push_back(
        {caps.size() == 1 ? "capacity " + fixed(*caps.begin() / unit, 1) + " " + unit_name : "capacity", "#222", 'd'});
    if (caps.size() == 1) cv.line(x(*caps.begin() / unit), T, x(*caps.begin() / unit), yend, dash);
  }
  cv.legend(x1 + 70, T, legend);
  return cv.str();
}

/// (c) Tokens/s against peak memory: every row that ran, faint (hollow when over capacity), and each group's
/// front as a staircase (the best throughput attainable within a memory budget).
std::string pareto_chart(const std::vector<SweepRow>& rows, const std::vector<ParetoGroup>& groups) {
  const std::string title = "Pareto fronts: tokens/s vs peak memory";
  double mem_hi = 0, lo = INFINITY, hi = 0;
  std::set<double> caps;
  for (const SweepRow& r : rows)
    if (r.ok()) {
      mem_hi = std::max(mem_hi, r.peak_memory_bytes / units::kGB);
      if (r.tokens_per_s > 0) lo = std::min(lo, r.tokens_per_s), hi = std::max(hi, r.tokens_per_s);
      if (std::isfinite(r.memory_capacity_bytes)) caps.insert(r.memory_capacity_bytes / units::kGB);
    }
  if (!(hi > 0)) return no_data(760, 120, title, "no scenario ran");
  for (double c : caps) mem_hi = std::max(mem_hi, c);
  const double W = 760, H = 440, L = 80, R = W - 230, T = 20, B = H - 56;
  Canvas cv(W, H, title);
  const Scale x = svg::linear(0, mem_hi, L, R, true);
  const Scale y = hi / lo > 30 ? svg::logarithmic(lo, hi, B, T) : svg::linear(lo, hi, B, T, false);
  cv.axes(x, y, "peak memory per GPU (GB)", std::string("tokens/s") + (y.log ? " (log scale)" : ""));
  std::map<std::pair<std::string, int>, std::string> colors;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) colors[{groups[gi].model, groups[gi].gpus}] = color(gi);
  for (const SweepRow& r : rows)
    if (r.ok() && r.tokens_per_s > 0) {
      const std::string& c = colors[{r.model, r.gpus}];
      cv.circle(x(r.peak_memory_bytes / units::kGB), y(r.tokens_per_s), 2.5,
                r.fits ? "fill=\"" + c + "\" fill-opacity=\"0.25\""
                       : "fill=\"none\" stroke=\"" + c + "\" stroke-opacity=\"0.4\"");
    }
  const std::string dash = R"(stroke="#222" stroke-width="1.5" stroke-dasharray="5 3")";
  for (double c : caps) cv.line(x(c), T, x(c), B, dash);
  std::vector<Canvas::LegendEntry> legend;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const ParetoGroup& g = groups[gi];
    if (g.front.empty()) continue;
    std::vector<std::pair<double, double>> steps;
    for (const ParetoPoint& p : g.front) {
      const double px = x(p.row->peak_memory_bytes / units::kGB), py = y(p.row->tokens_per_s);
      if (!steps.empty()) steps.push_back({px, steps.back().second});
      steps.push_back({px, py});
    }
    cv.polyline(steps, "stroke=\"" + color(gi) + "\" stroke-width=\"2\"");
    for (const ParetoPoint& p : g.front)
      cv.circle(x(p.row->peak_memory_bytes / units::kGB), y(p.row->tokens_per_s), 3.5, fill(color(gi)));
    legend.push_back({group_name(g) + " (" + std::to_string(g.front.size()) + ")", color(gi), 'o'});
  }
  legend.push_back({"every scenario that ran", "#bbbbbb", 's'});
  legend.push_back({"(hollow: over capacity)", "#ffffff", 's'});
  if (!caps.empty()) legend.push_back({"memory capacity", "#222", 'd'});
  cv.legend(R + 20, T, legend);
  return cv.str();
}

std::string td(const std::string& s, bool text = false) {
  return (text ? std::string("<td class=\"s\">") : std::string("<td>")) + escape(s) + "</td>";
}

std::string top_table(const ParetoGroup& g, const std::vector<const SweepRow*>& top) {
  std::string clusters;
  for (const auto& c : g.clusters) clusters += (clusters.empty() ? std::string() : std::string(", ")) + c;
  std::string h = "<h3>" + escape(group_name(g)) + " <small>(" + escape(clusters) + ")</small></h3>\n";
  if (top.empty()) return h + "<p>No scenario of this group ran and fit in memory.</p>\n";
  h += "<table>\n<tr><th>#</th><th class=\"s\">strategy</th><th class=\"s\">id</th><th>tokens/s</th>"
       "<th>samples/s</th><th>MFU</th><th>TFLOP/s per GPU</th><th>iteration s</th><th>peak GB</th>"
       "<th>capacity GB</th><th>compute s</th><th>exposed comm s</th><th>bubble s</th><th>Pareto</th></tr>\n";
  for (std::size_t k = 0; k < top.size(); ++k) {
    const SweepRow& r = *top[k];
    h += "<tr>" + td(std::to_string(k + 1)) + td(r.strategy(), true) + td(r.id, true) + td(fixed(r.tokens_per_s, 1)) +
         td(fixed(r.samples_per_s, 2)) + td(fixed(100 * r.mfu, 1) + "%") + td(fixed(r.model_tflops_per_gpu, 1)) +
         td(fixed(r.iteration_time_s, 3)) + td(gb(r.peak_memory_bytes)) + td(gb(r.memory_capacity_bytes)) +
         td(fixed(r.compute_s, 3)) + td(fixed(r.exposed_comm_s, 3)) + td(fixed(r.bubble_s, 3)) +
         td(g.on_front(r) ? "yes" : "") + "</tr>\n";
  }
  return h + "</table>\n";
}

std::string skip_tables(const std::vector<SweepRow>& rows, const std::vector<ParetoGroup>& groups) {
  std::string h =
      "<table>\n<tr><th class=\"s\">model</th><th>GPUs</th><th>scenarios</th><th>ran and fit</th>"
      "<th>over capacity</th><th>out of memory</th><th>failed</th><th>crashed</th></tr>\n";
  for (const ParetoGroup& g : groups)
    h += "<tr>" + td(g.model, true) + td(std::to_string(g.gpus)) + td(std::to_string(g.counts.total)) +
         td(std::to_string(g.counts.ok_fit)) + td(std::to_string(g.counts.ok_over)) + td(std::to_string(g.counts.oom)) +
         td(std::to_string(g.counts.failed)) + td(std::to_string(g.counts.crashed)) + "</tr>\n";
  h += "</table>\n";
  // Distinct (status, error) pairs, most frequent first, with up to three example ids.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> errors;
  for (const SweepRow& r : rows)
    if (!r.ok()) errors[{r.status, r.error}].push_back(r.id);
  if (errors.empty()) return h + "<p>Every scenario ran.</p>\n";
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<std::string>>> sorted(errors.begin(),
                                                                                               errors.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  h += "<table>\n<tr><th>count</th><th class=\"s\">status</th><th class=\"s\">error</th><th "
       "class=\"s\">e.g.</th></tr>\n";
  const std::size_t shown = std::min<std::size_t>(sorted.size(), 20);
  for (std::size_t k = 0; k < shown; ++k) {
    const auto& [key, ids] = sorted[k];
    std::string eg;
    for (std::size_t i = 0; i < std::min<std::size_t>(ids.size(), 3); ++i)
      eg += (i ? std::string(" ") : std::string()) + ids[i];
    h +=
        "<tr>" + td(std::to_string(ids.size())) + td(key.first, true) + td(key.second, true) + td(eg, true) + "</tr>\n";
  }
  h += "</table>\n";
  if (sorted.size() > shown)
    h += "<p>... and " + std::to_string(sorted.size() - shown) + " more distinct errors.</p>\n";
  return h;
}

const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}"
    "table{border-collapse:collapse;font-size:13px;margin:6px 0 16px}"
    "th,td{border-bottom:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top}"
    ".s{text-align:left}td.s{font-family:monospace}.fig{overflow-x:auto;margin:6px 0 20px}"
    "h2{margin-top:28px;border-bottom:1px solid #ccc}small{color:#666;font-weight:normal}";

}  // namespace

std::vector<const SweepRow*> top_strategies(const std::vector<SweepRow>& rows, const ParetoGroup& g, int top) {
  std::vector<const SweepRow*> out;
  for (const SweepRow& r : rows)
    if (r.usable() && r.model == g.model && r.gpus == g.gpus) out.push_back(&r);
  std::sort(out.begin(), out.end(), [](const SweepRow* a, const SweepRow* b) {
    return std::make_tuple(-a->tokens_per_s, a->index, a->id) < std::make_tuple(-b->tokens_per_s, b->index, b->id);
  });
  if (out.size() > static_cast<std::size_t>(std::max(top, 0))) out.resize(static_cast<std::size_t>(std::max(top, 0)));
  return out;
}

std::string sweep_html(const SweepResults& results, int top) {
  const std::vector<SweepRow>& rows = results.rows;
  const std::vector<ParetoGroup> groups = pareto_fronts(rows);
  std::vector<std::vector<const SweepRow*>> tops;
  tops.reserve(groups.size());
  for (const ParetoGroup& g : groups) tops.push_back(top_strategies(rows, g, top));
  const StatusCounts n = count_status(rows);

  const std::vector<Category> memory = {
      {"weights", "#4e79a7", [](const SweepRow& r) { return r.memory_bytes.weights; }},
      {"gradients", "#f28e2b", [](const SweepRow& r) { return r.memory_bytes.gradients; }},
      {"optimizer", "#e15759", [](const SweepRow& r) { return r.memory_bytes.optimizer; }},
      {"activations", "#76b7b2", [](const SweepRow& r) { return r.memory_bytes.activations; }},
      {"reserved", "#bab0ac", [](const SweepRow& r) { return r.memory_bytes.reserved; }}};
  const std::vector<Category> time = {
      {"compute", "#59a14f", [](const SweepRow& r) { return r.compute_s; }},
      {"exposed communication", "#e15759", [](const SweepRow& r) { return r.exposed_comm_s; }},
      {"pipeline bubble", "#bab0ac", [](const SweepRow& r) { return r.bubble_s; }}};

  const std::string top_s = std::to_string(top);
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>dtsim sweep report: " +
                  escape(results.path) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  h += "<h1>dtsim sweep report</h1>\n<p><code>" + escape(results.path) + "</code>: " + std::to_string(n.total) +
       " scenarios; " + std::to_string(n.ok_fit) + " ran and fit in memory, " + std::to_string(n.ok_over) +
       " ran but exceed the memory capacity, " + std::to_string(n.oom) + " out of memory, " + std::to_string(n.failed) +
       " failed, " + std::to_string(n.crashed) + " crashed. \"Top\" strategies: the " + top_s +
       " highest tokens/s of each model and GPU count among those that ran and fit.</p>\n";
  h += "<h2>Best throughput vs GPU count</h2>\n<div class=\"fig\">\n" + throughput_chart(rows) + "</div>\n";
  h += "<h2>Memory per GPU of the top strategies</h2>\n<p>Peak-memory categories (the most loaded rank), with the "
       "GPU's memory capacity.</p>\n<div class=\"fig\">\n" +
       stacked_bars(groups, tops, "memory per strategy", "memory per GPU (GB)", units::kGB, "GB", memory, true, false) +
       "</div>\n";
  h += "<h2>Pareto fronts: throughput vs peak memory</h2>\n<p>Per model and GPU count, the scenarios no other "
       "beats on both tokens/s and peak memory (see <code>dtsim pareto</code>).</p>\n<div class=\"fig\">\n" +
       pareto_chart(rows, groups) + "</div>\n";
  h += "<h2>Time breakdown of the top strategies</h2>\n<p>Compute, communication not hidden behind compute, and "
       "pipeline bubble, as shares of their sum; the label gives the sum in seconds.</p>\n<div class=\"fig\">\n" +
       stacked_bars(groups, tops, "time breakdown per strategy", "share of the iteration (%)", 1.0, "s", time, false,
                    true) +
       "</div>\n";
  h += "<h2>Top " + top_s + " strategies per GPU count</h2>\n";
  for (std::size_t gi = 0; gi < groups.size(); ++gi) h += top_table(groups[gi], tops[gi]);
  h += "<h2>Skipped and failed scenarios</h2>\n" + skip_tables(rows, groups);
  return h + "</body>\n</html>\n";
}

}  // namespace dtsim::sim
