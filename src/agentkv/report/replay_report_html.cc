// The HTML report of a ReplayResult: XHTML-style HTML5 with an inline stylesheet and four
// inline SVG charts, readable offline and parseable as XML.
//
// Invariants: every piece of text that comes from the result goes through Escape(); every
// coordinate goes through Coord(), which maps a non-finite value to 0, so no "nan" or "inf"
// reaches an attribute; every axis range is widened to a non-empty one before a value is mapped
// through it. Series are downsampled to at most kMaxPoints points per arm so that the report
// stays small for long replays. Arm colours come from one fixed palette, in arm order.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/report/replay_report.h"

namespace agentkv::report {

using sim::ArmResult;
using sim::KvUsageSample;
using sim::ReplayResult;
using sim::ReplaySetup;
namespace {

constexpr size_t kMaxPoints = 400;

// Tableau 10: distinguishable, and readable on white.
constexpr std::array<const char*, 10> kPalette = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                                  "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                                  "#9c755f", "#bab0ac"};

const char* ArmColor(size_t arm) { return kPalette[arm % kPalette.size()]; }

// Text for XML character data and attribute values. Control characters that XML 1.0 forbids
// become '?'.
std::string Escape(const std::string& text) {
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

// `text` cut to `max_chars` bytes with a trailing "~" when longer, never inside a UTF-8
// character (which would make the document invalid XML).
std::string Truncate(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars || max_chars < 2) return text;
  size_t cut = max_chars - 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "~";
}

// An SVG coordinate: one decimal, 0 for a non-finite value, clamped to a sane range.
std::string Coord(double value) {
  if (!std::isfinite(value)) value = 0;
  value = std::clamp(value, -1e6, 1e6);
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%.1f", value);
  std::string text(buffer.data());
  if (text == "-0.0") text = "0.0";
  return text;
}

// A tick label: up to four significant digits, k/M/G for large values ("1.5k", "250", "0.05").
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

// ---- Axes ----------------------------------------------------------------------------------

// A value range mapped onto a pixel range, linear or log10.
struct Scale {
  double lo = 0;
  double hi = 1;
  bool log = false;
  double px_lo = 0;
  double px_hi = 1;

  double Map(double v) const {
    double a = lo, b = hi, x = v;
    if (log) {
      a = std::log10(lo);
      b = std::log10(hi);
      x = std::log10(std::max(v, lo));
    }
    if (!(b > a) || !std::isfinite(x)) return px_lo;
    return px_lo + (x - a) / (b - a) * (px_hi - px_lo);
  }
};

// A step of 1, 2 or 5 times a power of ten giving about `target` intervals over `span`.
double NiceStep(double span, double target) {
  if (!(span > 0) || !std::isfinite(span)) return 1;
  const double raw = span / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalized = raw / magnitude;
  const double factor = normalized < 1.5 ? 1 : (normalized < 3 ? 2 : (normalized < 7 ? 5 : 10));
  return factor * magnitude;
}

// A linear range [0, nice top >= max_value]; [0, 1] when max_value is not positive.
Scale ZeroBasedScale(double max_value) {
  Scale s;
  if (!(max_value > 0) || !std::isfinite(max_value)) return s;
  const double step = NiceStep(max_value, 5);
  s.hi = std::ceil(max_value / step - 1e-9) * step;
  if (!(s.hi > 0)) s.hi = max_value;
  return s;
}

std::vector<double> Ticks(const Scale& s) {
  std::vector<double> ticks;
  if (s.log) {
    for (double e = std::floor(std::log10(s.lo)); e <= std::ceil(std::log10(s.hi)) + 1e-9; ++e) {
      const double v = std::pow(10.0, e);
      if (v >= s.lo * (1 - 1e-9) && v <= s.hi * (1 + 1e-9)) ticks.push_back(v);
    }
    return ticks;
  }
  const double step = NiceStep(s.hi - s.lo, 5);
  for (double v = std::ceil(s.lo / step - 1e-9) * step; v <= s.hi + step * 1e-6; v += step) {
    ticks.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
    if (ticks.size() > 20) break;
  }
  return ticks;
}

// ---- Charts --------------------------------------------------------------------------------

constexpr double kWidth = 900;
constexpr double kHeight = 320;
constexpr double kLeft = 70;
constexpr double kRight = 710;
constexpr double kTop = 20;
constexpr double kBottom = 270;
constexpr double kLegendX = 730;

// Presentation attributes rather than CSS classes, so that a chart copied out of the page
// looks the same.
constexpr const char* kGrid = "stroke=\"#e6e6e6\" stroke-width=\"1\"";
constexpr const char* kAxis = "stroke=\"#444444\" stroke-width=\"1\"";
constexpr const char* kTick = "font-size=\"11\" fill=\"#444444\"";
constexpr const char* kLabel = "font-size=\"12\" fill=\"#222222\"";

class Chart {
 public:
  Chart(const std::string& title, Scale x, Scale y) : x_(x), y_(y) {
    x_.px_lo = kLeft;
    x_.px_hi = kRight;
    y_.px_lo = kBottom;
    y_.px_hi = kTop;
    svg_ = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + Coord(kWidth) + " " +
           Coord(kHeight) + "\" width=\"" + Coord(kWidth) + "\" height=\"" + Coord(kHeight) +
           "\" font-family=\"system-ui, sans-serif\" role=\"img\" aria-label=\"" + Escape(title) +
           "\">\n<title>" + Escape(title) + "</title>\n";
  }

  const Scale& x() const { return x_; }
  const Scale& y() const { return y_; }

  // Frame, grid lines, ticks and their labels; x ticks are left out for a categorical x axis.
  void Axes(const std::string& x_label, const std::string& y_label, bool x_ticks) {
    for (const double t : Ticks(y_)) {
      const std::string py = Coord(y_.Map(t));
      svg_ += "<line " + std::string(kGrid) + " x1=\"" + Coord(kLeft) + "\" y1=\"" + py +
              "\" x2=\"" + Coord(kRight) + "\" y2=\"" + py + "\"/>\n";
      svg_ += "<text " + std::string(kTick) + " x=\"" + Coord(kLeft - 6) + "\" y=\"" +
              Coord(y_.Map(t) + 4) + "\" text-anchor=\"end\">" + Escape(TickLabel(t)) + "</text>\n";
    }
    if (x_ticks) {
      for (const double t : Ticks(x_)) {
        const std::string px = Coord(x_.Map(t));
        svg_ += "<line " + std::string(kAxis) + " x1=\"" + px + "\" y1=\"" + Coord(kBottom) +
                "\" x2=\"" + px + "\" y2=\"" + Coord(kBottom + 5) + "\"/>\n";
        svg_ += "<text " + std::string(kTick) + " x=\"" + px + "\" y=\"" + Coord(kBottom + 18) +
                "\" text-anchor=\"middle\">" + Escape(TickLabel(t)) + "</text>\n";
      }
    }
    svg_ += "<polyline " + std::string(kAxis) + " fill=\"none\" points=\"" + Coord(kLeft) + "," +
            Coord(kTop) + " " + Coord(kLeft) + "," + Coord(kBottom) + " " + Coord(kRight) + "," +
            Coord(kBottom) + "\"/>\n";
    svg_ += "<text " + std::string(kLabel) + " x=\"" + Coord((kLeft + kRight) / 2) + "\" y=\"" +
            Coord(kBottom + 40) + "\" text-anchor=\"middle\">" + Escape(x_label) + "</text>\n";
    svg_ += "<text " + std::string(kLabel) + " transform=\"translate(16," +
            Coord((kTop + kBottom) / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
            Escape(y_label) + "</text>\n";
  }

  void Polyline(const std::vector<std::pair<double, double>>& points, const char* color) {
    if (points.empty()) return;
    svg_ += "<polyline fill=\"none\" stroke=\"" + std::string(color) +
            "\" stroke-width=\"1.6\" points=\"";
    for (size_t i = 0; i < points.size(); ++i) {
      if (i > 0) svg_ += ' ';
      svg_ += Coord(x_.Map(points[i].first)) + "," + Coord(y_.Map(points[i].second));
    }
    svg_ += "\"/>\n";
  }

  // A rectangle from value y0 up to y1 at pixel x range [px, px + width].
  void Bar(double px, double width, double y0, double y1, const std::string& style,
           const std::string& tooltip) {
    const double top = y_.Map(std::max(y0, y1));
    const double bottom = y_.Map(std::min(y0, y1));
    svg_ += "<rect x=\"" + Coord(px) + "\" y=\"" + Coord(top) + "\" width=\"" + Coord(width) +
            "\" height=\"" + Coord(std::max(0.0, bottom - top)) + "\" " + style + "><title>" +
            Escape(tooltip) + "</title></rect>\n";
  }

  void Text(double px, double py, const std::string& text, const std::string& attributes) {
    svg_ += "<text x=\"" + Coord(px) + "\" y=\"" + Coord(py) + "\" " + attributes + ">" +
            Escape(text) + "</text>\n";
  }

  void Raw(const std::string& element) { svg_ += element; }

  // One legend entry per call, stacked down the right margin: a swatch element (given its
  // top-left corner) and the text.
  void LegendEntry(const std::string& swatch, const std::string& text) {
    const double py = kTop + 6 + 18 * static_cast<double>(legend_entries_++);
    svg_ += "<g transform=\"translate(" + Coord(kLegendX) + "," + Coord(py) + ")\">" + swatch +
            "<text " + std::string(kLabel) + " x=\"22\" y=\"9\">" + Escape(Truncate(text, 24)) +
            "</text></g>\n";
  }

  void Empty(const std::string& message) {
    Text((kLeft + kRight) / 2, (kTop + kBottom) / 2, message,
         std::string(kLabel) + " text-anchor=\"middle\"");
  }

  std::string Finish() { return svg_ + "</svg>\n"; }

 private:
  Scale x_;
  Scale y_;
  std::string svg_;
  int legend_entries_ = 0;
};

std::string LineSwatch(const std::string& color, bool dashed) {
  return "<line x1=\"0\" y1=\"5\" x2=\"16\" y2=\"5\" stroke=\"" + color +
         "\" stroke-width=\"2.5\"" + (dashed ? " stroke-dasharray=\"4,3\"" : "") + "/>";
}

std::string BoxSwatch(const std::string& color, double opacity) {
  return "<rect x=\"0\" y=\"0\" width=\"14\" height=\"10\" fill=\"" + color + "\" fill-opacity=\"" +
         Coord(opacity) + "\"/>";
}

double UsedFraction(const KvUsageSample& s) {
  if (s.capacity_tokens <= 0) return 0;
  const double f = static_cast<double>(s.used_tokens) / static_cast<double>(s.capacity_tokens);
  return std::isfinite(f) ? f : 0;
}

// (minutes, used fraction) with at most kMaxPoints points: the samples are cut into kMaxPoints
// consecutive buckets and each bucket keeps its fullest sample, so peaks survive.
std::vector<std::pair<double, double>> UsageSeries(const std::vector<KvUsageSample>& samples) {
  std::vector<std::pair<double, double>> points;
  const size_t n = samples.size();
  const size_t buckets = std::min(n, kMaxPoints);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t begin = b * n / buckets;
    const size_t end = (b + 1) * n / buckets;
    size_t best = begin;
    for (size_t i = begin; i < end; ++i) {
      if (UsedFraction(samples[i]) > UsedFraction(samples[best])) best = i;
    }
    points.emplace_back(samples[best].time.seconds() / 60, UsedFraction(samples[best]));
  }
  return points;
}

std::string KvUsageChart(const ReplayResult& result) {
  double max_minutes = 0;
  double max_fraction = 1;
  bool any = false;
  for (const ArmResult& arm : result.arms) {
    for (const KvUsageSample& s : arm.kv_usage) {
      any = true;
      max_minutes = std::max(max_minutes, s.time.seconds() / 60);
      max_fraction = std::max(max_fraction, UsedFraction(s));
    }
  }
  Chart chart("KV usage over time", ZeroBasedScale(max_minutes), ZeroBasedScale(max_fraction));
  chart.Axes("time (minutes)", "used / capacity", true);
  if (!any) chart.Empty("no KV usage samples");
  for (size_t i = 0; i < result.arms.size(); ++i) {
    chart.Polyline(UsageSeries(result.arms[i].kv_usage), ArmColor(i));
    chart.LegendEntry(LineSwatch(ArmColor(i), false), result.arms[i].arm);
  }
  return chart.Finish();
}

std::vector<double> SortedFinite(const std::vector<double>& values) {
  std::vector<double> out;
  for (const double v : values) {
    if (std::isfinite(v) && v >= 0) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string SessionCdfChart(const ReplayResult& result) {
  std::vector<std::vector<double>> times;
  double min_positive = 0;
  double max_time = 0;
  for (const ArmResult& arm : result.arms) {
    times.push_back(SortedFinite(arm.session_times_s));
    for (const double t : times.back()) {
      if (t > 0 && (min_positive == 0 || t < min_positive)) min_positive = t;
      max_time = std::max(max_time, t);
    }
  }
  Scale x = ZeroBasedScale(max_time);
  // Session times spanning more than two decades read better on a log axis.
  if (min_positive > 0 && max_time / min_positive > 100) {
    x.log = true;
    x.lo = std::pow(10.0, std::floor(std::log10(min_positive)));
    x.hi = std::pow(10.0, std::ceil(std::log10(max_time)));
  }
  Chart chart("Session completion time CDF", x, Scale{});
  chart.Axes(x.log ? "session time (s, log scale)" : "session time (s)", "fraction of sessions",
             true);
  if (std::all_of(times.begin(), times.end(),
                  [](const std::vector<double>& t) { return t.empty(); })) {
    chart.Empty("no completed sessions");
  }
  for (size_t i = 0; i < times.size(); ++i) {
    const std::vector<double>& t = times[i];
    std::vector<std::pair<double, double>> points;
    const size_t n = t.size();
    if (n > 0) {
      const double dn = static_cast<double>(n);
      points.emplace_back(t.front(), 0.0);
      if (n <= kMaxPoints / 2) {
        // The exact step function: up at each sample.
        for (size_t k = 0; k < n; ++k) {
          if (k > 0) points.emplace_back(t[k], static_cast<double>(k) / dn);
          points.emplace_back(t[k], static_cast<double>(k + 1) / dn);
        }
      } else {
        for (size_t j = 1; j <= kMaxPoints; ++j) {
          const size_t rank = (j * n + kMaxPoints - 1) / kMaxPoints;
          points.emplace_back(t[rank - 1], static_cast<double>(rank) / dn);
        }
      }
    }
    chart.Polyline(points, ArmColor(i));
    chart.LegendEntry(LineSwatch(ArmColor(i), false), result.arms[i].arm);
  }
  return chart.Finish();
}

// Bar geometry for `arms` categories over the plot width.
struct BarSlots {
  explicit BarSlots(size_t arms)
      : slot((kRight - kLeft) / static_cast<double>(std::max<size_t>(arms, 1))),
        width(std::min(60.0, slot * 0.6)) {}
  double Left(size_t i) const { return kLeft + slot * static_cast<double>(i) + (slot - width) / 2; }
  double Center(size_t i) const { return kLeft + slot * (static_cast<double>(i) + 0.5); }
  // The arm name under its bar, cut to what fits in a slot.
  size_t LabelChars() const { return std::max<size_t>(4, static_cast<size_t>(slot / 7)); }

  double slot;
  double width;
};

void ArmLabels(Chart& chart, const ReplayResult& result, const BarSlots& slots) {
  for (size_t i = 0; i < result.arms.size(); ++i) {
    chart.Text(slots.Center(i), kBottom + 16, Truncate(result.arms[i].arm, slots.LabelChars()),
               std::string(kTick) + " text-anchor=\"middle\"");
  }
}

std::string HitRatioChart(const ReplayResult& result) {
  double max_ratio = 1;
  for (const ArmResult& arm : result.arms) {
    max_ratio = std::max(max_ratio, arm.token_hit_ratio_device + arm.token_hit_ratio_host);
  }
  Chart chart("Token hit ratio per arm", Scale{}, ZeroBasedScale(max_ratio));
  chart.Axes("arm", "token hit ratio", false);
  const BarSlots slots(result.arms.size());
  for (size_t i = 0; i < result.arms.size(); ++i) {
    const ArmResult& arm = result.arms[i];
    const double device =
        std::isfinite(arm.token_hit_ratio_device) ? arm.token_hit_ratio_device : 0;
    const double host = std::isfinite(arm.token_hit_ratio_host) ? arm.token_hit_ratio_host : 0;
    const std::string color = ArmColor(i);
    chart.Bar(slots.Left(i), slots.width, 0, device, "fill=\"" + color + "\"",
              arm.arm + ": device " + TickLabel(device));
    chart.Bar(slots.Left(i), slots.width, device, device + host,
              "fill=\"" + color + "\" fill-opacity=\"0.45\"",
              arm.arm + ": host " + TickLabel(host));
    chart.Text(slots.Center(i), chart.y().Map(device + host) - 4, TickLabel(device + host),
               std::string(kTick) + " text-anchor=\"middle\"");
  }
  ArmLabels(chart, result, slots);
  chart.LegendEntry(BoxSwatch("#555555", 1), "device");
  chart.LegendEntry(BoxSwatch("#555555", 0.45), "host");
  if (const std::optional<size_t> ideal = IdealArmIndex(result)) {
    const ArmResult& arm = result.arms[*ideal];
    const double py = chart.y().Map(arm.token_hit_ratio_device + arm.token_hit_ratio_host);
    chart.Raw("<line x1=\"" + Coord(kLeft) + "\" y1=\"" + Coord(py) + "\" x2=\"" + Coord(kRight) +
              "\" y2=\"" + Coord(py) + "\" stroke=\"#222222\" stroke-width=\"1.2\"" +
              " stroke-dasharray=\"6,4\"/>\n");
    chart.LegendEntry(LineSwatch("#222222", true), "ideal (" + arm.arm + ")");
  }
  return chart.Finish();
}

std::string RecomputeChart(const ReplayResult& result) {
  struct Part {
    const char* name;
    const char* color;
    int64_t ArmResult::*field;
  };
  static constexpr std::array<Part, 3> kParts = {
      {{"cold", "#8da0cb", &ArmResult::cold_tokens},
       {"evicted recompute", "#fc8d62", &ArmResult::evicted_recompute_tokens},
       {"preempted recompute", "#e78ac3", &ArmResult::preempted_recompute_tokens}}};
  double max_total = 0;
  for (const ArmResult& arm : result.arms) {
    double total = 0;
    for (const Part& part : kParts)
      total += static_cast<double>(std::max<int64_t>(0, arm.*part.field));
    max_total = std::max(max_total, total);
  }
  Chart chart("Recomputed prompt tokens per arm", Scale{}, ZeroBasedScale(max_total));
  chart.Axes("arm", "tokens", false);
  const BarSlots slots(result.arms.size());
  for (size_t i = 0; i < result.arms.size(); ++i) {
    const ArmResult& arm = result.arms[i];
    double base = 0;
    for (const Part& part : kParts) {
      const double tokens = static_cast<double>(std::max<int64_t>(0, arm.*part.field));
      chart.Bar(slots.Left(i), slots.width, base, base + tokens,
                "fill=\"" + std::string(part.color) + "\"",
                arm.arm + ": " + part.name + " " + TickLabel(tokens));
      base += tokens;
    }
    chart.Text(slots.Center(i), chart.y().Map(base) - 4, TickLabel(base),
               std::string(kTick) + " text-anchor=\"middle\"");
  }
  ArmLabels(chart, result, slots);
  for (const Part& part : kParts) chart.LegendEntry(BoxSwatch(part.color, 1), part.name);
  return chart.Finish();
}

// ---- Page ----------------------------------------------------------------------------------

constexpr const char* kStyle = R"(
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; }
td, th { padding: 2px 10px; }
table.setup th { text-align: left; font-weight: normal; color: #666; }
table.arms td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.arms th.arm { text-align: right; border-bottom: 2px solid #999; }
table.arms tr.section th { text-align: left; background: #f2f2f2; }
table.arms tbody tr:hover { background: #fafae6; }
.good { color: #1b7f3b; } .bad { color: #b3261e; } .flat { color: #777; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.4em; }
figure { margin: 1.2em 0; } figcaption { font-weight: bold; margin-bottom: 0.3em; }
svg { max-width: 100%; height: auto; }
)";

std::string DeltaClass(MetricSense sense, double change) {
  if (std::fabs(change) < 5e-4 || sense == MetricSense::kNeutral) return "flat";
  const bool up = change > 0;
  return up == (sense == MetricSense::kHigherIsBetter) ? "good" : "bad";
}

std::string SetupTable(const ReplayResult& result) {
  const ReplaySetup& s = result.setup;
  const std::optional<size_t> baseline = BaselineArmIndex(result);
  const std::optional<size_t> ideal = IdealArmIndex(result);
  std::vector<std::pair<std::string, std::string>> rows = {
      {"workload", s.workload},
      {"seed", std::to_string(s.seed)},
      {"engines", std::to_string(s.num_engines)},
      {"router", s.router},
      {"model / GPU / TP", s.model + " / " + s.gpu + " / " + std::to_string(s.tp)},
      {"tokens per block", std::to_string(s.tokens_per_block)},
      {"device KV tokens per engine", std::to_string(s.device_tokens_per_engine)},
      {"host tier tokens per engine", std::to_string(s.host_tokens_per_engine)},
      {"deltas against", baseline ? result.arms[*baseline].arm : std::string("-")}};
  if (ideal) {
    const ArmResult& arm = result.arms[*ideal];
    rows.emplace_back("ideal token hit ratio",
                      TickLabel(arm.token_hit_ratio_device + arm.token_hit_ratio_host) + " (" +
                          arm.arm + ", device+host)");
  }
  std::string html = "<table class=\"setup\">\n";
  for (const auto& [name, value] : rows) {
    html += "<tr><th>" + Escape(name) + "</th><td>" + Escape(value) + "</td></tr>\n";
  }
  return html + "</table>\n";
}

std::string ArmList(const ReplayResult& result) {
  std::string html = "<ul>\n";
  for (size_t i = 0; i < result.arms.size(); ++i) {
    html += "<li><span class=\"swatch\" style=\"background: " + std::string(ArmColor(i)) +
            "\"></span><b>" + Escape(result.arms[i].arm) +
            "</b>: " + Escape(result.arms[i].description) + "</li>\n";
  }
  return html + "</ul>\n";
}

std::string ArmTable(const ReplayResult& result) {
  const std::vector<ReplayTableRow> rows = ReplayTableRows(result, NumberStyle::kFull);
  std::string html = "<table class=\"arms\">\n<thead><tr><th>metric</th>";
  for (const ArmResult& arm : result.arms) html += "<th class=\"arm\">" + Escape(arm.arm) + "</th>";
  html += "</tr></thead>\n<tbody>\n";
  std::string section;
  for (const ReplayTableRow& row : rows) {
    if (row.section != section) {
      section = row.section;
      html += "<tr class=\"section\"><th colspan=\"" + std::to_string(result.arms.size() + 1) +
              "\">" + Escape(section) + "</th></tr>\n";
    }
    html += "<tr><td>" + Escape(row.label) + "</td>";
    for (const ReplayTableCell& cell : row.cells) {
      html += "<td class=\"num\">" + Escape(cell.value);
      if (cell.change) {
        html += " <span class=\"" + DeltaClass(row.sense, *cell.change) + "\">" +
                Escape(cell.delta) + "</span>";
      }
      html += "</td>";
    }
    html += "</tr>\n";
  }
  return html + "</tbody>\n</table>\n";
}

std::string Figure(const std::string& caption, const std::string& svg) {
  return "<figure>\n<figcaption>" + Escape(caption) + "</figcaption>\n" + svg + "</figure>\n";
}

}  // namespace

std::string ReplayResultHtml(const ReplayResult& result) {
  const std::string title = "agentkv replay: " + result.setup.workload;
  std::string html = "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n";
  html += "<head>\n<meta charset=\"utf-8\"/>\n<title>" + Escape(title) + "</title>\n<style>" +
          kStyle + "</style>\n</head>\n<body>\n";
  html += "<h1>" + Escape(title) + "</h1>\n";
  html += "<h2>Setup</h2>\n" + SetupTable(result);
  html += "<h2>Arms</h2>\n" + ArmList(result);
  html += "<h2>Results</h2>\n";
  html += result.arms.empty() ? std::string("<p>No arms.</p>\n") : ArmTable(result);
  html += "<h2>Charts</h2>\n";
  html += Figure("KV usage: used tokens / device capacity, summed over engines (peak per bucket)",
                 KvUsageChart(result));
  html += Figure("Session completion time CDF", SessionCdfChart(result));
  html += Figure("Token hit ratio: device (solid) and host tier (light)", HitRatioChart(result));
  html += Figure("Recomputed prompt tokens: cold, evicted recompute, preempted recompute",
                 RecomputeChart(result));
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace agentkv::report
