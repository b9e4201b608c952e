// The capacity report of a hand-built result: the verdict ahead of the table and at the top of
// the page, the table's capacities (a bound at max_rate, a 0 below min_rate), the ratios to the
// baseline, the JSON's verdict and probes sorted by rate with their interarrival, and the HTML
// page parsed as XML with one curve per arm and seed.
#include "agentkv/report/capacity_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <functional>
#include <sstream>
#include <string>

namespace agentkv::report {
namespace {

using ::testing::HasSubstr;

// A search over a step metric (1 s below `threshold`, 5 s from it) with default options.
sim::CapacitySearchResult Search(double threshold, const sim::CapacitySearchOptions& options) {
  return sim::SearchCapacity(options,
                             [threshold](double rate) -> StatusOr<sim::CapacityMetrics> {
                               sim::CapacityMetrics m;
                               m.ttft_p95_s = rate < threshold ? 1.0 : 5.0;
                               m.ttft_p50_s = m.ttft_p95_s / 2;
                               m.ttft_p99_s = m.ttft_p95_s * 2;
                               m.server_time_mean_s = 100;
                               return m;
                             })
      .value();
}

sim::CapacityResult TwoSeedResult() {
  sim::CapacityResult r;
  r.workload = "synthetic: 4 sessions <test>";
  r.num_engines = 2;
  r.sessions = 4;
  r.options.start_rate = 60;
  r.options.max_rate = 1000;
  r.seeds = {1, 2};
  r.arms = {"baseline", "agentkv", "infinite-cache", "hopeless"};
  r.searches = {{Search(40, r.options), Search(50, r.options)},
                {Search(80, r.options), Search(150, r.options)},
                {Search(1e9, r.options), Search(1e9, r.options)},
                {Search(0, r.options), Search(0, r.options)}};
  return r;
}

TEST(CapacityReportTest, TableShowsCapacitiesRatiosAndEdges) {
  const std::string table = FormatCapacityTable(TwoSeedResult());
  EXPECT_THAT(table, HasSubstr("SLO: ttft-p95 <= 2.00 s"));
  EXPECT_THAT(table, HasSubstr(">= 1000 [>= 1000, >= 1000]"));
  EXPECT_THAT(table, HasSubstr("hopeless"));
  EXPECT_THAT(table, HasSubstr("note: hopeless (seed 1): misses the SLO even at --min-rate 1.00"));
  EXPECT_THAT(table, HasSubstr("note: infinite-cache (seed 2): meets the SLO at --max-rate 1000"));
  // agentkv's capacity over the baseline's, seed by seed: about 2 and 3.
  EXPECT_THAT(table, ::testing::ContainsRegex("agentkv .* 2\\.[0-9]+x \\[[12]\\.[0-9]+x, "
                                              "[23]\\.[0-9]+x\\]"));
}

TEST(CapacityReportTest, VerdictComesBeforeTheTable) {
  const std::string table = FormatCapacityTable(TwoSeedResult());
  const size_t verdict = table.find("\nverdict (each arm against baseline");
  const size_t turn_on = table.find("\n  turn on ");
  const size_t header = table.find("\narm ");
  ASSERT_NE(verdict, std::string::npos);
  ASSERT_NE(header, std::string::npos);
  EXPECT_LT(verdict, turn_on);
  EXPECT_LT(turn_on, header);
  // The arm to turn on, with its gain: agentkv's capacity is 2 and 3 times the baseline's.
  EXPECT_THAT(
      table.substr(turn_on, header - turn_on),
      ::testing::ContainsRegex("turn on +agentkv \\(\\+[0-9.]+ sessions/h/engine, \\+150%"));
  // No verdict line runs past the table.
  size_t widest = 0;
  for (size_t at = header + 1, end = 0; at < table.size(); at = end + 1) {
    end = table.find('\n', at);
    widest = std::max(widest, end - at);
  }
  for (size_t at = verdict + 1, end = 0; at < header; at = end + 1) {
    end = table.find('\n', at);
    EXPECT_LE(end - at, widest) << table.substr(at, end - at);
  }
}

TEST(CapacityReportTest, JsonHasEveryProbeSortedByRate) {
  const sim::CapacityResult r = TwoSeedResult();
  const boost::json::value doc = boost::json::parse(CapacityResultJson(r));
  EXPECT_EQ(doc.at("options").at("metric").as_string(), "ttft-p95");
  EXPECT_EQ(doc.at("baseline").as_string(), "baseline");
  const boost::json::object& verdict = doc.at("verdict").as_object();
  EXPECT_EQ(verdict.at("turn_on").as_string(), "agentkv");
  EXPECT_EQ(verdict.at("arms").as_array()[1].at("arm").as_string(), "hopeless");
  EXPECT_EQ(verdict.at("arms").as_array()[1].at("standing").as_string(), "worse");
  EXPECT_EQ(verdict.at("bounds").as_array()[0].at("arm").as_string(), "infinite-cache");
  EXPECT_EQ(verdict.at("lines").as_array()[0].at("label").as_string(), "turn on");
  const boost::json::array& arms = doc.at("arms").as_array();
  ASSERT_EQ(arms.size(), 4U);
  const boost::json::object& run = arms[0].at("runs").as_array()[0].as_object();
  EXPECT_EQ(run.at("outcome").as_string(), "found");
  const boost::json::array& probes = run.at("probes").as_array();
  ASSERT_EQ(probes.size(), r.searches[0][0].probes.size());
  for (size_t i = 1; i < probes.size(); ++i) {
    EXPECT_LT(probes[i - 1].at("rate").as_double(), probes[i].at("rate").as_double());
  }
  const boost::json::object& first = probes[0].as_object();
  EXPECT_DOUBLE_EQ(first.at("interarrival_s").as_double(),
                   3600 / (first.at("rate").as_double() * 2));
  EXPECT_TRUE(arms[3].at("runs").as_array()[0].at("metric_at_capacity").is_null());
  EXPECT_TRUE(arms[2].at("runs").as_array()[0].at("lowest_missed").is_null());
  EXPECT_EQ(arms[2].at("runs").as_array()[0].at("outcome").as_string(), "at-least-max");
  EXPECT_EQ(CapacityResultJson(r), CapacityResultJson(r));
}

TEST(CapacityReportTest, HtmlIsXmlWithOneCurvePerArmAndSeed) {
  const sim::CapacityResult r = TwoSeedResult();
  const std::string html = CapacityResultHtml(r);
  EXPECT_THAT(html, HasSubstr("&lt;test&gt;"));
  EXPECT_THAT(html, ::testing::Not(HasSubstr("<script")));
  // The page opens with the verdict, ahead of the setup and every table.
  const size_t verdict = html.find("<section class=\"verdict\" id=\"verdict\">");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(verdict, html.find("<dl class=\"setup\">"));
  EXPECT_LT(verdict, html.find("<table"));
  EXPECT_THAT(html.substr(verdict, html.find("<table") - verdict),
              HasSubstr("<dt>turn on</dt><dd>agentkv ("));
  std::istringstream in(html.substr(html.find("<html")));
  boost::property_tree::ptree tree;
  ASSERT_NO_THROW(boost::property_tree::read_xml(in, tree));
  size_t polylines = 0;
  const std::function<void(const boost::property_tree::ptree&)> count =
      [&](const boost::property_tree::ptree& node) {
        for (const auto& [name, child] : node) {
          if (name == "polyline" && child.get_optional<std::string>("<xmlattr>.data-arm")) {
            ++polylines;
          }
          count(child);
        }
      };
  count(tree);
  // The hopeless arm's probes and the bound's are curves too: every search probes twice or more.
  EXPECT_EQ(polylines, r.arms.size() * r.seeds.size());
  EXPECT_THAT(html, HasSubstr("stroke-dasharray=\"6,3\""));
}

}  // namespace
}  // namespace agentkv::report
