// The gateway's per-request rules, without a socket: body reading, session identity, the
// reservation estimate, the forwarded headers and body edits, the bearer token, the close path,
// the signed parent hint, the error-to-status mapping and the retry advice of error answers.
#include "agentkv/service/gateway/gateway_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/base/bounds.h"

namespace agentkv::service {
namespace {

namespace http = net::http;
using ::testing::HasSubstr;

ClientRequest Parse(GatewayRoute route, const std::string& body) {
  StatusOr<ClientRequest> parsed = ParseClientRequest(route, body);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *std::move(parsed) : ClientRequest{};
}

TEST(ParseClientRequestTest, GenerateReadsIdentityPromptAndDecodeBudget) {
  const ClientRequest r =
      Parse(GatewayRoute::kGenerate, R"({"input_ids":[1,2,3,4,5],"rid":"req-1","session_id":"s-1",)"
                                     R"("stream":true,"sampling_params":{"max_new_tokens":64}})");
  EXPECT_EQ(r.rid, "req-1");
  EXPECT_EQ(r.session_id, "s-1");
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.prompt_token_ids, 5);
  EXPECT_EQ(r.max_new_tokens, 64);
  const ClientRequest text = Parse(GatewayRoute::kGenerate, R"({"text":"0123456789"})");
  EXPECT_FALSE(text.prompt_token_ids.has_value());
  EXPECT_EQ(text.prompt_text_bytes, 10);
  EXPECT_EQ(text.max_new_tokens, 128);  // SGLang's default.
  EXPECT_FALSE(text.rid.has_value());
  EXPECT_TRUE(Parse(GatewayRoute::kGenerate, R"({"text":"x","session_params":{"id":"a"}})")
                  .has_session_params);
}

// The gateway only counts a /generate prompt's ids (protocol::GenerateParseMode::kSummary): a
// long list is counted exactly, a bad entry is refused naming it, and the body is kept as sent.
TEST(ParseClientRequestTest, GenerateCountsInputIdsAndKeepsTheBody) {
  std::string body = R"({"input_ids":[)";
  for (int i = 0; i < 100'000; ++i) body += (i > 0 ? "," : "") + std::to_string(1000 + i);
  body += R"(],"sampling_params":{"max_new_tokens":1},"session_id":"s"})";
  const ClientRequest r = Parse(GatewayRoute::kGenerate, body);
  EXPECT_EQ(r.prompt_token_ids, 100'000);
  EXPECT_EQ(r.body, body);
  EXPECT_EQ(ExactPromptTokens(r, std::nullopt), 100'000);
  for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"input_ids":[1,2,-3]})", "input_ids[2]: expected a non-negative integer"},
           {R"({"input_ids":[1,99999999999999999999]})",
            "input_ids[1]: expected a non-negative integer"},
           {R"({"input_ids":[1,[2]]})", "input_ids[1]: expected a non-negative integer"},
           {R"({"input_ids":[[1],[2]]})", "batch requests are not supported"}}) {
    EXPECT_EQ(ParseClientRequest(GatewayRoute::kGenerate, bad).status(),
              InvalidArgumentError(message))
        << bad;
  }
}

TEST(ParseClientRequestTest, RejectsInvalidBodiesWithTheirReason) {
  for (const char* body : {"", "not json", "[]", R"({"text":"a","input_ids":[1]})",
                           R"({"input_ids":[[1],[2]]})", R"({"text":"a","rid":7})"}) {
    StatusOr<ClientRequest> r = ParseClientRequest(GatewayRoute::kGenerate, body);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
  }
  for (GatewayRoute route : {GatewayRoute::kChatCompletions, GatewayRoute::kCompletions}) {
    for (const char* body : {"[1]", "\"x\"", "{", R"({"rid":1})", R"({"session_id":[]})",
                             R"({"stream":"yes"})", R"({"max_tokens":-1})"}) {
      EXPECT_EQ(ParseClientRequest(route, body).status().code(), StatusCode::kInvalidArgument)
          << body;
    }
  }
  const std::string long_rid(kMaxRidBytes + 1, 'r');
  EXPECT_FALSE(
      ParseClientRequest(GatewayRoute::kGenerate, R"({"text":"a","rid":")" + long_rid + "\"}")
          .ok());
}

TEST(ParseClientRequestTest, OpenAiRoutesCountPromptTextOrTokenIds) {
  const ClientRequest chat =
      Parse(GatewayRoute::kChatCompletions,
            R"({"messages":[{"role":"user","content":"hello"}],"max_tokens":10,"session_id":"s"})");
  EXPECT_EQ(chat.prompt_text_bytes, 4 + 5);  // "user" + "hello"
  EXPECT_EQ(chat.max_new_tokens, 10);
  EXPECT_EQ(chat.session_id, "s");
  const ClientRequest completion_ids =
      Parse(GatewayRoute::kCompletions,
            R"({"prompt":[1,2,3],"max_completion_tokens":7,"max_tokens":99})");
  EXPECT_EQ(completion_ids.prompt_token_ids, 3);
  EXPECT_EQ(completion_ids.max_new_tokens, 7);
  const ClientRequest completion_text =
      Parse(GatewayRoute::kCompletions, R"({"prompt":"abcdefgh"})");
  EXPECT_EQ(completion_text.prompt_text_bytes, 8);
  EXPECT_FALSE(completion_text.max_new_tokens.has_value());
}

TEST(SessionIdTest, BodyWinsOverHeaderAndBadIdsAreRejected) {
  EXPECT_EQ(*ResolveSessionId(std::string("body"), "header", "X-Session-Id"), "body");
  EXPECT_EQ(*ResolveSessionId(std::nullopt, "header", "X-Session-Id"), "header");
  EXPECT_FALSE(ResolveSessionId(std::nullopt, "", "X-Session-Id")->has_value());
  StatusOr<std::optional<std::string>> bad = ResolveSessionId(std::nullopt, "a b", "X-Session-Id");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("X-Session-Id"), std::string::npos);
  EXPECT_FALSE(ResolveSessionId(std::string(kMaxSessionIdBytes + 1, 's'), "", "h").ok());
  EXPECT_TRUE(ResolveSessionId(std::string(kMaxSessionIdBytes, 's'), "", "h").ok());
}

TEST(HeaderParsingTest, ProtectedScopeAndPromptTokens) {
  EXPECT_TRUE(*ParseProtectedHeader("1"));
  EXPECT_TRUE(*ParseProtectedHeader("TRUE"));
  EXPECT_FALSE(*ParseProtectedHeader(""));
  EXPECT_FALSE(*ParseProtectedHeader("0"));
  EXPECT_FALSE(ParseProtectedHeader("yes").ok());
  EXPECT_TRUE(*ParseScopeHeader(""));
  EXPECT_TRUE(*ParseScopeHeader("train"));
  EXPECT_FALSE(*ParseScopeHeader("eval"));
  EXPECT_FALSE(ParseScopeHeader("Eval").ok());
  EXPECT_EQ(*ParsePromptTokensHeader("123"), 123);
  EXPECT_FALSE(ParsePromptTokensHeader("")->has_value());
  EXPECT_FALSE(ParsePromptTokensHeader("-1").ok());
  EXPECT_FALSE(ParsePromptTokensHeader("12x").ok());
}

// A client's prompt-token claim is bounded by what its body can hold, and only the gateway's
// bearer token may skip admission.
TEST(HeaderParsingTest, PromptClaimsAreBoundedAndBypassNeedsTheToken) {
  EXPECT_EQ(MaxPromptTokensOfBody(2), 2 + kPromptTemplateTokens);
  EXPECT_EQ(BoundPromptTokens(179'000, 2), 2 + kPromptTemplateTokens);
  EXPECT_EQ(BoundPromptTokens(100, 2), 100);
  EXPECT_EQ(BoundPromptTokens(std::nullopt, 2), std::nullopt);
  EXPECT_EQ(MaxPromptTokensOfBody(size_t{1} << 50), kMaxTokens);
  EXPECT_TRUE(TrustOf("Bearer s3cret", "s3cret").honour_bypass_headers);
  EXPECT_FALSE(TrustOf("Bearer wrong", "s3cret").honour_bypass_headers);
  EXPECT_FALSE(TrustOf("", "s3cret").honour_bypass_headers);
  EXPECT_FALSE(TrustOf("", "").honour_bypass_headers);  // No token: nobody may.
  EXPECT_FALSE(TrustOf("Bearer ", "").honour_bypass_headers);
}

// X-Agentkv-Session-Retain sets (1, true), clears (0, false) or leaves (absent) the session's
// retention; anything else is a 400 naming the header and the value.
TEST(HeaderParsingTest, RetainSetsClearsOrLeavesTheMark) {
  EXPECT_EQ(*ParseRetainHeader(""), std::nullopt);
  EXPECT_EQ(*ParseRetainHeader("1"), true);
  EXPECT_EQ(*ParseRetainHeader("True"), true);
  EXPECT_EQ(*ParseRetainHeader("0"), false);
  EXPECT_EQ(*ParseRetainHeader("FALSE"), false);
  EXPECT_EQ(
      ParseRetainHeader("yes").status(),
      InvalidArgumentError("X-Agentkv-Session-Retain: expected 1, true, 0 or false, got \"yes\""));
  EXPECT_EQ(
      ParseRetainHeader(std::string(100, 'x')).status().message().size(),
      std::string("X-Agentkv-Session-Retain: expected 1, true, 0 or false, got \"\"").size() + 64)
      << "a hostile value is not echoed whole";
}

// Token counts from a header or a body are range-checked where they enter: the bound itself
// passes, one past it, int64's limit and beyond are a 400 naming the field and the value.
TEST(HeaderParsingTest, TokenCountsAreBoundedWhereTheyEnter) {
  EXPECT_EQ(*ParsePromptTokensHeader("1099511627776"), kMaxTokens);
  for (const char* value :
       {"1099511627777", "9223372036854775000", "9223372036854775807", "99999999999999999999999"}) {
    const StatusOr<std::optional<int64_t>> parsed = ParsePromptTokensHeader(value);
    ASSERT_FALSE(parsed.ok()) << value;
    EXPECT_THAT(parsed.status().message(), HasSubstr("X-Prompt-Tokens: "));
    EXPECT_THAT(parsed.status().message(), HasSubstr("out of range [0, 1099511627776]"));
  }
  struct Case {
    GatewayRoute route;
    std::string body;
    std::string field;
  };
  for (const Case& c : std::vector<Case>{
           {GatewayRoute::kGenerate,
            R"({"text": "a", "sampling_params": {"max_new_tokens": 9223372036854775807}})",
            "sampling_params.max_new_tokens"},
           {GatewayRoute::kGenerate,
            R"({"text": "a", "sampling_params": {"max_new_tokens": 1099511627777}})",
            "sampling_params.max_new_tokens"},
           {GatewayRoute::kChatCompletions, R"({"messages": [], "max_tokens": 1099511627777})",
            "max_tokens"},
           {GatewayRoute::kCompletions,
            R"({"prompt": "a", "max_completion_tokens": 9223372036854775807})",
            "max_completion_tokens"},
           {GatewayRoute::kCompletions, R"({"prompt": "a", "max_tokens": -1})", "max_tokens"},
       }) {
    const StatusOr<ClientRequest> parsed = ParseClientRequest(c.route, c.body);
    ASSERT_FALSE(parsed.ok()) << c.body;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), testing::StartsWith(c.field + ": ")) << c.body;
  }
  const StatusOr<ClientRequest> edge = ParseClientRequest(
      GatewayRoute::kChatCompletions, R"({"messages": [], "max_tokens": 1099511627776})");
  ASSERT_TRUE(edge.ok()) << edge.status();
  // The largest accepted values cannot overflow the reservation.
  EXPECT_EQ(EstimateReservationTokens(*edge, kMaxTokens, std::nullopt, 0), kMaxTokens);
}

// The parent hint is the gateway's to set from a verified header; in a client body it is
// refused on every route, whatever its value and however its key is spelled.
TEST(ParseClientRequestTest, RefusesTheParentHintInTheBody) {
  for (const auto& [route, body] : std::vector<std::pair<GatewayRoute, std::string>>{
           {GatewayRoute::kGenerate, R"({"text": "a", "agentkv_parent_session": "victim"})"},
           {GatewayRoute::kGenerate, R"({"text": "a", "agentkv_parent_sessio\u006e": "v"})"},
           {GatewayRoute::kChatCompletions, R"({"messages": [], "agentkv_parent_session": 1})"},
           {GatewayRoute::kCompletions, R"({"prompt": "a", "agentkv_parent_session": null})"}}) {
    const StatusOr<ClientRequest> parsed = ParseClientRequest(route, body);
    ASSERT_FALSE(parsed.ok()) << body;
    EXPECT_THAT(parsed.status().message(),
                testing::StartsWith("agentkv_parent_session: not accepted in the body"));
  }
}

// Only an exact prompt (token ids, or the client's count) is checked against the context; a
// prompt estimated from bytes never is.
TEST(ExactPromptTokensTest, TokenIdsThenTheHeaderElseNone) {
  ClientRequest text;
  text.prompt_text_bytes = 1'000'000;
  EXPECT_EQ(ExactPromptTokens(text, std::nullopt), std::nullopt);
  EXPECT_EQ(ExactPromptTokens(text, 7), 7);
  ClientRequest ids;
  ids.prompt_token_ids = 12;
  EXPECT_EQ(ExactPromptTokens(ids, 7), 12);
  // A batch completion: each prompt is held to the context on its own, so the longest counts;
  // the reservation counts them all.
  const ClientRequest batch =
      Parse(GatewayRoute::kCompletions, R"({"prompt": [[1, 2, 3], [4, 5], [6]]})");
  EXPECT_EQ(ExactPromptTokens(batch, std::nullopt), 3);
  EXPECT_EQ(EstimatePromptTokens(batch, std::nullopt), 6);
  const ClientRequest one = Parse(GatewayRoute::kCompletions, R"({"prompt": [1, 2, 3, 4]})");
  EXPECT_EQ(ExactPromptTokens(one, std::nullopt), 4);
}

TEST(ReservationTest, PromptPlusDecodeCappedByTheExpectedDecodeCap) {
  const ClientRequest ids =
      Parse(GatewayRoute::kGenerate,
            R"({"input_ids":[1,2,3,4],"sampling_params":{"max_new_tokens":100}})");
  EXPECT_EQ(EstimateReservationTokens(ids, std::nullopt, std::nullopt, 4096), 104);
  EXPECT_EQ(EstimateReservationTokens(ids, std::nullopt, 20, 4096), 24);
  // Token ids win over the header; the header wins over the byte estimate.
  EXPECT_EQ(EstimatePromptTokens(ids, 999), 4);
  const ClientRequest text = Parse(GatewayRoute::kGenerate, R"({"text":"123456789"})");
  EXPECT_EQ(EstimatePromptTokens(text, std::nullopt), 3);  // ceil(9 / 4)
  EXPECT_EQ(EstimatePromptTokens(text, 50), 50);
  EXPECT_EQ(EstimateReservationTokens(text, std::nullopt, std::nullopt, 4096), 3 + 128);
  const ClientRequest chat = Parse(GatewayRoute::kChatCompletions, R"({"messages":[]})");
  EXPECT_EQ(EstimateReservationTokens(chat, 10, std::nullopt, 4096), 10 + 4096);
  EXPECT_EQ(EstimateReservationTokens(chat, 10, 256, 4096), 10 + 256);
}

TEST(ForwardHeadersTest, KeepsTheRouterAllowlistAndDropsTheGatewayToken) {
  net::Request request(http::verb::post, "/generate", 11);
  request.set("X-Request-Id", "r1");
  request.set("x-request-id-extra", "r2");
  request.set("traceparent", "00-abc-def-01");
  request.set("X-SMG-Routing-Key", "k");
  request.set("Cookie", "secret");
  request.set("X-Session-Id", "s");
  request.set(http::field::authorization, "Bearer gateway-token");
  net::HeaderList headers = ForwardHeaders(request, "gateway-token");
  net::HeaderList expected = {{"X-Request-Id", "r1"},
                              {"x-request-id-extra", "r2"},
                              {"traceparent", "00-abc-def-01"},
                              {"X-SMG-Routing-Key", "k"}};
  EXPECT_EQ(headers, expected);
  // A client's own credential for the router passes.
  request.set(http::field::authorization, "Bearer router-key");
  headers = ForwardHeaders(request, "gateway-token");
  EXPECT_EQ(headers.back(),
            (std::pair<std::string, std::string>{"Authorization", "Bearer router-key"}));
  SetHeader(headers, "x-smg-routing-key", "session-1");
  EXPECT_EQ(
      std::count_if(headers.begin(), headers.end(), [](const auto& h) { return h.second == "k"; }),
      0);
  EXPECT_EQ(headers.back(),
            (std::pair<std::string, std::string>{"x-smg-routing-key", "session-1"}));
  EXPECT_FALSE(IsForwardedHeader("content-length"));
  EXPECT_TRUE(IsForwardedHeader("TraceState"));
  EXPECT_TRUE(IsForwardedHeader("X-Request-Id-Hop"));
  EXPECT_TRUE(IsForwardedHeader("AUTHORIZATION"));
  EXPECT_FALSE(IsForwardedHeader("x-request-i"));
  EXPECT_FALSE(IsForwardedHeader("x-request-idx"));
  EXPECT_FALSE(IsForwardedHeader("authorizatio\xc5"));
  EXPECT_FALSE(IsForwardedHeader(""));
}

TEST(ForwardBodyTest, SplicesOnlyTheOwnedMembers) {
  const std::string body = "{ \"text\" : \"hi\",\n  \"rid\": \"old\", \"x\": 1.50 }";
  ForwardEdits edits;
  edits.rid = "req:0";
  edits.session_id = "s-1";
  edits.parent_session = "p-0";
  StatusOr<std::string> out = BuildForwardBody(body, edits);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "{ \"text\" : \"hi\",\n  \"rid\": \"req:0\", \"x\": 1.50,\"session_id\":\"s-1\","
            "\"agentkv_parent_session\":\"p-0\" }");
  ForwardEdits rid_only;
  rid_only.rid = "a\"b";
  EXPECT_EQ(*BuildForwardBody("{}", rid_only), R"({"rid":"a\"b"})");
}

TEST(PausePriorityTest, ChatBodiesShowTheirPauseAndTheHeaderNamesOne) {
  const auto pause = [](const std::string& messages) {
    return Parse(GatewayRoute::kChatCompletions, R"({"messages": )" + messages + "}").pause;
  };
  EXPECT_EQ(pause(R"([{"role": "user", "content": "hi"}])"), PauseKind::kHumanTurn);
  EXPECT_EQ(pause(R"([{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": []},
                      {"role": "tool", "tool_call_id": "1", "content": "42"}])"),
            PauseKind::kToolCall);
  EXPECT_EQ(pause(R"([{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}])"),
            PauseKind::kToolCall);
  EXPECT_EQ(pause(R"([{"role": "user", "content": [{"type": "text", "text": "x"}]}])"),
            PauseKind::kHumanTurn);
  EXPECT_EQ(pause(R"([{"role": "system", "content": "s"}])"), PauseKind::kUnknown);
  EXPECT_EQ(pause("[]"), PauseKind::kUnknown);
  EXPECT_EQ(pause("[1]"), PauseKind::kUnknown);
  EXPECT_EQ(Parse(GatewayRoute::kGenerate, R"({"text": "hi"})").pause, PauseKind::kUnknown);
  // A client priority is kept.
  EXPECT_TRUE(Parse(GatewayRoute::kGenerate, R"({"text": "hi", "priority": 3})").has_priority);
  EXPECT_TRUE(
      Parse(GatewayRoute::kChatCompletions, R"({"messages": [], "priority": 3})").has_priority);
  EXPECT_FALSE(Parse(GatewayRoute::kChatCompletions, R"({"messages": []})").has_priority);

  EXPECT_EQ(*protocol::ParsePauseHint(kPauseHeader, ""), PauseKind::kUnknown);
  EXPECT_EQ(*protocol::ParsePauseHint(kPauseHeader, "tool_call"), PauseKind::kToolCall);
  EXPECT_EQ(*protocol::ParsePauseHint(kPauseHeader, "subagent_wait"), PauseKind::kSubagentWait);
  EXPECT_EQ(*protocol::ParsePauseHint(kPauseHeader, "human_turn"), PauseKind::kHumanTurn);
  EXPECT_EQ(*protocol::ParsePauseHint(kPauseHeader, "session_end"), PauseKind::kSessionEnd);
  EXPECT_THAT(protocol::ParsePauseHint(kPauseHeader, "later").status().message(),
              HasSubstr("X-Agentkv-Pause"));
}

// --agentic-program-fcfs: older programs get higher values, within [0, 2^30] (sgl-router reads
// a 32-bit priority), saturating at 0.
TEST(ProgramFcfsPriorityTest, OlderProgramsGetHigherValuesWithinTheRouterRange) {
  EXPECT_EQ(ProgramFcfsPriority(0), int32_t{1} << 30);
  EXPECT_EQ(ProgramFcfsPriority(1), (int32_t{1} << 30) - 1);
  EXPECT_GT(ProgramFcfsPriority(41), ProgramFcfsPriority(42));
  EXPECT_EQ(ProgramFcfsPriority(uint64_t{1} << 30), 0);
  EXPECT_EQ(ProgramFcfsPriority(std::numeric_limits<uint64_t>::max()), 0);
}

TEST(PausePriorityTest, TheMapParsesEachKindOnceWithinRange) {
  StatusOr<protocol::PausePriorities> map =
      protocol::ParsePausePriorities("tool_call=10,human_turn=0");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->For(PauseKind::kToolCall), 10);
  EXPECT_EQ(map->For(PauseKind::kHumanTurn), 0);
  EXPECT_EQ(map->For(PauseKind::kSubagentWait), std::nullopt);
  EXPECT_EQ(map->For(PauseKind::kUnknown), std::nullopt);
  EXPECT_EQ(protocol::ParsePausePriorities("session_end=1")->For(PauseKind::kSessionEnd), 1);
  EXPECT_TRUE(protocol::ParsePausePriorities("")->empty());
  for (const char* bad : {"tool_call", "tool_call=", "tool_call=-1", "tool_call=1000001", "tool=1",
                          "tool_call=1,tool_call=2", "tool_call=1,", "human_turn=x"}) {
    const Status s = protocol::ParsePausePriorities(bad).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--agentic-pause-priority")) << bad;
  }
}

TEST(PausePriorityTest, TheForwardedBodyCarriesThePriority) {
  ForwardEdits edits;
  edits.rid = "r:0";
  edits.priority = 10;
  edits.pause = "tool_call";
  EXPECT_EQ(*BuildForwardBody(R"({"text": "hi"})", edits),
            R"({"text": "hi","rid":"r:0","priority":10,"agentkv_pause":"tool_call"})");
}

TEST(SessionClosePathTest, ExtractsAndDecodesTheId) {
  EXPECT_EQ(ParseSessionClosePath("/v1/sessions/agent-42/close"), "agent-42");
  EXPECT_EQ(ParseSessionClosePath("/v1/sessions/a%3Ab/close"), "a:b");
  EXPECT_FALSE(ParseSessionClosePath("/v1/sessions//close").has_value());
  EXPECT_FALSE(ParseSessionClosePath("/v1/sessions/a/b/close").has_value());
  EXPECT_FALSE(ParseSessionClosePath("/v1/sessions/a%20b/close").has_value());
  EXPECT_FALSE(ParseSessionClosePath("/v1/sessions/a").has_value());
  EXPECT_FALSE(ParseSessionClosePath("/v1/sessions/a/close/").has_value());
}

TEST(ParentHintTest, HonouredOnlyWithAKeyAndAValidSignature) {
  const std::string signature = SignParentHint("k", "sess-1", "parent-0");
  EXPECT_EQ(signature, "e5aa1da6ce0997cbf0635a60a5dfcfbb15c9d8d2dea32fe35f1144abd8206596");
  const std::optional<std::string> session = "sess-1";
  EXPECT_EQ(VerifyParentHint("k", session, "parent-0", signature), ParentHintVerdict::kAccepted);
  EXPECT_EQ(VerifyParentHint("k", session, "", signature), ParentHintVerdict::kAbsent);
  EXPECT_EQ(VerifyParentHint("", session, "parent-0", signature), ParentHintVerdict::kRejected);
  EXPECT_EQ(VerifyParentHint("other", session, "parent-0", signature),
            ParentHintVerdict::kRejected);
  EXPECT_EQ(VerifyParentHint("k", std::string("sess-2"), "parent-0", signature),
            ParentHintVerdict::kRejected);
  EXPECT_EQ(VerifyParentHint("k", std::nullopt, "parent-0", signature),
            ParentHintVerdict::kRejected);
  EXPECT_EQ(VerifyParentHint("k", session, "parent-0", ""), ParentHintVerdict::kRejected);
  EXPECT_EQ(VerifyParentHint("k", session, "parent-0", signature.substr(1)),
            ParentHintVerdict::kRejected);
}

TEST(HttpStatusTest, OneMappingForEveryGatewayError) {
  EXPECT_EQ(HttpStatusFor(ErrorFor(InvalidArgumentError("x"))), 400);
  EXPECT_EQ(HttpStatusFor(ErrorFor(ResourceExhaustedError("x"))), 413);
  EXPECT_EQ(HttpStatusFor(ErrorFor(NotFoundError("x"))), 404);
  EXPECT_EQ(HttpStatusFor(ErrorFor(AlreadyExistsError("x"))), 409);
  EXPECT_EQ(HttpStatusFor(ErrorFor(FailedPreconditionError("x"))), 409);
  EXPECT_EQ(HttpStatusFor(ErrorFor(UnavailableError("x"))), 502);
  EXPECT_EQ(HttpStatusFor(ErrorFor(DeadlineExceededError("x"))), 504);
  EXPECT_EQ(HttpStatusFor(ErrorFor(InternalError("x"))), 500);
  EXPECT_EQ(HttpStatusFor(GatewayError::kUnauthorized), 401);
  EXPECT_EQ(HttpStatusFor(GatewayError::kShuttingDown), 503);
  EXPECT_EQ(HttpStatusFor(GatewayError::kOverloaded), 503);
  EXPECT_EQ(HttpStatusFor(GatewayError::kTooManyRequests), 429);
  EXPECT_EQ(HttpStatusFor(GatewayError::kClientGone), 499);
}

// The retry advice of every error the gateway answers itself: never retry what fails again
// or what a retry would make worse (the 409 of a session being closed would open a new
// incarnation of it), and leave the SDK's own rule (retry 429 and 5xx) where waiting helps.
TEST(ShouldRetryTest, ForbidsRetriesThatCannotHelpOrWouldReopenAClosedSession) {
  for (GatewayError error : {GatewayError::kBadRequest, GatewayError::kUnauthorized,
                             GatewayError::kNotFound, GatewayError::kMethodNotAllowed,
                             GatewayError::kSessionClosing, GatewayError::kPayloadTooLarge}) {
    EXPECT_EQ(ShouldRetry(error), false) << HttpStatusFor(error);
  }
  for (GatewayError error :
       {GatewayError::kTooManyRequests, GatewayError::kInternal, GatewayError::kUpstreamFailed,
        GatewayError::kShuttingDown, GatewayError::kOverloaded, GatewayError::kUpstreamTimeout}) {
    EXPECT_EQ(ShouldRetry(error), std::nullopt) << HttpStatusFor(error);
  }
}

net::Request RequestTo(std::string target) {
  net::Request request(http::verb::post, target, 11);
  request.keep_alive(true);
  return request;
}

// The answer itself: status, the family's body and the header the OpenAI SDKs read first.
TEST(ShouldRetryTest, TheErrorAnswerCarriesTheAdviceInXShouldRetry) {
  const net::Response closing = ErrorResponse(
      RequestTo("/v1/chat/completions"), GatewayError::kSessionClosing, "session s is closing");
  EXPECT_EQ(closing.result_int(), 409);
  EXPECT_EQ(closing["x-should-retry"], "false");
  EXPECT_EQ(closing.body(),
            R"({"object":"error","message":"session s is closing","type":"ConflictError",)"
            R"("param":null,"code":409})");
  const net::Response refused =
      ErrorResponse(RequestTo("/generate"), GatewayError::kBadRequest, "can never be admitted");
  EXPECT_EQ(refused.result_int(), 400);
  EXPECT_EQ(refused["x-should-retry"], "false");
  EXPECT_EQ(refused.body(), R"({"error":{"message":"can never be admitted","code":400}})");
  for (GatewayError error :
       {GatewayError::kTooManyRequests, GatewayError::kOverloaded, GatewayError::kShuttingDown}) {
    const net::Response retried = ErrorResponse(RequestTo("/v1/completions"), error, "later");
    EXPECT_EQ(retried.result_int(), HttpStatusFor(error));
    EXPECT_EQ(retried.find("x-should-retry"), retried.end()) << HttpStatusFor(error);
  }
}

TEST(SharedPrefixTest, BothHeadersOrNeither) {
  EXPECT_EQ(*ParseSharedPrefixHeaders("", ""), std::nullopt);
  const StatusOr<std::optional<SharedPrefix>> both = ParseSharedPrefixHeaders("group-1", "512");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(**both, (SharedPrefix{"group-1", 512}));
  EXPECT_THAT(ParseSharedPrefixHeaders("group-1", "").status().message(),
              HasSubstr("X-Agentkv-Prefix-Tokens: required with X-Agentkv-Prefix-Key"));
  EXPECT_THAT(ParseSharedPrefixHeaders("", "5").status().message(),
              HasSubstr("X-Agentkv-Prefix-Key: required"));
  EXPECT_THAT(ParseSharedPrefixHeaders("a b", "5").status().message(),
              HasSubstr("X-Agentkv-Prefix-Key"));
  EXPECT_THAT(ParseSharedPrefixHeaders("g", "-5").status().message(),
              HasSubstr("X-Agentkv-Prefix-Tokens"));
  EXPECT_THAT(ParseSharedPrefixHeaders("g", "99999999999999").status().message(),
              HasSubstr("X-Agentkv-Prefix-Tokens"));
}

TEST(ReservationTest, UncachedReservationSkipsTheHeldPromptAndTheSharedPrefix) {
  const ClientRequest ids =
      Parse(GatewayRoute::kGenerate,
            R"({"input_ids":[1,2,3,4,5,6,7,8,9,10],"sampling_params":{"max_new_tokens":100}})");
  EXPECT_EQ(EstimateUncachedReservation(ids, std::nullopt, std::nullopt, 4096, 0, 0),
            (control::UncachedReservation{110, 0}));
  EXPECT_EQ(EstimateUncachedReservation(ids, std::nullopt, 20, 4096, 6, 0),
            (control::UncachedReservation{24, 0}));
  EXPECT_EQ(EstimateUncachedReservation(ids, std::nullopt, 20, 4096, 0, 8),
            (control::UncachedReservation{22, 8}));
}

}  // namespace
}  // namespace agentkv::service
