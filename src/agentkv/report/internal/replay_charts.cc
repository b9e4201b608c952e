// Invariants: every axis range is widened to a non-empty one before a value is mapped through
// it; every label drawn is fitted (FitText) to the room it has; usage series are bucketed to
// at most kUsageBuckets points per arm, so the report stays small for long replays. Arm colours
// come from one fixed palette, in arm order, and every mark drawn in an arm's colour carries
// data-arm="<index>"; lines of arms past the palette's length are dashed.
#include "agentkv/report/internal/replay_charts.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/report/internal/svg_chart.h"
#include "agentkv/report/replay_report.h"

namespace agentkv::report::internal {

using sim::ArmResult;
using sim::DurationSummary;
using sim::KvUsageSample;
using sim::ReplayResult;
namespace {

// Time buckets per arm in a KV usage panel: about one per pixel of the panel.
constexpr size_t kUsageBuckets = 180;
// Quantiles sampled per arm in the session-time chart.
constexpr size_t kQuantiles = 100;

// Twenty colours, so that the default sixteen arms (references included) and a few more each
// get their own: Tableau 10 (distinguishable, readable on white), then ten of other hues or
// lightness (deep blue, raspberry, light green, indigo, olive, cyan, rust, warm grey, light
// blue, near black).
constexpr std::array<const char*, 20> kPalette = {
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
    "#ff9da7", "#9c755f", "#bab0ac", "#003f5c", "#d45087", "#8cd17d", "#665191",
    "#b6992d", "#17becf", "#8c2d04", "#79706e", "#a0cbe8", "#333333"};

// The attribute that ties a mark to its arm, so that a check (the browser test) can find every
// mark of one arm across the charts: data-arm="<index>".
std::string ArmData(size_t arm) { return "data-arm=\"" + std::to_string(arm) + "\""; }

// Stroke attributes of arm `arm`'s line: its colour, dashed once the palette has wrapped.
std::string ArmStroke(size_t arm, double width) {
  std::string stroke = ArmData(arm) + " stroke=\"" + std::string(ArmColor(arm)) +
                       "\" stroke-width=\"" + Coord(width) + "\"";
  if (arm >= kPalette.size()) stroke += " stroke-dasharray=\"5,3\"";
  return stroke;
}

double FiniteOr0(double value) { return std::isfinite(value) ? value : 0; }

// Seconds with three significant digits at most ("0.082", "1.50", "17.2", "410").
std::string SecondsLabel(double seconds) {
  const double s = FiniteOr0(seconds);
  std::array<char, 32> buffer{};
  const double magnitude = std::fabs(s);
  const int decimals = magnitude < 1 ? 3 : (magnitude < 10 ? 2 : (magnitude < 100 ? 1 : 0));
  std::snprintf(buffer.data(), buffer.size(), "%.*f", decimals, s);
  return buffer.data();
}

std::string PercentLabel(double percent) {
  if (!std::isfinite(percent) || std::fabs(percent) < 1e-9) return "0%";
  return (percent > 0 ? "+" : "") + TickLabel(percent) + "%";
}

std::string FractionAsPercent(double fraction) { return TickLabel(fraction * 100) + "%"; }

// A legend entry: a swatch and its text at (x, y) (the text's baseline); returns the x after
// it.
double LegendEntry(SvgCanvas& canvas, double x, double y, const std::string& swatch_attributes,
                   const std::string& text) {
  canvas.Raw("<rect x=\"" + Coord(x) + "\" y=\"" + Coord(y - 8.5) +
             "\" width=\"12\" height=\"9\" " + swatch_attributes + "/>\n");
  canvas.Text(x + 16, y, text, kTickStyle);
  return x + 16 + TextWidth(text, kTickFontPx) + 14;
}

// ---- Horizontal bars, one row per arm -----------------------------------------------------

// The geometry of a chart with one row of bars per arm: arm names right-aligned in a left
// margin sized to the longest name (cut only past a third of the width), value labels right
// of the bars in a margin sized to the longest value label.
class ArmRows {
 public:
  static constexpr double kWidth = 600;
  static constexpr double kTop = 30;  // Room for the legend.
  static constexpr double kBottom = 40;
  static constexpr double kValueFontPx = 9.5;

  ArmRows(const ReplayResult& result, double row_height, const std::vector<std::string>& values)
      : row_height_(row_height) {
    double names = 0;
    for (const ArmResult& arm : result.arms) {
      names = std::max(names, TextWidth(arm.arm, kLabelFontPx));
    }
    double value_room = 0;
    for (const std::string& value : values) {
      value_room = std::max(value_room, TextWidth(value, kValueFontPx));
    }
    area_.left = std::min(names + 24, kWidth / 3);
    area_.right = kWidth - value_room - 10;
    area_.top = kTop;
    area_.bottom = kTop + row_height * static_cast<double>(std::max<size_t>(result.arms.size(), 1));
  }

  const PlotArea& area() const { return area_; }
  double height() const { return area_.bottom + kBottom; }
  double RowTop(size_t arm) const { return area_.top + row_height_ * static_cast<double>(arm); }
  double row_height() const { return row_height_; }

  Scale XScale(double max_value) const {
    Scale x = NiceScale(0, max_value);
    x.px_lo = area_.left;
    x.px_hi = area_.right;
    return x;
  }

  // Arm names left of their rows, fitted to the margin, each followed by its arm's swatch.
  void Names(SvgCanvas& canvas, const ReplayResult& result) const {
    for (size_t i = 0; i < result.arms.size(); ++i) {
      const double middle = RowTop(i) + row_height_ / 2;
      canvas.Raw("<rect x=\"" + Coord(area_.left - 13) + "\" y=\"" + Coord(middle - 4) +
                 "\" width=\"8\" height=\"8\" " + ArmData(i) + " fill=\"" + ArmColor(i) + "\"/>\n");
      canvas.Text(area_.left - 17, middle + 4,
                  FitText(result.arms[i].arm, kLabelFontPx, area_.left - 20),
                  std::string(kLabelStyle) + " text-anchor=\"end\"");
    }
  }

  // Grid, ticks, frame and the x-axis label.
  void Axes(SvgCanvas& canvas, const Scale& x, const std::string& label,
            std::string (*format)(double) = nullptr) const {
    canvas.XTicks(x, area_, 5, true, format);
    canvas.Frame(area_);
    canvas.Text((area_.left + area_.right) / 2, area_.bottom + 32, label,
                std::string(kLabelStyle) + " text-anchor=\"middle\"");
  }

  // A value label right of a bar ending at x `px`, vertically centred on [top, top + height].
  static void Value(SvgCanvas& canvas, double px, double top, double height,
                    const std::string& text) {
    canvas.Text(px + 3, top + height / 2 + 3.3, text,
                "font-size=\"9.5\" fill=\"#333333\" text-anchor=\"start\"");
  }

 private:
  double row_height_;
  PlotArea area_;
};

}  // namespace

// TTFT or queueing delay: p50, p95 and p99 side by side per arm. The bars share one linear
// axis from 0, so a long p99 tail shows as long as it is; each arm's row carries its three
// values ("p50 / p95 / p99", as the legend) right of its longest bar, so the p50s stay readable
// where they are too short to see. One label per row rather than per bar: three labels on bars
// 8 px apart would overlap.
std::string PercentileChart(const ReplayResult& result, const std::string& title,
                            DurationSummary ArmResult::*field, const std::string& axis_label) {
  struct Percentile {
    const char* name;
    const char* color;
    double DurationSummary::*value;
  };
  static constexpr std::array<Percentile, 3> kPercentiles = {
      {{"p50", "#9ecae1", &DurationSummary::p50_s},
       {"p95", "#3182bd", &DurationSummary::p95_s},
       {"p99", "#08306b", &DurationSummary::p99_s}}};
  constexpr double kBar = 7;
  std::vector<std::string> values;
  double max_value = 0;
  for (const ArmResult& arm : result.arms) {
    std::string label;
    for (const Percentile& p : kPercentiles) {
      const double v = std::max(0.0, FiniteOr0((arm.*field).*p.value));
      label += (label.empty() ? "" : " / ") + SecondsLabel(v);
      max_value = std::max(max_value, v);
    }
    values.push_back(label);
  }
  const ArmRows rows(result, 3 * kBar + 2 + 9, values);
  SvgCanvas canvas(ArmRows::kWidth, rows.height(), title);
  const Scale x = rows.XScale(max_value);
  rows.Axes(canvas, x, axis_label);
  double legend_x = rows.area().left;
  for (const Percentile& p : kPercentiles) {
    legend_x = LegendEntry(canvas, legend_x, 14, "fill=\"" + std::string(p.color) + "\"", p.name);
  }
  canvas.Text(legend_x, 14, "(values: p50 / p95 / p99 s)", kTickStyle);
  if (result.arms.empty()) {
    canvas.Text((rows.area().left + rows.area().right) / 2, rows.area().top + 20, "no arms",
                std::string(kLabelStyle) + " text-anchor=\"middle\"");
  }
  for (size_t i = 0; i < result.arms.size(); ++i) {
    const ArmResult& arm = result.arms[i];
    double top = rows.RowTop(i) + 4.5;
    double longest = x.px_lo;
    for (const Percentile& p : kPercentiles) {
      const double v = std::max(0.0, FiniteOr0((arm.*field).*p.value));
      const double end = x.Map(v);
      canvas.Rect(x.px_lo, top, end - x.px_lo, kBar, "fill=\"" + std::string(p.color) + "\"",
                  arm.arm + ": " + p.name + " " + SecondsLabel(v) + " s");
      longest = std::max(longest, end);
      top += kBar + 1;
    }
    ArmRows::Value(canvas, longest, rows.RowTop(i) + 4.5, 3 * kBar + 2, values[i]);
  }
  rows.Names(canvas, result);
  return canvas.Finish();
}

std::string HitRatioChart(const ReplayResult& result) {
  std::vector<std::string> values;
  double max_ratio = 1;
  for (const ArmResult& arm : result.arms) {
    const double total =
        FiniteOr0(arm.token_hit_ratio_device) + FiniteOr0(arm.token_hit_ratio_host);
    values.push_back(TickLabel(total));
    max_ratio = std::max(max_ratio, total);
  }
  const ArmRows rows(result, 20, values);
  SvgCanvas canvas(ArmRows::kWidth, rows.height(), "Token hit ratio per arm");
  const Scale x = rows.XScale(max_ratio);
  rows.Axes(canvas, x, "token hit ratio (device + host)");
  double legend_x = rows.area().left;
  legend_x = LegendEntry(canvas, legend_x, 14, "fill=\"#555555\"", "device");
  legend_x = LegendEntry(canvas, legend_x, 14, "fill=\"#555555\" fill-opacity=\"0.4\"", "host");
  for (size_t i = 0; i < result.arms.size(); ++i) {
    const ArmResult& arm = result.arms[i];
    const double device = std::max(0.0, FiniteOr0(arm.token_hit_ratio_device));
    const double host = std::max(0.0, FiniteOr0(arm.token_hit_ratio_host));
    const std::string color = ArmColor(i);
    const double top = rows.RowTop(i) + 3;
    const double height = rows.row_height() - 6;
    canvas.Rect(x.px_lo, top, x.Map(device) - x.px_lo, height,
                ArmData(i) + " fill=\"" + color + "\"", arm.arm + ": device " + TickLabel(device));
    canvas.Rect(x.Map(device), top, x.Map(device + host) - x.Map(device), height,
                ArmData(i) + " fill=\"" + color + "\" fill-opacity=\"0.4\"",
                arm.arm + ": host " + TickLabel(host));
    ArmRows::Value(canvas, x.Map(device + host), top, height, TickLabel(device + host));
  }
  if (const std::optional<size_t> ideal = IdealArmIndex(result)) {
    const ArmResult& arm = result.arms[*ideal];
    const double px = x.Map(FiniteOr0(arm.token_hit_ratio_device + arm.token_hit_ratio_host));
    canvas.Line(px, rows.area().top - 4, px, rows.area().bottom,
                "stroke=\"#222222\" stroke-width=\"1.2\" stroke-dasharray=\"5,3\"");
    canvas.Raw("<line x1=\"" + Coord(legend_x) + "\" y1=\"10\" x2=\"" + Coord(legend_x + 14) +
               "\" y2=\"10\" stroke=\"#222222\" stroke-width=\"1.5\" stroke-dasharray=\"4,2\"/>\n");
    canvas.Text(legend_x + 18, 14,
                FitText("ideal (" + arm.arm + ")", kTickFontPx, ArmRows::kWidth - legend_x - 20),
                kTickStyle);
  }
  rows.Names(canvas, result);
  return canvas.Finish();
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
  std::vector<std::string> values;
  double max_total = 0;
  for (const ArmResult& arm : result.arms) {
    double total = 0;
    for (const Part& part : kParts) {
      total += static_cast<double>(std::max<int64_t>(0, arm.*part.field));
    }
    values.push_back(TickLabel(total));
    max_total = std::max(max_total, total);
  }
  const ArmRows rows(result, 20, values);
  SvgCanvas canvas(ArmRows::kWidth, rows.height(), "Recomputed prompt tokens per arm");
  const Scale x = rows.XScale(max_total);
  rows.Axes(canvas, x, "prompt tokens computed");
  double legend_x = rows.area().left;
  for (const Part& part : kParts) {
    legend_x =
        LegendEntry(canvas, legend_x, 14, "fill=\"" + std::string(part.color) + "\"", part.name);
  }
  for (size_t i = 0; i < result.arms.size(); ++i) {
    const ArmResult& arm = result.arms[i];
    const double top = rows.RowTop(i) + 3;
    const double height = rows.row_height() - 6;
    double base = 0;
    for (const Part& part : kParts) {
      const double tokens = static_cast<double>(std::max<int64_t>(0, arm.*part.field));
      canvas.Rect(x.Map(base), top, x.Map(base + tokens) - x.Map(base), height,
                  "fill=\"" + std::string(part.color) + "\"",
                  arm.arm + ": " + part.name + " " + TickLabel(tokens));
      base += tokens;
    }
    ArmRows::Value(canvas, x.Map(base), top, height, TickLabel(base));
  }
  rows.Names(canvas, result);
  return canvas.Finish();
}

namespace {

// ---- Session time against the baseline ----------------------------------------------------

// The value at quantile q in (0, 1] of ascending `sorted` (nearest rank, as the table's
// percentiles).
double Quantile(const std::vector<double>& sorted, double q) {
  const double n = static_cast<double>(sorted.size());
  const size_t rank = static_cast<size_t>(std::clamp(std::ceil(q * n), 1.0, n));
  return sorted[rank - 1];
}

std::vector<double> SortedFinite(const std::vector<double>& values) {
  std::vector<double> out;
  for (const double v : values) {
    if (std::isfinite(v) && v >= 0) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Each arm's shift series: (quantile in %, change in %) at kQuantiles quantiles of its session
// times against the baseline's `base` (ascending); empty without sessions on either side.
std::vector<std::pair<double, double>> ShiftSeries(const std::vector<double>& base,
                                                   const ArmResult& arm) {
  std::vector<std::pair<double, double>> series;
  const std::vector<double> times = SortedFinite(arm.session_times_s);
  if (times.empty() || base.empty()) return series;
  for (size_t j = 0; j < kQuantiles; ++j) {
    const double q = (static_cast<double>(j) + 0.5) / static_cast<double>(kQuantiles);
    const double reference = Quantile(base, q);
    if (!(reference > 0)) continue;
    const double change = (Quantile(times, q) / reference - 1) * 100;
    if (std::isfinite(change)) series.emplace_back(q * 100, change);
  }
  return series;
}

// One panel of the session-time small multiples: arm `arm`'s shift line over the baseline's
// 0 % line (in the baseline's colour), on the shared scale `y_percent`.
std::string SessionTimeShiftPanel(const ReplayResult& result, size_t arm, size_t baseline,
                                  const std::vector<std::pair<double, double>>& series,
                                  const Scale& y_percent) {
  constexpr double kWidth = 300;
  constexpr double kHeight = 150;
  const PlotArea area{.left = 44, .top = 22, .right = kWidth - 12, .bottom = kHeight - 22};
  const Scale x{.lo = 0, .hi = 100, .px_lo = area.left, .px_hi = area.right};
  Scale y = y_percent;
  y.px_lo = area.bottom;
  y.px_hi = area.top;
  SvgCanvas canvas(kWidth, kHeight,
                   "Session time against the baseline, by quantile: " + result.arms[arm].arm);
  canvas.Raw("<rect x=\"0\" y=\"4\" width=\"10\" height=\"10\" " + ArmData(arm) + " fill=\"" +
             std::string(ArmColor(arm)) + "\"/>\n");
  canvas.Text(15, 13, FitText(result.arms[arm].arm, kLabelFontPx, kWidth - 20),
              "font-size=\"11.5\" font-weight=\"bold\" fill=\"#222222\"");
  canvas.YGrid(y, area, 3, &PercentLabel);
  canvas.XTicks(x, area, 2, false, [](double v) { return TickLabel(v) + "%"; });
  canvas.Frame(area);
  canvas.Line(area.left, y.Map(0), area.right, y.Map(0), ArmStroke(baseline, 1.2));
  if (series.empty()) {
    canvas.Text((area.left + area.right) / 2, (area.top + area.bottom) / 2, "no sessions",
                std::string(kTickStyle) + " text-anchor=\"middle\"");
    return canvas.Finish();
  }
  std::vector<std::pair<double, double>> points;
  for (const auto& [q, change] : series) points.emplace_back(x.Map(q), y.Map(change));
  canvas.Polyline(points, ArmStroke(arm, 1.8));
  return canvas.Finish();
}

}  // namespace

// Session times are mostly the workload's recorded client gaps (tool calls, humans coming
// back), so the arms' session-time CDFs coincide within a line width even on a log axis. Each
// panel plots instead, at each quantile, the arm's session time against the baseline's at the
// same quantile, as a relative change (a shift function): the shared gaps cancel, an arm that
// changes nothing lies on 0 %, and one that shortens the long sessions bends down at the right.
// One panel per arm, on one shared scale, rather than every arm's line in one chart: fourteen
// lines on one plot cannot be told apart.
std::string SessionTimeShiftPanels(const ReplayResult& result) {
  const std::optional<size_t> baseline = BaselineArmIndex(result);
  if (!baseline) return "<div class=\"multiples\">\n<p>No arms.</p>\n</div>\n";
  const std::vector<double> base = SortedFinite(result.arms[*baseline].session_times_s);
  std::vector<std::vector<std::pair<double, double>>> series(result.arms.size());
  double lo = 0, hi = 0;
  bool any = false;
  for (size_t i = 0; i < result.arms.size(); ++i) {
    if (i == *baseline) continue;
    series[i] = ShiftSeries(base, result.arms[i]);
    for (const auto& [q, change] : series[i]) {
      lo = std::min(lo, change);
      hi = std::max(hi, change);
    }
    any = any || !series[i].empty();
  }
  std::string html = "<div class=\"multiples\">\n";
  if (result.arms.size() == 1) return html + "<p>Only the baseline ran.</p>\n</div>\n";
  if (!any) return html + "<p>No completed sessions.</p>\n</div>\n";
  const Scale y = NiceScale(lo, hi);
  for (size_t i = 0; i < result.arms.size(); ++i) {
    if (i != *baseline) html += SessionTimeShiftPanel(result, i, *baseline, series[i], y);
  }
  return html + "</div>\n";
}

namespace {

// ---- KV usage, one panel per arm ----------------------------------------------------------

double Fraction(int64_t part, int64_t whole) {
  if (whole <= 0) return 0;
  const double f = static_cast<double>(part) / static_cast<double>(whole);
  return std::isfinite(f) ? std::max(f, 0.0) : 0;
}

// The fullest sample of each of kUsageBuckets equal spans of [0, end_minutes]: (used fraction,
// occupied fraction = used + evictable); nullopt for a span without samples (the fleet was idle:
// the gateway polls only while requests are in flight).
struct UsageBucket {
  double used = 0;
  double occupied = 0;
};
std::vector<std::optional<UsageBucket>> UsageBuckets(const std::vector<KvUsageSample>& samples,
                                                     double end_minutes) {
  std::vector<std::optional<UsageBucket>> buckets(kUsageBuckets);
  for (const KvUsageSample& s : samples) {
    const double minutes = FiniteOr0(s.time.seconds() / 60);
    const double at = end_minutes > 0 ? minutes / end_minutes * kUsageBuckets : 0;
    const size_t b = std::min(kUsageBuckets - 1, static_cast<size_t>(std::max(0.0, at)));
    UsageBucket& bucket = buckets[b].has_value() ? *buckets[b] : buckets[b].emplace();
    bucket.used = std::max(bucket.used, Fraction(s.used_tokens, s.capacity_tokens));
    bucket.occupied = std::max(
        bucket.occupied,
        Fraction(s.used_tokens + std::max<int64_t>(0, s.evictable_tokens), s.capacity_tokens));
  }
  return buckets;
}

// One panel of the KV usage small multiples. Every panel has the same scales, so panels
// compare at a glance.
std::string KvUsagePanel(const ArmResult& arm, size_t index, const Scale& x_minutes,
                         const Scale& y_fraction) {
  constexpr double kWidth = 300;
  constexpr double kHeight = 150;
  const PlotArea area{.left = 36, .top = 22, .right = kWidth - 10, .bottom = kHeight - 22};
  Scale x = x_minutes;
  x.px_lo = area.left;
  x.px_hi = area.right;
  Scale y = y_fraction;
  y.px_lo = area.bottom;
  y.px_hi = area.top;
  SvgCanvas canvas(kWidth, kHeight, "KV usage over time: " + arm.arm);
  canvas.Raw("<rect x=\"0\" y=\"4\" width=\"10\" height=\"10\" " + ArmData(index) + " fill=\"" +
             std::string(ArmColor(index)) + "\"/>\n");
  canvas.Text(15, 13, FitText(arm.arm, kLabelFontPx, kWidth - 20),
              "font-size=\"11.5\" font-weight=\"bold\" fill=\"#222222\"");
  canvas.YGrid(y, area, 2, &FractionAsPercent);
  canvas.XTicks(x, area, 4, false);
  canvas.Frame(area);
  if (arm.kv_usage.empty()) {
    canvas.Text((area.left + area.right) / 2, (area.top + area.bottom) / 2, "no samples",
                std::string(kTickStyle) + " text-anchor=\"middle\"");
    return canvas.Finish();
  }
  const std::vector<std::optional<UsageBucket>> buckets = UsageBuckets(arm.kv_usage, x.hi);
  const double bucket_minutes = x.hi / static_cast<double>(kUsageBuckets);
  // Each run of consecutive non-empty buckets is one step-shaped area per series: cached
  // (light) behind used (solid).
  for (size_t begin = 0; begin < buckets.size();) {
    if (!buckets[begin].has_value()) {
      ++begin;
      continue;
    }
    size_t end = begin;
    while (end < buckets.size() && buckets[end].has_value()) ++end;
    for (const bool occupied : {true, false}) {
      auto value = [&](size_t b) { return occupied ? buckets[b]->occupied : buckets[b]->used; };
      auto px = [&](size_t b) { return x.Map(bucket_minutes * static_cast<double>(b)); };
      // A step at each bucket whose value differs from the one before.
      std::vector<std::pair<double, double>> points = {{px(begin), y.Map(value(begin))}};
      for (size_t b = begin + 1; b < end; ++b) {
        if (value(b) == value(b - 1)) continue;
        points.emplace_back(px(b), y.Map(value(b - 1)));
        points.emplace_back(px(b), y.Map(value(b)));
      }
      points.emplace_back(px(end), y.Map(value(end - 1)));
      points.emplace_back(px(end), y.Map(0));
      points.emplace_back(px(begin), y.Map(0));
      canvas.Polygon(points, ArmData(index) + " fill=\"" + std::string(ArmColor(index)) +
                                 "\" fill-opacity=\"" + (occupied ? "0.25" : "0.9") + "\"");
    }
    begin = end;
  }
  return canvas.Finish();
}

}  // namespace

std::string KvUsagePanels(const ReplayResult& result) {
  double max_minutes = 0;
  double max_fraction = 1;
  for (const ArmResult& arm : result.arms) {
    for (const KvUsageSample& s : arm.kv_usage) {
      max_minutes = std::max(max_minutes, FiniteOr0(s.time.seconds() / 60));
      max_fraction = std::max(
          max_fraction,
          Fraction(s.used_tokens + std::max<int64_t>(0, s.evictable_tokens), s.capacity_tokens));
    }
  }
  const Scale x = NiceScale(0, max_minutes);
  const Scale y = NiceScale(0, max_fraction);
  std::string html = "<div class=\"multiples\">\n";
  for (size_t i = 0; i < result.arms.size(); ++i) {
    html += KvUsagePanel(result.arms[i], i, x, y);
  }
  if (result.arms.empty()) html += "<p>No arms.</p>\n";
  return html + "</div>\n";
}

const char* ArmColor(size_t arm) { return kPalette[arm % kPalette.size()]; }

}  // namespace agentkv::report::internal
