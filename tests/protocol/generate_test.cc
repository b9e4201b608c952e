#include "agentkv/protocol/generate.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <optional>
#include <string>
#include <vector>

#include "protocol_test_support.h"

namespace agentkv::protocol {
namespace {

using testing_support::ExpectInputError;
using testing_support::ForEachMalformedVariant;
using testing_support::ReadTestdata;

GenerateRequest MustParse(std::string_view body) {
  StatusOr<GenerateRequest> request = ParseGenerateRequest(body);
  EXPECT_TRUE(request.ok()) << request.status();
  return request.ok() ? *std::move(request) : GenerateRequest{};
}

Status ParseError(std::string_view body, const ParseLimits& limits = {}) {
  return ParseGenerateRequest(body, limits).status();
}

TEST(GenerateRequestTest, ParsesTheRelaxRequest) {
  const std::string body = ReadTestdata("generate_relax.json");
  const GenerateRequest r = MustParse(body);
  EXPECT_EQ(r.raw, body);
  EXPECT_EQ(r.rid, "req-17:0");
  EXPECT_EQ(r.session_id, "sess-abc");
  EXPECT_FALSE(r.text.has_value());
  EXPECT_EQ(r.input_ids, (std::vector<int64_t>{151644, 872, 198}));
  EXPECT_EQ(r.sampling_params.max_new_tokens, 4096);
  EXPECT_EQ(r.sampling_params.temperature, 1.0);
  EXPECT_EQ(r.sampling_params.top_p, 1.0);
  EXPECT_EQ(r.sampling_params.top_k, -1);
  EXPECT_TRUE(r.return_logprob);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.priority.has_value());
  EXPECT_FALSE(r.has_session_params);
}

TEST(GenerateRequestTest, ParsesTheMinimalDocsRequestWithDefaults) {
  const GenerateRequest r = MustParse(ReadTestdata("generate_minimal.json"));
  EXPECT_EQ(r.text, "FULL_PROMPT_FOR_THIS_TURN");
  EXPECT_FALSE(r.input_ids.has_value());
  EXPECT_FALSE(r.rid.has_value());
  EXPECT_EQ(r.session_id, "agent-42");
  EXPECT_EQ(r.sampling_params, SamplingParams{});  // max_new_tokens 128 is the default.
  const GenerateRequest bare = MustParse(R"({"text": "hi"})");
  EXPECT_EQ(bare.sampling_params.max_new_tokens, 128);
  EXPECT_EQ(bare.sampling_params.top_k, -1);
}

TEST(GenerateRequestTest, ReadsEverySamplingParameterTheEmulatorUses) {
  const GenerateRequest r = MustParse(R"({"input_ids": [], "stream": true, "priority": -3,
      "sampling_params": {"max_new_tokens": 0, "temperature": 0, "top_p": 0.5, "top_k": 20,
      "stop": ["</s>", "\n\n"], "stop_token_ids": [2, 151645], "ignore_eos": true,
      "min_new_tokens": 0, "n": 1, "json_schema": null, "custom_params": {"a": 1}}})");
  EXPECT_EQ(r.input_ids, std::vector<int64_t>{});
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.priority, -3);
  const SamplingParams& p = r.sampling_params;
  EXPECT_EQ(p.max_new_tokens, 0);
  EXPECT_EQ(p.temperature, 0.0);
  EXPECT_EQ(p.top_p, 0.5);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"</s>", "\n\n"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int64_t>{2, 151645}));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(MustParse(R"({"text":"", "sampling_params": {"stop": "END", "max_new_tokens": 4,
                          "min_new_tokens": 4}})")
                .sampling_params.stop,
            std::vector<std::string>{"END"});
}

TEST(GenerateRequestTest, NullCountsAsAbsent) {
  const GenerateRequest r = MustParse(R"({"text": "x", "rid": null, "input_ids": null,
      "session_id": null, "session_params": null, "sampling_params": null, "stream": null,
      "priority": null})");
  EXPECT_FALSE(r.rid.has_value());
  EXPECT_FALSE(r.session_id.has_value());
  EXPECT_FALSE(r.has_session_params);
  EXPECT_FALSE(r.stream);
}

TEST(GenerateRequestTest, UnknownFieldsAreIgnoredAndKeptInRaw) {
  const std::string body =
      R"({"text": "x", "lora_path": "a", "image_data": [1], "routed_dp_rank": 3,
          "custom_labels": {"k": "v"}, "return_routed_experts": true})";
  EXPECT_EQ(MustParse(body).raw, body);
}

TEST(GenerateRequestTest, ReadsTheParentSessionOnlyWhenItIsAString) {
  StatusOr<GenerateRequest> r =
      ParseGenerateRequest(R"({"text": "a", "session_id": "c", "agentkv_parent_session": "p"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->has_parent_session_field);
  EXPECT_EQ(r->parent_session, "p");
  r = ParseGenerateRequest(R"({"text": "a", "agentkv_parent_session": 7})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->has_parent_session_field);
  EXPECT_FALSE(r->parent_session.has_value());
  r = ParseGenerateRequest(R"({"text": "a"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_parent_session_field);
  EXPECT_FALSE(r->parent_session.has_value());
}

TEST(GenerateRequestTest, ReadsAgentkvsPauseHint) {
  EXPECT_EQ(MustParse(R"({"text": "x", "agentkv_pause": "tool_call"})").pause, "tool_call");
  EXPECT_FALSE(MustParse(R"({"text": "x"})").pause.has_value());
  EXPECT_FALSE(MustParse(R"({"text": "x", "agentkv_pause": null})").pause.has_value());
  EXPECT_EQ(ParseError(R"({"text": "x", "agentkv_pause": 3})").code(),
            StatusCode::kInvalidArgument);
}

TEST(GenerateRequestTest, CacheSaltThenExtraKeyNameTheCacheNamespace) {
  EXPECT_EQ(MustParse(R"({"text": "x"})").cache_namespace, "");
  EXPECT_EQ(MustParse(R"({"text": "x", "extra_key": "k"})").cache_namespace, "k");
  EXPECT_EQ(MustParse(R"({"text": "x", "extra_key": "k", "cache_salt": "s"})").cache_namespace,
            "sk");
  EXPECT_EQ(MustParse(R"({"text": "x", "cache_salt": null})").cache_namespace, "");
  EXPECT_EQ(ParseError(R"({"text": "x", "extra_key": ["a"]})").code(),
            StatusCode::kInvalidArgument);
}

TEST(GenerateRequestTest, RejectsBatches) {
  const Status batch = InvalidArgumentError("batch requests are not supported");
  EXPECT_EQ(ParseError(R"({"text": ["a", "b"]})"), batch);
  EXPECT_EQ(ParseError(R"({"input_ids": [[1, 2], [3]]})"), batch);
  EXPECT_EQ(ParseError(R"({"text": "a", "rid": ["r1", "r2"]})"), batch);
  EXPECT_EQ(ParseError(R"({"text": "a", "sampling_params": [{}, {}]})"), batch);
  EXPECT_EQ(ParseError(R"([{"text": "a"}])"), batch);
}

TEST(GenerateRequestTest, NeedsExactlyOnePrompt) {
  EXPECT_EQ(ParseError(R"({"rid": "r"})"),
            InvalidArgumentError("one of text, input_ids or input_embeds is required"));
  EXPECT_EQ(ParseError(R"({"text": "a", "input_ids": [1]})"),
            InvalidArgumentError("only one of text, input_ids or input_embeds may be given"));
  EXPECT_EQ(ParseError(R"({"input_embeds": [[0.1, 0.2]]})"),
            InvalidArgumentError("input_embeds: not supported"));
}

TEST(GenerateRequestTest, RejectsSessionIdWithSessionParams) {
  EXPECT_EQ(ParseError(R"({"text": "a", "session_id": "s", "session_params": {"id": "s"}})"),
            InvalidArgumentError("session_id cannot be combined with session_params"));
  const GenerateRequest legacy = MustParse(R"({"text": "a", "session_params": {"id": "s"}})");
  EXPECT_TRUE(legacy.has_session_params);
  EXPECT_EQ(ParseError(R"({"text": "a", "session_params": "s"})"),
            InvalidArgumentError("session_params: expected an object"));
}

TEST(GenerateRequestTest, WrongTypesNameTheJsonPath) {
  struct Case {
    std::string_view body;
    std::string_view message;
  };
  const Case cases[] = {
      {R"({"text": 1})", "text: expected a string"},
      {R"({"input_ids": [1, -2]})", "input_ids[1]: expected a non-negative integer"},
      {R"({"input_ids": [1, 2.0]})", "input_ids[1]: expected a non-negative integer"},
      {R"({"input_ids": "1 2"})", "input_ids: expected a list"},
      {R"({"text": "a", "rid": 5})", "rid: expected a string"},
      {R"({"text": "a", "session_id": {}})", "session_id: expected a string"},
      {R"({"text": "a", "stream": "yes"})", "stream: expected a boolean"},
      {R"({"text": "a", "return_logprob": 1})", "return_logprob: expected a boolean"},
      {R"({"text": "a", "priority": 1.5})", "priority: expected an integer"},
      {R"({"text": "a", "sampling_params": 3})", "sampling_params: expected an object"},
      {R"({"text": "a", "sampling_params": {"max_new_tokens": -1}})",
       "sampling_params.max_new_tokens: expected a non-negative integer"},
      {R"({"text": "a", "sampling_params": {"max_new_tokens": 1.5}})",
       "sampling_params.max_new_tokens: expected a non-negative integer"},
      {R"({"text": "a", "sampling_params": {"temperature": "hot"}})",
       "sampling_params.temperature: expected a number"},
      {R"({"text": "a", "sampling_params": {"temperature": -0.1}})",
       "sampling_params.temperature: expected a non-negative number"},
      {R"({"text": "a", "sampling_params": {"top_p": 0}})",
       "sampling_params.top_p: expected a number in (0, 1]"},
      {R"({"text": "a", "sampling_params": {"top_k": 0}})",
       "sampling_params.top_k: expected -1 or a positive integer"},
      {R"({"text": "a", "sampling_params": {"stop": 1}})",
       "sampling_params.stop: expected a string or a list of strings"},
      {R"({"text": "a", "sampling_params": {"stop": ["a", 2]}})",
       "sampling_params.stop[1]: expected a string"},
      {R"({"text": "a", "sampling_params": {"stop_token_ids": [true]}})",
       "sampling_params.stop_token_ids[0]: expected a non-negative integer"},
      {R"({"text": "a", "sampling_params": {"ignore_eos": 0}})",
       "sampling_params.ignore_eos: expected a boolean"},
      {R"({"text": "a", "sampling_params": {"max_new_tokens": 2, "min_new_tokens": 3}})",
       "sampling_params.min_new_tokens: expected at most max_new_tokens (2)"},
      {R"("text")", "generate request: expected a JSON object"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ParseError(c.body), InvalidArgumentError(std::string(c.message))) << c.body;
  }
}

TEST(GenerateRequestTest, LimitsAreResourceExhausted) {
  const std::string body = R"({"input_ids": [1, 2, 3, 4]})";
  EXPECT_EQ(ParseError(body, ParseLimits{.max_body_bytes = 10}).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(ParseError(body, ParseLimits{.max_input_ids = 3}),
            ResourceExhaustedError("input_ids: 4 entries, over the limit of 3"));
  EXPECT_TRUE(ParseGenerateRequest(body, ParseLimits{.max_input_ids = 4}).ok());
  const std::string deep =
      R"({"text": "a", "x": )" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_EQ(ParseError(deep).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(ParseGenerateRequest(deep, ParseLimits{.max_depth = 101}).ok());
}

TEST(GenerateRequestTest, MalformedJsonIsInvalidArgument) {
  for (const std::string_view bad : {"", "{", "{\"text\": \"a\"", "{\"text\": \"a\"}}",
                                     "{\"text\": 'a'}", "nul", "{\"text\": \"\\x\"}"}) {
    EXPECT_EQ(ParseError(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
}

// What the gateway does: set its own rid on the client's bytes and forward them. The result
// parses with the new rid and every other member byte-identical.
TEST(GenerateRequestTest, SettingRidKeepsTheRestOfTheRequest) {
  const std::string body = ReadTestdata("generate_minimal.json");
  StatusOr<std::string> forwarded =
      SetTopLevelField(body, "rid", "\"gw-1:0\"", JsonLimitsFor(ParseLimits{}));
  ASSERT_TRUE(forwarded.ok()) << forwarded.status();
  EXPECT_EQ(*forwarded, R"({"text": "FULL_PROMPT_FOR_THIS_TURN", "sampling_params": )"
                        R"({"max_new_tokens": 128}, "session_id": "agent-42","rid":"gw-1:0"})");
  const GenerateRequest r = MustParse(*forwarded);
  EXPECT_EQ(r.rid, "gw-1:0");
  EXPECT_EQ(r.session_id, "agent-42");
}

TEST(GenerateRequestTest, MalformedBodiesNeverCrash) {
  for (const std::string_view name : {"generate_relax.json", "generate_minimal.json"}) {
    ForEachMalformedVariant(ReadTestdata(name), 11, [](const std::string& body) {
      const StatusOr<GenerateRequest> request = ParseGenerateRequest(body);
      ExpectInputError(request.status());
      if (!request.ok()) return;
      EXPECT_EQ(request->raw, body);
      EXPECT_NE(request->text.has_value(), request->input_ids.has_value());
      StatusOr<std::string> edited = SetTopLevelField(body, "rid", "\"x\"");
      ASSERT_TRUE(edited.ok()) << edited.status();
      const StatusOr<GenerateRequest> reparsed = ParseGenerateRequest(*edited);
      ASSERT_TRUE(reparsed.ok()) << reparsed.status();
      EXPECT_EQ(reparsed->rid, "x");
    });
  }
}

// ---- input_ids read while parsing (GenerateParseMode::kSummary and kFull alike) ----

StatusOr<GenerateRequest> ParseSummary(std::string_view body, const ParseLimits& limits = {}) {
  return ParseGenerateRequest(body, limits, GenerateParseMode::kSummary);
}

// A reference for the prompt, written the obvious way over a Boost.JSON DOM: the count of a
// top-level `input_ids` list (the member the DOM keeps), or the error its first bad entry gives.
std::optional<StatusOr<int64_t>> ReferenceIdCount(std::string_view body) {
  boost::system::error_code ec;
  const boost::json::value document = boost::json::parse(body, ec);
  if (ec || !document.is_object()) return std::nullopt;
  const boost::json::value* ids = document.as_object().if_contains("input_ids");
  if (ids == nullptr || !ids->is_array()) return std::nullopt;
  const boost::json::array& list = ids->as_array();
  for (size_t i = 0; i < list.size(); ++i) {
    const std::optional<int64_t> id = AsInt64(list[i]);
    if (!id.has_value() || *id < 0) {
      if (i == 0 && list[i].is_array()) return StatusOr<int64_t>(InvalidArgumentError("batch"));
      return StatusOr<int64_t>(InvalidArgumentError("input_ids[" + std::to_string(i) + "]"));
    }
  }
  return StatusOr<int64_t>(static_cast<int64_t>(list.size()));
}

// Both modes accept and refuse the same bodies with the same statuses; an accepted id prompt
// has the same count in both, and kFull keeps the ids.
void ExpectModesAgree(std::string_view body, const ParseLimits& limits = {}) {
  const StatusOr<GenerateRequest> full = ParseGenerateRequest(body, limits);
  const StatusOr<GenerateRequest> summary = ParseSummary(body, limits);
  ASSERT_EQ(full.status(), summary.status()) << body;
  if (!full.ok()) return;
  EXPECT_EQ(full->input_id_count, summary->input_id_count) << body;
  EXPECT_FALSE(summary->input_ids.has_value()) << body;
  EXPECT_TRUE(summary->raw.empty()) << body;
  EXPECT_EQ(full->raw, body);
  if (full->input_id_count.has_value()) {
    ASSERT_TRUE(full->input_ids.has_value()) << body;
    EXPECT_EQ(static_cast<int64_t>(full->input_ids->size()), *full->input_id_count) << body;
  }
  EXPECT_EQ(summary->rid, full->rid);
  EXPECT_EQ(summary->session_id, full->session_id);
  EXPECT_EQ(summary->text, full->text);
  EXPECT_EQ(summary->sampling_params, full->sampling_params);
}

TEST(GenerateInputIdsTest, SummaryCountsWithoutKeepingIdsOrBody) {
  const StatusOr<GenerateRequest> r =
      ParseSummary(R"({"rid": "a", "input_ids": [5, 0, 9223372036854775807], "stream": true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->input_id_count, 3);
  EXPECT_FALSE(r->input_ids.has_value());
  EXPECT_TRUE(r->raw.empty());
  EXPECT_FALSE(r->text.has_value());
  EXPECT_EQ(r->rid, "a");
  EXPECT_TRUE(r->stream);
  const GenerateRequest full = MustParse(R"({"input_ids": [5, 0, 9223372036854775807]})");
  EXPECT_EQ(full.input_ids, (std::vector<int64_t>{5, 0, 9223372036854775807}));
  EXPECT_EQ(full.input_id_count, 3);
  EXPECT_FALSE(MustParse(R"({"text": "a"})").input_id_count.has_value());
  EXPECT_EQ(ParseSummary(R"({"input_ids": []})")->input_id_count, 0);
}

TEST(GenerateInputIdsTest, BadEntriesNameTheirIndexInBothModes) {
  struct Case {
    std::string_view body;
    Status status;
  };
  const Status batch = InvalidArgumentError("batch requests are not supported");
  const auto bad = [](int index) {
    return InvalidArgumentError("input_ids[" + std::to_string(index) +
                                "]: expected a non-negative integer");
  };
  const Case cases[] = {
      // Numbers past int64, past uint64, negative, floats, exponents.
      {R"({"input_ids": [1, 9223372036854775808]})", bad(1)},
      {R"({"input_ids": [18446744073709551615]})", bad(0)},
      {R"({"input_ids": [1, 2, 184467440737095516150000]})", bad(2)},
      {R"({"input_ids": [-1]})", bad(0)},
      {R"({"input_ids": [-9223372036854775808]})", bad(0)},
      {R"({"input_ids": [1, 1.0]})", bad(1)},
      {R"({"input_ids": [1e3]})", bad(0)},
      {R"({"input_ids": [1, 2, 1e400]})", bad(2)},
      // Other types, the first bad entry named.
      {R"({"input_ids": [1, "2", null]})", bad(1)},
      {R"({"input_ids": [true]})", bad(0)},
      {R"({"input_ids": [0, null]})", bad(1)},
      // Nesting: a list first is a batch; a list or object later is a bad entry, whatever it holds.
      {R"({"input_ids": [[1, 2], [3]]})", batch},
      {R"({"input_ids": [[]]})", batch},
      {R"({"input_ids": [[1], 2]})", batch},
      {R"({"input_ids": [1, [2, [3]], 4]})", bad(1)},
      {R"({"input_ids": [{"input_ids": [1]}, 2]})", bad(0)},
      {R"({"input_ids": [1, {"a": "x"}, -1]})", bad(1)},
      // Not a list.
      {R"({"input_ids": {"0": 1}})", InvalidArgumentError("input_ids: expected a list")},
      {R"({"input_ids": 7})", InvalidArgumentError("input_ids: expected a list")},
      {R"({"input_ids": "1 2"})", InvalidArgumentError("input_ids: expected a list")},
      // A bad entry and a second prompt: the prompt rule comes first, as before.
      {R"({"text": "a", "input_ids": [-1]})",
       InvalidArgumentError("only one of text, input_ids or input_embeds may be given")},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ParseError(c.body), c.status) << c.body;
    EXPECT_EQ(ParseSummary(c.body).status(), c.status) << c.body;
  }
}

TEST(GenerateInputIdsTest, OnlyTheTopLevelMemberIsThePrompt) {
  // An `input_ids` nested anywhere else is an ordinary member, kept in the DOM untouched.
  const StatusOr<GenerateRequest> nested =
      ParseSummary(R"({"text": "a", "x": {"input_ids": [[1], -2]}, "y": [{"input_ids": [1]}]})");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_FALSE(nested->input_id_count.has_value());
  EXPECT_EQ(nested->text, "a");
  // An escaped key is the same key.
  EXPECT_EQ(ParseSummary(R"({"input\u005fids": [1, 2]})")->input_id_count, 2);
  // A null list is absent.
  EXPECT_EQ(ParseError(R"({"input_ids": null})"),
            InvalidArgumentError("one of text, input_ids or input_embeds is required"));
  // A root that is a list is the batch form, whatever it holds.
  EXPECT_EQ(ParseSummary(R"([[1, 2]])").status(),
            InvalidArgumentError("batch requests are not supported"));
}

TEST(GenerateInputIdsTest, RepeatedMemberCountsTheListTheDomKeeps) {
  for (const std::string_view body :
       {R"({"input_ids": [1, 2], "input_ids": [3]})", R"({"input_ids": [1], "input_ids": [2, 3]})",
        R"({"input_ids": [-1], "input_ids": [2, 3]})", R"({"input_ids": [1], "input_ids": [-3]})",
        R"({"input_ids": 5, "input_ids": [2, 3]})", R"({"input_ids": [2, 3], "input_ids": 5})"}) {
    const std::optional<StatusOr<int64_t>> reference = ReferenceIdCount(body);
    const StatusOr<GenerateRequest> summary = ParseSummary(body);
    if (reference.has_value() && reference->ok()) {
      ASSERT_TRUE(summary.ok()) << body << ": " << summary.status();
      EXPECT_EQ(summary->input_id_count, **reference) << body;
    } else {
      EXPECT_FALSE(summary.ok()) << body;
    }
    ExpectModesAgree(body);
  }
}

TEST(GenerateInputIdsTest, LimitsHoldWithoutStoringTheList) {
  std::string body = R"({"input_ids": [)";
  for (int i = 0; i < 100'000; ++i) body += (i > 0 ? ",1" : "1");
  body += "]}";
  EXPECT_EQ(ParseSummary(body)->input_id_count, 100'000);
  EXPECT_EQ(ParseSummary(body, ParseLimits{.max_input_ids = 99'999}).status(),
            ResourceExhaustedError("input_ids: 100000 entries, over the limit of 99999"));
  ExpectModesAgree(body, ParseLimits{.max_input_ids = 99'999});
  // The size check comes before the entries': an oversized list with a bad entry is still
  // ResourceExhausted.
  EXPECT_EQ(ParseSummary(R"({"input_ids": [1, -1, 3]})", ParseLimits{.max_input_ids = 2}).status(),
            ResourceExhaustedError("input_ids: 3 entries, over the limit of 2"));
  // Nesting inside the list counts against the depth limit.
  const std::string deep =
      R"({"input_ids": [1, )" + std::string(70, '[') + std::string(70, ']') + "]}";
  EXPECT_EQ(ParseSummary(deep).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ParseSummary(deep, ParseLimits{.max_depth = 80}).status(),
            InvalidArgumentError("input_ids[1]: expected a non-negative integer"));
  // Truncated and trailing bytes fail as ParseJson fails.
  for (const std::string_view bad :
       {R"({"input_ids": [1, 2)", R"({"input_ids": [1, 2]} x)", R"({"input_ids": [1,, 2]})",
        R"({"input_ids": [01]})", R"({"input_ids": [1 2]})"}) {
    EXPECT_EQ(ParseSummary(bad).status().code(), StatusCode::kInvalidArgument) << bad;
    ExpectModesAgree(bad);
  }
}

TEST(GenerateInputIdsTest, MalformedVariantsAgreeAcrossModesAndWithTheReference) {
  const std::string seeds[] = {
      ReadTestdata("generate_relax.json"),
      R"({"input_ids": [1, 22, 333, [4], {"a": [5]}, "6", -7, 8.5], "rid": "r"})",
      R"({"input_ids": [[1, 2]], "sampling_params": {"stop_token_ids": [1, 2]}})",
      R"({"rid": "x", "input_ids": [0, 18446744073709551615, 9223372036854775807]})",
  };
  uint64_t seed = 1;
  for (const std::string& text : seeds) {
    ForEachMalformedVariant(text, seed++, [](const std::string& body) {
      ExpectModesAgree(body);
      const StatusOr<GenerateRequest> summary = ParseSummary(body);
      ExpectInputError(summary.status());
      const std::optional<StatusOr<int64_t>> reference = ReferenceIdCount(body);
      if (summary.ok() && summary->input_id_count.has_value()) {
        ASSERT_TRUE(reference.has_value() && reference->ok()) << body;
        EXPECT_EQ(*summary->input_id_count, **reference) << body;
      } else if (reference.has_value() && !reference->ok()) {
        EXPECT_FALSE(summary.ok()) << body;
      }
    });
  }
}

}  // namespace
}  // namespace agentkv::protocol
