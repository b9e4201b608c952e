// Drawing primitives of the replay report's inline SVG charts: escaping, coordinates that never
// print NaN, nice axis ranges and ticks, an estimate of how wide a label renders (so that labels
// are fitted to their room before the page is written, not clipped by the browser), label
// placement without overlap, and a canvas that collects SVG elements.
//
// What is plotted lives in replay_report_html.cc; nothing here knows about a replay. Pure
// functions and value types: thread-compatible.
#ifndef AGENTKV_REPORT_INTERNAL_SVG_CHART_H_
#define AGENTKV_REPORT_INTERNAL_SVG_CHART_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentkv::report::internal {

// Text for XML character data and attribute values. Control characters that XML 1.0 forbids
// become '?'.
std::string Escape(std::string_view text);

// An SVG coordinate: one decimal, 0 for a non-finite value, clamped to [-1e6, 1e6].
std::string Coord(double value);

// A tick label: up to four significant digits, k/M/G for large values ("1.5k", "250", "0.05");
// "0" for a non-finite value.
std::string TickLabel(double value);

// The estimated width in px of `text` rendered at `font_px` in DejaVu Sans, the sans-serif of
// Linux desktops and of headless Chromium on Debian. Helvetica, Arial, Segoe UI and San
// Francisco set the same text narrower, so a label that fits by this estimate fits in them.
// Bold adds 10 %. A non-ASCII character counts as 1 em. Never negative.
double TextWidth(std::string_view text, double font_px, bool bold = false);

// `text` when TextWidth says it fits in `max_px`; else its longest prefix that fits followed
// by "\u2026" (an ellipsis), cut on a UTF-8 character boundary; "" when not even that fits.
std::string FitText(std::string_view text, double font_px, double max_px);

// A value range mapped onto a pixel range, linear or log10. Map() of a value outside the range
// extrapolates (log: values at or below `lo` map to `lo`); a non-finite value or an empty range
// maps to px_lo.
struct Scale {
  double lo = 0;
  double hi = 1;
  bool log = false;
  double px_lo = 0;
  double px_hi = 1;

  double Map(double value) const;
};

// A step of 1, 2 or 5 times a power of ten giving about `target` intervals over `span`; 1 for
// a span that is not positive and finite.
double NiceStep(double span, double target);

// The linear range [lo', hi'] with lo' <= min(lo, 0) and hi' >= max(hi, 0) rounded out to
// multiples of a nice step (about five intervals); [0, 1] when both are 0 or not finite.
Scale NiceScale(double lo, double hi);

// Tick values inside the range: multiples of NiceStep(hi - lo, target) (linear), or the powers
// of ten (log). At most 21.
std::vector<double> Ticks(const Scale& scale, double target = 5);

// Positions for labels that want to sit at `wanted` (any order) along one axis, each at least
// `min_gap` from the next, all inside [lo, hi] when they fit there, moved as little as a
// forward and a backward pass allow. The result is in the order of `wanted`.
std::vector<double> SpreadLabels(const std::vector<double>& wanted, double min_gap, double lo,
                                 double hi);

// A plot rectangle in canvas pixels.
struct PlotArea {
  double left = 0;
  double top = 0;
  double right = 1;
  double bottom = 1;
};

// An SVG document built element by element: presentation attributes rather than CSS classes,
// so that a chart copied out of the page looks the same. Every coordinate goes through Coord()
// and every text through Escape().
class SvgCanvas {
 public:
  // An empty canvas of `width` x `height` px (also its viewBox) titled `title` (the SVG
  // <title> and aria-label).
  SvgCanvas(double width, double height, std::string_view title);

  double width() const { return width_; }
  double height() const { return height_; }

  void Line(double x1, double y1, double x2, double y2, std::string_view attributes);
  // A rectangle with a tooltip (an SVG <title>); a negative width or height draws nothing.
  void Rect(double x, double y, double width, double height, std::string_view attributes,
            std::string_view tooltip);
  void Text(double x, double y, std::string_view text, std::string_view attributes);
  // Points in canvas pixels; nothing for fewer than two points.
  void Polyline(const std::vector<std::pair<double, double>>& points, std::string_view attributes);
  // A closed shape; nothing for fewer than three points.
  void Polygon(const std::vector<std::pair<double, double>>& points, std::string_view attributes);
  // Grid lines across `area` and labels left of it at the ticks of `y`; `format` writes a
  // label (TickLabel when null).
  void YGrid(const Scale& y, const PlotArea& area, double target,
             std::string (*format)(double) = nullptr);
  // Tick marks and labels under `area` at the ticks of `x`, with vertical grid lines when
  // `grid` is set.
  void XTicks(const Scale& x, const PlotArea& area, double target, bool grid,
              std::string (*format)(double) = nullptr);
  // The left and bottom edges of `area`.
  void Frame(const PlotArea& area);
  // An element written as is (already escaped).
  void Raw(std::string_view element);

  // The document, ending with a newline.
  std::string Finish() const;

 private:
  double width_;
  double height_;
  std::string svg_;
};

// Presentation attributes shared by every chart.
inline constexpr std::string_view kGridStyle = "stroke=\"#e6e6e6\" stroke-width=\"1\"";
inline constexpr std::string_view kAxisStyle = "stroke=\"#444444\" stroke-width=\"1\"";
inline constexpr double kTickFontPx = 10.5;
inline constexpr std::string_view kTickStyle = "font-size=\"10.5\" fill=\"#444444\"";
inline constexpr double kLabelFontPx = 11.5;
inline constexpr std::string_view kLabelStyle = "font-size=\"11.5\" fill=\"#222222\"";

}  // namespace agentkv::report::internal

#endif  // AGENTKV_REPORT_INTERNAL_SVG_CHART_H_
