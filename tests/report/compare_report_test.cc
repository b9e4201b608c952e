// The comparison of two hand-made replay results: arms matched by name, an arm in one document
// only, a metric missing from one, a zero A value (no relative difference), the table's and the
// JSON's cells, and the errors naming the document and the field.
#include "agentkv/report/compare_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>

namespace agentkv::report {
namespace {

using ::testing::HasSubstr;

boost::json::value Parse(const char* text) { return boost::json::parse(text); }

// A: baseline (complete) and "old-arm"; B: baseline (makespan missing, uncached 0 in A) and
// "new-arm".
const char* kA = R"({"arms": [
  {"arm": "baseline", "requests_completed": 100, "token_hit_ratio_device": 0.5,
   "token_hit_ratio_host": 0.1, "uncached_tokens": 0, "makespan_s": 10.0,
   "output_tokens_per_s": 200.0,
   "ttft": {"p50_s": 1.0, "p95_s": 2.0, "p99_s": 4.0},
   "server_time": {"mean_s": 30.0, "p50_s": 20.0, "p95_s": 60.0},
   "session_time": {"p50_s": 100.0}},
  {"arm": "old-arm", "requests_completed": 1}]})";
const char* kB = R"({"arms": [
  {"arm": "new-arm", "requests_completed": 1},
  {"arm": "baseline", "requests_completed": 110, "token_hit_ratio_device": 0.25,
   "token_hit_ratio_host": null, "uncached_tokens": 50,
   "output_tokens_per_s": 220.0,
   "ttft": {"p50_s": 1.5, "p95_s": 2.0, "p99_s": 3.0},
   "server_time": {"mean_s": 33.0, "p50_s": 20.0, "p95_s": 66.0},
   "session_time": {"p50_s": 90.0}}]})";

const MetricComparison& Metric(const ArmComparison& arm, std::string_view path) {
  for (const MetricComparison& m : arm.metrics) {
    if (m.path == path) return m;
  }
  ADD_FAILURE() << "no metric " << path;
  return arm.metrics.front();
}

TEST(CompareReportTest, MatchesArmsByNameAndListsTheOthers) {
  StatusOr<Comparison> c = CompareReplayResults(Parse(kA), "A.json", Parse(kB), "B.json");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->arms.size(), 1u);
  EXPECT_EQ(c->arms[0].arm, "baseline");
  EXPECT_EQ(c->arms[0].metrics.size(), CompareMetricKeys().size());
  EXPECT_EQ(c->only_in_a, std::vector<std::string>{"old-arm"});
  EXPECT_EQ(c->only_in_b, std::vector<std::string>{"new-arm"});
}

TEST(CompareReportTest, DifferencesAndRelativeDifferences) {
  StatusOr<Comparison> c = CompareReplayResults(Parse(kA), "A.json", Parse(kB), "B.json");
  ASSERT_TRUE(c.ok()) << c.status();
  const ArmComparison& arm = c->arms[0];
  const MetricComparison& requests = Metric(arm, "requests_completed");
  EXPECT_EQ(requests.a, 100.0);
  EXPECT_EQ(requests.b, 110.0);
  EXPECT_EQ(requests.difference, 10.0);
  EXPECT_DOUBLE_EQ(*requests.relative, 0.1);
  const MetricComparison& p99 = Metric(arm, "ttft.p99_s");
  EXPECT_EQ(p99.difference, -1.0);
  EXPECT_DOUBLE_EQ(*p99.relative, -0.25);
  EXPECT_EQ(Metric(arm, "server_time.p95_s").difference, 6.0);
}

TEST(CompareReportTest, MissingValuesAndZeroAGiveNoDifference) {
  StatusOr<Comparison> c = CompareReplayResults(Parse(kA), "A.json", Parse(kB), "B.json");
  ASSERT_TRUE(c.ok()) << c.status();
  const ArmComparison& arm = c->arms[0];
  const MetricComparison& makespan = Metric(arm, "makespan_s");  // Absent in B.
  EXPECT_EQ(makespan.a, 10.0);
  EXPECT_FALSE(makespan.b);
  EXPECT_FALSE(makespan.difference);
  EXPECT_FALSE(makespan.relative);
  EXPECT_FALSE(Metric(arm, "token_hit_ratio_host").b);                // null in B.
  const MetricComparison& uncached = Metric(arm, "uncached_tokens");  // 0 in A.
  EXPECT_EQ(uncached.difference, 50.0);
  EXPECT_FALSE(uncached.relative);
}

TEST(CompareReportTest, TableAndJsonWriteUnsetValuesAsDashAndNull) {
  StatusOr<Comparison> c = CompareReplayResults(Parse(kA), "A.json", Parse(kB), "B.json");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string table = FormatComparison(*c);
  EXPECT_THAT(table, HasSubstr("A: A.json\nB: B.json\n"));
  EXPECT_THAT(table, HasSubstr("arm baseline\n"));
  EXPECT_THAT(table, ::testing::ContainsRegex("requests completed +100 +110 +\\+10 +\\+10\\.0%"));
  EXPECT_THAT(table, ::testing::ContainsRegex("uncached tokens +0 +50 +\\+50 +-\n"));
  EXPECT_THAT(table, ::testing::ContainsRegex("makespan \\(s\\) +10 +- +- +-\n"));
  EXPECT_THAT(table, HasSubstr("arms only in A (A.json): old-arm\n"));
  EXPECT_THAT(table, HasSubstr("arms only in B (B.json): new-arm\n"));

  const boost::json::value json = boost::json::parse(ComparisonJson(*c));
  EXPECT_EQ(json.at("a").as_string(), "A.json");
  const boost::json::array& metrics = json.at("arms").at(0).at("metrics").as_array();
  ASSERT_EQ(metrics.size(), CompareMetricKeys().size());
  EXPECT_EQ(metrics[0].at("metric").as_string(), "requests_completed");
  EXPECT_EQ(metrics[0].at("difference").to_number<double>(), 10.0);
  EXPECT_TRUE(metrics[3].at("relative").is_null());  // uncached_tokens: A is 0.
  EXPECT_EQ(json.at("only_in_b").at(0).as_string(), "new-arm");
}

TEST(CompareReportTest, CountsPrintWholeAndFractionsKeepSixDigits) {
  const char* a = R"({"arms": [{"arm": "x", "uncached_tokens": 48835000,
                               "token_hit_ratio_device": 0.8025561}]})";
  const char* b = R"({"arms": [{"arm": "x", "uncached_tokens": 46846800,
                               "token_hit_ratio_device": 0.8105949}]})";
  StatusOr<Comparison> c = CompareReplayResults(Parse(a), "A.json", Parse(b), "B.json");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string table = FormatComparison(*c);
  EXPECT_THAT(table, ::testing::ContainsRegex("uncached tokens +48835000 +46846800 +-1988200 "));
  EXPECT_THAT(table, ::testing::ContainsRegex("token hit ratio device +0\\.802556 +0\\.810595 "));
}

TEST(CompareReportTest, ArmsListRestrictsAndChecksNames) {
  StatusOr<Comparison> c =
      CompareReplayResults(Parse(kA), "A.json", Parse(kB), "B.json", {"new-arm", "baseline"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->arms.size(), 1u);
  EXPECT_TRUE(c->only_in_a.empty());
  EXPECT_EQ(c->only_in_b, std::vector<std::string>{"new-arm"});

  StatusOr<Comparison> bad =
      CompareReplayResults(Parse(kA), "A.json", Parse(kB), "B.json", {"nope"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("\"nope\""));
}

TEST(CompareReportTest, NonReplayDocumentsAreInvalidArgumentNamingTheField) {
  auto error = [](const char* b) {
    StatusOr<Comparison> c = CompareReplayResults(Parse(kA), "A.json", Parse(b), "B.json");
    EXPECT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    return std::string(c.status().message());
  };
  EXPECT_EQ(error(R"({"workload": "x"})"), "B.json: not a replay result: no `arms` array");
  EXPECT_EQ(error("[1, 2]"), "B.json: not a replay result: no `arms` array");
  EXPECT_EQ(error(R"({"arms": {}})"), "B.json: not a replay result: no `arms` array");
  EXPECT_EQ(error(R"({"arms": [{"arm": "x"}, 3]})"), "B.json: arms[1] is not an object");
  EXPECT_EQ(error(R"({"arms": [{"arm": 1}]})"), "B.json: arms[0].arm is not a string");
  EXPECT_THAT(error(R"({"arms": [{"arm": "x"}, {"arm": "x"}]})"), HasSubstr("appears twice"));

  StatusOr<boost::json::value> not_json = ParseJsonDocument("{\"arms\": [", "B.json");
  ASSERT_FALSE(not_json.ok());
  EXPECT_EQ(not_json.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(not_json.status().message(), HasSubstr("B.json: not JSON: "));
  EXPECT_TRUE(ParseJsonDocument(kA, "A.json").ok());
}

}  // namespace
}  // namespace agentkv::report
