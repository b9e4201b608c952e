// End-to-end tests of what the agentkv gateway tells the engines about retention and order, on
// 127.0.0.1: the expected pause forwarded as the request's priority (honoured by an engine that
// runs SGLang's priority eviction) or as agentkv_pause (the emulator's gap-aware order),
// program-level FCFS priorities, and what happens when an engine lacks the flag they need.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/protocol/generate_response.h"
#include "agentkv/service/gateway/gateway.h"
#include "agentkv/service/gateway/gateway_request.h"
#include "gateway_test_support.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using namespace gateway_testing;
namespace http = net::http;
namespace json = boost::json;

// Gap-aware retention on an unmodified SGLang: the expected pause becomes the request's
// `priority` (what --radix-eviction-policy priority orders by); a client's own priority wins,
// requests without a known pause get none, and a bad X-Agentkv-Pause is a 400 that reaches no
// engine.
TEST(GatewayTest, TheExpectedPauseIsForwardedAsTheRequestPriority) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.pause_priority = *protocol::ParsePausePriorities("tool_call=10,human_turn=0");
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  // A distinct rid per request: a rid still in flight at the gateway gets the next attempt
  // number.
  const auto body = [](std::string_view rid) {
    return R"({"rid": ")" + std::string(rid) + R"(", "text": "hi"})";
  };
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate", body("a"), {{"X-Agentkv-Pause", "tool_call"}})
          .status,
      200);
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate", body("b"), {{"X-Agentkv-Pause", "human_turn"}})
          .status,
      200);
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate", body("c"),
                 {{"X-Agentkv-Pause", "subagent_wait"}})
                .status,
            200);
  ASSERT_EQ(
      Post(client, gateway->base_url(), "/generate",
           R"({"rid": "d", "text": "hi", "priority": 99})", {{"X-Agentkv-Pause", "tool_call"}})
          .status,
      200);
  EXPECT_EQ(Post(client, gateway->base_url(), "/generate", body("e"), {{"X-Agentkv-Pause", "soon"}})
                .status,
            400);
  // Without a session an attempt of rid "x" is "x:0".
  const auto generates = engine.generates();
  ASSERT_EQ(generates.size(), 4u);
  EXPECT_EQ(generates[0].body, R"({"rid": "a:0", "text": "hi","priority":10})");
  EXPECT_EQ(generates[1].body, R"({"rid": "b:0", "text": "hi","priority":0})");
  EXPECT_EQ(generates[2].body, R"({"rid": "c:0", "text": "hi"})");
  EXPECT_EQ(generates[3].body, R"({"rid": "d:0", "text": "hi", "priority": 99})");
}

// Program-level FCFS on an unmodified SGLang (--agentic-program-fcfs): each forwarded body gets
// the `priority` of its program's arrival, older programs higher (a continuing session keeps
// its program's value, a sub-agent takes its parent's, a closed session's next request is a
// new program); an untrusted caller's own priority is replaced, a trusted caller's kept. Off,
// the body is forwarded as before.
TEST(GatewayTest, ProgramFcfsStampsOlderProgramsWithHigherPriorities) {
  for (const bool program_fcfs : {false, true}) {
    SCOPED_TRACE(program_fcfs ? "program_fcfs" : "off");
    FakeEngine engine(/*hold=*/false);
    LogCapture logs;
    GatewayOptions options = BaseOptions(logs);
    options.engine_urls = {engine.base_url()};
    options.bearer_token = "t0k3n";
    options.parent_hint_key = "hint-key";
    options.program_fcfs = program_fcfs;
    auto gateway = StartGateway(options);
    ASSERT_NE(gateway, nullptr);
    net::HttpClient client(ClientOptions());
    const auto post = [&](std::string body, net::HeaderList headers) {
      ASSERT_EQ(Post(client, gateway->base_url(), "/generate", std::move(body), headers).status,
                200);
    };
    const auto text = [](std::string_view rid) {
      return R"({"rid": ")" + std::string(rid) + R"(", "text": "hi"})";
    };
    post(text("a"), {{"X-Session-Id", "old"}});  // Program 0.
    post(text("b"), {{"X-Session-Id", "new"}});  // Program 1.
    post(text("c"), {{"X-Session-Id", "old"}});  // Program 0 continues.
    post(text("d"), {});                         // Program 2: no session.
    post(text("e"), {{"X-Session-Id", "child"},  // Program 3's session, parent "old".
                     {"X-Agentkv-Parent-Session", "old"},
                     {"X-Agentkv-Parent-Signature", SignParentHint("hint-key", "child", "old")}});
    post(R"({"rid": "f", "text": "hi", "priority": 2000000000})", {{"X-Session-Id", "new"}});
    post(R"({"rid": "g", "text": "hi", "priority": 5})",
         {{"X-Session-Id", "new"}, {"Authorization", "Bearer t0k3n"}});
    ASSERT_EQ(Post(client, gateway->base_url(), "/v1/sessions/old/close", "",
                   {{"Authorization", "Bearer t0k3n"}})
                  .status,
              200);
    post(text("h"), {{"X-Session-Id", "old"}});  // Program 4: a new incarnation.
    const auto generates = engine.generates();
    ASSERT_EQ(generates.size(), 8u);
    if (!program_fcfs) {
      EXPECT_EQ(generates[0].body, R"({"rid": "a:0", "text": "hi"})");
      EXPECT_EQ(generates[5].body, R"({"rid": "f:0", "text": "hi", "priority": 2000000000})");
      for (const auto& generate : generates) {
        if (generate.body.find("\"rid\": \"f") == std::string::npos &&
            generate.body.find("\"rid\": \"g") == std::string::npos) {
          EXPECT_EQ(generate.body.find("priority"), std::string::npos) << generate.body;
        }
      }
      continue;
    }
    constexpr int64_t kTop = int64_t{1} << 30;
    const auto priority = [&](size_t i) {
      return json::parse(generates[i].body).at("priority").as_int64();
    };
    EXPECT_EQ(generates[0].body, R"({"rid": "a:0", "text": "hi","priority":1073741824})");
    EXPECT_EQ(priority(0), kTop);      // a: the oldest program.
    EXPECT_EQ(priority(1), kTop - 1);  // b.
    EXPECT_EQ(priority(2), kTop);      // c: old's program still.
    EXPECT_EQ(priority(3), kTop - 2);  // d.
    EXPECT_EQ(priority(4), kTop);      // e: its parent's program.
    EXPECT_EQ(priority(5), kTop - 1);  // f: an untrusted priority replaced.
    EXPECT_EQ(generates[6].body, R"({"rid": "g:0", "text": "hi", "priority": 5})");
    EXPECT_EQ(priority(7), kTop - 4);  // h: old ended; a new program.
    gateway->Shutdown(2s);
  }
}

// End to end on an engine that runs SGLang's --radix-eviction-policy priority (the emulator):
// with the pause priority, the KV of a session in a tool loop outlives that of a session
// waiting for its user, although it is older; without it, LRU evicts the older one first.
TEST(GatewayTest, ThePausePriorityKeepsAToolLoopsKvOverAHumanTurnsOnAPriorityEngine) {
  const auto cached_on_return = [](bool pause_priority) {
    EngineEmulatorOptions engine_options = EngineOptions();
    engine_options.runtime.engine.kv_pool.max_total_tokens = 1024;  // 64 pages of 16 tokens
    Fleet fleet = StartFleet(1, "round_robin", engine_options);
    LogCapture logs;
    GatewayOptions options = BaseOptions(logs);
    options.engine_urls = EngineUrls(fleet);
    if (pause_priority)
      options.pause_priority = *protocol::ParsePausePriorities("tool_call=60,human_turn=20");
    auto gateway = StartGateway(options);
    EXPECT_NE(gateway, nullptr);
    net::HttpClient client(ClientOptions());
    const auto generate = [&](int64_t first, int64_t tokens, const std::string& pause) {
      net::HeaderList headers;
      if (!pause.empty()) headers.emplace_back("X-Agentkv-Pause", pause);
      const net::ClientResponse r = Post(client, gateway->base_url(), "/generate",
                                         R"({"input_ids": )" + InputIds(first, tokens) +
                                             R"(, "sampling_params": {"max_new_tokens": 8}})",
                                         headers);
      EXPECT_EQ(r.status, 200) << r.body;
      StatusOr<protocol::GenerateResponse> response = protocol::ParseGenerateResponse(r.body);
      EXPECT_TRUE(response.ok()) << response.status();
      return response.ok() ? response->meta_info.cached_tokens : -1;
    };
    generate(1, 320, "tool_call");        // the older session, in a tool loop
    generate(100000, 320, "human_turn");  // the newer one, waiting for its user
    generate(200000, 400, "");            // needs room: some of the two must go
    return std::pair{generate(1, 320, "tool_call"), generate(100000, 320, "human_turn")};
  };
  const auto [tool_lru, human_lru] = cached_on_return(false);
  const auto [tool_prio, human_prio] = cached_on_return(true);
  // 19 full pages of the 320-token prompt (the last token is always computed).
  EXPECT_LT(tool_lru, 304);
  EXPECT_EQ(tool_prio, 304);
  EXPECT_LT(human_prio, 304);
  EXPECT_LE(human_prio, human_lru);
}

// End to end on agentkv's own engines (the emulator with --eviction-order gap_aware): the
// gateway forwards the expected pause as agentkv_pause, and the blocks of a session that ended
// go before an older live session's; without the hint the engine evicts by LRU.
TEST(GatewayTest, TheForwardedPauseDrivesTheEmulatorsGapAwareOrder) {
  const auto cached_on_return = [](bool forward) {
    EngineEmulatorOptions engine_options = EngineOptions();
    engine_options.runtime.engine.kv_pool.max_total_tokens = 1024;  // 64 pages of 16 tokens
    engine_options.runtime.radix_eviction_policy = RadixEvictionPolicy::kLru;
    engine_options.runtime.engine.cache.eviction_order = kv::EvictionOrder::kGapAware;
    Fleet fleet = StartFleet(1, "round_robin", engine_options);
    LogCapture logs;
    GatewayOptions options = BaseOptions(logs);
    options.engine_urls = EngineUrls(fleet);
    options.forward_pause = forward;
    auto gateway = StartGateway(options);
    EXPECT_NE(gateway, nullptr);
    net::HttpClient client(ClientOptions());
    const auto generate = [&](int64_t first, int64_t tokens, const std::string& pause) {
      net::HeaderList headers;
      if (!pause.empty()) headers.emplace_back("X-Agentkv-Pause", pause);
      const net::ClientResponse r = Post(client, gateway->base_url(), "/generate",
                                         R"({"input_ids": )" + InputIds(first, tokens) +
                                             R"(, "sampling_params": {"max_new_tokens": 8}})",
                                         headers);
      EXPECT_EQ(r.status, 200) << r.body;
      StatusOr<protocol::GenerateResponse> response = protocol::ParseGenerateResponse(r.body);
      EXPECT_TRUE(response.ok()) << response.status();
      return response.ok() ? response->meta_info.cached_tokens : -1;
    };
    generate(1, 320, "tool_call");         // the older session, in a tool loop
    generate(100000, 320, "session_end");  // the newer one, which ended
    generate(200000, 400, "");             // needs room
    return generate(1, 320, "tool_call");
  };
  // 19 full pages of the 320-token prompt (the last token is always computed).
  EXPECT_LT(cached_on_return(false), 304);
  EXPECT_EQ(cached_on_return(true), 304);
}

TEST(GatewayTest, AMissingEngineFlagRefusesTheStartOrDisablesTheFeature) {
  EngineEmulatorOptions no_session_cache = EngineOptions();
  no_session_cache.runtime.enable_session_radix_cache = false;
  Fleet fleet = StartFleet(1, "round_robin", no_session_cache);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  options.agentic.agentic_session_lifecycle = true;
  StatusOr<std::unique_ptr<Gateway>> refused = Gateway::Start(options, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(fleet.engines[0]->base_url()), std::string::npos);
  EXPECT_NE(refused.status().message().find("--enable-session-radix-cache"), std::string::npos);
  options.prerequisite_policy = PrerequisitePolicy::kDisable;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  EXPECT_FALSE(gateway->lifecycle_enabled());
  EXPECT_FALSE(gateway->admission_enabled());
  // Admission without a backend is refused before anything starts.
  GatewayOptions admission = BaseOptions(logs);
  admission.router_url = fleet.router->base_url();
  admission.agentic.agentic_program_admission = true;
  EXPECT_EQ(Gateway::Start(admission, nullptr).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace agentkv::service
