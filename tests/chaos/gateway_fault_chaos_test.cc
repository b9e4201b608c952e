// The gateway and the coordinator when the fleet breaks (ctest -L chaos): a hung engine, an
// engine or a router whose answers stall, and a coordinator that is shared, unreachable, hung or
// outlived by a dead gateway's leases. Admission fails open where it must, recovers, and never
// waits past its deadlines. Loopback only; every client call has a timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "../integration/gateway_test_support.h"
#include "agentkv/service/admission/admission_wire.h"
#include "agentkv/service/common/engine_directory.h"
#include "gateway_chaos_support.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using namespace gateway_testing;
using ::testing::HasSubstr;

// A gateway in front of `engine` that asks the coordinator at `coordinator_url` for admission,
// logging (its own lines and its backend's) into `logs`.
std::unique_ptr<Gateway> StartRemoteGateway(const std::string& coordinator_url,
                                            const FakeEngine& engine, LogCapture& logs,
                                            RemoteAdmissionOptions remote = {}) {
  remote.coordinator_url = coordinator_url;
  remote.log = logs.Sink();
  StatusOr<std::unique_ptr<RemoteAdmission>> backend = RemoteAdmission::Create(remote);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return nullptr;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_program_admission = true;
  options.poll_fleet_metrics = false;
  return StartGateway(options, std::shared_ptr<AdmissionBackend>(*std::move(backend)));
}

// A coordinator that accepts connections and reads requests but, while hung, answers nothing
// (as one stopped with SIGSTOP, or wedged); once released it answers heartbeats, admits every
// acquire and acknowledges releases and cancels.
class HangingCoordinator {
 public:
  HangingCoordinator() {
    net::Router router;
    for (const std::string_view path : {kAcquirePath, kReleasePath, kCancelPath, kHeartbeatPath}) {
      router.Add(http::verb::post, std::string(path),
                 [this, path](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
                   Handle(path, std::move(q), std::move(w));
                 });
    }
    StatusOr<std::unique_ptr<net::HttpServer>> server =
        net::HttpServer::Start({}, router.AsHandler());
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok()) server_ = *std::move(server);
  }
  ~HangingCoordinator() { server_->Shutdown(0ms); }

  std::string base_url() const { return server_->base_url(); }
  void SetHung(bool hung) { hung_.store(hung); }
  int64_t acquires() const { return acquires_.load(); }
  int64_t heartbeats() const { return heartbeats_.load(); }

 private:
  void Handle(std::string_view path, net::Request q, std::shared_ptr<net::ResponseWriter> w) {
    if (path == kAcquirePath) ++acquires_;
    if (path == kHeartbeatPath) ++heartbeats_;
    if (hung_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      unanswered_.push_back(std::move(w));
      return;
    }
    std::string body = "{}";
    if (path == kAcquirePath) {
      StatusOr<control::AcquireRequest> request = ParseAcquireRequest(q.body());
      if (!request.ok()) return w->Reply(net::MakeResponse(q, http::status::bad_request, "{}"));
      body = SerializeDecision(control::AdmissionDecision{
          control::AdmissionAction::kAdmit, control::AdmissionReason::kCapacityAvailable,
          request->ticket, request->reservation_tokens, "1:" + request->ticket, 1, TimeNs(),
          std::nullopt});
    }
    w->Reply(net::MakeResponse(q, http::status::ok, body));
  }

  std::atomic<bool> hung_{false};
  std::atomic<int64_t> acquires_{0};
  std::atomic<int64_t> heartbeats_{0};
  std::mutex mu_;
  std::vector<std::shared_ptr<net::ResponseWriter>> unanswered_;
  std::unique_ptr<net::HttpServer> server_;
};

// The value of an unlabelled series in a Prometheus text, or -1.
double MetricValue(const std::string& text, const std::string& name) {
  const std::string prefix = "\n" + name + " ";
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + prefix.size()));
}

// Item 3: two gateways share a coordinator and their clients happen to choose the same rid.
// Each attempt holds its own lease: the second waits for capacity instead of riding on the
// first's lease (and releasing it when it finishes).
TEST(GatewayChaosTest, TwoGatewaysSharingACoordinatorNeverShareALease) {
  FakeEngine engine(/*hold=*/true, /*capacity=*/1000);
  LogCapture coordinator_logs;
  std::unique_ptr<CoordinatorServer> started = StartCoordinatorOver(engine, coordinator_logs);
  ASSERT_NE(started, nullptr);
  CoordinatorServer& coordinator = *started;

  LogCapture logs;
  std::vector<std::unique_ptr<Gateway>> gateways;
  for (int i = 0; i < 2; ++i) {
    gateways.push_back(StartRemoteGateway(coordinator.base_url(), engine, logs));
    ASSERT_NE(gateways.back(), nullptr);
  }
  auto send = [&](Gateway& gateway) {
    return std::async(std::launch::async, [&gateway] {
      net::HttpClient own(ClientOptions());
      return Post(own, gateway.base_url(), "/generate", AdmissionSetup::Body("same-rid")).status;
    });
  };
  auto first = send(*gateways[0]);
  ASSERT_TRUE(WaitFor([&] { return engine.held() == 1; }));
  EXPECT_EQ(coordinator.admission().reserved(), 600);
  auto second = send(*gateways[1]);
  ASSERT_TRUE(WaitFor([&] { return coordinator.admission().waiting() == 1; }))
      << "the second gateway's attempt must wait for its own lease";
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(engine.held(), 1u) << "the second request ran on the first one's lease";
  EXPECT_EQ(coordinator.admission().lease_count(), 1);
  ASSERT_TRUE(engine.Answer());
  EXPECT_EQ(first.get(), 200);
  ASSERT_TRUE(WaitFor([&] { return engine.held() == 1; }));
  EXPECT_EQ(coordinator.admission().reserved(), 600) << "the second attempt holds its own lease";
  ASSERT_TRUE(engine.Answer());
  EXPECT_EQ(second.get(), 200);
  ExpectLedgerAtRest(coordinator.admission());
  for (auto& gateway : gateways) gateway->Shutdown(1s);
}

// Item 5: a non-streamed request to a hung engine (it ignores the abort): when the client
// leaves, the upstream call is cut and the lease returned at once, not after the upstream
// timeout or the lease TTL.
TEST(GatewayChaosTest, AClientLeavingANonStreamedRequestReleasesItsLeaseAtOnce) {
  AdmissionSetup setup;
  setup.engine->SetHung(true);
  net::HttpClientOptions impatient = ClientOptions();
  impatient.header_timeout = 300ms;
  net::HttpClient client(impatient);
  StatusOr<net::ClientResponse> r =
      client.Request(http::verb::post, setup.gateway->base_url(), "/generate",
                     {{"Content-Type", "application/json"}}, AdmissionSetup::Body("gone"));
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(setup.engine->held(), 1u);
  ExpectLedgerAtRest(*setup.admission);
  EXPECT_TRUE(WaitFor([&] { return setup.gateway->stats().in_flight == 0; }));
  EXPECT_TRUE(WaitFor([&] {
    for (const auto& [path, body] : setup.engine->control()) {
      if (path == "/abort_request" && body.find("gone:0") != std::string::npos) return true;
    }
    return false;
  })) << "the engine was asked to abort the request";
  // The next request is admitted at once.
  auto next = std::async(std::launch::async, [&] {
    net::HttpClient own(ClientOptions());
    return Post(own, setup.gateway->base_url(), "/generate", AdmissionSetup::Body("next")).status;
  });
  EXPECT_TRUE(WaitFor([&] { return setup.engine->held() == 2; }, 1000ms));
  setup.engine->SetHung(false);
  while (setup.engine->Answer()) {
  }
  EXPECT_EQ(next.get(), 200);
}

// Item 6: one engine's /metrics stalls for good. Each poll gives up on it after
// --metrics-timeout-s, so the ledger keeps a fresh ceiling from the other engine and never
// turns degraded; and a configuration that could not keep that promise is refused at startup.
TEST(GatewayChaosTest, OneStalledEngineNeverAgesTheWholeSnapshot) {
  FakeEngine healthy(/*hold=*/false, /*capacity=*/1000);
  FakeEngine stalled(/*hold=*/false, /*capacity=*/1000);
  stalled.StallMetrics(true);
  control::AgenticOptions agentic;
  agentic.agentic_program_admission = true;
  agentic.agentic_admission_headroom = 1.0;
  agentic.poll_interval_s = 0.2;
  agentic.staleness_s = 0.6;
  std::shared_ptr<LocalAdmission> admission = StartLocalAdmission(agentic);
  ASSERT_NE(admission, nullptr);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {healthy.base_url(), stalled.base_url()};
  options.agentic = agentic;
  options.metrics_timeout_s = 0.15;  // 0.2 + 2 x 0.15 < 0.6.
  auto gateway = StartGateway(options, admission);
  ASSERT_NE(gateway, nullptr);
  const auto until = std::chrono::steady_clock::now() + 3s;
  int64_t samples = 0;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_FALSE(admission->degraded()) << "the snapshot aged after " << samples << " samples";
    ++samples;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(Series(*admission, control::kCeilingMetric), 1000.0) << "only the healthy engine";
  EXPECT_TRUE(Logged(logs, "event=metrics_scrape_failed engine=" + stalled.base_url()));
  gateway->Shutdown(1s);

  GatewayOptions slow = BaseOptions(logs);
  slow.engine_urls = {healthy.base_url()};
  slow.agentic.agentic_program_admission = true;
  slow.metrics_timeout_s = 5;  // 2 + 2 x 5 >= 6: a stalled engine would age every snapshot.
  StatusOr<std::unique_ptr<Gateway>> refused = Gateway::Start(slow, admission);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("--metrics-timeout-s (5)"));
}

// Item 6, discovery: a router that accepts /workers and never answers (or trickles) cannot
// hold a poll past its deadline, whatever the client's own (long) timeouts.
TEST(GatewayChaosTest, AStalledRouterCannotHoldAPollPastItsDeadline) {
  std::mutex mu;
  std::vector<std::shared_ptr<net::ResponseWriter>> stalled;
  net::Router router;
  for (const char* path : {"/workers", "/list_workers"}) {
    router.Add(http::verb::get, path, [&](net::Request, std::shared_ptr<net::ResponseWriter> w) {
      std::lock_guard<std::mutex> lock(mu);
      stalled.push_back(std::move(w));
    });
  }
  StatusOr<std::unique_ptr<net::HttpServer>> server =
      net::HttpServer::Start({}, router.AsHandler());
  ASSERT_TRUE(server.ok()) << server.status();
  net::HttpClientOptions patient = ClientOptions();
  patient.header_timeout = 60s;
  net::HttpClient client(patient);
  EngineDirectory directory((*server)->base_url(), {}, &client);
  const auto started = std::chrono::steady_clock::now();
  StatusOr<std::vector<std::string>> urls = directory.Refresh(started + 200ms);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_FALSE(urls.ok());
  EXPECT_THAT(urls.status().message(), HasSubstr("no answer within the poll's deadline"));
  EXPECT_LT(took, 1s);
  (*server)->Shutdown(0ms);
}

// Item 10: while the coordinator is unreachable admission fails open, and the outage shows:
// one warning line (not one per request) and a failure counter per operation.
TEST(GatewayChaosTest, CoordinatorOutagesAreLoggedOnceAndCounted) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  const std::string coordinator_url = DeadUrl();
  auto gateway = StartRemoteGateway(coordinator_url, engine, logs);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Post(client, gateway->base_url(), "/generate", SmallGenerate("r" + std::to_string(i)))
                  .status,
              200);
  }
  const std::string metrics = Call(client, http::verb::get, gateway->base_url(), "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("agentkv_gateway_coordinator_failures_total{op=\"acquire\"} 5.0"));
  int64_t failure_lines = 0;
  {
    std::lock_guard<std::mutex> lock(logs.mu);
    for (const std::string& line : logs.lines) {
      failure_lines += line.find("event=coordinator_failed") != std::string::npos;
    }
  }
  EXPECT_EQ(failure_lines, 1) << "one line per outage, not one per request";
  EXPECT_TRUE(Logged(logs, "coordinator=" + coordinator_url));
  gateway->Shutdown(1s);
}

// Issue 29, item 2: a gateway holding leases dies without releasing them (SIGKILL: no release,
// no more heartbeats). The coordinator gives its instance up after --instance-timeout-s, so the
// other gateway's large request is admitted within seconds, not after the 30 s maximum wait (or
// the 600 s lease TTL).
TEST(GatewayChaosTest, ADeadGatewaysLeasesAreReleasedAfterTheInstanceTimeout) {
  FakeEngine engine(/*hold=*/true, /*capacity=*/1000);
  LogCapture coordinator_logs;
  std::unique_ptr<CoordinatorServer> started =
      StartCoordinatorOver(engine, coordinator_logs, /*instance_timeout_s=*/1.0);
  ASSERT_NE(started, nullptr);
  CoordinatorServer& coordinator = *started;

  // The gateway about to die: its admission client takes three leases, 900 of 1000 tokens.
  LogCapture dead_logs;
  RemoteAdmissionOptions dead_options;
  dead_options.coordinator_url = coordinator.base_url();
  dead_options.heartbeat_interval = 200ms;
  dead_options.log = dead_logs.Sink();
  StatusOr<std::unique_ptr<RemoteAdmission>> dead = RemoteAdmission::Create(dead_options);
  ASSERT_TRUE(dead.ok()) << dead.status();
  const std::string dead_instance = (*dead)->instance_id();
  for (int i = 0; i < 3; ++i) {
    std::promise<control::AdmissionDecision> decided;
    (*dead)->Acquire(control::AcquireRequest{dead_instance + "/r" + std::to_string(i), 300},
                     [&decided](const control::AdmissionDecision& d) { decided.set_value(d); });
    auto future = decided.get_future();
    ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
    ASSERT_EQ(future.get().action, control::AdmissionAction::kAdmit);
  }
  EXPECT_EQ(coordinator.admission().reserved(), 900);
  ASSERT_TRUE(WaitFor([&] { return coordinator.admission().instances() == 1; }));

  LogCapture logs;
  auto gateway = StartRemoteGateway(coordinator.base_url(), engine, logs);
  ASSERT_NE(gateway, nullptr);
  auto large = std::async(std::launch::async, [&] {
    net::HttpClient own(ClientOptions());
    return Post(own, gateway->base_url(), "/generate", AdmissionSetup::Body("large")).status;
  });
  // 600 tokens do not fit beside the other gateway's 900: the request waits for them.
  ASSERT_TRUE(WaitFor([&] { return coordinator.admission().waiting() == 1; }, 5000ms));
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(engine.held(), 0u);

  const auto sent = std::chrono::steady_clock::now();
  dead->reset();  // Killed: it never releases, and its heartbeats stop.
  ASSERT_TRUE(WaitFor([&] { return engine.held() == 1; }, 5000ms))
      << "the dead gateway's leases still block the fleet";
  const auto waited = std::chrono::steady_clock::now() - sent;
  EXPECT_LT(waited, 5s);
  EXPECT_EQ(coordinator.admission().reserved(), 600) << "only the live gateway's lease";
  EXPECT_TRUE(Logged(coordinator_logs, "event=instance_expired instance=" + dead_instance));
  EXPECT_TRUE(Logged(coordinator_logs, "leases=3 tokens=900 waiters=0"));
  const std::string metrics = coordinator.MetricsText();
  EXPECT_EQ(MetricValue(metrics, "agentkv_coordinator_instance_expired_total"), 1.0);
  EXPECT_EQ(MetricValue(metrics, "agentkv_coordinator_instance_leases_released_total"), 3.0);
  EXPECT_EQ(MetricValue(metrics, "agentkv_coordinator_instance_tokens_released_total"), 900.0);
  EXPECT_EQ(MetricValue(metrics, "agentkv_coordinator_instances"), 1.0) << "the live gateway";
  ASSERT_TRUE(engine.Answer());
  EXPECT_EQ(large.get(), 200);
  ExpectLedgerAtRest(coordinator.admission());
  gateway->Shutdown(1s);
}

// Issue 29, item 3: a coordinator that accepts connections but answers nothing (stopped with
// SIGSTOP). Its heartbeats fail, the breaker opens within about a second and cuts the acquire
// already waiting, so that request goes on (bypass `degraded`) at once instead of after the
// acquire's 40 s timeout; while it is open, requests do not ask at all. When the coordinator
// answers again, the first heartbeat after the cool-down closes the breaker and requests are
// admitted through it again.
TEST(GatewayChaosTest, AHungCoordinatorOpensTheBreakerAndAddsAlmostNothing) {
  HangingCoordinator coordinator;
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  RemoteAdmissionOptions remote;
  remote.heartbeat_interval = 100ms;
  remote.heartbeat_timeout = 200ms;
  remote.breaker_failures = 2;
  remote.breaker_cooldown = 1000ms;
  remote.control_timeout = 1000ms;
  auto gateway = StartRemoteGateway(coordinator.base_url(), engine, logs, remote);
  ASSERT_NE(gateway, nullptr);
  net::HttpClientOptions bounded = ClientOptions();
  bounded.header_timeout = 5s;
  net::HttpClient client(bounded);
  auto timed_post = [&](const std::string& rid) {
    const auto started = std::chrono::steady_clock::now();
    StatusOr<net::ClientResponse> r =
        client.Request(http::verb::post, gateway->base_url(), "/generate",
                       {{"Content-Type", "application/json"}}, SmallGenerate(rid));
    EXPECT_TRUE(r.ok() && r->status == 200)
        << rid << ": " << (r.ok() ? r->body : "") << " " << r.status();
    return std::chrono::steady_clock::now() - started;
  };
  auto metrics = [&] {
    return Call(client, http::verb::get, gateway->base_url(), "/metrics").body;
  };

  // Answering: admitted through the coordinator.
  ASSERT_TRUE(WaitFor([&] { return coordinator.heartbeats() >= 1; }));
  EXPECT_LT(timed_post("up"), 1s);
  EXPECT_EQ(coordinator.acquires(), 1);

  // Hung: the first request waits only until the breaker opens.
  coordinator.SetHung(true);
  const auto first = timed_post("hung-1");
  EXPECT_LT(first, 2s) << "the acquire waited on a hung coordinator";
  EXPECT_EQ(coordinator.acquires(), 2);
  EXPECT_TRUE(
      Logged(logs, "event=coordinator_breaker_opened coordinator=" + coordinator.base_url()));
  EXPECT_EQ(MetricValue(metrics(), "agentkv_gateway_coordinator_breaker_open"), 1.0);
  // Open: nothing is asked, nothing waits.
  for (int i = 0; i < 5; ++i) {
    ASSERT_LT(timed_post("open-" + std::to_string(i)), 300ms);
  }
  EXPECT_EQ(coordinator.acquires(), 2) << "an open breaker asks the coordinator nothing";
  const std::string open = metrics();
  EXPECT_EQ(MetricValue(open, "agentkv_gateway_coordinator_breaker_opens_total"), 1.0);
  EXPECT_EQ(MetricValue(open, "agentkv_gateway_coordinator_breaker_bypass_total"), 5.0);

  // Back: the breaker closes after its cool-down and requests are admitted again.
  coordinator.SetHung(false);
  ASSERT_TRUE(WaitFor(
      [&] { return MetricValue(metrics(), "agentkv_gateway_coordinator_breaker_open") == 0.0; },
      3000ms));
  EXPECT_TRUE(Logged(logs, "event=coordinator_breaker_closed coordinator="));
  EXPECT_LT(timed_post("back"), 1s);
  EXPECT_EQ(coordinator.acquires(), 3);
  EXPECT_EQ(engine.generates().size(), 8u) << "every request reached the engine";
  gateway->Shutdown(1s);
}

}  // namespace
}  // namespace agentkv::service
