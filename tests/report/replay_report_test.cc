// Tests of the replay report: the terminal table (arm columns, signed deltas against the
// baseline, 160-column fit, server time and the shares of the ideal), the JSON (parses, arm
// order, field values, deltas, server time and share keys, determinism) and the HTML
// (well-formed XML, its SVG charts, escaped arm names, compact cells with exact tooltips, no NaN
// or infinity even for degenerate input, downsampled series, the new rows). The charts' own
// tests are in internal/replay_charts_test.cc; the page in a browser in
// replay_report_browser_test.cc. The results are built by hand so every expected delta
// is known.
#include "agentkv/report/replay_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/sim/replay/replay_result.h"

namespace agentkv::report {

using sim::ArmResult;
using sim::ReplayResult;
using sim::SummarizeDurations;
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kOddName[] = "a&b<c>\"q\"";

ArmResult Arm(const std::string& name, double device_ratio, double host_ratio,
              int64_t evicted_recompute) {
  ArmResult arm;
  arm.arm = name;
  arm.description = "arm " + name + " & co";
  arm.requests_issued = 1200;
  arm.requests_completed = 1200;
  arm.sessions = 24;
  arm.conversations = 60;
  arm.prompt_tokens = 1'000'000;
  arm.prompt_blocks = 62'500;
  arm.token_hit_ratio_device = device_ratio;
  arm.token_hit_ratio_host = host_ratio;
  arm.block_hit_ratio_device = device_ratio;
  arm.block_hit_ratio_host = host_ratio;
  arm.cold_tokens = 40'000;
  arm.evicted_recompute_tokens = evicted_recompute;
  arm.uncached_tokens = arm.cold_tokens + evicted_recompute;
  arm.preempted_recompute_tokens = 5'000;
  arm.makespan_s = 600;
  arm.output_tokens = 300'000;
  arm.requests_per_s = 2.0;
  arm.output_tokens_per_s = 500;
  for (int i = 1; i <= 24; ++i) arm.session_times_s.push_back(3.0 * i);
  std::vector<double> times = arm.session_times_s;
  arm.session_time = SummarizeDurations(times);
  arm.queueing_delay = {1200, 0.5, 0.2, 1.0, 1.5, 3.0, 4.0};
  arm.ttft = {1200, 0.8, 0.5, 1.5, 2.0, 4.0, 5.0};
  arm.preemptions = 10;
  arm.device_evictions = 1000;
  arm.agentic_kv = {{"agentic_kv/admission/admit", 1100},
                    {"agentic_kv/admission/wait", 40},
                    {"agentic_kv/budget/ceiling", 1e6}};
  // 20,000 polls 2 s apart with a saw-tooth occupancy.
  for (int64_t i = 0; i < 20'000; ++i) {
    arm.kv_usage.push_back(
        {TimeNs::Seconds(2.0 * static_cast<double>(i)), (i % 100) * 1000, 500, 100'000, i % 7});
  }
  return arm;
}

ReplayResult FourArms() {
  ReplayResult result;
  result.setup.workload = "synthetic & <24 sessions>";
  result.setup.seed = 7;
  result.setup.num_engines = 2;
  result.setup.router = "prefix-aware";
  result.setup.model = "llama-3.1-8b";
  result.setup.gpu = "h100";
  result.setup.tp = 1;
  result.setup.tokens_per_block = 16;
  result.setup.device_tokens_per_engine = 100'000;
  result.setup.host_tokens_per_engine = 400'000;
  result.arms.push_back(Arm("baseline", 0.40, 0, 20'000));
  result.arms.push_back(Arm("+host-tier", 0.40, 0.10, 10'000));
  result.arms.push_back(Arm("infinite-cache", 0.80, 0, 0));
  result.arms.push_back(Arm(kOddName, 0.30, 0, 30'000));
  // Server time per session (mean 10, 9, 6 and 12 s) and the shares of the ideal: uncached and
  // evicted recompute tokens 0, 0.5, 1, -0.5; mean server time 0, 0.25, 1, -0.5.
  const double server_mean[] = {10, 9, 6, 12};
  for (size_t i = 0; i < result.arms.size(); ++i) {
    const double m = server_mean[i];
    result.arms[i].server_time = {24, m, m - 1, m + 1, m + 2, m + 3, m + 4};
    result.arms[i].request_server_time = {1200, m / 50, m / 60, m / 40, m / 30, m / 20, m / 10};
  }
  sim::FillIdealShares(result);
  return result;
}

// One arm, no samples, every number zero.
ReplayResult Degenerate() {
  ReplayResult result;
  ArmResult arm;
  arm.arm = "baseline";
  result.arms.push_back(arm);
  return result;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The table line of metric `label` (indented by two spaces in the table).
std::string RowOf(const std::string& table, const std::string& label) {
  for (const std::string& line : Lines(table)) {
    if (line.rfind("  " + label + "  ", 0) == 0) return line;
  }
  return "";
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Removes every occurrence of `word`.
std::string Without(std::string text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at)) {
    text.erase(at, word.size());
  }
  return text;
}

// Whether `text` is well-formed UTF-8 (no cut multi-byte characters).
bool IsValidUtf8(const std::string& text) {
  size_t pending = 0;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (pending > 0) {
      if ((byte & 0xC0) != 0x80) return false;
      --pending;
    } else if (byte >= 0xF0) {
      pending = 3;
    } else if (byte >= 0xE0) {
      pending = 2;
    } else if (byte >= 0xC0) {
      pending = 1;
    } else if (byte >= 0x80) {
      return false;
    }
  }
  return pending == 0;
}

void ExpectWellFormedXml(const std::string& html) {
  std::istringstream in(html);
  boost::property_tree::ptree tree;
  EXPECT_NO_THROW(boost::property_tree::read_xml(in, tree));
  // The parser accepts a bare '&'; XML does not.
  for (size_t at = html.find('&'); at != std::string::npos; at = html.find('&', at + 1)) {
    const std::string rest = html.substr(at, 6);
    EXPECT_TRUE(rest.starts_with("&amp;") || rest.starts_with("&lt;") || rest.starts_with("&gt;") ||
                rest.starts_with("&quot;") || rest.starts_with("&#"))
        << "bare & at " << at << ": " << html.substr(at, 20);
  }
}

// ---- Rows ------------------------------------------------------------------------------------

TEST(ReplayTableRowsTest, BaselineIsTheArmNamedBaselineElseTheFirst) {
  ReplayResult result = FourArms();
  EXPECT_EQ(BaselineArmIndex(result), 0u);
  EXPECT_EQ(IdealArmIndex(result), 2u);
  std::swap(result.arms[0], result.arms[1]);
  EXPECT_EQ(BaselineArmIndex(result), 1u);
  result.arms[1].arm = "lru";
  EXPECT_EQ(BaselineArmIndex(result), 0u);
  EXPECT_EQ(BaselineArmIndex(ReplayResult{}), std::nullopt);
  EXPECT_EQ(IdealArmIndex(Degenerate()), std::nullopt);
}

TEST(ReplayTableRowsTest, CellsCarryValuesAndRelativeChanges) {
  const std::vector<ReplayTableRow> rows = ReplayTableRows(FourArms(), NumberStyle::kFull);
  const auto row = std::find_if(rows.begin(), rows.end(), [](const ReplayTableRow& r) {
    return r.key == "evicted_recompute_tokens";
  });
  ASSERT_NE(row, rows.end());
  ASSERT_EQ(row->cells.size(), 4u);
  EXPECT_EQ(row->sense, MetricSense::kLowerIsBetter);
  EXPECT_EQ(row->cells[0].value, "20,000");
  EXPECT_FALSE(row->cells[0].change.has_value());
  EXPECT_EQ(row->cells[0].delta, "");
  EXPECT_DOUBLE_EQ(row->cells[1].number, 10'000);
  ASSERT_TRUE(row->cells[1].change.has_value());
  EXPECT_DOUBLE_EQ(*row->cells[1].change, -0.5);
  EXPECT_EQ(row->cells[1].delta, "(-50.0%)");
  EXPECT_EQ(row->cells[3].delta, "(+50.0%)");
}

TEST(ReplayTableRowsTest, ShowsAdmissionSeriesAndShareOfIdeal) {
  const std::vector<ReplayTableRow> rows = ReplayTableRows(FourArms(), NumberStyle::kFull);
  std::vector<std::string> labels;
  for (const ReplayTableRow& r : rows) labels.push_back(r.label);
  EXPECT_THAT(labels, ::testing::Contains("admission/admit"));
  EXPECT_THAT(labels, ::testing::Contains("admission/wait"));
  // Not an admission counter.
  EXPECT_THAT(labels, Not(::testing::Contains("budget/ceiling")));
  const auto share = std::find(labels.begin(), labels.end(), "share of ideal hit ratio");
  ASSERT_NE(share, labels.end());
  const ReplayTableRow& row = rows[static_cast<size_t>(share - labels.begin())];
  EXPECT_EQ(row.cells[0].value, "50.0%");  // 0.40 / 0.80
  EXPECT_EQ(row.cells[1].value, "62.5%");  // 0.50 / 0.80
  EXPECT_EQ(row.cells[2].value, "100.0%");
  EXPECT_EQ(row.cells[1].delta, "");
}

// The row labelled `label` in `rows`, or nullptr.
const ReplayTableRow* FindRow(const std::vector<ReplayTableRow>& rows, const std::string& label) {
  const auto row = std::find_if(rows.begin(), rows.end(),
                                [&label](const ReplayTableRow& r) { return r.label == label; });
  return row == rows.end() ? nullptr : &*row;
}

TEST(ReplayTableRowsTest, ShowsServerTimeRightAfterSessionTimeWithDeltas) {
  const std::vector<ReplayTableRow> rows = ReplayTableRows(FourArms(), NumberStyle::kFull);
  std::vector<std::string> labels;
  for (const ReplayTableRow& r : rows) labels.push_back(r.label);
  const auto session = std::find(labels.begin(), labels.end(), "session time p99 (s)");
  ASSERT_NE(session, labels.end());
  EXPECT_THAT(std::vector<std::string>(session + 1, session + 5),
              ::testing::ElementsAre("server time mean (s)", "server time p50 (s)",
                                     "server time p95 (s)", "server time p99 (s)"));
  const ReplayTableRow& mean = *FindRow(rows, "server time mean (s)");
  EXPECT_EQ(mean.section, "latency");
  EXPECT_EQ(mean.key, "server_time_mean_s");
  EXPECT_EQ(mean.sense, MetricSense::kLowerIsBetter);
  EXPECT_EQ(mean.cells[0].value, "10.00");
  EXPECT_EQ(mean.cells[1].value, "9.000");
  EXPECT_EQ(mean.cells[1].delta, "(-10.0%)");
  EXPECT_EQ(FindRow(rows, "server time p95 (s)")->cells[3].value, "14.00");
}

TEST(ReplayTableRowsTest, ShowsSharesOfTheIdealAfterTheLatencyRows) {
  const std::vector<ReplayTableRow> rows = ReplayTableRows(FourArms(), NumberStyle::kFull);
  std::vector<std::string> sections;
  for (const ReplayTableRow& r : rows) {
    if (sections.empty() || sections.back() != r.section) sections.push_back(r.section);
  }
  const std::string share_section = "share of ideal (baseline = 0%, infinite-cache = 100%)";
  EXPECT_THAT(sections, ::testing::ElementsAre("prefix cache", "recompute", "throughput", "latency",
                                               share_section, "engines", "lifecycle", "admission",
                                               "conservation"));
  std::vector<std::string> shares;
  for (const ReplayTableRow& r : rows) {
    if (r.section != share_section) continue;
    // Not in delta_vs_baseline, and no deltas: a delta of shares repeats the metric's own.
    EXPECT_EQ(r.key, "");
    std::string line = r.label + ":";
    for (const ReplayTableCell& cell : r.cells) {
      line += " " + cell.value;
      EXPECT_EQ(cell.delta, "");
    }
    shares.push_back(line);
  }
  EXPECT_THAT(shares, ::testing::ElementsAre("uncached tokens: 0.0% 50.0% 100.0% -50.0%",
                                             "evicted recompute tokens: 0.0% 50.0% 100.0% -50.0%",
                                             "server time mean: 0.0% 25.0% 100.0% -50.0%"));
}

TEST(ReplayTableRowsTest, SharesNeedBothReferenceArmsAndAGap) {
  ReplayResult result = FourArms();
  // No gap in server time: that row shows "-" (a NaN number), the token rows stay.
  result.arms[0].server_time.mean_s = result.arms[2].server_time.mean_s;
  sim::FillIdealShares(result);
  std::vector<ReplayTableRow> rows = ReplayTableRows(result, NumberStyle::kFull);
  const ReplayTableRow* server = FindRow(rows, "server time mean");
  ASSERT_NE(server, nullptr);
  for (const ReplayTableCell& cell : server->cells) {
    EXPECT_EQ(cell.value, "-");
    EXPECT_TRUE(std::isnan(cell.number));
  }
  EXPECT_EQ(FindRow(rows, "evicted recompute tokens")->section, "recompute");
  EXPECT_THAT(FormatReplayTable(result), HasSubstr("share of ideal"));
  // No infinite-cache arm: no shares and no section.
  result.arms[2].arm = "unbounded";
  sim::FillIdealShares(result);
  rows = ReplayTableRows(result, NumberStyle::kFull);
  EXPECT_EQ(FindRow(rows, "server time mean"), nullptr);
  EXPECT_THAT(FormatReplayTable(result), Not(HasSubstr("share of ideal")));
  EXPECT_THAT(ReplayResultHtml(result), Not(HasSubstr("share of ideal")));
}

// ---- Terminal table ----------------------------------------------------------------------------

TEST(FormatReplayTableTest, HasEveryArmAndSignedDeltas) {
  const std::string table = FormatReplayTable(FourArms());
  for (const ArmResult& arm : FourArms().arms) EXPECT_THAT(table, HasSubstr(arm.arm));
  EXPECT_THAT(table, HasSubstr("synthetic & <24 sessions>"));
  EXPECT_THAT(table, HasSubstr("ideal token hit ratio (infinite-cache, device+host): 0.8000"));
  EXPECT_THAT(RowOf(table, "evicted recompute tokens"), HasSubstr("10,000 (-50.0%)"));
  EXPECT_THAT(RowOf(table, "evicted recompute tokens"), HasSubstr("30,000 (+50.0%)"));
  EXPECT_THAT(RowOf(table, "token hit ratio dev+host"), HasSubstr("0.5000 (+25.0%)"));
  EXPECT_THAT(RowOf(table, "token hit ratio dev+host"), HasSubstr("0.3000 (-25.0%)"));
  EXPECT_THAT(RowOf(table, "requests issued"), HasSubstr("1,200 (=)"));
  EXPECT_THAT(RowOf(table, "server time mean (s)"), HasSubstr("9.000 (-10.0%)"));
  EXPECT_THAT(RowOf(table, "server time mean"), HasSubstr("25.0%"));
  EXPECT_THAT(table, HasSubstr("\nshare of ideal (baseline = 0%, infinite-cache = 100%)\n"));
  // The baseline column has no delta: the first number after the label is plain.
  EXPECT_THAT(RowOf(table, "preemptions"), ::testing::StartsWith("  preemptions"));
  for (const std::string& line : Lines(table)) EXPECT_LE(line.size(), 160u) << line;
}

TEST(FormatReplayTableTest, VerdictAndLegendComeFirstWrappedToTheTableWidth) {
  ReplayResult result = FourArms();
  std::string description;
  for (int i = 0; i < 40; ++i) description += "feature" + std::to_string(i) + " ";
  result.arms[1].description = description;
  const std::string text = FormatReplayTable(result);
  const size_t table = text.find("\nmetric ");
  ASSERT_NE(table, std::string::npos);
  const size_t verdict = text.find("\nverdict (each arm against baseline");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(verdict, text.find("\narms:\n"));
  EXPECT_LT(text.find("\narms:\n"), table);
  // +host-tier: -10 % server time, -25 % uncached tokens (30,000 of 40,000).
  EXPECT_THAT(text, HasSubstr("\n  turn on          +host-tier (server time -10%, uncached "));
  size_t table_width = 0;
  for (const std::string& line : Lines(text.substr(table + 1))) {
    table_width = std::max(table_width, line.size());
  }
  const std::vector<std::string> head = Lines(text.substr(0, table));
  for (const std::string& line : head) EXPECT_LE(line.size(), table_width) << line;
  // The description is all there, its continuation lines under its first word.
  std::string legend;
  for (const std::string& line : head) {
    if (line.starts_with("  +host-tier  ") || line.starts_with("                ")) legend += line;
  }
  EXPECT_THAT(legend, HasSubstr("feature0"));
  EXPECT_THAT(legend, HasSubstr("feature39"));
}

TEST(FormatReplayTableTest, SharesPastTheBoundSaySo) {
  ReplayResult result = FourArms();
  result.arms[1].ideal_share.server_time_mean = 8.84;
  EXPECT_THAT(RowOf(FormatReplayTable(result), "server time mean"), HasSubstr("exceeds the bound"));
  EXPECT_THAT(RowOf(FormatReplayTable(result), "server time mean"), Not(HasSubstr("884")));
  const std::string html = ReplayResultHtml(result);
  EXPECT_THAT(html, HasSubstr("title=\"884% of the gap\">exceeds<span class=\"d\">the bound"));
  EXPECT_THAT(html, Not(HasSubstr(">884.0%")));
}

TEST(FormatReplayTableTest, EightWideArmsFitIn160Columns) {
  ReplayResult result = FourArms();
  result.arms.clear();
  for (int i = 0; i < 8; ++i) {
    ArmResult arm = Arm("+lifecycle+admission+host-tier-" + std::to_string(i), 0.1 * i, 0.01 * i,
                        123'456'789 * (i + 1));
    arm.cold_tokens = 987'654'321;
    result.arms.push_back(arm);
  }
  result.arms[0].arm = "baseline";
  const std::string table = FormatReplayTable(result);
  for (const std::string& line : Lines(table)) EXPECT_LE(line.size(), 160u) << line;
  // Compact numbers, and the full names in the arm list above the table.
  EXPECT_THAT(table, HasSubstr("988M"));
  EXPECT_THAT(table, HasSubstr("+lifecycle+admission+host-tier-7  arm"));
}

TEST(FormatReplayTableTest, TooManyArmsSplitIntoPanelsLedByTheBaseline) {
  ReplayResult result = FourArms();
  result.arms.clear();
  for (int i = 0; i < 14; ++i) {
    ArmResult arm =
        Arm("+subagent-demotion-" + std::to_string(i), 0.05 * i, 0.01 * i, 123'456'789 * (i + 1));
    arm.cold_tokens = 987'654'321;
    result.arms.push_back(arm);
  }
  result.arms[0].arm = "baseline";
  const std::string table = FormatReplayTable(result);
  std::vector<std::string> headers;
  for (const std::string& line : Lines(table)) {
    EXPECT_LE(line.size(), 160u) << line;
    if (line.rfind("metric ", 0) == 0) headers.push_back(line);
  }
  ASSERT_GE(headers.size(), 2u) << table;
  // Every panel starts with the baseline; every arm is in exactly one panel, named in full.
  for (const std::string& header : headers) {
    EXPECT_THAT(header, ::testing::ContainsRegex("^metric +baseline ")) << header;
  }
  for (int i = 1; i < 14; ++i) {
    const std::string name = "+subagent-demotion-" + std::to_string(i);
    int panels_with_it = 0;
    for (const std::string& header : headers) {
      std::istringstream words(header);
      for (std::string word; words >> word;) panels_with_it += word == name ? 1 : 0;
    }
    EXPECT_EQ(panels_with_it, 1) << name;
  }
  // Each panel repeats the rows, with the delta against the baseline in every cell.
  size_t rows_named = 0;
  for (const std::string& line : Lines(table)) {
    rows_named += line.rfind("  evicted recompute tokens", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(rows_named, headers.size());
}

TEST(FormatReplayTableTest, DegenerateResultHasNoNonFiniteText) {
  ReplayResult result = Degenerate();
  result.arms[0].makespan_s = std::numeric_limits<double>::quiet_NaN();
  const std::string table = FormatReplayTable(result);
  EXPECT_THAT(table, HasSubstr("baseline"));
  EXPECT_THAT(Lower(table), Not(HasSubstr("nan")));
  EXPECT_THAT(Lower(table), Not(HasSubstr("inf")));
  EXPECT_THAT(FormatReplayTable(ReplayResult{}), HasSubstr("(no arms)"));
}

// ---- JSON --------------------------------------------------------------------------------------

TEST(ReplayResultJsonTest, ParsesWithArmsInOrderAndTheirValues) {
  const ReplayResult result = FourArms();
  const std::string text = ReplayResultJson(result);
  boost::json::error_code ec;
  const boost::json::value json = boost::json::parse(text, ec);
  ASSERT_FALSE(ec) << ec.message();
  const boost::json::object& root = json.as_object();
  EXPECT_EQ(root.at("baseline").as_string(), "baseline");
  const boost::json::object& setup = root.at("setup").as_object();
  EXPECT_EQ(setup.at("workload").as_string(), "synthetic & <24 sessions>");
  EXPECT_EQ(setup.at("seed").to_number<int64_t>(), 7);
  EXPECT_EQ(setup.at("host_tokens_per_engine").as_int64(), 400'000);
  const boost::json::array& arms = root.at("arms").as_array();
  ASSERT_EQ(arms.size(), 4u);
  for (size_t i = 0; i < arms.size(); ++i) {
    EXPECT_EQ(arms[i].at("arm").as_string(), result.arms[i].arm);
  }
  const boost::json::object& host = arms[1].as_object();
  EXPECT_EQ(host.at("evicted_recompute_tokens").as_int64(), 10'000);
  EXPECT_DOUBLE_EQ(host.at("token_hit_ratio_host").as_double(), 0.10);
  EXPECT_DOUBLE_EQ(host.at("makespan_s").as_double(), 600.0);
  EXPECT_EQ(host.at("session_time").at("count").as_int64(), 24);
  EXPECT_DOUBLE_EQ(host.at("session_time").at("p50_s").as_double(), 36.0);
  EXPECT_DOUBLE_EQ(host.at("ttft").at("p99_s").as_double(), 4.0);
  // agentic_kv keeps the series order.
  const boost::json::object& series = host.at("agentic_kv").as_object();
  ASSERT_EQ(series.size(), 3u);
  EXPECT_EQ(series.begin()->key(), "agentic_kv/admission/admit");
  EXPECT_DOUBLE_EQ(series.at("agentic_kv/budget/ceiling").as_double(), 1e6);
  const boost::json::array& usage = host.at("kv_usage").as_array();
  ASSERT_EQ(usage.size(), 20'000u);
  EXPECT_DOUBLE_EQ(usage[3].at(0).as_double(), 6.0);
  EXPECT_EQ(usage[3].at(1).as_int64(), 3000);
  EXPECT_EQ(usage[3].at(3).as_int64(), 100'000);
  EXPECT_EQ(usage[3].at(4).as_int64(), 3);
  EXPECT_EQ(host.at("session_times_s").as_array().size(), 24u);
}

TEST(ReplayResultJsonTest, HasServerTimeAndTheSharesOfTheIdeal) {
  const boost::json::value json = boost::json::parse(ReplayResultJson(FourArms()));
  const boost::json::array& arms = json.at("arms").as_array();
  const boost::json::object& host = arms[1].as_object();
  const boost::json::object& server = host.at("server_time").as_object();
  EXPECT_EQ(server.at("count").as_int64(), 24);
  EXPECT_DOUBLE_EQ(server.at("mean_s").as_double(), 9.0);
  EXPECT_DOUBLE_EQ(server.at("p50_s").as_double(), 8.0);
  EXPECT_DOUBLE_EQ(server.at("p95_s").as_double(), 11.0);
  EXPECT_DOUBLE_EQ(server.at("p99_s").as_double(), 12.0);
  EXPECT_EQ(host.at("request_server_time").at("count").as_int64(), 1200);
  EXPECT_DOUBLE_EQ(host.at("request_server_time").at("mean_s").as_double(), 9.0 / 50);
  EXPECT_DOUBLE_EQ(host.at("uncached_tokens_ideal_share").as_double(), 0.5);
  EXPECT_DOUBLE_EQ(host.at("evicted_recompute_tokens_ideal_share").as_double(), 0.5);
  EXPECT_DOUBLE_EQ(host.at("server_time_mean_ideal_share").as_double(), 0.25);
  EXPECT_DOUBLE_EQ(arms[0].at("server_time_mean_ideal_share").as_double(), 0.0);
  EXPECT_DOUBLE_EQ(arms[2].at("uncached_tokens_ideal_share").as_double(), 1.0);
  EXPECT_DOUBLE_EQ(arms[3].at("server_time_mean_ideal_share").as_double(), -0.5);
  const boost::json::object& delta = host.at("delta_vs_baseline").as_object();
  EXPECT_DOUBLE_EQ(delta.at("server_time_mean_s").as_double(), -0.1);
  EXPECT_TRUE(delta.contains("server_time_p99_s"));
  // The server time sits right after the other duration summaries.
  std::vector<std::string> keys;
  for (const auto& member : host) keys.emplace_back(member.key());
  const auto at = std::find(keys.begin(), keys.end(), "admission_wait");
  ASSERT_NE(at, keys.end());
  EXPECT_EQ(*(at + 1), "server_time");
}

TEST(ReplayResultJsonTest, UnsetSharesAreNull) {
  ReplayResult result = FourArms();
  result.arms.erase(result.arms.begin() + 2);  // The infinite-cache arm.
  sim::FillIdealShares(result);
  const boost::json::value json = boost::json::parse(ReplayResultJson(result));
  for (const boost::json::value& arm : json.at("arms").as_array()) {
    for (const char* key : {"uncached_tokens_ideal_share", "evicted_recompute_tokens_ideal_share",
                            "server_time_mean_ideal_share"}) {
      ASSERT_TRUE(arm.as_object().contains(key)) << key;
      EXPECT_TRUE(arm.at(key).is_null()) << key;
    }
  }
  // A degenerate result (never filled) has every key too.
  const boost::json::value degenerate = boost::json::parse(ReplayResultJson(Degenerate()));
  EXPECT_TRUE(degenerate.at("arms").at(0).at("server_time_mean_ideal_share").is_null());
  EXPECT_EQ(degenerate.at("arms").at(0).at("server_time").at("count").as_int64(), 0);
}

TEST(ReplayResultJsonTest, SharesOfTheOracleAreNullWithoutAnOracleArmAndSetWithOne) {
  ReplayResult result = FourArms();
  sim::FillIdealShares(result);
  constexpr const char* kKeys[] = {"uncached_tokens_oracle_share",
                                   "evicted_recompute_tokens_oracle_share",
                                   "server_time_mean_oracle_share"};
  const boost::json::value without = boost::json::parse(ReplayResultJson(result));
  for (const boost::json::value& arm : without.at("arms").as_array()) {
    for (const char* key : kKeys) {
      ASSERT_TRUE(arm.as_object().contains(key)) << key;
      EXPECT_TRUE(arm.at(key).is_null()) << key;
    }
  }
  EXPECT_THAT(FormatReplayTable(result), Not(HasSubstr("share of oracle")));
  // The infinite-cache arm renamed "oracle": the shares of the oracle are its shares of ideal.
  result.arms[2].arm = "oracle";
  sim::FillIdealShares(result);
  const boost::json::value with = boost::json::parse(ReplayResultJson(result));
  const boost::json::object& host = with.at("arms").at(1).as_object();
  EXPECT_DOUBLE_EQ(host.at("uncached_tokens_oracle_share").as_double(), 0.5);
  EXPECT_DOUBLE_EQ(host.at("server_time_mean_oracle_share").as_double(), 0.25);
  EXPECT_DOUBLE_EQ(with.at("arms").at(2).at("uncached_tokens_oracle_share").as_double(), 1.0);
  EXPECT_THAT(FormatReplayTable(result),
              HasSubstr("share of oracle (baseline = 0%, oracle = 100%)"));
}

TEST(ReplayResultJsonTest, DeltasAgainstBaselineSkipZeroBaselines) {
  const boost::json::value json = boost::json::parse(ReplayResultJson(FourArms()));
  const boost::json::array& arms = json.at("arms").as_array();
  const boost::json::object& host = arms[1].at("delta_vs_baseline").as_object();
  EXPECT_DOUBLE_EQ(host.at("evicted_recompute_tokens").as_double(), -0.5);
  EXPECT_DOUBLE_EQ(host.at("token_hit_ratio").as_double(), 0.25);
  EXPECT_DOUBLE_EQ(host.at("requests_per_s").as_double(), 0.0);
  // The baseline has no host hits, so there is no relative change to report.
  EXPECT_FALSE(host.contains("token_hit_ratio_host"));
  EXPECT_FALSE(host.contains("ttl_pins"));
  const boost::json::object& odd = arms[3].at("delta_vs_baseline").as_object();
  EXPECT_DOUBLE_EQ(odd.at("evicted_recompute_tokens").as_double(), 0.5);
  const boost::json::object& self = arms[0].at("delta_vs_baseline").as_object();
  EXPECT_DOUBLE_EQ(self.at("evicted_recompute_tokens").as_double(), 0.0);
}

TEST(ReplayResultJsonTest, EqualInputGivesIdenticalBytes) {
  const ReplayResult result = FourArms();
  const std::string first = ReplayResultJson(result);
  const ReplayResult copy = result;
  EXPECT_EQ(first, ReplayResultJson(copy));
  EXPECT_EQ(first, ReplayResultJson(result));
  EXPECT_EQ(first.back(), '\n');
  EXPECT_THAT(first, HasSubstr("\n  \"setup\": {\n    \"workload\": "));
}

TEST(ReplayResultJsonTest, NonFiniteDoublesBecomeNull) {
  ReplayResult result = Degenerate();
  result.arms[0].makespan_s = std::numeric_limits<double>::infinity();
  const std::string text = ReplayResultJson(result);
  const boost::json::value json = boost::json::parse(text);
  EXPECT_TRUE(json.at("arms").at(0).at("makespan_s").is_null());
  EXPECT_THAT(Lower(text), Not(HasSubstr("nan")));
  EXPECT_THAT(Lower(text), Not(HasSubstr("inf")));
  EXPECT_TRUE(json.at("arms").at(0).at("kv_usage").as_array().empty());
}

// ---- HTML --------------------------------------------------------------------------------------

// TTFT and queueing bars, one session-time panel per arm but the baseline (when there are
// sessions), one KV usage panel per arm, hit ratio and recompute bars.
size_t ChartsFor(size_t arms, bool sessions = true) {
  return 4 + arms + (sessions && arms > 1 ? arms - 1 : 0);
}

TEST(ReplayResultHtmlTest, IsWellFormedXmlWithItsCharts) {
  const std::string html = ReplayResultHtml(FourArms());
  ExpectWellFormedXml(html);
  EXPECT_EQ(Count(html, "<svg "), ChartsFor(4));
  EXPECT_EQ(Count(html, "xmlns=\"http://www.w3.org/2000/svg\""), ChartsFor(4));
  EXPECT_EQ(Count(html, "</svg>"), ChartsFor(4));
  EXPECT_EQ(Count(html, "aria-label=\"KV usage over time: "), 4u);
  EXPECT_THAT(html, HasSubstr("aria-label=\"TTFT per arm: p50, p95, p99\""));
  EXPECT_THAT(html, HasSubstr("aria-label=\"Queueing delay per arm: p50, p95, p99\""));
  EXPECT_EQ(Count(html, "aria-label=\"Session time against the baseline, by quantile: "), 3u);
  EXPECT_THAT(html, ::testing::StartsWith("<!DOCTYPE html>"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  // Self-contained: nothing is loaded from elsewhere.
  EXPECT_THAT(html, Not(HasSubstr("href=")));
  EXPECT_THAT(html, Not(HasSubstr(" src=")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
}

// A measured run (agentkv load): one arm with its client block and a ramp.
ReplayResult Measured() {
  ReplayResult result = FourArms();
  result.arms.resize(1);
  sim::MeasuredRun m;
  m.target = "http://127.0.0.1:30000 generate";
  m.time_scale = 10;
  m.attempts = 12;
  m.retries = 2;
  m.requests_failed = 1;
  m.errors = {{"http 503", 2}, {"unavailable", 1}};
  m.close_errors = {{"http 404", 3}};
  m.ramp = sim::RampResult{.period_s = 20,
                           .ttft_slo_s = 1,
                           .steps = {{4, 10, 0.25}, {8, 12, 1.5}},
                           .users_held = 4,
                           .slo_exceeded = true};
  result.arms[0].measured = m;
  return result;
}

TEST(ReplayResultJsonTest, AMeasuredArmCarriesItsClientBlockAndRamp) {
  const boost::json::value json = boost::json::parse(ReplayResultJson(Measured()));
  const boost::json::value& m = json.at("arms").at(0).at("measured");
  EXPECT_EQ(m.at("target").as_string(), "http://127.0.0.1:30000 generate");
  EXPECT_EQ(m.at("time_scale").to_number<double>(), 10.0);
  EXPECT_EQ(m.at("errors").at("http 503").to_number<int64_t>(), 2);
  EXPECT_EQ(m.at("close_errors").at("http 404").to_number<int64_t>(), 3);
  EXPECT_EQ(m.at("ramp").at("users_held").to_number<int64_t>(), 4);
  EXPECT_EQ(m.at("ramp").at("steps").at(1).at("ttft_p95_s").to_number<double>(), 1.5);
  // A simulated arm has no such block.
  EXPECT_FALSE(boost::json::parse(ReplayResultJson(FourArms()))
                   .at("arms")
                   .at(0)
                   .as_object()
                   .contains("measured"));
}

TEST(ReplayResultHtmlTest, OpensWithTheVerdictAndEndsWithTheGlossary) {
  const std::string html = ReplayResultHtml(FourArms());
  const size_t verdict = html.find("<section class=\"verdict\" id=\"verdict\">");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(verdict, html.find("<table class=\"arms\">"));
  EXPECT_THAT(html, HasSubstr("<dt>turn on</dt><dd>+host-tier (server time -10%"));
  const size_t glossary = html.find("<h2 id=\"glossary\">");
  ASSERT_NE(glossary, std::string::npos);
  EXPECT_THAT(html.substr(glossary), HasSubstr("<dt>drops</dt><dd>Blocks removed"));
  // Each row's definition is its label's tooltip; each arm's colour tops its column.
  EXPECT_THAT(html, HasSubstr("<th scope=\"row\" title=\"Blocks moved host -&gt; device"));
  EXPECT_THAT(html, HasSubstr("style=\"border-top: 4px solid #f28e2b\""));
}

TEST(ReplayResultHtmlTest, AMeasuredRunSaysSoAndShowsTheClientAndTheRamp) {
  const std::string html = ReplayResultHtml(Measured());
  ExpectWellFormedXml(html);
  EXPECT_THAT(html, HasSubstr("<title>agentkv load: "));
  EXPECT_THAT(html, HasSubstr("<h2 id=\"measured\">Measured</h2>"));
  EXPECT_THAT(html, HasSubstr("http 503: 2, unavailable: 1"));
  EXPECT_THAT(html, HasSubstr("12 / 2 / 1"));
  EXPECT_THAT(html, HasSubstr("Ramp: 4 users held"));
  EXPECT_EQ(Count(html, "<tr><td>"), 2u);
  const std::string simulated = ReplayResultHtml(FourArms());
  EXPECT_THAT(simulated, HasSubstr("<title>agentkv replay: "));
  EXPECT_THAT(simulated, Not(HasSubstr("id=\"measured\"")));
}

TEST(ReplayResultHtmlTest, EscapesTextFromTheResult) {
  const std::string html = ReplayResultHtml(FourArms());
  EXPECT_THAT(html, HasSubstr("a&amp;b&lt;c&gt;&quot;q&quot;"));
  EXPECT_THAT(html, Not(HasSubstr(kOddName)));
  EXPECT_THAT(html, HasSubstr("synthetic &amp; &lt;24 sessions&gt;"));
  EXPECT_THAT(html, HasSubstr("+host-tier"));
  EXPECT_THAT(html, HasSubstr("infinite-cache"));
  // The delta of the +host-tier arm's hit ratio under its value, coloured as an improvement;
  // the exact value and delta in the tooltip where the cell rounds them.
  EXPECT_THAT(html, HasSubstr("<td title=\"0.5000 (+25.0%)\">0.5000<span class=\"d good\">"
                              "(+25%)</span></td>"));
  EXPECT_THAT(html, HasSubstr("<td title=\"10,000 (-50.0%)\">10.0k<span class=\"d good\">"
                              "(-50%)</span></td>"));
  // A worse value is coloured as such; an exact cell has no tooltip.
  EXPECT_THAT(html, HasSubstr("<td title=\"30,000 (+50.0%)\">30.0k<span class=\"d bad\">"
                              "(+50%)</span></td>"));
  EXPECT_THAT(html, HasSubstr("<td>5,000<span class=\"d flat\">(=)</span></td>"));
  // Column headers wrap between the parts of an arm name, are topped by the arm's colour and
  // describe the arm on hover.
  EXPECT_THAT(html, HasSubstr("<th scope=\"col\" style=\"border-top: 4px solid #f28e2b\" "
                              "title=\"arm +host-tier &amp; co\">+host-<wbr/>tier</th>"));
}

TEST(ReplayResultHtmlTest, ShowsServerTimeAndTheSharesOfTheIdeal) {
  const std::string html = ReplayResultHtml(FourArms());
  EXPECT_THAT(html, HasSubstr("server time mean (s)</th><td>10.00</td>"
                              "<td title=\"9.000 (-10.0%)\">9.000<span class=\"d good\">"
                              "(-10%)</span></td>"));
  EXPECT_THAT(html, HasSubstr("share of ideal (baseline = 0%, infinite-cache = 100%)</th></tr>"));
  EXPECT_THAT(html, HasSubstr("Reference: infinite-cache.\">server time mean</th><td>0.0%</td>"
                              "<td>25.0%</td>"));
}

TEST(ReplayResultHtmlTest, HasNoNonFiniteNumbers) {
  const std::string html = Lower(ReplayResultHtml(FourArms()));
  EXPECT_THAT(html, Not(HasSubstr("nan")));
  EXPECT_THAT(Without(html, "infinite"), Not(HasSubstr("inf")));
}

TEST(ReplayResultHtmlTest, DegenerateResultIsStillAValidReport) {
  for (const ReplayResult& result : {Degenerate(), ReplayResult{}}) {
    const std::string html = ReplayResultHtml(result);
    ExpectWellFormedXml(html);
    EXPECT_EQ(Count(html, "<svg "), ChartsFor(result.arms.size()));
    EXPECT_THAT(Lower(html), Not(HasSubstr("nan")));
    EXPECT_THAT(Lower(html), Not(HasSubstr("inf")));
  }
  // Samples at time zero only, zero capacity, equal session times: ranges collapse to a point.
  ReplayResult flat = Degenerate();
  flat.arms[0].kv_usage = {{TimeNs(0), 10, 0, 0, 0}, {TimeNs(0), 0, 0, 0, 0}};
  flat.arms[0].session_times_s = {0, 0, 0};
  const std::string html = ReplayResultHtml(flat);
  ExpectWellFormedXml(html);
  EXPECT_THAT(Lower(html), Not(HasSubstr("nan")));
  EXPECT_THAT(Lower(html), Not(HasSubstr("inf")));
}

TEST(ReplayResultHtmlTest, DownsamplesLongSeries) {
  const std::string html = ReplayResultHtml(FourArms());
  // 4 arms x 20,000 samples would be megabytes at full resolution.
  EXPECT_LT(html.size(), 200'000u);
  // Every polyline and polygon has at most ~400 points (a point is "x,y", separated by spaces).
  for (size_t at = html.find("points=\""); at != std::string::npos;
       at = html.find("points=\"", at + 1)) {
    const size_t end = html.find('"', at + 8);
    EXPECT_LE(Count(html.substr(at + 8, end - at - 8), ","), 401u);
  }
}

TEST(ReplayResultHtmlTest, CutsLongNamesOnCharacterBoundaries) {
  ReplayResult result = FourArms();
  std::string long_name;
  for (int i = 0; i < 12; ++i) long_name += "\u00fcber-arm-\u00e4\u00f6\u00fc";
  for (int i = 0; i < 8; ++i) {
    result.arms.push_back(Arm(long_name + "-" + std::to_string(i), 0.2, 0, 1000));
  }
  const std::string html = ReplayResultHtml(result);
  ExpectWellFormedXml(html);
  EXPECT_TRUE(IsValidUtf8(html));
  EXPECT_THAT(html, HasSubstr("\u2026</text>"));  // Some label was cut.
  // Names that fit are written in full, in the bar charts too.
  EXPECT_THAT(html, HasSubstr("text-anchor=\"end\">+host-tier</text>"));
  EXPECT_TRUE(IsValidUtf8(FormatReplayTable(result)));
}

TEST(ReplayResultHtmlTest, IsDeterministic) {
  EXPECT_EQ(ReplayResultHtml(FourArms()), ReplayResultHtml(FourArms()));
}

}  // namespace
}  // namespace agentkv::report
