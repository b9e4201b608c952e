// The gateway's session table under abuse (ctest -L chaos): sessions never closed, a tenant
// closing another's session, sessions opened in a tight loop, and endless new sessions; every
// table stays bounded and each session is closed only by its owner. Loopback only; every client
// call has a timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <string_view>
#include <vector>

#include "../integration/gateway_test_support.h"
#include "chaos_support.h"
#include "gateway_chaos_support.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using namespace gateway_testing;
using ::testing::HasSubstr;

// Item 8: clients that open sessions and never close them cannot grow the gateway past
// --max-sessions: the longest-idle session is ended (and closed on the engines) to make room,
// and when every session is busy the newcomer gets a 503 at once.
TEST(GatewayChaosTest, NeverClosedSessionsStayWithinMaxSessions) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  options.max_sessions = 50;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  for (int i = 0; i < 400; ++i) {
    ASSERT_EQ(Post(client, gateway->base_url(), "/generate", R"({"text": "hi"})",
                   {{"X-Session-Id", "s" + std::to_string(i)}})
                  .status,
              200);
    ASSERT_LE(gateway->stats().sessions_active, 50);
  }
  EXPECT_EQ(gateway->stats().sessions_active, 50);
  EXPECT_TRUE(WaitFor([&] {
    int64_t closes = 0;
    for (const auto& [path, body] : engine.control()) closes += path == "/close_session";
    return closes == 350;
  })) << "every evicted session is closed on the engine";
  const std::string metrics = Call(client, http::verb::get, gateway->base_url(), "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("agentkv_gateway_sessions_evicted_total 350.0"));
  gateway->Shutdown(1s);

  // Every session busy: no room can be made.
  FakeEngine holding(/*hold=*/true);
  options.engine_urls = {holding.base_url()};
  options.max_sessions = 2;
  auto busy = StartGateway(options);
  ASSERT_NE(busy, nullptr);
  std::vector<std::future<int>> held;
  for (const char* session : {"a", "b"}) {
    held.push_back(std::async(std::launch::async, [&busy, session] {
      net::HttpClient own(ClientOptions());
      return Post(own, busy->base_url(), "/generate", R"({"text": "hi"})",
                  {{"X-Session-Id", session}})
          .status;
    }));
  }
  ASSERT_TRUE(WaitFor([&] { return holding.held() == 2; }));
  const net::ClientResponse refused =
      Post(client, busy->base_url(), "/generate", R"({"text": "hi"})", {{"X-Session-Id", "c"}});
  EXPECT_EQ(refused.status, 503);
  EXPECT_THAT(ErrorMessage(refused), HasSubstr("--max-sessions"));
  EXPECT_THAT(Call(client, http::verb::get, busy->base_url(), "/metrics").body,
              HasSubstr("agentkv_gateway_sessions_refused_total 1.0"));
  while (holding.Answer()) {
  }
  for (auto& f : held) EXPECT_EQ(f.get(), 200);
  busy->Shutdown(1s);
}

// The value of header `name` in `r` ("" when absent).
std::string HeaderOf(const net::ClientResponse& r, std::string_view name) {
  for (const auto& [key, value] : r.headers) {
    if (boost::beast::iequals(key, name)) return value;
  }
  return "";
}

// Issue 29, item 6: sessions are owned. With tenant keys, tenant B closing "s1" never touches
// tenant A's "s1" (ids are namespaced per tenant), a request without a key is 401, a tenant's
// key never reaches the engine, and the admin token closes any session by its full id.
TEST(GatewayChaosTest, ATenantCannotCloseAnotherTenantsSession) {
  FakeEngine engine(/*hold=*/true);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  const std::string key_a = "acme-key-0123456789";
  const std::string key_b = "beta-key-0123456789";
  const std::string admin = "admin-token-0123456789";
  options.tenant_keys = {{"acme", key_a}, {"beta", key_b}};
  options.bearer_token = admin;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const std::string base = gateway->base_url();

  // No key, or an unknown one: 401 on the data path and on the close route.
  for (const net::HeaderList& headers :
       {net::HeaderList{{"X-Session-Id", "s1"}},
        net::HeaderList{{"X-Session-Id", "s1"}, {"Authorization", "Bearer not-a-key-0123456"}}}) {
    const net::ClientResponse r = Post(client, base, "/generate", R"({"text": "hi"})", headers);
    EXPECT_EQ(r.status, 401);
    EXPECT_EQ(HeaderOf(r, "WWW-Authenticate"), "Bearer");
  }
  EXPECT_EQ(Post(client, base, "/v1/chat/completions",
                 R"({"messages": [{"role": "user", "content": "hi"}]})")
                .status,
            401);
  EXPECT_EQ(Post(client, base, "/v1/sessions/s1/close", "").status, 401);
  EXPECT_EQ(engine.generates().size(), 0u) << "nothing unauthenticated reaches the engine";

  // Tenant A's request in its session s1, held by the engine.
  std::future<int> held = std::async(std::launch::async, [&] {
    net::HttpClient own(ClientOptions());
    return Post(own, base, "/generate", R"({"text": "hi"})",
                {{"X-Session-Id", "s1"}, {"Authorization", "Bearer " + key_a}})
        .status;
  });
  ASSERT_TRUE(WaitFor([&] { return engine.held() == 1; }));
  const FakeEngine::Received received = engine.generates().at(0);
  EXPECT_EQ(json::parse(received.body).at("session_id").as_string(), "acme.s1");
  for (const auto& [name, value] : received.headers) {
    EXPECT_FALSE(boost::beast::iequals(name, "Authorization")) << "a tenant key went upstream";
  }

  // Tenant B closes its own "s1": A's request is neither aborted nor answered.
  const net::ClientResponse b_close =
      Post(client, base, "/v1/sessions/s1/close", "", {{"Authorization", "Bearer " + key_b}});
  EXPECT_EQ(b_close.status, 200);
  EXPECT_EQ(json::parse(b_close.body).at("session_id").as_string(), "s1");
  EXPECT_EQ(json::parse(b_close.body).at("aborted").as_int64(), 0);
  EXPECT_EQ(engine.held(), 1u);
  EXPECT_EQ(held.wait_for(200ms), std::future_status::timeout);
  for (const auto& [path, body] : engine.control()) {
    EXPECT_NE(path, "/abort_request") << body;
    if (path == "/close_session") {
      EXPECT_EQ(json::parse(body).at("session_id").as_string(), "beta.s1");
    }
  }
  // B cannot name A's session by its full id either: that is B's "acme.s1".
  const net::ClientResponse b_spoof =
      Post(client, base, "/v1/sessions/acme.s1/close", "", {{"Authorization", "Bearer " + key_b}});
  EXPECT_EQ(b_spoof.status, 200);
  EXPECT_EQ(json::parse(b_spoof.body).at("aborted").as_int64(), 0);
  EXPECT_EQ(engine.held(), 1u);

  // The admin closes A's session by its full id: the held request is aborted.
  const net::ClientResponse admin_close =
      Post(client, base, "/v1/sessions/acme.s1/close", "", {{"Authorization", "Bearer " + admin}});
  EXPECT_EQ(admin_close.status, 200);
  EXPECT_EQ(json::parse(admin_close.body).at("aborted").as_int64(), 1);
  ASSERT_EQ(held.wait_for(5s), std::future_status::ready);
  held.get();
  EXPECT_EQ(engine.held(), 0u);
  gateway->Shutdown(1s);
}

// Issue 29, item 6: a client opening sessions in a tight loop gets 429 (with Retry-After) past
// its burst, so it can no longer push every other session out at --max-sessions.
TEST(GatewayChaosTest, OpeningSessionsInATightLoopIsRateLimited) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  options.max_sessions = 12;
  options.new_sessions_burst = 10;
  options.max_new_sessions_per_s = 0.01;  // No refill within the test.
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const std::string base = gateway->base_url();
  ASSERT_EQ(Post(client, base, "/generate", R"({"text": "hi"})", {{"X-Session-Id", "old"}}).status,
            200);
  int ok = 0;
  int limited = 0;
  for (int i = 0; i < 100; ++i) {
    const net::ClientResponse r = Post(client, base, "/generate", R"({"text": "hi"})",
                                       {{"X-Session-Id", "loop-" + std::to_string(i)}});
    if (r.status == 200) {
      ++ok;
    } else {
      ASSERT_EQ(r.status, 429) << r.body;
      EXPECT_EQ(HeaderOf(r, "Retry-After"), "1");
      EXPECT_THAT(ErrorMessage(r), HasSubstr("--max-new-sessions-per-s"));
      ++limited;
    }
  }
  EXPECT_EQ(ok, 9) << "the burst of 10, less the session opened first";
  EXPECT_EQ(limited, 91);
  // The session that existed before was not evicted, and continues without a new token.
  EXPECT_EQ(Post(client, base, "/generate", R"({"text": "hi"})", {{"X-Session-Id", "old"}}).status,
            200);
  const std::string metrics = Call(client, http::verb::get, base, "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("agentkv_gateway_sessions_rate_limited_total 91.0"));
  EXPECT_THAT(metrics, HasSubstr("agentkv_gateway_sessions_evicted_total 0.0"));
  for (const auto& [path, body] : engine.control()) {
    EXPECT_NE(path, "/close_session") << "no session was ended: " << body;
  }
  EXPECT_EQ(gateway->stats().sessions_active, 10);
  gateway->Shutdown(1s);
}

// Item 8, soak: 12,000 requests, each opening a session that is never closed and carrying a
// new rid. After the tables fill (sessions to --max-sessions, ended ones to
// --max-closed-sessions), the gateway's memory stays flat: without the bounds it grows by
// about 0.8 KB per session, about 7 MB over the measured part.
TEST(GatewayChaosTest, MemoryStaysFlatUnderEndlessNewSessions) {
  FakeEngine engine(/*hold=*/false);
  engine.SetRecording(false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.log = [](LogLevel, std::string_view) {};
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  options.max_sessions = 500;
  options.max_closed_sessions = 500;
  options.max_new_sessions_per_s = 0;  // It opens 12,000 sessions on purpose.
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  auto send = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      const std::string id = std::to_string(i);
      ASSERT_EQ(Post(client, gateway->base_url(), "/generate",
                     R"({"rid": "soak-)" + id + R"(", "text": "hi"})",
                     {{"X-Session-Id", "soak-session-" + id}})
                    .status,
                200);
    }
  };
  send(0, 3000);  // Fills every table.
  const int64_t warm = chaos::ResidentKiB();
  for (int part = 1; part <= 3; ++part) {
    send(3000 * part, 3000 * (part + 1));
    std::printf("soak: RSS %lld KiB after %d requests\n",
                static_cast<long long>(chaos::ResidentKiB()), 3000 * (part + 1));
  }
  const int64_t end = chaos::ResidentKiB();
  ASSERT_GT(warm, 0);
  EXPECT_LE(gateway->stats().sessions_active, 500);
  if (chaos::kResidentSetIsTheProcesses) {
    EXPECT_LT(end - warm, 3 * 1024) << "RSS grew from " << warm << " KiB to " << end << " KiB";
  }
  RecordProperty("rss_warm_kib", std::to_string(warm));
  RecordProperty("rss_end_kib", std::to_string(end));
  std::printf("soak: RSS %lld KiB after 3,000 sessions, %lld KiB after 12,000\n",
              static_cast<long long>(warm), static_cast<long long>(end));
  gateway->Shutdown(1s);
}

}  // namespace
}  // namespace agentkv::service
