// The HTML report of a ReplayResult: XHTML-style HTML5 with an inline stylesheet and inline SVG
// charts, readable offline and parseable as XML.
//
// The page opens with the verdict and is laid out for a laptop screen (1280 px) with the default
// arms of a small run: the arm table fits without scrolling (compact numbers, the delta under
// its value, headers that wrap between the parts of an arm name) and scrolls inside its own
// box, first column pinned, only when a run has more arms than fit; charts sit two to a row
// where they are narrow enough. It closes with the glossary of the rows it shows.
// Per-arm bar charts are horizontal, so an arm's name is written in full left of its bars
// rather than cut to the width of a bar.
//
// Invariants: every text from the result goes through Escape(); the page loads nothing (no
// scripts, fonts, images or links), so it reads the same offline.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/report/internal/html_page.h"
#include "agentkv/report/internal/replay_charts.h"
#include "agentkv/report/internal/svg_chart.h"
#include "agentkv/report/internal/verdict_text.h"
#include "agentkv/report/replay_glossary.h"
#include "agentkv/report/replay_report.h"
#include "agentkv/report/replay_verdict.h"

namespace agentkv::report {

using internal::ArmColor;
using internal::Escape;
using internal::Figure;
using internal::TickLabel;
using sim::ArmResult;
using sim::MeasuredRun;
using sim::RampResult;
using sim::RampStep;
using sim::ReplayResult;
using sim::ReplaySetup;
namespace {

// ---- Page ----------------------------------------------------------------------------------

std::string DeltaClass(MetricSense sense, double change) {
  if (std::fabs(change) < 5e-4 || sense == MetricSense::kNeutral) return "flat";
  const bool up = change > 0;
  return up == (sense == MetricSense::kHigherIsBetter) ? "good" : "bad";
}

std::string SetupList(const ReplayResult& result) {
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
  for (const std::string& note : s.workload_notes) rows.emplace_back("trace", note);
  if (ideal) {
    const ArmResult& arm = result.arms[*ideal];
    rows.emplace_back("ideal token hit ratio",
                      TickLabel(arm.token_hit_ratio_device + arm.token_hit_ratio_host) + " (" +
                          arm.arm + ", device+host)");
  }
  std::string html = "<dl class=\"setup\">\n";
  for (const auto& [name, value] : rows) {
    html += "<div><dt>" + Escape(name) + "</dt><dd>" + Escape(value) + "</dd></div>\n";
  }
  return html + "</dl>\n";
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

// An arm name for a column header, with line-break opportunities before each '+' and after
// each '-' ("+stall-offload+host-tier" wraps as "+stall-", "offload", "+host-tier"), so that
// the column is as narrow as its numbers.
std::string WrappableName(const std::string& name) {
  const std::string escaped = Escape(name);
  std::string out;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '+' && i > 0) out += "<wbr/>";
    out += escaped[i];
    if (escaped[i] == '-' && i + 1 < escaped.size()) out += "<wbr/>";
  }
  return out;
}

// A share of a reference gap past 100 % (ShareOfBoundText).
constexpr char kExceeds[] = "exceeds the bound";

// The verdict (replay_verdict.h) as the page's opening box.
std::string VerdictSection(const ReplayResult& result) {
  const std::vector<VerdictLine> lines = VerdictLines(result, DecideVerdict(result));
  if (lines.empty()) return "";
  return internal::VerdictBoxHtml("Each arm against " + result.arms[*BaselineArmIndex(result)].arm +
                                      ", on mean server time and uncached tokens (lower is "
                                      "better for both).",
                                  lines);
}

// Every row of the table with its definition (replay_glossary.h), in table order, each label
// once; then the table's notation.
std::string GlossarySection(const ReplayResult& result) {
  std::string html = "<h2 id=\"glossary\">Glossary</h2>\n<dl class=\"glossary\">\n";
  std::vector<std::string> seen;
  for (const ReplayTableRow& row : ReplayTableRows(result, NumberStyle::kCompact)) {
    const std::string definition = RowDefinition(row);
    const std::string key = definition + row.label;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    std::string label = row.label;
    while (label.starts_with(" ")) label.erase(0, 1);
    html += "<div><dt>" + Escape(label) + "</dt><dd>" + Escape(definition) + "</dd></div>\n";
  }
  static constexpr std::pair<const char*, const char*> kNotation[] = {
      {"(+3.1%)",
       "under a value: its change against the baseline, (arm - baseline) / baseline; "
       "green is better, red worse, grey no direction; (=) no change"},
      {"exceeds the bound",
       "a share of a reference gap above 100 %: the arm does better than "
       "its section's reference arm; the exact share is the cell's "
       "tooltip"},
      {"-", "unset: no gap to share (the references are equal) or no value"},
      {"colours", "one per arm, the same in the table's headers and every chart"}};
  for (const auto& [term, meaning] : kNotation) {
    html += "<div><dt>" + Escape(term) + "</dt><dd>" + Escape(meaning) + "</dd></div>\n";
  }
  return html + "</dl>\n";
}

// The arm table: compact numbers with the delta under each value; a cell whose compact text
// rounds the full one carries the full value and delta as its tooltip.
std::string ArmTable(const ReplayResult& result) {
  const std::vector<ReplayTableRow> rows = ReplayTableRows(result, NumberStyle::kCompact);
  const std::vector<ReplayTableRow> full = ReplayTableRows(result, NumberStyle::kFull);
  std::string html = "<div class=\"table-box\">\n<table class=\"arms\">\n<thead><tr>";
  html += "<th class=\"metric\" scope=\"col\">metric</th>";
  for (size_t i = 0; i < result.arms.size(); ++i) {
    html += "<th scope=\"col\" style=\"border-top: 4px solid " + std::string(ArmColor(i)) +
            "\" title=\"" + Escape(result.arms[i].description) + "\">" +
            WrappableName(result.arms[i].arm) + "</th>";
  }
  html += "</tr></thead>\n<tbody>\n";
  std::string section;
  for (size_t r = 0; r < rows.size(); ++r) {
    const ReplayTableRow& row = rows[r];
    if (row.section != section) {
      section = row.section;
      html += "<tr class=\"section\"><th colspan=\"" + std::to_string(result.arms.size() + 1) +
              "\" scope=\"rowgroup\">" + Escape(section) + "</th></tr>\n";
    }
    html += "<tr><th scope=\"row\" title=\"" + Escape(RowDefinition(row)) + "\">" +
            Escape(row.label) + "</th>";
    for (size_t c = 0; c < row.cells.size(); ++c) {
      const ReplayTableCell& cell = row.cells[c];
      const ReplayTableCell& exact = full[r].cells[c];
      html += "<td";
      if (cell.value == kExceeds) {
        // Two lines, as narrow as a number: the exact share is the tooltip.
        html += " class=\"over\" title=\"" + Escape(TickLabel(100 * cell.number) + "% of the gap") +
                "\">exceeds<span class=\"d\">the bound</span></td>";
        continue;
      }
      if (exact.value != cell.value || exact.delta != cell.delta) {
        html += " title=\"" + Escape(exact.value + (exact.delta.empty() ? "" : " ") + exact.delta) +
                "\"";
      }
      html += ">" + Escape(cell.value);
      if (cell.change) {
        html += "<span class=\"d " + DeltaClass(row.sense, *cell.change) + "\">" +
                Escape(cell.delta) + "</span>";
      }
      html += "</td>";
    }
    html += "</tr>\n";
  }
  return html + "</tbody>\n</table>\n</div>\n";
}

// An inline swatch for a caption (HTML, not escaped again).
std::string CaptionSwatch(const std::string& style) {
  return "<span class=\"swatch\" style=\"" + style + "\"></span>";
}

// "name: n, name: n" of counts by kind; "none" when empty.
std::string Counts(const std::vector<std::pair<std::string, int64_t>>& counts) {
  std::string text;
  for (const auto& [name, count] : counts) {
    text += (text.empty() ? "" : ", ") + name + ": " + std::to_string(count);
  }
  return text.empty() ? "none" : text;
}

// What a measured run (`agentkv load`) adds per arm: the client's side, and the ramp's steps.
std::string MeasuredSection(const ReplayResult& result) {
  std::string html;
  for (const ArmResult& arm : result.arms) {
    if (!arm.measured.has_value()) continue;
    const MeasuredRun& m = *arm.measured;
    const std::vector<std::pair<std::string, std::string>> rows = {
        {"target", m.target},
        {"time scale", TickLabel(m.time_scale)},
        {"wall / client CPU (s)", TickLabel(m.wall_s) + " / " + TickLabel(m.client_cpu_s)},
        {"first 90 % of requests (req/s)", TickLabel(m.first_90_percent_requests_per_s)},
        {"inter-token latency p50 / p95 (s)",
         TickLabel(m.inter_token.p50_s) + " / " + TickLabel(m.inter_token.p95_s)},
        {"attempts / retries / failed requests", std::to_string(m.attempts) + " / " +
                                                     std::to_string(m.retries) + " / " +
                                                     std::to_string(m.requests_failed)},
        {"errors", Counts(m.errors)},
        {"sessions closed / close errors",
         std::to_string(m.sessions_closed) + " / " + Counts(m.close_errors)},
        {"stopped early",
         m.stopped ? "yes (" + std::to_string(m.requests_cancelled) + " requests cancelled)"
                   : "no"}};
    html += "<h3>" + Escape(arm.arm) + "</h3>\n<dl class=\"setup\">\n";
    for (const auto& [name, value] : rows) {
      html += "<div><dt>" + Escape(name) + "</dt><dd>" + Escape(value) + "</dd></div>\n";
    }
    html += "</dl>\n";
    if (!m.ramp.has_value()) continue;
    const RampResult& ramp = *m.ramp;
    html += "<p>Ramp: " + std::to_string(ramp.users_held) + " users held within a TTFT p95 of " +
            TickLabel(ramp.ttft_slo_s) + " s" +
            (ramp.slo_exceeded ? "" : " (the workload ran out of users first)") + ".</p>\n";
    html +=
        "<table class=\"arms\"><thead><tr><th scope=\"col\">users</th>"
        "<th scope=\"col\">requests</th><th scope=\"col\">TTFT p95 (s)</th></tr></thead>"
        "\n<tbody>\n";
    for (const RampStep& step : ramp.steps) {
      html += "<tr><td>" + std::to_string(step.users) + "</td><td>" +
              std::to_string(step.requests) + "</td><td>" + TickLabel(step.ttft_p95_s) +
              "</td></tr>\n";
    }
    html += "</tbody></table>\n";
  }
  return html.empty() ? html : "<h2 id=\"measured\">Measured</h2>\n" + html;
}

}  // namespace

std::string ReplayResultHtml(const ReplayResult& result) {
  // A measurement's own page says so (agentkv load writes one with its arms measured).
  const bool measured = !result.arms.empty() &&
                        std::all_of(result.arms.begin(), result.arms.end(),
                                    [](const ArmResult& a) { return a.measured.has_value(); });
  const std::string title =
      std::string(measured ? "agentkv load: " : "agentkv replay: ") + result.setup.workload;
  std::string html = internal::PageStart(title);
  html += VerdictSection(result);
  html += SetupList(result);
  html += "<h2 id=\"results\">Results</h2>\n";
  html += result.arms.empty() ? std::string("<p>No arms.</p>\n") : ArmTable(result);
  html += MeasuredSection(result);
  html += "<h2 id=\"charts\">Charts</h2>\n";
  html += "<div class=\"pair\">\n";
  html += Figure("Time to first token", "(per request, p50 / p95 / p99, seconds)",
                 internal::PercentileChart(result, "TTFT per arm: p50, p95, p99", &ArmResult::ttft,
                                           "TTFT (s)"));
  html += Figure("Queueing delay", "(per request, arrival to first admission, p50 / p95 / p99)",
                 internal::PercentileChart(result, "Queueing delay per arm: p50, p95, p99",
                                           &ArmResult::queueing_delay, "queueing delay (s)"));
  html += "</div>\n";
  html += Figure("Session time against the baseline",
                 "(one panel per arm: each quantile of its session times, shortest to longest "
                 "on the x axis, over the baseline's same quantile, minus 1; the line in the "
                 "baseline's colour at 0 % is no change; one shared scale)",
                 internal::SessionTimeShiftPanels(result));
  html += Figure("KV usage over time",
                 "(fraction of device KV, summed over engines, fullest sample per time bucket: " +
                     CaptionSwatch("background: #555; opacity: 0.9") + "held by requests " +
                     CaptionSwatch("background: #555; opacity: 0.25") +
                     "cached, evictable; gaps: no request in flight; x axis in minutes)",
                 internal::KvUsagePanels(result));
  html += "<div class=\"pair\">\n";
  html += Figure("Token hit ratio", "(device solid, host tier light; dashed: the ideal)",
                 internal::HitRatioChart(result));
  html += Figure("Recomputed prompt tokens", "(cold, evicted recompute, preempted recompute)",
                 internal::RecomputeChart(result));
  html += "</div>\n";
  html += "<h2 id=\"arms\">Arms</h2>\n" + ArmList(result);
  if (!result.arms.empty()) html += GlossarySection(result);
  return html + internal::PageEnd();
}

}  // namespace agentkv::report
