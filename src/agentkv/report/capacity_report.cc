// The capacity report: verdict, terminal table, JSON and HTML page with the capacity curve.
//
// Numbers are written with snprintf in the "C" locale conventions (the program never sets
// another), so the text depends on nothing but the input. The JSON and the page come from the
// shared report helpers (internal/json_text.h, internal/html_page.h, internal/svg_chart.h);
// every text from the result goes through Escape() on the page.
#include "agentkv/report/capacity_report.h"

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/report/capacity_verdict.h"
#include "agentkv/report/internal/html_page.h"
#include "agentkv/report/internal/json_text.h"
#include "agentkv/report/internal/replay_charts.h"
#include "agentkv/report/internal/svg_chart.h"
#include "agentkv/report/internal/text_wrap.h"
#include "agentkv/report/internal/verdict_text.h"

namespace agentkv::report {

using internal::ArmColor;
using internal::Coord;
using internal::Escape;
using sim::CapacityProbe;
using sim::CapacityResult;
using sim::CapacitySearchResult;
using sim::SeedSpread;
namespace {

std::string Printf(const char* format, double value) {
  std::array<char, 64> buffer{};
  std::snprintf(buffer.data(), buffer.size(), format, value);
  return buffer.data();
}

std::string Rate(double rate) { return CapacityRateText(rate); }

std::string SpreadText(const SeedSpread& s, std::string (*format)(double), bool single,
                       const std::string& prefix_at_max = "", double max = 0) {
  const auto one = [&](double v) {
    return (!prefix_at_max.empty() && v >= max ? prefix_at_max : std::string()) + format(v);
  };
  if (single) return one(s.median);
  return one(s.median) + " [" + one(s.min) + ", " + one(s.max) + "]";
}

std::string Ratio(double value) { return Printf("%.2f", value) + "x"; }

std::string Seconds(double value) {
  if (!std::isfinite(value)) return "-";
  if (value >= 100) return Printf("%.0f", value);
  if (value >= 1) return Printf("%.2f", value);
  return Printf("%.3f", value);
}

// The median over seeds of the metric at each seed's capacity; nullopt when every seed
// missed at min_rate.
std::optional<double> MetricAtCapacity(const std::vector<CapacitySearchResult>& runs) {
  std::vector<double> values;
  for (const CapacitySearchResult& run : runs) {
    if (const CapacityProbe* p = run.AtCapacity()) values.push_back(p->value);
  }
  const std::optional<SeedSpread> spread = sim::SpreadOf(std::move(values));
  if (!spread) return std::nullopt;
  return spread->median;
}

int64_t ProbeCount(const std::vector<CapacitySearchResult>& runs) {
  int64_t n = 0;
  for (const CapacitySearchResult& run : runs) n += static_cast<int64_t>(run.probes.size());
  return n;
}

std::string SloText(const CapacityResult& r) {
  return std::string(sim::SloMetricName(r.options.metric)) + " <= " + Seconds(r.options.slo_s) +
         " s";
}

std::string SeedsText(const std::vector<uint64_t>& seeds) {
  std::string text;
  for (const uint64_t seed : seeds) text += (text.empty() ? "" : ", ") + std::to_string(seed);
  return text;
}

// One line per arm and seed whose capacity is an edge of the range.
std::vector<std::string> Notes(const CapacityResult& r) {
  std::vector<std::string> notes;
  for (size_t a = 0; a < r.arms.size(); ++a) {
    for (size_t s = 0; s < r.searches[a].size(); ++s) {
      const CapacitySearchResult& run = r.searches[a][s];
      const std::string who = r.arms[a] + " (seed " + std::to_string(r.seeds[s]) + ")";
      if (run.outcome == sim::CapacityOutcome::kNoneMet) {
        notes.push_back(who + ": misses the SLO even at --min-rate " + Rate(r.options.min_rate) +
                        ": capacity 0");
      } else if (run.outcome == sim::CapacityOutcome::kAtLeastMax) {
        notes.push_back(who + ": meets the SLO at --max-rate " + Rate(r.options.max_rate) +
                        ": capacity at least that");
      }
    }
  }
  return notes;
}

struct ArmRow {
  std::string arm;
  std::string capacity;
  std::string vs_baseline;
  std::string metric;
  std::string probes;
};

std::vector<ArmRow> ArmRows(const CapacityResult& r) {
  const bool single = r.seeds.size() == 1;
  std::vector<ArmRow> rows;
  for (size_t a = 0; a < r.arms.size(); ++a) {
    ArmRow row;
    row.arm = r.arms[a];
    row.capacity = SpreadText(r.Capacity(a), &Rate, single, ">= ", r.options.max_rate);
    const std::optional<SeedSpread> vs = r.VsBaseline(a);
    // A ratio built from a capacity at max_rate is a lower bound too.
    const bool bounded =
        std::any_of(r.searches[a].begin(), r.searches[a].end(), [](const CapacitySearchResult& s) {
          return s.outcome == sim::CapacityOutcome::kAtLeastMax;
        });
    row.vs_baseline = vs ? (bounded ? ">= " : "") + SpreadText(*vs, &Ratio, single) : "-";
    const std::optional<double> metric = MetricAtCapacity(r.searches[a]);
    row.metric = metric ? Seconds(*metric) : "-";
    row.probes = std::to_string(ProbeCount(r.searches[a]));
    rows.push_back(std::move(row));
  }
  return rows;
}

boost::json::value OrNull(const std::optional<double>& value) {
  if (!value) return nullptr;
  return *value;
}

boost::json::value SpreadJson(const std::optional<SeedSpread>& s) {
  if (!s) return nullptr;
  return boost::json::object{{"median", s->median}, {"min", s->min}, {"max", s->max}};
}

// Probes of all seeds of one arm: (seed index, probe), by seed then rate.
std::vector<std::pair<size_t, CapacityProbe>> ArmProbes(const CapacityResult& r, size_t arm) {
  std::vector<std::pair<size_t, CapacityProbe>> probes;
  for (size_t s = 0; s < r.searches[arm].size(); ++s) {
    for (const CapacityProbe& p : r.searches[arm][s].ProbesByRate()) probes.emplace_back(s, p);
  }
  return probes;
}

// The table's lines: a header row, then one row per arm; the arm left-aligned, numbers
// right-aligned, no trailing spaces.
std::vector<std::string> TableLines(const CapacityResult& r) {
  const std::vector<ArmRow> rows = ArmRows(r);
  const std::array<std::string, 5> headers = {
      "arm", "capacity (sessions/h/engine)", "vs baseline",
      std::string(sim::SloMetricName(r.options.metric)) + " at capacity (s)", "probes"};
  std::array<size_t, 5> width{};
  for (size_t c = 0; c < headers.size(); ++c) width[c] = headers[c].size();
  for (const ArmRow& row : rows) {
    const std::array<const std::string*, 5> cells = {&row.arm, &row.capacity, &row.vs_baseline,
                                                     &row.metric, &row.probes};
    for (size_t c = 0; c < cells.size(); ++c) width[c] = std::max(width[c], cells[c]->size());
  }
  const auto line = [&](const std::array<const std::string*, 5>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string& cell = *cells[c];
      const std::string pad(width[c] - cell.size(), ' ');
      text += c == 0 ? cell + pad : "   " + pad + cell;
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text;
  };
  std::vector<std::string> lines = {
      line({&headers[0], &headers[1], &headers[2], &headers[3], &headers[4]})};
  for (const ArmRow& row : rows) {
    lines.push_back(line({&row.arm, &row.capacity, &row.vs_baseline, &row.metric, &row.probes}));
  }
  return lines;
}

// The verdict (capacity_verdict.h): a title, then each label padded to the longest with its
// sentence wrapped under itself to the table's width; nothing without a baseline arm.
std::vector<std::string> VerdictTextLines(const CapacityResult& r, size_t width) {
  std::vector<std::pair<std::string, std::string>> items;
  for (VerdictLine& line : CapacityVerdictLines(r, DecideCapacityVerdict(r))) {
    items.emplace_back(std::move(line.label), std::move(line.text));
  }
  if (items.empty()) return {};
  return internal::LabelledLines("verdict (each arm against " + r.arms[*r.BaselineArm()] +
                                     ", on sessions/h/engine at the SLO; higher is better):",
                                 items, width);
}

// The verdict as the page's opening box (the replay page's markup and style).
std::string VerdictSection(const CapacityResult& r) {
  const std::vector<VerdictLine> lines = CapacityVerdictLines(r, DecideCapacityVerdict(r));
  if (lines.empty()) return "";
  return internal::VerdictBoxHtml("Each arm against " + r.arms[*r.BaselineArm()] +
                                      ", on sessions per hour per engine at the SLO (higher is "
                                      "better).",
                                  lines);
}

const char* StandingName(ArmStanding standing) {
  switch (standing) {
    case ArmStanding::kBetter:
      return "better";
    case ArmStanding::kWorse:
      return "worse";
    case ArmStanding::kWithinNoise:
      break;
  }
  return "within-noise";
}

boost::json::value ArmVerdictJson(const CapacityResult& r, const CapacityArmVerdict& v) {
  return boost::json::object{{"arm", r.arms[v.arm]},
                             {"standing", StandingName(v.vs_baseline.standing)},
                             {"delta", v.delta},
                             {"change", v.change ? boost::json::value(*v.change) : nullptr},
                             {"at_least", v.at_least},
                             {"least_change", v.vs_baseline.least_change},
                             {"most_change", v.vs_baseline.most_change}};
}

// The verdict for tools: its decisions and its sentences; null without a baseline arm.
boost::json::value VerdictJson(const CapacityResult& r) {
  const CapacityVerdict verdict = DecideCapacityVerdict(r);
  if (!verdict.baseline) return nullptr;
  boost::json::array arms, bounds, leaders, lines;
  for (const CapacityArmVerdict& v : verdict.arms) arms.push_back(ArmVerdictJson(r, v));
  for (const CapacityArmVerdict& v : verdict.bounds) bounds.push_back(ArmVerdictJson(r, v));
  for (const size_t k : verdict.leaders)
    leaders.push_back(boost::json::value(r.arms[verdict.arms[k].arm]));
  for (const VerdictLine& line : CapacityVerdictLines(r, verdict)) {
    lines.push_back(boost::json::object{{"label", line.label}, {"text", line.text}});
  }
  return boost::json::object{
      {"noise", verdict.noise},
      {"turn_on", leaders.empty() ? boost::json::value(nullptr) : leaders[0]},
      {"leaders", std::move(leaders)},
      {"arms", std::move(arms)},
      {"bounds", std::move(bounds)},
      {"lines", std::move(lines)}};
}

}  // namespace

double SessionInterarrivalS(double rate, int32_t num_engines) {
  return 3600.0 / (rate * static_cast<double>(num_engines));
}

std::string CapacityRateText(double rate) {
  if (rate >= 100) return Printf("%.0f", rate);
  if (rate >= 10) return Printf("%.1f", rate);
  return Printf("%.2f", rate);
}

std::string FormatCapacityTable(const CapacityResult& r) {
  std::string out = "agentkv capacity: " + r.workload + "\n";
  out += "fleet: " + std::to_string(r.num_engines) + " engine" + (r.num_engines == 1 ? "" : "s") +
         "; " + std::to_string(r.sessions) + " sessions per probe\n";
  out += "SLO: " + SloText(r) + "; rates " + Rate(r.options.min_rate) + " to " +
         Rate(r.options.max_rate) + " sessions/h/engine, tolerance " +
         Printf("%g", r.options.tolerance * 100) + " %; seeds " + SeedsText(r.seeds) + "\n\n";
  // The verdict leads, wrapped to the table's width (as the replay's does).
  const std::vector<std::string> table = TableLines(r);
  const std::vector<std::string> verdict = VerdictTextLines(r, internal::WidestLine(table));
  for (const std::string& line : verdict) out += line + "\n";
  if (!verdict.empty()) out += "\n";
  for (const std::string& line : table) out += line + "\n";
  const std::vector<std::string> notes = Notes(r);
  if (!notes.empty()) out += "\n";
  for (const std::string& note : notes) out += "note: " + note + "\n";
  return out;
}

std::string CapacityResultJson(const CapacityResult& r) {
  boost::json::object root;
  root["workload"] = r.workload;
  root["num_engines"] = r.num_engines;
  root["sessions"] = r.sessions;
  root["options"] =
      boost::json::object{{"metric", std::string(sim::SloMetricName(r.options.metric))},
                          {"slo_s", r.options.slo_s},
                          {"start_rate", r.options.start_rate},
                          {"min_rate", r.options.min_rate},
                          {"max_rate", r.options.max_rate},
                          {"tolerance", r.options.tolerance},
                          {"max_probes", r.options.MaxProbes()}};
  boost::json::array seeds;
  for (const uint64_t seed : r.seeds) seeds.push_back(seed);
  root["seeds"] = std::move(seeds);
  const std::optional<size_t> baseline = r.BaselineArm();
  if (baseline) {
    root["baseline"] = r.arms[*baseline];
  } else {
    root["baseline"] = nullptr;
  }
  root["verdict"] = VerdictJson(r);
  boost::json::array arms;
  for (size_t a = 0; a < r.arms.size(); ++a) {
    boost::json::object arm;
    arm["arm"] = r.arms[a];
    arm["capacity"] = SpreadJson(r.Capacity(a));
    arm["vs_baseline"] = SpreadJson(r.VsBaseline(a));
    boost::json::array runs;
    for (size_t s = 0; s < r.searches[a].size(); ++s) {
      const CapacitySearchResult& search = r.searches[a][s];
      boost::json::object run;
      run["seed"] = r.seeds[s];
      run["outcome"] = std::string(sim::CapacityOutcomeName(search.outcome));
      run["capacity"] = search.capacity;
      run["lowest_missed"] = OrNull(search.lowest_missed);
      const CapacityProbe* at = search.AtCapacity();
      run["metric_at_capacity"] = at != nullptr ? boost::json::value(at->value) : nullptr;
      boost::json::array probes;
      for (const CapacityProbe& p : search.ProbesByRate()) {
        const auto order = std::find(search.probes.begin(), search.probes.end(), p);
        probes.push_back(
            boost::json::object{{"rate", p.rate},
                                {"interarrival_s", SessionInterarrivalS(p.rate, r.num_engines)},
                                {"ttft_p50_s", p.metrics.ttft_p50_s},
                                {"ttft_p95_s", p.metrics.ttft_p95_s},
                                {"ttft_p99_s", p.metrics.ttft_p99_s},
                                {"server_time_mean_s", p.metrics.server_time_mean_s},
                                {"value", p.value},
                                {"met", p.met},
                                {"order", order - search.probes.begin() + 1}});
      }
      run["probes"] = std::move(probes);
      runs.push_back(std::move(run));
    }
    arm["runs"] = std::move(runs);
    arms.push_back(std::move(arm));
  }
  root["arms"] = std::move(arms);
  return internal::JsonText(root);
}

namespace {

constexpr double kChartWidth = 1000;
constexpr double kChartHeight = 400;

// Where CapacityChart draws: the plot area and its two log10 axes.
struct CapacityAxes {
  internal::PlotArea area;
  internal::Scale x;
  internal::Scale y;
};

// Both axes log10, from the power of ten at or below the least value to the one at or above
// the greatest, so that each has at least two labelled ticks. A metric of 0 (no waiting at
// all) is drawn at the bottom of the axis. The legend takes the right of the chart, as wide as
// the longest arm name up to 220 px.
CapacityAxes ChartAxes(const CapacityResult& r) {
  double x_lo = r.options.min_rate, x_hi = r.options.max_rate;
  double y_lo = r.options.slo_s, y_hi = r.options.slo_s;
  for (const auto& runs : r.searches) {
    for (const CapacitySearchResult& run : runs) {
      for (const CapacityProbe& p : run.probes) {
        x_lo = std::min(x_lo, p.rate);
        x_hi = std::max(x_hi, p.rate);
        if (p.value > 0 && std::isfinite(p.value)) {
          y_lo = std::min(y_lo, p.value);
          y_hi = std::max(y_hi, p.value);
        }
      }
    }
  }
  const auto decade_below = [](double v) { return std::pow(10.0, std::floor(std::log10(v))); };
  const auto decade_above = [](double v) {
    return std::pow(10.0, std::max(std::ceil(std::log10(v)), std::floor(std::log10(v)) + 1));
  };
  double names = 0;
  for (const std::string& arm : r.arms) {
    names = std::max(names, internal::TextWidth(arm, internal::kTickFontPx));
  }
  const internal::PlotArea area{.left = 58,
                                .top = 14,
                                .right = kChartWidth - std::min(names, 220.0) - 40,
                                .bottom = kChartHeight - 44};
  return CapacityAxes{.area = area,
                      .x = {.lo = decade_below(x_lo),
                            .hi = decade_above(x_hi),
                            .log = true,
                            .px_lo = area.left,
                            .px_hi = area.right},
                      .y = {.lo = decade_below(y_lo),
                            .hi = decade_above(y_hi),
                            .log = true,
                            .px_lo = area.bottom,
                            .px_hi = area.top}};
}

// The grid, the ticks, the frame, the axes' labels and the SLO's dashed line.
void DrawCapacityAxes(const CapacityResult& r, const CapacityAxes& axes,
                      internal::SvgCanvas& canvas) {
  using internal::kLabelStyle;
  const internal::PlotArea& area = axes.area;
  const std::string metric(sim::SloMetricName(r.options.metric));
  canvas.YGrid(axes.y, area, 5);
  canvas.XTicks(axes.x, area, 5, true);
  canvas.Frame(area);
  canvas.Text((area.left + area.right) / 2, area.bottom + 34, "sessions per hour per engine",
              std::string(kLabelStyle) + " text-anchor=\"middle\"");
  canvas.Text(0, 0, metric + " (s)",
              std::string(kLabelStyle) + " text-anchor=\"middle\" transform=\"translate(14," +
                  Coord((area.top + area.bottom) / 2) + ") rotate(-90)\"");
  const double slo_y = axes.y.Map(r.options.slo_s);
  canvas.Line(area.left, slo_y, area.right, slo_y,
              "stroke=\"#b3261e\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"");
  canvas.Text(area.left + 6, slo_y - 5, "SLO " + Seconds(r.options.slo_s) + " s",
              "font-size=\"10.5\" fill=\"#b3261e\"");
}

// Arm `a`'s curve of seed index `s`: its probes by rate, each a circle filled when it met the
// SLO. The first seed's curve is the bold one; the infinite-cache bound's is dashed. Returns
// the curve's points.
std::vector<std::pair<double, double>> DrawCapacityCurve(const CapacityResult& r,
                                                         const CapacityAxes& axes, size_t a,
                                                         size_t s, internal::SvgCanvas& canvas) {
  const std::string color = ArmColor(a);
  const bool bound = r.arms[a] == "infinite-cache";
  const std::string metric(sim::SloMetricName(r.options.metric));
  const std::vector<CapacityProbe> probes = r.searches[a][s].ProbesByRate();
  std::vector<std::pair<double, double>> points;
  for (const CapacityProbe& p : probes) {
    points.emplace_back(axes.x.Map(p.rate), axes.y.Map(p.value));
  }
  // data-arm and data-seed name the curve for tools that read the page.
  std::string stroke = "data-arm=\"" + Escape(r.arms[a]) + "\" data-seed=\"" +
                       std::to_string(r.seeds[s]) + "\" stroke=\"" + color + "\" stroke-width=\"" +
                       (s == 0 ? "2" : "1") + "\"" + (s == 0 ? "" : " stroke-opacity=\"0.6\"") +
                       (bound ? " stroke-dasharray=\"6,3\"" : "");
  canvas.Polyline(points, stroke);
  for (size_t i = 0; i < probes.size(); ++i) {
    const CapacityProbe& p = probes[i];
    const std::string tip = r.arms[a] + ", seed " + std::to_string(r.seeds[s]) + ": " +
                            Rate(p.rate) + " sessions/h/engine, " + metric + " " +
                            Seconds(p.value) + " s, " + (p.met ? "met" : "missed");
    canvas.Raw("<circle cx=\"" + Coord(points[i].first) + "\" cy=\"" + Coord(points[i].second) +
               "\" r=\"3\" stroke=\"" + color + "\" stroke-width=\"1.5\" fill=\"" +
               (p.met ? color : std::string("#ffffff")) + "\"><title>" + Escape(tip) +
               "</title></circle>\n");
  }
  return points;
}

// The legend right of the plot, each name at the height of its arm's last probe (of the first
// seed; the top of the plot for an arm without one), spread apart where they would overlap.
void DrawCapacityLegend(const CapacityResult& r, const CapacityAxes& axes,
                        const std::vector<double>& last_y, internal::SvgCanvas& canvas) {
  const internal::PlotArea& area = axes.area;
  std::vector<double> wanted;
  for (const double y : last_y) wanted.push_back(y + 3.5);
  const std::vector<double> placed =
      internal::SpreadLabels(wanted, 12, area.top + 8, kChartHeight - 4);
  for (size_t a = 0; a < r.arms.size(); ++a) {
    canvas.Line(area.right + 10, placed[a] - 3.5, area.right + 24, placed[a] - 3.5,
                "stroke=\"" + std::string(ArmColor(a)) + "\" stroke-width=\"2\"");
    canvas.Text(area.right + 28, placed[a],
                internal::FitText(r.arms[a], internal::kTickFontPx, kChartWidth - area.right - 30),
                internal::kTickStyle);
  }
}

}  // namespace

std::string CapacityChart(const CapacityResult& r) {
  const CapacityAxes axes = ChartAxes(r);
  const std::string metric(sim::SloMetricName(r.options.metric));
  internal::SvgCanvas canvas(kChartWidth, kChartHeight,
                             "Capacity curve: " + metric + " against load");
  DrawCapacityAxes(r, axes, canvas);
  std::vector<double> last_y;
  for (size_t a = 0; a < r.arms.size(); ++a) {
    last_y.push_back(axes.area.top);
    for (size_t s = 0; s < r.searches[a].size(); ++s) {
      const std::vector<std::pair<double, double>> points =
          DrawCapacityCurve(r, axes, a, s, canvas);
      if (s == 0 && !points.empty()) last_y.back() = points.back().second;
    }
  }
  DrawCapacityLegend(r, axes, last_y, canvas);
  return canvas.Finish();
}

std::string CapacityResultHtml(const CapacityResult& r) {
  std::string html = internal::PageStart("agentkv capacity: " + r.workload);
  html += VerdictSection(r);
  const std::vector<std::pair<std::string, std::string>> setup = {
      {"workload", r.workload},
      {"engines", std::to_string(r.num_engines)},
      {"sessions per probe", std::to_string(r.sessions)},
      {"SLO", SloText(r)},
      {"rates (sessions/h/engine)", Rate(r.options.min_rate) + " to " + Rate(r.options.max_rate) +
                                        ", start " + Rate(r.options.start_rate)},
      {"tolerance", Printf("%g", r.options.tolerance * 100) + " %"},
      {"seeds", SeedsText(r.seeds)}};
  html += "<dl class=\"setup\">\n";
  for (const auto& [name, value] : setup) {
    html += "<div><dt>" + Escape(name) + "</dt><dd>" + Escape(value) + "</dd></div>\n";
  }
  html += "</dl>\n<h2 id=\"results\">Sessions at SLO</h2>\n";
  html += "<div class=\"table-box\">\n<table class=\"arms\">\n<thead><tr>";
  for (const std::string& header :
       {std::string("arm"), std::string("capacity (sessions/h/engine)"), std::string("vs baseline"),
        std::string(sim::SloMetricName(r.options.metric)) + " at capacity (s)",
        std::string("probes")}) {
    html += std::string(header == "arm" ? "<th class=\"metric\"" : "<th") + " scope=\"col\">" +
            Escape(header) + "</th>";
  }
  html += "</tr></thead>\n<tbody>\n";
  const std::vector<ArmRow> rows = ArmRows(r);
  for (size_t a = 0; a < rows.size(); ++a) {
    html += "<tr><th scope=\"row\"><span class=\"swatch\" style=\"background: " +
            std::string(ArmColor(a)) + "\"></span>" + Escape(rows[a].arm) + "</th><td>" +
            Escape(rows[a].capacity) + "</td><td>" + Escape(rows[a].vs_baseline) + "</td><td>" +
            Escape(rows[a].metric) + "</td><td>" + Escape(rows[a].probes) + "</td></tr>\n";
  }
  html += "</tbody>\n</table>\n</div>\n";
  const std::vector<std::string> notes = Notes(r);
  if (!notes.empty()) {
    html += "<ul>\n";
    for (const std::string& note : notes) html += "<li>" + Escape(note) + "</li>\n";
    html += "</ul>\n";
  }
  html += "<h2 id=\"curve\">Capacity curve</h2>\n";
  html += internal::Figure(
      std::string(sim::SloMetricName(r.options.metric)) + " against load",
      "(every probe, per arm and seed, sorted by rate; filled: met, hollow: missed; dashed red: "
      "the SLO; the infinite-cache arm, dashed, is the bound; both axes log scale)",
      CapacityChart(r));
  html += "<h2 id=\"probes\">Probes</h2>\n";
  html += "<div class=\"table-box\">\n<table class=\"arms\">\n<thead><tr>";
  for (const char* header : {"arm", "seed", "sessions/h/engine", "interarrival (s)", "TTFT p50 (s)",
                             "TTFT p95 (s)", "TTFT p99 (s)", "server time mean (s)", "SLO"}) {
    html += std::string(header == std::string_view("arm") ? "<th class=\"metric\"" : "<th") +
            " scope=\"col\">" + header + "</th>";
  }
  html += "</tr></thead>\n<tbody>\n";
  for (size_t a = 0; a < r.arms.size(); ++a) {
    for (const auto& [s, p] : ArmProbes(r, a)) {
      html += "<tr><th scope=\"row\">" + Escape(r.arms[a]) + "</th><td>" +
              std::to_string(r.seeds[s]) + "</td><td>" + Rate(p.rate) + "</td><td>" +
              Seconds(SessionInterarrivalS(p.rate, r.num_engines)) + "</td><td>" +
              Seconds(p.metrics.ttft_p50_s) + "</td><td>" + Seconds(p.metrics.ttft_p95_s) +
              "</td><td>" + Seconds(p.metrics.ttft_p99_s) + "</td><td>" +
              Seconds(p.metrics.server_time_mean_s) + "</td><td>" + (p.met ? "met" : "missed") +
              "</td></tr>\n";
    }
  }
  html += "</tbody>\n</table>\n</div>\n";
  return html + internal::PageEnd();
}

}  // namespace agentkv::report
