// End-to-end tests of the gateway's working-set admission (--agentic-working-set) on
// 127.0.0.1: clients -> gateway -> one engine emulator with a tiny KV, its capacity read from
// the emulator's /metrics by the gateway's poller.
#include "agentkv/service/gateway/gateway_working_set.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>

#include "gateway_test_support.h"

namespace agentkv::service::gateway_testing {
namespace {

// The emulator's KV: one 600-token request fits, two do not.
constexpr int64_t kCapacity = 1024;

double Labelled(net::HttpClient& client, const std::string& base, std::string_view name,
                std::string_view label, std::string_view value) {
  const net::ClientResponse r = Call(client, http::verb::get, base, "/metrics");
  StatusOr<std::vector<protocol::Sample>> samples = protocol::ParsePrometheusText(r.body);
  EXPECT_TRUE(samples.ok()) << samples.status();
  if (!samples.ok()) return -1;
  for (const protocol::Sample& s : *samples) {
    if (s.name != name) continue;
    for (const protocol::Label& l : s.labels) {
      if (l.name == label && l.value == value) return s.value;
    }
  }
  return -1;
}

struct WorkingSetSetup {
  std::unique_ptr<EngineEmulator> engine;
  std::unique_ptr<Gateway> gateway;
  LogCapture logs;
  net::HttpClient client{ClientOptions()};

  explicit WorkingSetSetup(bool working_set) {
    EngineEmulatorOptions engine_options = EngineOptions();
    engine_options.runtime.engine.kv_pool.max_total_tokens = kCapacity;
    engine_options.runtime.engine.tp = 1;
    StatusOr<std::unique_ptr<EngineEmulator>> started = EngineEmulator::Start(engine_options);
    EXPECT_TRUE(started.ok()) << started.status();
    engine = *std::move(started);
    GatewayOptions options = BaseOptions(logs);
    options.engine_urls = {engine->base_url()};
    options.agentic.poll_interval_s = 0.05;
    options.agentic.staleness_s = 5.0;
    if (working_set) {
      control::WorkingSetOptions ws;
      ws.headroom = 1.0;
      ws.default_hold = TimeNs::Seconds(60);
      ws.max_hold = TimeNs::Seconds(60);
      ws.max_wait = TimeNs::Seconds(60);
      options.working_set = ws;
    }
    gateway = StartGateway(options);
  }
  ~WorkingSetSetup() {
    if (gateway != nullptr) gateway->Shutdown(2s);
  }
  std::string base() const { return gateway->base_url(); }
  double Gauge(const std::string& name) {
    const std::map<std::string, double> gauges = Gauges(client, base());
    auto it = gauges.find(name);
    return it == gauges.end() ? -1 : it->second;
  }
  // A /generate of `session`: 500 prompt tokens, at most 100 generated (reserves 600).
  net::ClientResponse Generate(const std::string& session, const std::string& rid) {
    return Post(
        client, base(), "/generate",
        R"({"input_ids": )" + InputIds(1, 500) +
            R"(, "sampling_params": {"max_new_tokens": 100, "ignore_eos": true}, "rid": ")" + rid +
            R"(", "session_id": ")" + session + "\"}");
  }
};

// prompt + completion tokens of a /generate answer.
int64_t ContextOf(const net::ClientResponse& r) {
  const std::optional<int64_t> context = ContextTokensOfAnswer(r.body);
  EXPECT_TRUE(context.has_value()) << r.body;
  return context.value_or(-1);
}

TEST(GatewayWorkingSetTest, PausedProgramHoldsItsContextSoANewProgramWaitsUntilItsSessionCloses) {
  WorkingSetSetup s(/*working_set=*/true);
  ASSERT_NE(s.gateway, nullptr);
  ASSERT_TRUE(WaitFor([&] { return s.Gauge("agentic_kv_working_set_capacity_tokens") > 0; }));
  EXPECT_EQ(s.Gauge("agentic_kv_working_set_capacity_tokens"), kCapacity);

  // Program A's first request fits; its context is then held for the pause that follows.
  const net::ClientResponse a1 = s.Generate("A", "a1");
  ASSERT_EQ(a1.status, 200) << a1.body;
  const int64_t a_context = ContextOf(a1);
  // The gateway finishes the attempt just after it answers: wait (bounded) for the hold.
  ASSERT_TRUE(WaitFor([&] {
    return s.Gauge("agentic_kv_working_set_held_tokens") == static_cast<double>(a_context);
  }));
  EXPECT_EQ(s.Gauge("agentic_kv_working_set_live_programs"), 1);

  // Program B's first request does not fit beside A's held context: it waits.
  net::HttpClient b_client(ClientOptions());
  std::future<net::ClientResponse> b = std::async(std::launch::async, [&] {
    return Post(b_client, s.base(), "/generate",
                R"({"input_ids": )" + InputIds(1, 500) +
                    R"(, "sampling_params": {"max_new_tokens": 100}, "rid": "b1", )"
                    R"("session_id": "B"})");
  });
  ASSERT_TRUE(WaitFor([&] { return s.Gauge("agentic_kv_working_set_waiting_programs") == 1; }));
  EXPECT_EQ(s.gateway->stats().awaiting_admission, 1);

  // A's next request goes at once (its program is live), while B still waits.
  const net::ClientResponse a2 = s.Generate("A", "a2");
  ASSERT_EQ(a2.status, 200) << a2.body;
  EXPECT_EQ(b.wait_for(0ms), std::future_status::timeout);
  EXPECT_EQ(s.Gauge("agentic_kv_working_set_waiting_programs"), 1);
  const int64_t a2_context = ContextOf(a2);
  EXPECT_TRUE(WaitFor([&] {
    return s.Gauge("agentic_kv_working_set_held_tokens") == static_cast<double>(a2_context);
  }));

  // A's session closes: its hold ends and B is admitted.
  const net::ClientResponse closed = Post(s.client, s.base(), "/v1/sessions/A/close", "{}");
  EXPECT_EQ(closed.status, 200) << closed.body;
  ASSERT_EQ(b.wait_for(10s), std::future_status::ready);
  const net::ClientResponse b1 = b.get();
  EXPECT_EQ(b1.status, 200) << b1.body;

  EXPECT_EQ(s.Gauge("agentic_kv_working_set_waiting_programs"), 0);
  const std::string admitted = "agentic_kv_working_set_admitted_total";
  EXPECT_EQ(Labelled(s.client, s.base(), admitted, "reason", "fits"), 2);
  EXPECT_EQ(Labelled(s.client, s.base(), admitted, "reason", "continuing"), 1);
  EXPECT_EQ(s.Gauge("agentic_kv_working_set_waits_total"), 1);
  EXPECT_EQ(Labelled(s.client, s.base(), "agentic_kv_working_set_holds_total", "end", "returned"),
            1);
  EXPECT_EQ(Labelled(s.client, s.base(), "agentic_kv_working_set_holds_total", "end", "ended"), 1);
}

TEST(GatewayWorkingSetTest, AClientThatLeavesWhileItsProgramWaitsIsCancelled) {
  WorkingSetSetup s(/*working_set=*/true);
  ASSERT_NE(s.gateway, nullptr);
  ASSERT_TRUE(WaitFor([&] { return s.Gauge("agentic_kv_working_set_capacity_tokens") > 0; }));
  ASSERT_EQ(s.Generate("A", "a1").status, 200);
  {
    net::HttpClientOptions quick = ClientOptions();
    quick.header_timeout = 300ms;
    net::HttpClient b_client(quick);
    StatusOr<net::ClientResponse> b = b_client.Request(
        http::verb::post, s.base(), "/generate", {{"Content-Type", "application/json"}},
        R"({"input_ids": )" + InputIds(1, 500) +
            R"(, "sampling_params": {"max_new_tokens": 100}, "session_id": "B"})");
    EXPECT_FALSE(b.ok());  // Timed out waiting.
  }
  EXPECT_TRUE(WaitFor([&] { return s.Gauge("agentic_kv_working_set_cancelled_total") == 1; }));
  EXPECT_EQ(s.Gauge("agentic_kv_working_set_waiting_programs"), 0);
  EXPECT_TRUE(WaitFor([&] { return s.gateway->stats().in_flight == 0; }));
}

TEST(GatewayWorkingSetTest, SwitchedOffANewProgramDoesNotWait) {
  WorkingSetSetup s(/*working_set=*/false);
  ASSERT_NE(s.gateway, nullptr);
  ASSERT_EQ(s.Generate("A", "a1").status, 200);
  const net::ClientResponse b = s.Generate("B", "b1");
  EXPECT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(s.Gauge("agentic_kv_working_set_held_tokens"), -1);  // No such series.
}

}  // namespace
}  // namespace agentkv::service::gateway_testing
