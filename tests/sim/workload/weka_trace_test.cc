// Tests of the WEKA trace reader: a conversation with a sub-agent parses into requests and
// sub-agents in file order, optional fields default when absent or null and are counted (a
// model of which fields a random file leaves out checks the counts), unknown fields are
// ignored, gzip files read as their text, and each kind of bad input is one
// InvalidArgument/NotFound naming the file and the JSON path of the field.
#include "agentkv/sim/workload/weka_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agentkv/base/bounds.h"
#include "agentkv/base/rng.h"
#include "agentkv/sim/workload/trace_input.h"
#include "tests/sim/trace_files_for_tests.h"

namespace agentkv::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A main agent with two requests around a sub-agent of two requests, in the real files'
// layout (fields the reader does not use included, one of them unknown to the format).
constexpr const char* kTrace = R"({
  "id": "trace_test", "models": 2, "block_size": 64, "hash_id_scope": "local",
  "tool_tokens": 10, "system_tokens": 5, "future_field": {"x": [1, 2]},
  "requests": [
    {"t": 0.0, "type": "n", "model": "m", "in": 200, "out": 10, "hash_ids": [1, 2, 3],
     "input_types": ["text"], "output_types": ["tool_use"], "stop": "tool_use",
     "api_time": 1.5, "think_time": 0.0},
    {"t": 2.5, "type": "subagent", "agent_id": "agent_001", "subagent_type": "Explore",
     "duration_ms": 4000, "status": "completed", "models": ["h"],
     "requests": [
       {"t": 0.0, "type": "n", "in": 130, "out": 7, "hash_ids": [10, 11], "stop": "tool_use",
        "think_time": 0.0},
       {"t": 1.25, "type": "s", "in": 192, "out": 9, "hash_ids": [10, 11, 12], "stop": "end_turn",
        "think_time": 1}
     ]},
    {"t": 9, "type": "s", "in": 260, "out": 20, "hash_ids": [1, 2, 3, 4], "stop": "",
     "ttft": 0.3}
  ]
})";

StatusOr<WekaConversation> Parse(const std::string& text) { return ParseWekaTrace(text, "t.json"); }

// The error of parsing `text` as "t.json"; fails the test if it parses.
Status ParseError(const std::string& text) {
  StatusOr<WekaConversation> r = Parse(text);
  EXPECT_FALSE(r.ok()) << "parsed: " << text;
  return r.ok() ? Status() : r.status();
}

// A trace whose only main-agent request is `request` (a JSON object's text).
std::string WithRequest(const std::string& request) { return R"({"requests": [)" + request + "]}"; }

// A trace whose only entry is a sub-agent whose only request is `request`.
std::string WithSubagentRequest(const std::string& request) {
  return R"({"requests": [{"t": 0, "in": 0, "out": 0, "hash_ids": []},)"
         R"( {"t": 1, "type": "subagent", "agent_id": "a", "requests": [)" +
         request + "]}]}";
}

TEST(WekaTraceTest, ParsesMainAgentAndSubagentInFileOrder) {
  StatusOr<WekaConversation> r = Parse(kTrace);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, "t.json");
  EXPECT_EQ(r->id, "trace_test");
  EXPECT_EQ(r->block_size, 64);
  ASSERT_EQ(r->requests.size(), 2u);
  EXPECT_EQ(r->requests[0], (WekaRequest{TimeNs(0),
                                         200,
                                         10,
                                         {1, 2, 3},
                                         "tool_use",
                                         TimeNs(0),
                                         TimeNs::Millis(1500),
                                         "m",
                                         {"text"},
                                         {"tool_use"}}));
  EXPECT_EQ(r->requests[1],
            (WekaRequest{
                TimeNs::Seconds(9), 260, 20, {1, 2, 3, 4}, "", TimeNs(0), TimeNs(0), "", {}, {}}));
  ASSERT_EQ(r->subagents.size(), 1u);
  const WekaSubagent& s = r->subagents[0];
  EXPECT_EQ(s.agent_id, "agent_001");
  EXPECT_EQ(s.subagent_type, "Explore");
  // `t` is the completion; the spawn is `t` - duration_ms, clamped at 0.
  EXPECT_EQ(s.completion, TimeNs::Millis(2500));
  EXPECT_EQ(s.duration, TimeNs::Seconds(4));
  EXPECT_EQ(s.spawn(), TimeNs(0));
  EXPECT_EQ(s.status, SubagentStatus::kCompleted);
  EXPECT_THAT(s.models, ElementsAre("h"));
  ASSERT_EQ(s.requests.size(), 2u);
  EXPECT_EQ(
      s.requests[0],
      (WekaRequest{TimeNs(0), 130, 7, {10, 11}, "tool_use", TimeNs(0), TimeNs(0), "", {}, {}}));
  EXPECT_EQ(s.requests[1], (WekaRequest{TimeNs::Millis(1250),
                                        192,
                                        9,
                                        {10, 11, 12},
                                        "end_turn",
                                        TimeNs::Seconds(1),
                                        TimeNs(0),
                                        "",
                                        {},
                                        {}}));
  EXPECT_EQ(r->TotalRequests(), 4);
}

TEST(WekaTraceTest, AFileWithoutRequestsIsRefusedNamingIt) {
  const Status empty = InvalidArgumentError("t.json: no requests (an empty trace)");
  EXPECT_EQ(ParseError(R"({"id": "x", "block_size": 64, "requests": []})"), empty);
  // Sub-agent entries without requests of their own do not make a conversation.
  EXPECT_EQ(ParseError(R"({"requests": [{"t": 1, "type": "subagent", "agent_id": "a",)"
                       R"( "duration_ms": 5, "requests": []}]})"),
            empty);
  // One request, a sub-agent's, is a conversation.
  EXPECT_TRUE(Parse(R"({"requests": [{"t": 1, "type": "subagent", "agent_id": "a",)"
                    R"( "duration_ms": 5, "requests": [{"t": 0, "in": 1, "out": 1,)"
                    R"( "hash_ids": [1]}]}]})")
                  .ok());
}

TEST(WekaTraceTest, SubagentSpawnIsCompletionMinusDuration) {
  StatusOr<WekaConversation> r = Parse(
      R"({"requests": [{"t": 0, "in": 0, "out": 0, "hash_ids": [], "api_time": 8.81},)"
      R"( {"t": 100.65, "type": "subagent", "agent_id": "a", "duration_ms": 91243,)"
      R"( "status": "async_launched", "requests": []},)"
      R"( {"t": 3, "type": "subagent", "agent_id": "b", "status": "failed", "requests": []}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->subagents.size(), 2u);
  EXPECT_EQ(r->requests[0].api_time, TimeNs::Millis(8810));
  EXPECT_EQ(r->subagents[0].completion, TimeNs::Millis(100'650));
  EXPECT_EQ(r->subagents[0].spawn(), TimeNs::Millis(9'407));
  EXPECT_EQ(r->subagents[0].status, SubagentStatus::kAsyncLaunched);
  // No duration: spawned at its completion; an unknown status is kept as kUnknown.
  EXPECT_EQ(r->subagents[1].spawn(), TimeNs::Seconds(3));
  EXPECT_EQ(r->subagents[1].status, SubagentStatus::kUnknown);
  EXPECT_TRUE(r->subagents[1].models.empty());
}

TEST(WekaTraceTest, SubagentModelsSharedOrExcluded) {
  WekaConversation c;
  c.requests.resize(2);
  c.requests[0].model = "opus";
  c.subagents.resize(4);
  c.subagents[0].models = {"haiku"};
  c.subagents[1].models = {"haiku", "opus"};
  c.subagents[2].requests.resize(1);
  c.subagents[2].requests[0].model = "haiku";
  // subagents[3] records no model: nothing says it differs.
  EXPECT_FALSE(c.SharesMainModel(c.subagents[0]));
  EXPECT_TRUE(c.SharesMainModel(c.subagents[1]));
  EXPECT_FALSE(c.SharesMainModel(c.subagents[2]));
  EXPECT_TRUE(c.SharesMainModel(c.subagents[3]));
  c.subagents[0].agent_id = "a0";
  c.subagents[1].agent_id = "a1";
  c.subagents[2].agent_id = "a2";
  c.subagents[3].agent_id = "a3";
  EXPECT_EQ(ApplySubagentModels({c}, SubagentModels::kShare)[0], c);
  const std::vector<WekaConversation> kept = ApplySubagentModels({c}, SubagentModels::kExclude);
  ASSERT_EQ(kept[0].subagents.size(), 2u);
  EXPECT_EQ(kept[0].subagents[0].agent_id, "a1");
  EXPECT_EQ(kept[0].subagents[1].agent_id, "a3");
  // What a replay issues (its progress total, its infinite-cache sizing) counts the same.
  EXPECT_TRUE(IsReplayed(c, c.subagents[0], SubagentModels::kShare));
  EXPECT_FALSE(IsReplayed(c, c.subagents[0], SubagentModels::kExclude));
  EXPECT_TRUE(IsReplayed(c, c.subagents[3], SubagentModels::kExclude));
  EXPECT_EQ(ReplayedRequests(c, SubagentModels::kShare), c.TotalRequests());
  EXPECT_EQ(ReplayedRequests(c, SubagentModels::kExclude), kept[0].TotalRequests());
  EXPECT_EQ(ParseSubagentModels("exclude"), SubagentModels::kExclude);
  EXPECT_EQ(ParseSubagentModels(SubagentModelsName(SubagentModels::kShare)),
            SubagentModels::kShare);
  EXPECT_EQ(ParseSubagentModels("none"), std::nullopt);
}

TEST(WekaTraceTest, BadNewFieldsNameFileLineAndPath) {
  EXPECT_EQ(ParseError(WithRequest(R"({"t": 0, "in": 0, "out": 0, "hash_ids": [],)"
                                   R"( "api_time": -1})"))
                .message(),
            "t.json:1: requests[0].api_time: -1 is out of range [0, 31536000] s");
  EXPECT_EQ(ParseError(WithRequest(R"({"t": 0, "in": 0, "out": 0, "hash_ids": [],)"
                                   R"( "model": 5})"))
                .message(),
            "t.json:1: requests[0].model: expected a string, got 5");
  EXPECT_EQ(ParseError(WithRequest(R"({"t": 0, "in": 0, "out": 0, "hash_ids": [],)"
                                   "\n \"input_types\": [\"text\", 3]}"))
                .message(),
            "t.json:2: requests[0].input_types: expected an array of strings, element 1 is 3");
  EXPECT_EQ(ParseError(WithRequest(R"({"t": 0, "in": 0, "out": 0, "hash_ids": [],)"
                                   R"( "output_types": "text"})"))
                .message(),
            "t.json:1: requests[0].output_types: expected an array of strings, got \"text\"");
  EXPECT_EQ(ParseError(R"({"requests": [{"t": 1, "type": "subagent", "agent_id": "a",)"
                       R"( "duration_ms": "5", "requests": []}]})")
                .message(),
            "t.json:1: requests[0].duration_ms: expected a number of milliseconds, got \"5\"");
  EXPECT_THAT(ParseError(R"({"requests": [{"t": 1, "type": "subagent", "agent_id": "a",)"
                         R"( "duration_ms": 1e300, "requests": []}]})")
                  .message(),
              StartsWith("t.json:1: requests[0].duration_ms: "));
  EXPECT_EQ(ParseError(R"({"requests": [{"t": 1, "type": "subagent", "agent_id": "a",)"
                       R"( "status": 1, "requests": []}]})")
                .message(),
            "t.json:1: requests[0].status: expected a string, got 1");
  EXPECT_EQ(ParseError(R"({"requests": [{"t": 1, "type": "subagent", "agent_id": "a",)"
                       R"( "models": [null], "requests": []}]})")
                .message(),
            "t.json:1: requests[0].models: expected an array of strings, element 0 is null");
  EXPECT_EQ(ParseError(WithSubagentRequest(R"({"t": 0, "in": 0, "out": 0, "hash_ids": [],)"
                                           R"( "api_time": "x"})"))
                .message(),
            "t.json:1: requests[1].requests[0].api_time: expected a number of seconds, got "
            "\"x\"");
}

TEST(WekaTraceTest, OptionalFieldsDefault) {
  StatusOr<WekaConversation> r =
      Parse(R"({"requests": [{"t": 3, "in": 64, "out": 1, "hash_ids": [7]}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id, "");
  EXPECT_EQ(r->block_size, 64);
  EXPECT_TRUE(r->subagents.empty());
  ASSERT_EQ(r->requests.size(), 1u);
  EXPECT_EQ(r->requests[0],
            (WekaRequest{TimeNs::Seconds(3), 64, 1, {7}, "", TimeNs(0), TimeNs(0), "", {}, {}}));
  EXPECT_EQ(r->fallbacks,
            (WekaFallbacks{.block_size = 1, .think_time = 1, .api_time = 1, .stop = 1}));
}

TEST(WekaTraceTest, NullOptionalFieldsGetTheirFallbacksAndAreCounted) {
  // Every optional field of every level null, as the public trace_0295 has duration_ms.
  constexpr const char* kNulls = R"({
    "id": null, "block_size": null, "models": null,
    "requests": [
      {"t": 0, "in": 64, "out": 1, "hash_ids": [7], "type": null, "stop": null,
       "think_time": null, "api_time": null, "model": null, "input_types": null,
       "output_types": null},
      {"t": 9, "type": "subagent", "agent_id": "a1", "subagent_type": null, "duration_ms": null,
       "status": null, "models": null, "total_tokens": null,
       "requests": [{"t": 0, "in": 1, "out": 1, "hash_ids": [], "stop": null}]}]})";
  StatusOr<WekaConversation> nulls = Parse(kNulls);
  ASSERT_TRUE(nulls.ok()) << nulls.status();
  // The same file without the null fields parses to the same values.
  StatusOr<WekaConversation> absent = Parse(R"({"requests": [
      {"t": 0, "in": 64, "out": 1, "hash_ids": [7]},
      {"t": 9, "type": "subagent", "agent_id": "a1",
       "requests": [{"t": 0, "in": 1, "out": 1, "hash_ids": []}]}]})");
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_EQ(*nulls, *absent);
  EXPECT_EQ(nulls->block_size, 64);
  ASSERT_EQ(nulls->subagents.size(), 1u);
  // No duration: the sub-agent spawns at its recorded t.
  EXPECT_EQ(nulls->subagents[0].spawn(), TimeNs::Seconds(9));
  EXPECT_EQ(nulls->subagents[0].status, SubagentStatus::kUnknown);
  const WekaFallbacks& f = nulls->fallbacks;
  EXPECT_EQ(f.block_size, 1);
  EXPECT_EQ(f.think_time, 2);
  EXPECT_EQ(f.api_time, 2);
  EXPECT_EQ(f.stop, 2);
  EXPECT_EQ(f.subagent_duration, 1);
  EXPECT_EQ(f.subagent_status, 1);
  EXPECT_THAT(f.Describe(),
              ElementsAre("1 file without block_size: 64 tokens per hash id",
                          "2 requests without think_time: gap taken from t less the previous "
                          "api_time",
                          "2 requests without api_time: server time not recorded, taken as 0",
                          "2 requests without stop: pause classified by content types alone",
                          "1 sub-agent without duration_ms: spawned at their recorded t",
                          "1 sub-agent without a known status: joined by the parent as "
                          "completed"));
  // Required fields may not be null.
  EXPECT_EQ(ParseError(WithRequest(R"({"t": 0, "in": null, "out": 0, "hash_ids": []})")).message(),
            "t.json:1: requests[0].in: expected a non-negative integer, got null");
  EXPECT_EQ(ParseError(R"({"requests": null})").message(),
            "t.json:1: requests: expected an array, got null");
}

// A model of the fallbacks: random files whose optional fields are each present, absent or
// null; the counts are the number of fields the model left out or set to null, and a file's
// values do not depend on whether a left-out field was absent or null.
TEST(WekaTraceTest, FallbackCountsMatchAModelOfTheFile) {
  Rng rng(28);
  enum class Form { kPresent, kAbsent, kNull };
  const auto draw = [&rng] { return static_cast<Form>(rng.Uniform(0, 2)); };
  // `key: value` as the form says, with a trailing comma; "" when absent.
  const auto field = [](Form form, const std::string& key, const std::string& value) {
    if (form == Form::kAbsent) return std::string();
    return "\"" + key + "\": " + (form == Form::kNull ? std::string("null") : value) + ", ";
  };
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    WekaFallbacks expected;
    // The same file twice: left-out fields absent in `plain`, null where the draw said so in
    // `drawn`.
    std::string drawn = "{";
    std::string plain = "{";
    const Form block = draw();
    drawn += field(block, "block_size", "64");
    plain += field(block == Form::kPresent ? block : Form::kAbsent, "block_size", "64");
    expected.block_size += block != Form::kPresent ? 1 : 0;
    const auto request = [&](double t) {
      std::string d = "{";
      std::string p = "{";
      const std::string base =
          "\"t\": " + std::to_string(t) + ", \"in\": 64, \"out\": 2, \"hash_ids\": [1]}";
      for (const auto& [key, value] : {std::pair<std::string, std::string>{"think_time", "0.5"},
                                       {"api_time", "1.25"},
                                       {"stop", "\"tool_use\""}}) {
        const Form form = draw();
        d += field(form, key, value);
        p += field(form == Form::kPresent ? form : Form::kAbsent, key, value);
        if (form == Form::kPresent) continue;
        if (key == "think_time") ++expected.think_time;
        if (key == "api_time") ++expected.api_time;
        if (key == "stop") ++expected.stop;
      }
      return std::pair{d + base, p + base};
    };
    std::string drawn_requests;
    std::string plain_requests;
    const int64_t entries = rng.Uniform(1, 6);
    for (int64_t i = 0; i < entries; ++i) {
      const std::string sep = i == 0 ? "" : ", ";
      if (i > 0 && rng.Bernoulli(0.3)) {
        const Form duration = draw();
        const Form status = draw();
        const auto [inner_drawn, inner_plain] = request(0);
        const std::string head =
            "{\"t\": " + std::to_string(10 * i) + ", \"type\": \"subagent\", \"agent_id\": \"a\", ";
        drawn_requests += sep + head + field(duration, "duration_ms", "2000") +
                          field(status, "status", "\"completed\"") + "\"requests\": [" +
                          inner_drawn + "]}";
        plain_requests +=
            sep + head +
            field(duration == Form::kPresent ? duration : Form::kAbsent, "duration_ms", "2000") +
            field(status == Form::kPresent ? status : Form::kAbsent, "status", "\"completed\"") +
            "\"requests\": [" + inner_plain + "]}";
        expected.subagent_duration += duration != Form::kPresent ? 1 : 0;
        expected.subagent_status += status != Form::kPresent ? 1 : 0;
      } else {
        const auto [d, p] = request(10.0 * static_cast<double>(i));
        drawn_requests += sep + d;
        plain_requests += sep + p;
      }
    }
    drawn += "\"requests\": [" + drawn_requests + "]}";
    plain += "\"requests\": [" + plain_requests + "]}";
    StatusOr<WekaConversation> a = Parse(drawn);
    StatusOr<WekaConversation> b = Parse(plain);
    ASSERT_TRUE(a.ok()) << a.status() << "\n" << drawn;
    ASSERT_TRUE(b.ok()) << b.status() << "\n" << plain;
    EXPECT_EQ(a->fallbacks, expected) << drawn;
    EXPECT_EQ(*a, *b);
    EXPECT_EQ(TotalFallbacks({*a, *b}).think_time, 2 * expected.think_time);
    EXPECT_EQ(a->fallbacks.none(), expected == WekaFallbacks());
  }
}

TEST(WekaTraceTest, TimesRoundToTheNanosecond) {
  StatusOr<WekaConversation> r =
      Parse(WithRequest(R"({"t": 1148.013, "in": 0, "out": 0, "hash_ids": []})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requests[0].t, TimeNs(1'148'013'000'000));
}

TEST(WekaTraceTest, AcceptsHashIdsAboveInt64AndABlockSize) {
  StatusOr<WekaConversation> r =
      Parse(R"({"block_size": 32, "requests": [{"t": 0, "in": 32, "out": 0,)"
            R"( "hash_ids": [18446744073709551615]}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->block_size, 32);
  EXPECT_THAT(r->requests[0].hash_ids, ElementsAre(18446744073709551615ULL));
}

TEST(WekaTraceTest, HashIdsWithAStringNameFileAndPath) {
  const Status s = ParseError(R"({"requests": [{"t": 0, "in": 0, "out": 0, "hash_ids": []},)"
                              R"( {"t": 1, "in": 0, "out": 0, "hash_ids": [1, 2, 3, "x"]}]})");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "t.json:1: requests[1].hash_ids: expected an array of non-negative integers, "
            "element 3 is \"x\"");
}

TEST(WekaTraceTest, ErrorInASubagentRequestNamesTheNestedPath) {
  EXPECT_EQ(
      ParseError(WithSubagentRequest(R"({"t": 0, "in": 1, "out": 0, "hash_ids": -1})")).message(),
      "t.json:1: requests[1].requests[0].hash_ids: expected an array of non-negative "
      "integers, got -1");
  EXPECT_EQ(ParseError(WithSubagentRequest(R"({"t": 0, "out": 0, "hash_ids": []})")).message(),
            "t.json:1: requests[1].requests[0].in: missing (expected a non-negative integer)");
}

TEST(WekaTraceTest, EachRequiredRequestFieldIsNamed) {
  EXPECT_EQ(ParseError(WithRequest(R"({"in": 0, "out": 0, "hash_ids": []})")).message(),
            "t.json:1: requests[0].t: missing (expected a number of seconds)");
  EXPECT_EQ(ParseError(WithRequest(R"({"t": 0, "in": -5, "out": 0, "hash_ids": []})")).message(),
            "t.json:1: requests[0].in: -5 is out of range [0, 1099511627776] tokens");
  EXPECT_EQ(ParseError(WithRequest(R"({"t": 0, "in": 0, "out": 1.5, "hash_ids": []})")).message(),
            "t.json:1: requests[0].out: expected a non-negative integer, got 1.5E0");
  EXPECT_EQ(ParseError(WithRequest(R"({"t": 0, "in": 0, "out": 0})")).message(),
            "t.json:1: requests[0].hash_ids: missing (expected an array of non-negative "
            "integers)");
  EXPECT_EQ(ParseError(WithRequest(R"({"t": -1, "in": 0, "out": 0, "hash_ids": []})")).message(),
            "t.json:1: requests[0].t: -1 is out of range [0, 31536000] s");
  EXPECT_EQ(ParseError(WithRequest(R"({"t": "0", "in": 0, "out": 0, "hash_ids": []})")).message(),
            "t.json:1: requests[0].t: expected a number of seconds, got \"0\"");
}

TEST(WekaTraceTest, OptionalFieldsOfTheWrongTypeAreErrors) {
  EXPECT_EQ(ParseError(WithRequest(R"({"t": 0, "in": 0, "out": 0, "hash_ids": [], "stop": 3})"))
                .message(),
            "t.json:1: requests[0].stop: expected a string, got 3");
  EXPECT_EQ(
      ParseError(WithRequest(R"({"t": 0, "in": 0, "out": 0, "hash_ids": [], "think_time": "1"})"))
          .message(),
      "t.json:1: requests[0].think_time: expected a number of seconds, got \"1\"");
  EXPECT_EQ(ParseError(R"({"block_size": 0, "requests": []})").message(),
            "t.json:1: block_size: expected an integer in [1, 2^20], got 0");
  EXPECT_EQ(ParseError(R"({"id": 7, "requests": []})").message(),
            "t.json:1: id: expected a string, got 7");
}

TEST(WekaTraceTest, SubagentFieldsAreNamed) {
  EXPECT_EQ(ParseError(R"({"requests": [{"t": 1, "type": "subagent", "requests": []}]})").message(),
            "t.json:1: requests[0].agent_id: missing (expected a string)");
  EXPECT_EQ(
      ParseError(R"({"requests": [{"t": 1, "type": "subagent", "agent_id": "a"}]})").message(),
      "t.json:1: requests[0].requests: missing (expected an array)");
  EXPECT_EQ(ParseError(R"({"requests": [{"type": "subagent", "agent_id": "a", "requests": []}]})")
                .message(),
            "t.json:1: requests[0].t: missing (expected a number of seconds)");
  EXPECT_EQ(ParseError(WithSubagentRequest(
                           R"({"t": 0, "type": "subagent", "agent_id": "b", "requests": []})"))
                .message(),
            "t.json:1: requests[1].requests[0].type: nested sub-agents are not supported");
}

TEST(WekaTraceTest, StructuralErrors) {
  EXPECT_EQ(ParseError("[1, 2]").message(),
            "t.json:1: expected a JSON object at the top level, got [1,2]");
  EXPECT_EQ(ParseError(R"({"id": "x"})").message(),
            "t.json:1: requests: missing (expected an array)");
  EXPECT_EQ(ParseError(R"({"requests": {}})").message(),
            "t.json:1: requests: expected an array, got {}");
  EXPECT_EQ(ParseError(R"({"requests": [5]})").message(),
            "t.json:1: requests[0]: expected a JSON object, got 5");
  EXPECT_EQ(ParseError(R"({"requests": [{"type": 1}]})").message(),
            "t.json:1: requests[0].type: expected a string, got 1");
}

TEST(WekaTraceTest, MalformedJsonNamesLineAndColumn) {
  const Status s = ParseError("{\"requests\": [\n  {\"t\": 0,, }\n]}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), StartsWith("t.json:2: malformed JSON at column 11: "));
  EXPECT_EQ(ParseError("{\"requests\": []} x").message(),
            "t.json:1: malformed JSON at column 18: extra data after the top-level value");
  EXPECT_EQ(ParseError("{\"requests\": []}\n\n  {}").message(),
            "t.json:3: malformed JSON at column 3: extra data after the top-level value");
  EXPECT_THAT(ParseError("").message(), StartsWith("t.json:1: malformed JSON at column 1: "));
  EXPECT_THAT(ParseError("{\"requests\": [\n").message(),
              StartsWith("t.json:2: malformed JSON at column 1: "));
}

// Errors in a pretty-printed file name the line of the value at fault (or of the object that
// lacks a field), found by a second pass over the file.
TEST(WekaTraceTest, FieldErrorsNameTheLineOfTheValue) {
  const std::string text = R"({
  "id": "x",
  "requests": [
    {"t": 0, "in": 1, "out": 1, "hash_ids": []},
    {"t": 1,
     "in": 9223372036854775807,
     "out": 1, "hash_ids": []}
  ]
})";
  EXPECT_EQ(ParseError(text).message(),
            "t.json:6: requests[1].in: 9223372036854775807 is out of range "
            "[0, 1099511627776] tokens");
  const std::string missing = R"({"requests": [
  {"t": 0, "in": 1, "out": 1, "hash_ids": []},
  {"t": 1, "type": "subagent", "agent_id": "a", "requests": [
    {"t": 0, "in": 1, "out": 1, "hash_ids": []},

    {"t": 0, "in": 1, "hash_ids": []}]}]})";
  EXPECT_EQ(ParseError(missing).message(),
            "t.json:6: requests[1].requests[1].out: missing (expected a non-negative integer)");
  // Of repeated keys the last counts, as in the parsed value.
  EXPECT_EQ(ParseError("{\"requests\": [\n{\"t\": 0, \"in\": 1, \"out\": 1, \"hash_ids\": [],\n"
                       "\"in\": -1}]}")
                .message(),
            "t.json:3: requests[0].in: -1 is out of range [0, 1099511627776] tokens");
  EXPECT_EQ(ParseError("\n\n[1,\n 2]").message(),
            "t.json:3: expected a JSON object at the top level, got [1,2]");
}

// Every number is held to the bounds.h rule of its kind where it is read: `in` and `out` are
// tokens in [0, 2^40], `t` and `think_time` times in [0, 365 days] (in s).
TEST(WekaTraceTest, NumbersOutOfTheirRangeNameTheField) {
  auto error = [](const std::string& request) {
    return ParseError(WithRequest(request)).message();
  };
  EXPECT_EQ(error(R"({"t": 0, "in": 9223372036854775807, "out": 0, "hash_ids": []})"),
            "t.json:1: requests[0].in: 9223372036854775807 is out of range "
            "[0, 1099511627776] tokens");
  EXPECT_EQ(error(R"({"t": 0, "in": 0, "out": 18446744073709551615, "hash_ids": []})"),
            "t.json:1: requests[0].out: 18446744073709551615 is out of range "
            "[0, 1099511627776] tokens");
  EXPECT_EQ(error(R"({"t": 0, "in": 1099511627777, "out": 0, "hash_ids": []})"),
            "t.json:1: requests[0].in: 1099511627777 is out of range [0, 1099511627776] tokens");
  EXPECT_EQ(error(R"({"t": 9.3e12, "in": 0, "out": 0, "hash_ids": []})"),
            "t.json:1: requests[0].t: 9300000000000 is out of range [0, 31536000] s");
  EXPECT_EQ(error(R"({"t": 1e309, "in": 0, "out": 0, "hash_ids": []})"),
            "t.json:1: requests[0].t: inf is out of range [0, 31536000] s");
  EXPECT_EQ(error(R"({"t": 0, "in": 0, "out": 0, "hash_ids": [], "think_time": -1e-9})"),
            "t.json:1: requests[0].think_time: -1.0000000000000001e-09 is out of range "
            "[0, 31536000] s");
  EXPECT_EQ(ParseError(WithSubagentRequest(R"({"t": 1e300, "in": 0, "out": 0, "hash_ids": []})"))
                .message(),
            "t.json:1: requests[1].requests[0].t: 1.0000000000000001e+300 is out of range "
            "[0, 31536000] s");
  EXPECT_EQ(ParseError(R"({"requests": [{"t": 31536001, "type": "subagent", "agent_id": "a",)"
                       R"( "requests": []}]})")
                .message(),
            "t.json:1: requests[0].t: 31536001 is out of range [0, 31536000] s");
  StatusOr<WekaConversation> edge =
      Parse(WithRequest(R"({"t": 31536000, "in": 1099511627776, "out": 1099511627776,)"
                        R"( "hash_ids": [], "think_time": 31536000})"));
  ASSERT_TRUE(edge.ok()) << edge.status();
  EXPECT_EQ(edge->requests[0].t, TimeNs(kMaxTimeNs));
  EXPECT_EQ(edge->requests[0].input_tokens, kMaxTokens);
}

// Derived quantities: at most ceil(in / block_size) hash ids, and the think times of one agent
// add up to at most 365 days (checked, so the sum cannot wrap either).
TEST(WekaTraceTest, DerivedQuantitiesAreBounded) {
  EXPECT_EQ(ParseError(R"({"block_size": 4, "requests": [{"t": 0, "in": 8, "out": 0,)"
                       R"( "hash_ids": [1, 2, 3]}]})")
                .message(),
            "t.json:1: requests[0].hash_ids: 3 ids for in 8, more than ceil(8 / 4) = 2");
  EXPECT_TRUE(Parse(R"({"block_size": 4, "requests": [{"t": 0, "in": 9, "out": 0,)"
                    R"( "hash_ids": [1, 2, 3]}]})")
                  .ok());
  const std::string year = R"({"t": 0, "in": 0, "out": 0, "hash_ids": [], "think_time": 31536000})";
  const std::string second = R"({"t": 0, "in": 0, "out": 0, "hash_ids": [], "think_time": 1})";
  EXPECT_TRUE(Parse(R"({"requests": [)" + year + "]}").ok());
  EXPECT_EQ(ParseError(R"({"requests": [)" + year + ", " + second + "]}").message(),
            "t.json:1: requests[1].think_time: the think times of this agent add up to more "
            "than 31536000 s (365 days) here");
  // Each agent has its own timeline: a sub-agent's think times are a separate sum.
  EXPECT_TRUE(Parse(R"({"requests": [)" + year +
                    R"(, {"t": 0, "type": "subagent", "agent_id": "a", "requests": [)" + year +
                    "]}]}")
                  .ok());
  EXPECT_EQ(
      ParseError(R"({"requests": [{"t": 0, "type": "subagent", "agent_id": "a", "requests": [)" +
                 second + ", " + year + "]}]}")
          .message(),
      "t.json:1: requests[0].requests[1].think_time: the think times of this agent add up "
      "to more than 31536000 s (365 days) here");
}

TEST(WekaTraceTest, LineLongerThanTheBoundIsRefused) {
  const std::string text = "{\"requests\": []}\n" + std::string(kMaxTraceLineBytes + 1, ' ');
  EXPECT_EQ(ParseError(text).message(), "t.json:2: line longer than 67108864 bytes");
}

// The reader streams the file in 64 KiB chunks: values cut by a chunk end parse whole.
TEST(WekaTraceTest, ValuesSpanningReadChunksParse) {
  for (const size_t pad : {65536 - 40, 65536 - 27, 65536 - 20, 65536 - 2}) {
    const std::string text = "{\"pad\": \"" + std::string(pad, 'p') +
                             R"(", "requests": [{"t": 12.5, "in": 123456, "out": 9,)"
                             R"( "hash_ids": [7, 8]}]})";
    StatusOr<WekaConversation> r = Parse(text);
    ASSERT_TRUE(r.ok()) << pad << ": " << r.status();
    ASSERT_EQ(r->requests.size(), 1u);
    EXPECT_EQ(r->requests[0].t, TimeNs(12'500'000'000)) << pad;
    EXPECT_EQ(r->requests[0].input_tokens, 123456) << pad;
    EXPECT_EQ(r->requests[0].hash_ids, (std::vector<uint64_t>{7, 8})) << pad;
  }
}

// ---- Files ------------------------------------------------------------------------------

class WekaTraceFileTest : public testing_support::ScratchDirTest {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
};

TEST_F(WekaTraceFileTest, ReadsAFileAndNamesItInErrors) {
  const std::string good = Write("good.json", kTrace);
  StatusOr<WekaConversation> ok = ReadWekaTrace(good);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->source, good);
  EXPECT_EQ(ok->TotalRequests(), 4);

  const std::string bad =
      Write("trace_0004.json", WithRequest(R"({"t": 0, "in": 0, "out": 0, "hash_ids": [1.5]})"));
  StatusOr<WekaConversation> r = ReadWekaTrace(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), bad +
                                      ":1: requests[0].hash_ids: expected an array of "
                                      "non-negative integers, element 0 is 1.5E0");
}

TEST_F(WekaTraceFileTest, MissingFileIsNotFound) {
  const std::string path = (dir_ / "missing.json").string();
  StatusOr<WekaConversation> r = ReadWekaTrace(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(),
            "cannot open trace file \"" + path + "\": No such file or directory");
}

TEST_F(WekaTraceFileTest, DirectoriesExpandToTheirJsonFilesByName) {
  const std::string b = Write("b.json", kTrace);
  const std::string a = Write("a.json", kTrace);
  Write("notes.txt", "not a trace");
  std::filesystem::create_directories(dir_ / "sub.json");  // A directory, not a file.
  const std::string single = Write("z_single.json", kTrace);
  StatusOr<std::vector<std::string>> files =
      ExpandWekaTracePaths({single, dir_.string(), "no/such/file.json"});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(single, a, b, single, "no/such/file.json"));

  StatusOr<std::vector<WekaConversation>> read = ReadWekaTraces({dir_.string()});
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 3u);
  EXPECT_EQ((*read)[0].source, a);
  EXPECT_EQ((*read)[2].source, single);
}

TEST_F(WekaTraceFileTest, GzipFilesReadAsTheirTextAndErrorsNameTheirLine) {
  const std::string plain = Write("a.json", kTrace);
  const std::string gz = (dir_ / "b.json.gz").string();
  testing_support::WriteBytes(gz, testing_support::Gzip(kTrace));
  StatusOr<std::vector<WekaConversation>> read = ReadWekaTraces({dir_.string()});
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[1].source, gz);
  (*read)[1].source = plain;
  EXPECT_EQ((*read)[0], (*read)[1]);

  // An error in a gzip file names the line of the value, found by decompressing it again.
  const std::string bad = (dir_ / "bad.json.gz").string();
  testing_support::WriteBytes(
      bad, testing_support::Gzip("{\"requests\": [\n{\"t\": 0, \"in\": 1, \"out\": 1,\n"
                                 "\"hash_ids\": [1, \"x\"]}]}"));
  EXPECT_EQ(
      ReadWekaTrace(bad).status(),
      InvalidArgumentError(bad + ":3: requests[0].hash_ids: expected an array of non-negative "
                                 "integers, element 1 is \"x\""));
  const std::string cut = (dir_ / "cut.json.gz").string();
  const std::string whole = testing_support::Gzip(kTrace);
  testing_support::WriteBytes(cut, whole.substr(0, whole.size() - 12));
  EXPECT_THAT(ReadWekaTrace(cut).status().message(), HasSubstr("cannot decompress: "));
}

TEST_F(WekaTraceFileTest, EmptyDirectoryAndNoPathsAreErrors) {
  std::filesystem::create_directories(dir_ / "empty");
  StatusOr<std::vector<std::string>> empty = ExpandWekaTracePaths({(dir_ / "empty").string()});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("holds no *.json or *.json.gz files"));
  EXPECT_FALSE(ExpandWekaTracePaths({}).ok());

  StatusOr<std::vector<WekaConversation>> missing = ReadWekaTraces({(dir_ / "x.json").string()});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(WekaTraceDataTest, ParsesThePublicSubagentTrace) {
  // Bundled gzip-compressed (data/weka/NOTICE.md); the reader decompresses it as it reads.
  const std::filesystem::path path =
      std::filesystem::path(AGENTKV_DATA_DIR) / "weka" / "trace_0277.json.gz";
  ASSERT_TRUE(std::filesystem::exists(path)) << "bundled trace " << path << " is absent";
  StatusOr<WekaConversation> r = ReadWekaTrace(path.string());
  ASSERT_TRUE(r.ok()) << r.status();
  // Counted with an independent JSON reader (Python's json module).
  EXPECT_EQ(r->id, "trace_0277");
  EXPECT_EQ(r->requests.size(), 9u);
  ASSERT_EQ(r->subagents.size(), 4u);
  EXPECT_EQ(r->subagents[0].agent_id, "agent_001");
  EXPECT_EQ(r->subagents[0].completion, TimeNs(79'224'000'000));
  EXPECT_EQ(r->subagents[0].duration, TimeNs(59'750'000'000));
  EXPECT_EQ(r->subagents[0].spawn(), TimeNs(19'474'000'000));
  EXPECT_EQ(r->subagents[0].status, SubagentStatus::kCompleted);
  EXPECT_THAT(r->subagents[0].models, ElementsAre("claude-haiku-4-5-20251001"));
  EXPECT_EQ(r->subagents[0].requests[0].model, "claude-haiku-4-5-20251001");
  EXPECT_EQ(r->requests[0].model, "claude-opus-4-5-20251101");
  EXPECT_GT(r->requests[0].api_time, TimeNs(0));
  // Sub-agent 3 runs on the main agent's model, the first three on Haiku.
  EXPECT_FALSE(r->SharesMainModel(r->subagents[0]));
  EXPECT_TRUE(r->SharesMainModel(r->subagents[3]));
  EXPECT_EQ(r->subagents[0].requests.size(), 4u);
  EXPECT_EQ(r->subagents[0].requests[0].hash_ids.size(), 182u);
  EXPECT_EQ(r->subagents[0].requests[0].hash_ids.front(), 1448u);
  EXPECT_EQ(r->TotalRequests(), 9 + 4 + 12 + 17 + 11);
  EXPECT_TRUE(r->fallbacks.none());
}

// The public trace whose background sub-agents record `"duration_ms": null` (data/
// weka-null-fields/NOTICE.md) is read, each of them spawned at its recorded t.
TEST(WekaTraceDataTest, ReadsThePublicTraceWithNullDurations) {
  const std::filesystem::path path =
      std::filesystem::path(AGENTKV_DATA_DIR) / "weka-null-fields" / "trace_0295.json.gz";
  StatusOr<WekaConversation> r = ReadWekaTrace(path.string());
  ASSERT_TRUE(r.ok()) << r.status();
  // Counted with an independent JSON reader (Python's json module).
  EXPECT_EQ(r->id, "trace_0295");
  ASSERT_EQ(r->subagents.size(), 8u);
  EXPECT_EQ(r->fallbacks, (WekaFallbacks{.subagent_duration = 4}));
  int async = 0;
  for (const WekaSubagent& sub : r->subagents) {
    if (sub.status != SubagentStatus::kAsyncLaunched) continue;
    ++async;
    EXPECT_EQ(sub.duration, TimeNs(0)) << sub.agent_id;
    EXPECT_EQ(sub.spawn(), sub.completion) << sub.agent_id;
  }
  EXPECT_EQ(async, 4);
  EXPECT_EQ(r->subagents[1].completion, TimeNs(8'783'325'000'000));
}

}  // namespace
}  // namespace agentkv::sim
