// Invariants: every coordinate written goes through Coord(), which maps a non-finite value to
// 0, so no "nan" or "inf" reaches an attribute; every text goes through Escape(); FitText never
// cuts inside a UTF-8 character, so the document stays valid XML.
#include "agentkv/report/internal/svg_chart.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace agentkv::report::internal {
namespace {

// DejaVu Sans Book advance widths of ASCII 32 (space) to 126 ('~'), in thousandths of an em,
// read from the font's hmtx table.
constexpr std::array<uint16_t, 95> kDejaVuSansWidths = {
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361,  318, 337, 636, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632,
    575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635,  611, 732, 684, 989, 685,
    611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352,  635, 634, 278, 278, 579,
    278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592,  525, 636, 337, 636, 838};

constexpr std::string_view kEllipsis = "\u2026";

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The width of one character starting at text[i], in em.
double CharEm(std::string_view text, size_t i) {
  const auto byte = static_cast<unsigned char>(text[i]);
  if (byte >= 32 && byte <= 126) return kDejaVuSansWidths[byte - 32] / 1000.0;
  return byte < 32 ? 0.0 : 1.0;
}

}  // namespace

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string Coord(double value) {
  if (!std::isfinite(value)) value = 0;
  value = std::clamp(value, -1e6, 1e6);
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%.1f", value);
  std::string text(buffer.data());
  if (text == "-0.0") text = "0.0";
  return text;
}

std::string TickLabel(double value) {
  if (!std::isfinite(value)) return "0";
  const double magnitude = std::fabs(value);
  double scaled = value;
  const char* suffix = "";
  if (magnitude >= 1e9) {
    scaled = value / 1e9;
    suffix = "G";
  } else if (magnitude >= 1e6) {
    scaled = value / 1e6;
    suffix = "M";
  } else if (magnitude >= 1e4) {
    scaled = value / 1e3;
    suffix = "k";
  }
  if (std::fabs(scaled) < 1e-12) scaled = 0;
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%.4g", scaled);
  return std::string(buffer.data()) + suffix;
}

double TextWidth(std::string_view text, double font_px, bool bold) {
  double em = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!IsContinuationByte(text[i])) em += CharEm(text, i);
  }
  const double width = em * font_px * (bold ? 1.1 : 1.0);
  return std::isfinite(width) && width > 0 ? width : 0;
}

std::string FitText(std::string_view text, double font_px, double max_px) {
  if (TextWidth(text, font_px) <= max_px) return std::string(text);
  const double room = max_px - TextWidth(kEllipsis, font_px);
  if (room < 0) return "";
  double width = 0;
  size_t cut = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (IsContinuationByte(text[i])) continue;
    width += CharEm(text, i) * font_px;
    if (width > room) break;
    // The character fits: the cut moves past it and its continuation bytes.
    cut = i + 1;
    while (cut < text.size() && IsContinuationByte(text[cut])) ++cut;
  }
  return std::string(text.substr(0, cut)) + std::string(kEllipsis);
}

double Scale::Map(double value) const {
  double a = lo, b = hi, x = value;
  if (log) {
    if (!(lo > 0)) return px_lo;
    a = std::log10(lo);
    b = std::log10(hi);
    x = std::log10(std::max(value, lo));
  }
  if (!(b > a) || !std::isfinite(x)) return px_lo;
  return px_lo + (x - a) / (b - a) * (px_hi - px_lo);
}

double NiceStep(double span, double target) {
  if (!(span > 0) || !std::isfinite(span) || !(target > 0)) return 1;
  const double raw = span / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalized = raw / magnitude;
  const double factor = normalized < 1.5 ? 1 : (normalized < 3 ? 2 : (normalized < 7 ? 5 : 10));
  return factor * magnitude;
}

Scale NiceScale(double lo, double hi) {
  Scale s;
  if (!std::isfinite(lo)) lo = 0;
  if (!std::isfinite(hi)) hi = 0;
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  if (!(hi > lo)) return s;
  const double step = NiceStep(hi - lo, 5);
  s.lo = std::floor(lo / step + 1e-9) * step;
  s.hi = std::ceil(hi / step - 1e-9) * step;
  if (!(s.hi > s.lo)) {
    s.lo = lo;
    s.hi = hi;
  }
  return s;
}

std::vector<double> Ticks(const Scale& s, double target) {
  std::vector<double> ticks;
  if (s.log) {
    if (!(s.lo > 0) || !(s.hi > s.lo)) return ticks;
    for (double e = std::floor(std::log10(s.lo)); e <= std::ceil(std::log10(s.hi)) + 1e-9; ++e) {
      const double v = std::pow(10.0, e);
      if (v >= s.lo * (1 - 1e-9) && v <= s.hi * (1 + 1e-9)) ticks.push_back(v);
      if (ticks.size() > 20) break;
    }
    return ticks;
  }
  if (!(s.hi > s.lo) || !std::isfinite(s.hi - s.lo)) return ticks;
  const double step = NiceStep(s.hi - s.lo, target);
  for (double v = std::ceil(s.lo / step - 1e-9) * step; v <= s.hi + step * 1e-6; v += step) {
    ticks.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
    if (ticks.size() > 20) break;
  }
  return ticks;
}

std::vector<double> SpreadLabels(const std::vector<double>& wanted, double min_gap, double lo,
                                 double hi) {
  const size_t n = wanted.size();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  auto at = [&](size_t i) { return std::isfinite(wanted[i]) ? wanted[i] : lo; };
  // Ties keep their input order, so equal inputs always give the same output.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return at(a) < at(b); });
  std::vector<double> sorted(n);
  for (size_t k = 0; k < n; ++k) sorted[k] = std::clamp(at(order[k]), lo, std::max(lo, hi));
  // Forward: each label at least min_gap below the previous one.
  for (size_t k = 1; k < n; ++k) sorted[k] = std::max(sorted[k], sorted[k - 1] + min_gap);
  // Backward: pull the labels pushed past `hi` back up, as far as the gap allows.
  if (n > 0 && sorted[n - 1] > hi) {
    sorted[n - 1] = hi;
    for (size_t k = n - 1; k > 0; --k) {
      sorted[k - 1] = std::min(sorted[k - 1], sorted[k] - min_gap);
    }
  }
  std::vector<double> out(n);
  for (size_t k = 0; k < n; ++k) out[order[k]] = sorted[k];
  return out;
}

SvgCanvas::SvgCanvas(double width, double height, std::string_view title)
    : width_(width), height_(height) {
  svg_ = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + Coord(width) + " " +
         Coord(height) + "\" width=\"" + Coord(width) + "\" height=\"" + Coord(height) +
         "\" font-family=\"system-ui, sans-serif\" role=\"img\" aria-label=\"" + Escape(title) +
         "\">\n<title>" + Escape(title) + "</title>\n";
}

void SvgCanvas::Line(double x1, double y1, double x2, double y2, std::string_view attributes) {
  svg_ += "<line x1=\"" + Coord(x1) + "\" y1=\"" + Coord(y1) + "\" x2=\"" + Coord(x2) + "\" y2=\"" +
          Coord(y2) + "\" " + std::string(attributes) + "/>\n";
}

void SvgCanvas::Rect(double x, double y, double width, double height, std::string_view attributes,
                     std::string_view tooltip) {
  if (!(width >= 0) || !(height >= 0)) return;
  svg_ += "<rect x=\"" + Coord(x) + "\" y=\"" + Coord(y) + "\" width=\"" + Coord(width) +
          "\" height=\"" + Coord(height) + "\" " + std::string(attributes) + "><title>" +
          Escape(tooltip) + "</title></rect>\n";
}

void SvgCanvas::Text(double x, double y, std::string_view text, std::string_view attributes) {
  svg_ += "<text x=\"" + Coord(x) + "\" y=\"" + Coord(y) + "\" " + std::string(attributes) + ">" +
          Escape(text) + "</text>\n";
}

namespace {

std::string Points(const std::vector<std::pair<double, double>>& points) {
  std::string text;
  for (size_t i = 0; i < points.size(); ++i) {
    if (i > 0) text += ' ';
    text += Coord(points[i].first) + "," + Coord(points[i].second);
  }
  return text;
}

}  // namespace

void SvgCanvas::Polyline(const std::vector<std::pair<double, double>>& points,
                         std::string_view attributes) {
  if (points.size() < 2) return;
  svg_ += "<polyline fill=\"none\" " + std::string(attributes) + " points=\"" + Points(points) +
          "\"/>\n";
}

void SvgCanvas::Polygon(const std::vector<std::pair<double, double>>& points,
                        std::string_view attributes) {
  if (points.size() < 3) return;
  svg_ += "<polygon " + std::string(attributes) + " points=\"" + Points(points) + "\"/>\n";
}

void SvgCanvas::YGrid(const Scale& y, const PlotArea& area, double target,
                      std::string (*format)(double)) {
  for (const double t : Ticks(y, target)) {
    const double py = y.Map(t);
    Line(area.left, py, area.right, py, kGridStyle);
    Text(area.left - 5, py + 3.5, format != nullptr ? format(t) : TickLabel(t),
         std::string(kTickStyle) + " text-anchor=\"end\"");
  }
}

void SvgCanvas::XTicks(const Scale& x, const PlotArea& area, double target, bool grid,
                       std::string (*format)(double)) {
  for (const double t : Ticks(x, target)) {
    const double px = x.Map(t);
    if (grid) Line(px, area.top, px, area.bottom, kGridStyle);
    Line(px, area.bottom, px, area.bottom + 4, kAxisStyle);
    // Centred under its tick, unless that would cross an edge of the canvas: then flush with
    // the edge.
    const std::string label = format != nullptr ? format(t) : TickLabel(t);
    const double half = TextWidth(label, kTickFontPx) / 2;
    if (px + half > width_ - 1) {
      Text(width_ - 1, area.bottom + 15, label, std::string(kTickStyle) + " text-anchor=\"end\"");
    } else if (px - half < 1) {
      Text(1, area.bottom + 15, label, std::string(kTickStyle) + " text-anchor=\"start\"");
    } else {
      Text(px, area.bottom + 15, label, std::string(kTickStyle) + " text-anchor=\"middle\"");
    }
  }
}

void SvgCanvas::Frame(const PlotArea& area) {
  svg_ += "<polyline fill=\"none\" " + std::string(kAxisStyle) + " points=\"" + Coord(area.left) +
          "," + Coord(area.top) + " " + Coord(area.left) + "," + Coord(area.bottom) + " " +
          Coord(area.right) + "," + Coord(area.bottom) + "\"/>\n";
}

void SvgCanvas::Raw(std::string_view element) { svg_ += element; }

std::string SvgCanvas::Finish() const { return svg_ + "</svg>\n"; }

}  // namespace agentkv::report::internal
