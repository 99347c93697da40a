// A small SVG writer for the sweep report: primitives with fixed-precision coordinates (deterministic text),
// linear and logarithmic scales with "nice" ticks, axes with tick labels and titles, and legends. Output is meant
// to be inlined in HTML (no xmlns, no external references).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtsim::svg {

/// Escapes & < > " ' for HTML/XML text and attribute values.
std::string escape(const std::string& s);
/// Fixed-point text ("-" for NaN or infinity).
std::string fixed(double v, int decimals);
/// Compact tick label: 950, 1.5k, 20k, 3M, 1.2G, 0.05.
std::string si(double v);

/// Maps a data interval [lo, hi] onto pixels [a, b] (b < a for a y axis), linearly or in log10.
struct Scale {
  double lo = 0, hi = 1, a = 0, b = 1;
  bool log = false;
  std::vector<double> ticks;  ///< where the axis is labelled
  double operator()(double v) const;
};
/// Linear, widened to multiples of a 1-2-5 step (about `n` ticks); starts at 0 when `from_zero` and lo >= 0.
Scale linear(double lo, double hi, double a, double b, bool from_zero, int n = 5);
/// Log10, widened to whole decades, ticks at 1, 2 and 5 times powers of ten when it spans at most two decades.
Scale logarithmic(double lo, double hi, double a, double b);
/// Log scale of exactly [lo, hi] padded by `pad` (fraction of the span) with ticks at the given values (GPU counts).
Scale log_at(const std::vector<double>& values, double a, double b, double pad = 0.06);

class Canvas {
public:
  Canvas(double width, double height, const std::string& title);
  /// `style` is extra attribute text, e.g. R"(stroke="#333" stroke-dasharray="4 3")".
  void line(double x1, double y1, double x2, double y2, const std::string& style);
  void rect(double x, double y, double w, double h, const std::string& style);
  void circle(double cx, double cy, double r, const std::string& style);
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& style);
  /// `text` is escaped here.
  void text(double x, double y, const std::string& text, const std::string& style = "");
  /// Frame, ticks and grid of a plot area [x.a, x.b] x [y.b, y.a], with axis titles; tick labels from `xl`/`yl`.
  void axes(const Scale& x, const Scale& y, const std::string& x_title, const std::string& y_title,
            std::string (*xl)(double) = si, std::string (*yl)(double) = si);
  struct LegendEntry {
    std::string label, color;
    char kind = 's';  ///< 's' swatch, 'l' line, 'd' dashed line, 'o' marker
  };
  /// Vertical list of entries with its top-left corner at (x, y).
  void legend(double x, double y, const std::vector<LegendEntry>& entries);
  std::string str() const;  ///< the <svg> element
  double width() const { return w_; }
  double height() const { return h_; }

private:
  double w_, h_;
  std::string title_, body_;
};

}  // namespace dtsim::svg
