// End-to-end tests of the agentkv gateway's session lifecycle on 127.0.0.1: turns carry the
// session to the engines, the close (explicit, idle or failing on one engine) ends it on every
// engine, a retained session outlives the idle timeout, and a signed parent hint links a
// sub-agent to its parent, whose return reaches the engine holding the sub-agent.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"
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

TEST(GatewayTest, SessionTurnsCarryTheSessionAndCloseReleasesItsKvOnEveryEngine) {
  Fleet fleet = StartFleet(3, "consistent_hashing");
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  options.router_policy = SglRouterPolicy::kConsistentHashing;
  options.agentic.agentic_session_lifecycle = true;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  EXPECT_TRUE(gateway->lifecycle_enabled());
  net::HttpClient client(ClientOptions());

  for (int turn = 0; turn < 2; ++turn) {
    const std::string body = R"({"input_ids": )" + InputIds(1, 200 + 64 * turn) +
                             R"(, "sampling_params": {"max_new_tokens": 8}, "rid": "turn-)" +
                             std::to_string(turn) + "\"}";
    const net::ClientResponse r =
        Post(client, gateway->base_url(), "/generate", body, {{"X-Session-Id", "agent-1"}});
    ASSERT_EQ(r.status, 200) << r.body;
    StatusOr<protocol::GenerateResponse> response = protocol::ParseGenerateResponse(r.body);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->meta_info.id, "turn-" + std::to_string(turn) + ":0");
    if (turn == 1) {
      EXPECT_GT(response->meta_info.cached_tokens, 0);
    }
  }
  // The router saw the session as its routing key and kept it on one engine.
  const net::ClientResponse routed =
      Call(client, http::verb::get, fleet.router->base_url(), "/agentkv/requests");
  std::set<std::string> workers;
  const json::value routed_entries = json::parse(routed.body);
  for (const json::value& entry : routed_entries.as_array()) {
    EXPECT_EQ(entry.at("routing_key").as_string(), "agent-1");
    workers.insert(std::string(entry.at("worker").as_string()));
  }
  ASSERT_EQ(workers.size(), 1u);
  const std::string holder = *workers.begin();
  const double available_before = Gauges(client, holder).at("sglang:kv_available_tokens");

  const net::ClientResponse closed =
      Post(client, gateway->base_url(), "/v1/sessions/agent-1/close", "");
  ASSERT_EQ(closed.status, 200) << closed.body;
  EXPECT_EQ(json::parse(closed.body),
            json::parse(R"({"session_id":"agent-1","closed":true,"aborted":0})"));
  for (const auto& engine : fleet.engines) {
    EXPECT_EQ(CloseCount(client, engine->base_url(), "agent-1"), 1) << engine->base_url();
  }
  // Only a session-tagged request makes the close release KV: the session_id reached it.
  EXPECT_GT(Gauges(client, holder).at("sglang:kv_available_tokens"), available_before);

  // Idempotent: the same answer, no second fan-out.
  const net::ClientResponse again =
      Post(client, gateway->base_url(), "/v1/sessions/agent-1/close", "");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(json::parse(again.body).at("closed").as_bool(), true);
  for (const auto& engine : fleet.engines)
    EXPECT_EQ(CloseCount(client, engine->base_url(), "agent-1"), 1);
  EXPECT_EQ(gateway->stats().session_close, 1);
  EXPECT_EQ(gateway->stats().session_close_failure, 0);
  const json::value series =
      json::parse(Call(client, http::verb::get, gateway->base_url(), "/agentic_kv").body);
  EXPECT_EQ(series.at("agentic_kv/session/lifecycle_enabled").as_double(), 1.0);
  EXPECT_EQ(series.at("agentic_kv/session/close").as_double(), 1.0);
  const net::ClientResponse health = Call(client, http::verb::get, gateway->base_url(), "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, R"({"status":"ok"})");
  gateway->Shutdown(2s);
  EXPECT_EQ(Call(client, http::verb::get, fleet.router->base_url(), "/health").status, 200);
}

TEST(GatewayTest, AFailedCloseOnOneEngineStillEndsTheSession) {
  Fleet fleet = StartFleet(2, "round_robin");
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  options.agentic.agentic_session_lifecycle = true;
  std::mutex mu;
  std::vector<bool> hook;
  options.on_session_close = [&](bool ok) {
    std::lock_guard<std::mutex> lock(mu);
    hook.push_back(ok);
  };
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  ASSERT_EQ(Post(client, fleet.engines[1]->base_url(), "/agentkv/faults",
                 R"({"close_session_status": 500})")
                .status,
            200);
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate",
                 R"({"input_ids": [1, 2, 3], "session_id": "s-9"})")
                .status,
            200);
  const net::ClientResponse closed =
      Post(client, gateway->base_url(), "/v1/sessions/s-9/close", "");
  ASSERT_EQ(closed.status, 200);
  EXPECT_EQ(json::parse(closed.body).at("closed").as_bool(), false);
  EXPECT_EQ(CloseCount(client, fleet.engines[0]->base_url(), "s-9"), 1);
  EXPECT_EQ(gateway->stats().session_close, 1);
  EXPECT_EQ(gateway->stats().session_close_failure, 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(hook, std::vector<bool>{false});
  }
  const json::value series =
      json::parse(Call(client, http::verb::get, gateway->base_url(), "/agentic_kv").body);
  EXPECT_EQ(series.at("agentic_kv/session/close_failure").as_double(), 1.0);
  // Ended all the same: a second close answers the remembered outcome without a fan-out, and
  // the id starts a new session.
  EXPECT_EQ(json::parse(Post(client, gateway->base_url(), "/v1/sessions/s-9/close", "").body)
                .at("closed")
                .as_bool(),
            false);
  EXPECT_EQ(CloseCount(client, fleet.engines[0]->base_url(), "s-9"), 1);
  EXPECT_EQ(gateway->stats().sessions_active, 0);
  EXPECT_EQ(Post(client, gateway->base_url(), "/generate",
                 R"({"input_ids": [1, 2, 3], "session_id": "s-9"})")
                .status,
            200);
  EXPECT_EQ(gateway->stats().sessions_active, 1);
}

TEST(GatewayTest, ClosingASessionAbortsItsInFlightRequestBeforeClosingIt) {
  FakeEngine engine(/*hold=*/true);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  std::promise<StatusOr<net::ClientResponse>> running;
  client.AsyncRequest(
      http::verb::post, gateway->base_url(), "/generate",
      {{"Content-Type", "application/json"}, {"X-Session-Id", "s-1"}},
      R"({"text": "long task", "rid": "job"})",
      [&running](StatusOr<net::ClientResponse> r) { running.set_value(std::move(r)); });
  ASSERT_TRUE(WaitFor([&] { return engine.held() == 1; }));
  const net::ClientResponse closed =
      Post(client, gateway->base_url(), "/v1/sessions/s-1/close", "");
  ASSERT_EQ(closed.status, 200);
  EXPECT_EQ(json::parse(closed.body),
            json::parse(R"({"session_id":"s-1","closed":true,"aborted":1})"));
  const auto control = engine.control();
  ASSERT_EQ(control.size(), 2u);
  EXPECT_EQ(control[0].first, "/abort_request");
  EXPECT_EQ(json::parse(control[0].second), json::parse(R"({"rid":"job:0"})"));
  EXPECT_EQ(control[1].first, "/close_session");
  EXPECT_EQ(json::parse(control[1].second), json::parse(R"({"session_id":"s-1"})"));
  auto future = running.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(future.get()->status, 200);
  // The request reached the engine with the gateway's rid and the session, nothing else changed.
  EXPECT_EQ(engine.generates()[0].body,
            R"({"text": "long task", "rid": "job:0","session_id":"s-1"})");
}

TEST(GatewayTest, IdleSessionsAreClosedByTheTimer) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  options.session_idle_timeout_s = 0.2;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate", R"({"text": "hi"})",
                 {{"X-Session-Id", "quiet"}})
                .status,
            200);
  EXPECT_EQ(gateway->stats().sessions_active, 1);
  ASSERT_TRUE(WaitFor([&] { return gateway->stats().session_close == 1; }));
  const auto control = engine.control();
  ASSERT_EQ(control.size(), 1u);
  EXPECT_EQ(json::parse(control[0].second), json::parse(R"({"session_id":"quiet"})"));
  EXPECT_EQ(gateway->stats().sessions_active, 0);
}

// X-Agentkv-Session-Retain: 1 (a partial rollout kept across steps): the retained session
// outlives the idle timeout with its KV on its engine, where a plain session beside it is
// closed and loses its KV; a mark past --max-retained-sessions is a 429, one without a session
// a 400; the explicit close ends the retained session on every engine.
TEST(GatewayTest, ARetainedSessionOutlivesTheIdleTimeoutUntilItsClose) {
  Fleet fleet = StartFleet(2, "consistent_hashing");
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.router_url = fleet.router->base_url();
  options.router_policy = SglRouterPolicy::kConsistentHashing;
  options.agentic.agentic_session_lifecycle = true;
  options.session_idle_timeout_s = 0.2;
  options.max_retained_sessions = 1;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const auto turn = [&](const std::string& session, int64_t first, int64_t n,
                        const std::string& retain) {
    net::HeaderList headers = {{"X-Session-Id", session}};
    if (!retain.empty()) headers.emplace_back("X-Agentkv-Session-Retain", retain);
    return Post(
        client, gateway->base_url(), "/generate",
        R"({"input_ids": )" + InputIds(first, n) + R"(, "sampling_params": {"max_new_tokens": 4}})",
        headers);
  };
  const auto cached = [](const net::ClientResponse& r) {
    StatusOr<protocol::GenerateResponse> response = protocol::ParseGenerateResponse(r.body);
    EXPECT_TRUE(response.ok()) << response.status() << " " << r.body;
    return response.ok() ? response->meta_info.cached_tokens : -1;
  };
  ASSERT_EQ(turn("kept", 1, 256, "1").status, 200);
  ASSERT_EQ(turn("plain", 5000, 256, "").status, 200);
  EXPECT_EQ(gateway->stats().sessions_retained, 1);

  // Past the bound, and without a session: refused before anything is reserved or sent.
  const net::ClientResponse over = turn("other", 9000, 64, "1");
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_NE(over.body.find("--max-retained-sessions 1"), std::string::npos) << over.body;
  const net::ClientResponse sessionless =
      Post(client, gateway->base_url(), "/generate", SmallGenerate("n"),
           {{"X-Agentkv-Session-Retain", "1"}});
  EXPECT_EQ(sessionless.status, 400) << sessionless.body;
  EXPECT_EQ(Post(client, gateway->base_url(), "/generate", SmallGenerate("m"),
                 {{"X-Session-Id", "x"}, {"X-Agentkv-Session-Retain", "yes"}})
                .status,
            400);

  // The idle timeout closes the plain session on every engine, never the kept one.
  ASSERT_TRUE(WaitFor([&] { return gateway->stats().session_close == 1; }));
  std::this_thread::sleep_for(600ms);  // Three more idle timeouts.
  EXPECT_EQ(gateway->stats().session_close, 1);
  for (const auto& engine : fleet.engines) {
    EXPECT_EQ(CloseCount(client, engine->base_url(), "plain"), 1);
    EXPECT_EQ(CloseCount(client, engine->base_url(), "kept"), 0);
  }
  EXPECT_EQ(gateway->stats().sessions_active, 1);
  const std::map<std::string, double> gauges = Gauges(client, gateway->base_url());
  EXPECT_EQ(gauges.at("agentkv_gateway_sessions_retained"), 1.0);
  EXPECT_EQ(gauges.at("agentkv_gateway_sessions_retain_refused_total"), 1.0);

  // Back from its long pause, the retained session finds its KV; the closed one does not.
  EXPECT_GE(cached(turn("kept", 1, 320, "")), 256);
  EXPECT_EQ(cached(turn("plain", 5000, 320, "")), 0);

  const net::ClientResponse closed =
      Post(client, gateway->base_url(), "/v1/sessions/kept/close", "");
  ASSERT_EQ(closed.status, 200) << closed.body;
  EXPECT_EQ(json::parse(closed.body),
            json::parse(R"({"session_id":"kept","closed":true,"aborted":0})"));
  for (const auto& engine : fleet.engines) {
    EXPECT_EQ(CloseCount(client, engine->base_url(), "kept"), 1) << engine->base_url();
  }
  EXPECT_EQ(gateway->stats().sessions_retained, 0);
  gateway->Shutdown(2s);
}

TEST(GatewayTest, OnlyACorrectlySignedParentHintIsForwarded) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  options.parent_hint_key = "hint-key";
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const std::string good = SignParentHint("hint-key", "child-1", "parent-0");
  const std::vector<net::HeaderList> attempts = {
      {{"X-Session-Id", "child-1"}, {"X-Agentkv-Parent-Session", "parent-0"}},
      {{"X-Session-Id", "child-1"},
       {"X-Agentkv-Parent-Session", "parent-0"},
       {"X-Agentkv-Parent-Signature", SignParentHint("other-key", "child-1", "parent-0")}},
      {{"X-Session-Id", "child-1"},
       {"X-Agentkv-Parent-Session", "parent-1"},
       {"X-Agentkv-Parent-Signature", good}},
      {{"X-Session-Id", "child-1"},
       {"X-Agentkv-Parent-Session", "parent-0"},
       {"X-Agentkv-Parent-Signature", good}}};
  for (size_t i = 0; i < attempts.size(); ++i) {
    ASSERT_EQ(
        Post(client, gateway->base_url(), "/generate", R"({"rid": "r", "text": "hi"})", attempts[i])
            .status,
        200);
  }
  const auto generates = engine.generates();
  ASSERT_EQ(generates.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(generates[i].body,
              R"({"rid": "r:)" + std::to_string(i) + R"(", "text": "hi","session_id":"child-1"})");
  }
  EXPECT_EQ(
      generates[3].body,
      R"({"rid": "r:3", "text": "hi","session_id":"child-1","agentkv_parent_session":"parent-0"})");
  EXPECT_EQ(gateway->stats().parent_hint_rejected, 3);
  const std::string metrics = Call(client, http::verb::get, gateway->base_url(), "/metrics").body;
  EXPECT_NE(metrics.find("agentkv_gateway_parent_hint_rejected_total 3.0"), std::string::npos);
  for (const std::string& line : logs.lines) EXPECT_EQ(line.find(good), std::string::npos) << line;
}

// Two emulated engines behind a round-robin router that demote a finished sub-agent's blocks at
// once (per-conversation reuse, demoted to priority 1 with no idle bound).
Fleet StartDemotingFleet() {
  EngineEmulatorOptions engine_options = EngineOptions();
  kv::KvCacheOptions& cache = engine_options.runtime.engine.cache;
  cache.block_reuse_policy = kv::BlockReusePolicy::kPerConversation;
  cache.finished_subagent_priority = 1;
  cache.finished_subagent_min_idle_iterations = 0;
  return StartFleet(2, "round_robin", engine_options);
}

// The HTTP status of a 100-token /generate turn of `session` (prompt ids from `first`, rid
// `rid`) through `gateway`; with a `parent`, the turn of a sub-agent of `parent`, its hint
// signed with "hint-key".
int PostTurn(net::HttpClient& client, const Gateway& gateway, const std::string& session,
             const std::string& rid, int64_t first, const std::string& parent = "") {
  net::HeaderList headers = {{"X-Session-Id", session}};
  if (!parent.empty()) {
    headers.emplace_back("X-Agentkv-Parent-Session", parent);
    headers.emplace_back("X-Agentkv-Parent-Signature", SignParentHint("hint-key", session, parent));
  }
  const std::string body = R"({"input_ids": )" + InputIds(first, 100) +
                           R"(, "sampling_params": {"max_new_tokens": 4}, "rid": ")" + rid + "\"}";
  return Post(client, gateway.base_url(), "/generate", body, std::move(headers)).status;
}

// --agentic-subagent-demotion: the parent's return reaches the engine that holds its sub-agent.
// The gateway forwards round robin over two emulated engines that demote finished sub-agents,
// so the child runs on the other engine than the parent's first turn; when the parent sends
// its next request, the gateway posts /demote_finished_subagents to every engine and the
// child's engine demotes it. Only the parent's requests are delivered.
TEST(GatewayTest, AParentsReturnIsDeliveredToTheEngineHoldingItsSubagent) {
  Fleet fleet = StartDemotingFleet();
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = EngineUrls(fleet);
  options.agentic.agentic_session_lifecycle = true;
  options.parent_hint_key = "hint-key";
  options.agentic_subagent_demotion = true;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const auto requests_on = [&fleet](size_t e) {
    return fleet.engines[e]->runtime().Snapshot().num_requests_total;
  };
  const auto demoted_on = [&fleet](size_t e) {
    return fleet.engines[e]->runtime().Snapshot().cache.demoted_children;
  };
  ASSERT_EQ(PostTurn(client, *gateway, "parent-0", "p1", 1), 200);
  const size_t parent_engine = requests_on(0) == 1 ? 0 : 1;
  const size_t child_engine = 1 - parent_engine;
  ASSERT_EQ(PostTurn(client, *gateway, "child-1", "c1", 1000, "parent-0"), 200);
  ASSERT_EQ(requests_on(child_engine), 1) << "round robin put the child on the other engine";
  EXPECT_EQ(gateway->stats().subagent_demotion_deliveries, 0);

  ASSERT_EQ(PostTurn(client, *gateway, "parent-0", "p2", 1), 200);
  EXPECT_TRUE(WaitFor([&] { return demoted_on(child_engine) == 1; }));
  EXPECT_EQ(demoted_on(parent_engine), 0);
  EXPECT_GT(fleet.engines[child_engine]->runtime().Snapshot().cache.demoted_blocks, 0);
  EXPECT_EQ(gateway->stats().subagent_demotion_deliveries, 1);
  for (const auto& engine : fleet.engines) {
    const std::string recorded =
        Call(client, http::verb::get, engine->base_url(), "/agentkv/requests").body;
    EXPECT_NE(recorded.find(R"(/demote_finished_subagents)"), std::string::npos) << recorded;
    EXPECT_NE(recorded.find(R"(\"parent_session_id\":\"parent-0\")"), std::string::npos)
        << recorded;
  }
  // The child's own next request is not a parent's: nothing more is delivered.
  ASSERT_EQ(PostTurn(client, *gateway, "child-1", "c2", 1000), 200);
  EXPECT_EQ(gateway->stats().subagent_demotion_deliveries, 1);
  // Issue 29: once per return. More turns of the parent with no sub-agent activity between
  // them post nothing more (they used to post to every engine on every request).
  for (int turn = 3; turn <= 5; ++turn) {
    ASSERT_EQ(PostTurn(client, *gateway, "parent-0", "p" + std::to_string(turn), 1), 200);
  }
  EXPECT_EQ(gateway->stats().subagent_demotion_deliveries, 1);
  // A sub-agent ran again (a hinted request): the parent's next turn is a return again.
  ASSERT_EQ(PostTurn(client, *gateway, "child-1", "c3", 1000, "parent-0"), 200);
  ASSERT_EQ(PostTurn(client, *gateway, "parent-0", "p6", 1), 200);
  EXPECT_EQ(gateway->stats().subagent_demotion_deliveries, 2);
  gateway->Shutdown(2s);
}

}  // namespace
}  // namespace agentkv::service
