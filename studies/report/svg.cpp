#include "studies/report/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dtsim::svg {

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string si(double v) {
  if (!std::isfinite(v)) return "-";
  static const struct {
    double factor;
    const char* suffix;
  } units[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  char buf[64];
  for (const auto& u : units)
    if (std::fabs(v) >= u.factor) {
      std::snprintf(buf, sizeof buf, "%.3g%s", v / u.factor, u.suffix);
      return buf;
    }
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

double Scale::operator()(double v) const {
  const double f = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
  return a + (std::isfinite(f) ? f : 0.0) * (b - a);
}

Scale linear(double lo, double hi, double a, double b, bool from_zero, int n) {
  if (from_zero && lo >= 0) lo = 0;
  if (!(hi > lo)) hi = lo + (lo != 0 ? std::fabs(lo) : 1.0);
  const double raw = (hi - lo) / n, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw * (1 - 1e-9)) {
      step = m * mag;
      break;
    }
  const long k0 = std::lround(std::floor(lo / step + 1e-9)), k1 = std::lround(std::ceil(hi / step - 1e-9));
  Scale s{static_cast<double>(k0) * step, static_cast<double>(k1) * step, a, b, false, {}};
  for (long k = k0; k <= k1; ++k) s.ticks.push_back(static_cast<double>(k) * step);
  return s;
}

Scale logarithmic(double lo, double hi, double a, double b) {
  if (!(lo > 0)) lo = hi > 0 ? hi / 10 : 1;
  if (!(hi > lo)) hi = lo * 10;
  const int d0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int d1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (d1 <= d0) d1 = d0 + 1;
  Scale s{std::pow(10.0, d0), std::pow(10.0, d1), a, b, true, {}};
  for (int d = d0; d <= d1; ++d) {
    s.ticks.push_back(std::pow(10.0, d));
    if (d1 - d0 <= 2 && d < d1)
      for (double m : {2.0, 5.0}) s.ticks.push_back(m * std::pow(10.0, d));
  }
  std::sort(s.ticks.begin(), s.ticks.end());
  return s;
}

Scale log_at(const std::vector<double>& values, double a, double b, double pad) {
  double lo = *std::min_element(values.begin(), values.end()), hi = *std::max_element(values.begin(), values.end());
  if (!(hi > lo)) lo /= 2, hi *= 2;
  const double l0 = std::log10(lo), l1 = std::log10(hi), span = l1 - l0;
  return Scale{std::pow(10.0, l0 - pad * span), std::pow(10.0, l1 + pad * span), a, b, true, values};
}

namespace {
std::string c(double v) { return fixed(v, 1); }
}  // namespace

Canvas::Canvas(double width, double height, const std::string& title) : w_(width), h_(height), title_(title) {}

void Canvas::line(double x1, double y1, double x2, double y2, const std::string& style) {
  body_ +=
      "<line x1=\"" + c(x1) + "\" y1=\"" + c(y1) + "\" x2=\"" + c(x2) + "\" y2=\"" + c(y2) + "\" " + style + "/>\n";
}

void Canvas::rect(double x, double y, double w, double h, const std::string& style) {
  body_ +=
      "<rect x=\"" + c(x) + "\" y=\"" + c(y) + "\" width=\"" + c(w) + "\" height=\"" + c(h) + "\" " + style + "/>\n";
}

void Canvas::circle(double cx, double cy, double r, const std::string& style) {
  body_ += "<circle cx=\"" + c(cx) + "\" cy=\"" + c(cy) + "\" r=\"" + c(r) + "\" " + style + "/>\n";
}

void Canvas::polyline(const std::vector<std::pair<double, double>>& points, const std::string& style) {
  std::string pts;
  for (const auto& [x, y] : points) {
    if (!pts.empty()) pts += ' ';
    pts += c(x) + "," + c(y);
  }
  body_ += "<polyline points=\"" + pts + "\" fill=\"none\" " + style + "/>\n";
}

void Canvas::text(double x, double y, const std::string& text, const std::string& style) {
  body_ += "<text x=\"" + c(x) + "\" y=\"" + c(y) + "\"";
  if (!style.empty()) body_ += ' ' + style;
  body_ += '>';
  body_ += escape(text);
  body_ += "</text>\n";
}

void Canvas::axes(const Scale& x, const Scale& y, const std::string& x_title, const std::string& y_title,
                  std::string (*xl)(double), std::string (*yl)(double)) {
  const std::string grid = R"(stroke="#e4e4e4")", tick = R"(stroke="#333")";
  for (double t : x.ticks) {
    const double px = x(t);
    line(px, y.b, px, y.a, grid);
    line(px, y.a, px, y.a + 5, tick);
    text(px, y.a + 17, xl(t), R"(text-anchor="middle")");
  }
  for (double t : y.ticks) {
    const double py = y(t);
    line(x.a, py, x.b, py, grid);
    line(x.a - 5, py, x.a, py, tick);
    text(x.a - 8, py + 4, yl(t), R"(text-anchor="end")");
  }
  rect(x.a, y.b, x.b - x.a, y.a - y.b, R"(fill="none" stroke="#333")");
  text((x.a + x.b) / 2, y.a + 36, x_title, R"(text-anchor="middle" font-size="12")");
  const double ty = (y.a + y.b) / 2, tx = x.a - 50;
  text(tx, ty, y_title,
       "text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 " + c(tx) + " " + c(ty) + ")\"");
}

void Canvas::legend(double x, double y, const std::vector<LegendEntry>& entries) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const LegendEntry& e = entries[i];
    const double cy = y + 16.0 * static_cast<double>(i) + 8;
    const std::string col = "\"" + e.color + "\"";
    if (e.kind == 's') rect(x, cy - 5, 12, 10, "fill=" + col);
    if (e.kind == 'l' || e.kind == 'o') line(x, cy, x + 14, cy, "stroke=" + col + " stroke-width=\"2\"");
    if (e.kind == 'd') line(x, cy, x + 14, cy, "stroke=" + col + " stroke-width=\"2\" stroke-dasharray=\"4 2\"");
    if (e.kind == 'o') circle(x + 7, cy, 3, "fill=" + col);
    text(x + 20, cy + 4, e.label);
  }
}

std::string Canvas::str() const {
  return "<svg width=\"" + c(w_) + "\" height=\"" + c(h_) + "\" viewBox=\"0 0 " + c(w_) + " " + c(h_) +
         "\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\n<title>" + escape(title_) +
         "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + body_ + "</svg>\n";
}

}  // namespace dtsim::svg
