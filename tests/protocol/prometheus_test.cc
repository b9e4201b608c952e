#include "agentkv/protocol/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "protocol_test_support.h"

namespace agentkv::protocol {
namespace {

using testing_support::ExpectInputError;
using testing_support::ForEachMalformedVariant;
using testing_support::ReadTestdata;

std::vector<Sample> MustParse(std::string_view text) {
  StatusOr<std::vector<Sample>> samples = ParsePrometheusText(text);
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *std::move(samples) : std::vector<Sample>{};
}

Status ParseError(std::string_view text, const PrometheusLimits& limits = {}) {
  return ParsePrometheusText(text, limits).status();
}

// The reference's regression (section 11.1): four TP ranks export the same gauges; the
// engine's value is the max over lines, and a sum would read 4x capacity and a quarter of
// the usage.
TEST(PrometheusTest, TpReplicatedGaugesAggregateByMaxNotSum) {
  const std::vector<Sample> samples = MustParse(ReadTestdata("metrics_tp4.txt"));
  const std::map<std::string, double> max = MaxByName(samples);
  EXPECT_EQ(max.at("sglang:max_total_num_tokens"), 262144.0);
  EXPECT_EQ(max.at("sglang:num_used_tokens"), 239861.0);
  EXPECT_EQ(max.at("sglang:token_usage"), 0.915);
  EXPECT_EQ(max.at("sglang:kv_available_tokens"), 8192.0);
  EXPECT_EQ(max.count("sglang:spec_accept_length"), 0u);  // Only NaN lines.

  double summed_capacity = 0;
  for (const Sample& s : samples) {
    if (s.name == "sglang:max_total_num_tokens") summed_capacity += s.value;
  }
  EXPECT_EQ(summed_capacity, 4 * 262144.0);
  EXPECT_NEAR(max.at("sglang:num_used_tokens") / summed_capacity, 0.23, 0.01);
  EXPECT_NEAR(max.at("sglang:num_used_tokens") / max.at("sglang:max_total_num_tokens"), 0.915,
              0.001);
}

TEST(PrometheusTest, MaxByNameTakesTheMaxOfDifferingLinesAndSkipsNan) {
  const std::vector<Sample> samples =
      MustParse("g{tp_rank=\"0\"} 0.5\ng{tp_rank=\"1\"} 0.75\ng{tp_rank=\"2\"} NaN\nh -1\nh -3\n");
  const std::map<std::string, double> max = MaxByName(samples);
  EXPECT_EQ(max.at("g"), 0.75);
  EXPECT_EQ(max.at("h"), -1.0);
}

TEST(PrometheusTest, KeepsLabelsHistogramsAndCounters) {
  const std::vector<Sample> samples = MustParse(ReadTestdata("metrics_tp4.txt"));
  int buckets = 0;
  for (const Sample& s : samples) {
    if (s.name == "sglang:time_to_first_token_seconds_bucket" && FindLabel(s, "tp_rank") == "3" &&
        FindLabel(s, "le") == "+Inf") {
      EXPECT_EQ(s.value, 10.0);
      ++buckets;
    }
    if (s.name == "sglang:cached_tokens_total" && FindLabel(s, "cache_source") == "device") {
      EXPECT_EQ(s.value, 91234.0);
    }
  }
  EXPECT_EQ(buckets, 1);
  const Sample& first = samples.front();
  EXPECT_EQ(first.name, "sglang:max_total_num_tokens");
  ASSERT_EQ(first.labels.size(), 5u);
  EXPECT_EQ(first.labels[0], (Label{.name = "engine_type", .value = "unified"}));
  EXPECT_EQ(FindLabel(first, "model_name"), "Qwen/Qwen3-8B");
  EXPECT_EQ(FindLabel(first, "dp_rank"), std::nullopt);

  StatusOr<std::vector<MetricFamily>> families =
      ParsePrometheusFamilies(ReadTestdata("metrics_tp4.txt"));
  ASSERT_TRUE(families.ok()) << families.status();
  ASSERT_EQ(families->size(), 15u);
  const MetricFamily& ttft = (*families)[13];
  EXPECT_EQ(ttft.name, "sglang:time_to_first_token_seconds");
  EXPECT_EQ(ttft.type, "histogram");
  EXPECT_EQ(ttft.help, "Histogram of time to first token in seconds.");
  EXPECT_EQ(ttft.samples.size(), 4u * 6u);
}

TEST(PrometheusTest, ParsesEveryValueForm) {
  const std::vector<Sample> samples = MustParse(
      "a 1\r\n"
      "b{x=\"q\\\"uo\\\\te\\nd\",} -2.5e-3 1712345678901\n"
      "c{} +Inf\n"
      "d -inf\n"
      "e\tNaN\n"
      "f{ x = \"1\" , y=\"2\" } 1E3 -5\n"
      "g 1e999\n"
      "h 1e-999\n"
      "i:sub_total 17\n");
  ASSERT_EQ(samples.size(), 9u);
  EXPECT_EQ(samples[0].value, 1.0);
  EXPECT_EQ(samples[1].labels, (std::vector<Label>{{.name = "x", .value = "q\"uo\\te\nd"}}));
  EXPECT_EQ(samples[1].value, -2.5e-3);
  EXPECT_EQ(samples[1].timestamp_ms, 1712345678901);
  EXPECT_TRUE(samples[2].labels.empty());
  EXPECT_EQ(samples[2].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(samples[3].value, -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(samples[4].value));
  EXPECT_EQ(samples[5].labels.size(), 2u);
  EXPECT_EQ(samples[5].value, 1000.0);
  EXPECT_EQ(samples[5].timestamp_ms, -5);
  EXPECT_EQ(samples[6].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(samples[7].value, 0.0);
  EXPECT_EQ(samples[8].name, "i:sub_total");
}

TEST(PrometheusTest, ErrorsNameTheLineAndTheProblem) {
  struct Case {
    std::string_view text;
    std::string_view message;
  };
  const Case cases[] = {
      {"a 1\nb\n", "line 2: missing value for \"b\""},
      {"a 1\n\nb x\n", "line 3: invalid value \"x\""},
      {"a 0x10\n", "line 1: invalid value \"0x10\""},
      {"a --1\n", "line 1: invalid value \"--1\""},
      {"a{x=1} 1\n", "line 1: expected '\"' to open the value of label \"x\""},
      {"a{x \"1\"} 1\n", "line 1: expected '=' after label name \"x\""},
      {"a{x=\"1\" y=\"2\"} 1\n", "line 1: expected ',' or '}' after the value of label \"x\""},
      {"a{x=\"1} 1\n", "line 1: unterminated value of label \"x\""},
      {"a{x=\"\\t\"} 1\n", "line 1: invalid escape \\t in label \"x\""},
      {"a{x=\"1\",x=\"2\"} 1\n", "line 1: duplicate label \"x\""},
      {"a{x=\"1\"", "line 1: unterminated label set"},
      {"a{1x=\"1\"} 1\n", "line 1: expected a label name"},
      {"a 1 12.5\n", "line 1: invalid timestamp \"12.5\""},
      {"a 1 2 3\n", "line 1: unexpected text after the timestamp"},
      {"9a 1\n", "line 1: expected a metric name"},
      {"a-b 1\n", "line 1: invalid character '-' in metric name"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ParseError(c.text), InvalidArgumentError(std::string(c.message))) << c.text;
  }
  EXPECT_EQ(ParsePrometheusFamilies("# TYPE a gauges\n").status(),
            InvalidArgumentError("line 1: unknown metric type \"gauges\""));
  EXPECT_EQ(ParsePrometheusFamilies("# HELP\n").status(),
            InvalidArgumentError("line 1: expected a metric name after # HELP"));
  EXPECT_EQ(ParsePrometheusFamilies("# TYPE a gauge extra\n").status(),
            InvalidArgumentError("line 1: unexpected text after the metric type"));
  // The sample parser skips comments unread.
  EXPECT_TRUE(ParsePrometheusText("# TYPE a gauges\n").ok());
}

TEST(PrometheusTest, LimitsAreResourceExhausted) {
  EXPECT_EQ(ParseError("a 1\n", PrometheusLimits{.max_bytes = 3}).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(ParseError("a 1\nbbbbbbbb 1\n", PrometheusLimits{.max_line_bytes = 5}),
            ResourceExhaustedError("line 2: longer than 5 bytes"));
  EXPECT_EQ(ParseError("a{x=\"1\",y=\"2\"} 1\n", PrometheusLimits{.max_labels = 1}),
            ResourceExhaustedError("line 1: more than 1 labels"));
  EXPECT_EQ(ParseError("a 1\nb 2\n", PrometheusLimits{.max_samples = 1}),
            ResourceExhaustedError("more than 1 samples"));
}

TEST(PrometheusTest, WriterEscapesAndRoundTrips) {
  const std::vector<MetricFamily> families = {
      {.name = "sglang:token_usage",
       .help = "Usage \\ of \"the\" pool\nsecond line",
       .type = "gauge",
       .samples = {{.name = "sglang:token_usage",
                    .labels = {{.name = "model_name", .value = "a\"b\\c\nd"},
                               {.name = "tp_rank", .value = "0"}},
                    .value = 0.915,
                    .timestamp_ms = std::nullopt},
                   {.name = "sglang:token_usage",
                    .labels = {{.name = "tp_rank", .value = "1"}},
                    .value = 262144.0,
                    .timestamp_ms = 1712345678901}}},
      {.name = "lat",
       .help = "",
       .type = "histogram",
       .samples = {{.name = "lat_bucket",
                    .labels = {{.name = "le", .value = "+Inf"}},
                    .value = 3,
                    .timestamp_ms = std::nullopt},
                   {.name = "lat_sum", .labels = {}, .value = 1e-7, .timestamp_ms = {}},
                   {.name = "lat_count", .labels = {}, .value = 3, .timestamp_ms = {}}}},
      {.name = "odd",
       .help = "x",
       .type = "untyped",
       .samples = {{.name = "", .labels = {}, .value = std::nan(""), .timestamp_ms = {}},
                   {.name = "odd",
                    .labels = {},
                    .value = -std::numeric_limits<double>::infinity(),
                    .timestamp_ms = {}},
                   {.name = "odd", .labels = {}, .value = 1.0 / 3.0, .timestamp_ms = {}}}},
  };
  const std::string text = WritePrometheusText(families);
  EXPECT_EQ(text,
            "# HELP sglang:token_usage Usage \\\\ of \"the\" pool\\nsecond line\n"
            "# TYPE sglang:token_usage gauge\n"
            "sglang:token_usage{model_name=\"a\\\"b\\\\c\\nd\",tp_rank=\"0\"} 0.915\n"
            "sglang:token_usage{tp_rank=\"1\"} 262144.0 1712345678901\n"
            "# TYPE lat histogram\n"
            "lat_bucket{le=\"+Inf\"} 3.0\n"
            "lat_sum 1e-07\n"
            "lat_count 3.0\n"
            "# HELP odd x\n"
            "# TYPE odd untyped\n"
            "odd NaN\n"
            "odd -Inf\n"
            "odd 0.3333333333333333\n");
  StatusOr<std::vector<MetricFamily>> parsed = ParsePrometheusFamilies(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::vector<MetricFamily> expected = families;
  expected[2].samples[0].name = "odd";
  EXPECT_EQ(*parsed, expected);
}

TEST(PrometheusTest, FormatsValuesAsPrometheusSpellsThem) {
  EXPECT_EQ(FormatPrometheusValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatPrometheusValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatPrometheusValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatPrometheusValue(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatPrometheusValue(1e21), "1e+21");
}

TEST(PrometheusTest, MalformedTextNeverCrashes) {
  const std::string fixture = ReadTestdata("metrics_tp4.txt");
  // The first lines cover every construct; the full fixture would make the sweep slow.
  const std::string head = fixture.substr(0, fixture.find("sglang:num_used_tokens{")) +
                           fixture.substr(fixture.find("# HELP sglang:time_to_first"), 900);
  ForEachMalformedVariant(head, 29, [](const std::string& text) {
    const StatusOr<std::vector<Sample>> samples = ParsePrometheusText(text);
    ExpectInputError(samples.status());
    const StatusOr<std::vector<MetricFamily>> families = ParsePrometheusFamilies(text);
    ExpectInputError(families.status());
    if (families.ok()) {
      EXPECT_TRUE(samples.ok());
      size_t count = 0;
      for (const MetricFamily& family : *families) count += family.samples.size();
      EXPECT_EQ(count, samples->size());
    }
  });
}

}  // namespace
}  // namespace agentkv::protocol
