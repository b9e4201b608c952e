// `agentkv coordinator` end to end on 127.0.0.1: a CoordinatorServer polling two
// EngineEmulators through a RouterEmulator, asked over HTTP by RemoteAdmission and raw clients.
// Every test ends with the coordinator's ledger back at zero reserved tokens.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agentkv/control/admission_metrics.h"
#include "agentkv/net/http_client.h"
#include "agentkv/net/router.h"
#include "agentkv/protocol/generate_response.h"
#include "agentkv/protocol/workers.h"
#include "agentkv/service/admission/admission_remote.h"
#include "agentkv/service/admission/admission_wire.h"
#include "agentkv/service/coordinator/coordinator_server.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/service/emulator/router_emulator.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using control::AdmissionAction;
using control::AdmissionDecision;
using control::AdmissionReason;
namespace http = net::http;

constexpr int64_t kEngineTokens = 2048;

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return condition();
}

// A pending RemoteAdmission::Acquire.
using Pending = std::shared_future<AdmissionDecision>;

Pending AcquireAsync(AdmissionBackend& backend, const std::string& ticket, int64_t tokens) {
  auto promise = std::make_shared<std::promise<AdmissionDecision>>();
  Pending future = promise->get_future().share();
  backend.Acquire(control::AcquireRequest{ticket, tokens, false},
                  [promise](const AdmissionDecision& d) { promise->set_value(d); });
  return future;
}

bool Ready(const Pending& pending, std::chrono::milliseconds wait = 0ms) {
  return pending.wait_for(wait) == std::future_status::ready;
}

AdmissionDecision Get(const Pending& pending) {
  EXPECT_TRUE(Ready(pending, 15s)) << "no decision within 15 s";
  return Ready(pending) ? pending.get() : AdmissionDecision{};
}

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      EngineEmulatorOptions options;
      options.runtime.paced = false;
      options.runtime.engine.kv_pool.tokens_per_block = 16;
      options.runtime.engine.kv_pool.max_total_tokens = kEngineTokens;
      StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(options);
      ASSERT_TRUE(engine.ok()) << engine.status();
      capacity_ += (*engine)->runtime().max_total_num_tokens();
      engines_.push_back(*std::move(engine));
    }
    RouterEmulatorOptions router;
    router.health_check_interval = 0ms;
    for (const auto& engine : engines_) router.worker_urls.push_back(engine->base_url());
    StatusOr<std::unique_ptr<RouterEmulator>> started = RouterEmulator::Start(router);
    ASSERT_TRUE(started.ok()) << started.status();
    router_ = *std::move(started);
  }

  void TearDown() override {
    if (coordinator_ != nullptr) {
      EXPECT_TRUE(WaitUntil([this] { return coordinator_->admission().reserved() == 0; }, 5s))
          << "reserved " << coordinator_->admission().reserved();
      EXPECT_EQ(coordinator_->admission().lease_count(), 0);
      EXPECT_EQ(coordinator_->admission().waiting(), 0);
      EXPECT_TRUE(coordinator_->admission().CheckInvariants().ok());
      coordinator_->Shutdown(1s);
    }
  }

  CoordinatorOptions Options(double max_wait_s = 10.0, double staleness_s = 5.0) {
    CoordinatorOptions options;
    options.router_url = router_->base_url();
    options.agentic.agentic_admission_headroom = 1.0;
    options.agentic.agentic_admission_max_wait_s = max_wait_s;
    options.agentic.poll_interval_s = 0.3;
    options.agentic.staleness_s = staleness_s;
    options.metrics_timeout_s = 0.3;  // 0.3 + 2 x 0.3 stays below the staleness.
    return options;
  }

  // Starts the coordinator and waits for its first successful poll.
  void StartCoordinator(const CoordinatorOptions& options) {
    StatusOr<std::unique_ptr<CoordinatorServer>> started = CoordinatorServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    coordinator_ = *std::move(started);
    ASSERT_TRUE(WaitUntil([this] { return !coordinator_->admission().degraded(); }))
        << "the ledger never got a capacity snapshot";
  }

  std::unique_ptr<RemoteAdmission> Remote(const std::string& token = "", double max_wait_s = 10) {
    RemoteAdmissionOptions options;
    options.coordinator_url = coordinator_->base_url();
    options.auth_token = token;
    options.max_wait_s = max_wait_s;
    StatusOr<std::unique_ptr<RemoteAdmission>> remote = RemoteAdmission::Create(options);
    EXPECT_TRUE(remote.ok()) << remote.status();
    return remote.ok() ? *std::move(remote) : nullptr;
  }

  net::ClientResponse Call(http::verb verb, const std::string& target, const std::string& body = "",
                           const std::string& token = "") {
    net::HeaderList headers{{"Content-Type", "application/json"}};
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    StatusOr<net::ClientResponse> r =
        client_.Request(verb, coordinator_->base_url(), target, headers, body);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : net::ClientResponse{};
  }

  std::map<std::string, double> AgenticKv(const std::string& query = "") {
    const net::ClientResponse r = Call(http::verb::get, std::string(kAgenticKvPath) + query);
    EXPECT_EQ(r.status, 200) << r.body;
    StatusOr<std::vector<std::pair<std::string, double>>> metrics = ParseStepMetrics(r.body);
    EXPECT_TRUE(metrics.ok()) << metrics.status();
    std::map<std::string, double> out;
    if (metrics.ok()) out.insert(metrics->begin(), metrics->end());
    return out;
  }

  int64_t Waiting() { return coordinator_->admission().waiting(); }

  std::vector<std::unique_ptr<EngineEmulator>> engines_;
  std::unique_ptr<RouterEmulator> router_;
  std::unique_ptr<CoordinatorServer> coordinator_;
  net::HttpClient client_;
  int64_t capacity_ = 0;
};

TEST_F(CoordinatorTest, PollingDiscoversEnginesThroughTheRouterAndFillsTheLedger) {
  StartCoordinator(Options());
  std::map<std::string, double> kv = AgenticKv();
  EXPECT_EQ(kv.at(std::string(control::kCeilingMetric)), static_cast<double>(capacity_));
  EXPECT_EQ(kv.at(std::string(control::kDegradedMetric)), 0.0);
  EXPECT_EQ(kv.at(std::string(control::kEpochMetric)), 1.0);
  EXPECT_EQ(kv.at(std::string(control::kWaitingMetric)), 0.0);

  const net::ClientResponse health = Call(http::verb::get, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, R"({"status":"ok","degraded":false})");
  const net::ClientResponse metrics = Call(http::verb::get, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("# TYPE agentic_kv_budget_ceiling gauge\nagentic_kv_budget_ceiling " +
                              std::to_string(capacity_)),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find(R"(agentkv_coordinator_requests_total{endpoint="agentic_kv"} 1)"),
            std::string::npos)
      << metrics.body;
}

TEST_F(CoordinatorTest, RequestsBeyondTheBudgetWaitAndAreAdmittedInFifoOrder) {
  StartCoordinator(Options());
  auto remote = Remote();
  // One engine's KV is the most one request can reserve: `hold` takes one engine's worth, `a`
  // the other's, and the fleet is full.
  const int64_t unit = capacity_ / 2;
  const AdmissionDecision hold = Get(AcquireAsync(*remote, "hold:0", unit));
  ASSERT_EQ(hold.action, AdmissionAction::kAdmit);
  const int64_t big = unit * 7 / 10;
  const int64_t small = unit / 5;
  const AdmissionDecision a = Get(AcquireAsync(*remote, "a:0", unit));
  ASSERT_EQ(a.action, AdmissionAction::kAdmit);
  EXPECT_EQ(a.lease_id, "1:a:0");
  const Pending b = AcquireAsync(*remote, "b:0", big);
  ASSERT_TRUE(WaitUntil([this] { return Waiting() == 1; }));
  const Pending c = AcquireAsync(*remote, "c:0", big);
  ASSERT_TRUE(WaitUntil([this] { return Waiting() == 2; }));
  const Pending d = AcquireAsync(*remote, "d:0", small);  // Fits, but is behind c.
  ASSERT_TRUE(WaitUntil([this] { return Waiting() == 3; }));
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(Ready(b) || Ready(c) || Ready(d)) << "nothing is answered before a release";
  EXPECT_EQ(AgenticKv().at(std::string(control::kWaitingMetric)), 3.0);

  remote->Release(*a.lease_id);
  const AdmissionDecision granted_b = Get(b);
  EXPECT_EQ(granted_b.action, AdmissionAction::kAdmit);
  EXPECT_GT(granted_b.wait, TimeNs::Millis(250));
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(Ready(c) || Ready(d)) << "c does not fit next to b, and d may not overtake c";

  remote->Release(*granted_b.lease_id);
  const AdmissionDecision granted_c = Get(c);
  const AdmissionDecision granted_d = Get(d);
  EXPECT_EQ(granted_c.action, AdmissionAction::kAdmit);
  EXPECT_EQ(granted_d.action, AdmissionAction::kAdmit);
  EXPECT_EQ(coordinator_->admission().reserved(), unit + big + small);
  remote->Release(*granted_c.lease_id);
  remote->Release(*granted_d.lease_id);
  remote->Release(*hold.lease_id);
  ASSERT_TRUE(WaitUntil([this] { return coordinator_->admission().reserved() == 0; }));
  EXPECT_EQ(remote->failures().total(), 0);
  const std::map<std::string, double> kv = AgenticKv("?reset=1");
  EXPECT_EQ(kv.at(std::string(control::kAdmitMetric)), 2.0);
  EXPECT_EQ(kv.at(std::string(control::kWaitMetric)), 3.0);
  EXPECT_EQ(AgenticKv().count(std::string(control::kAdmitMetric)), 0u) << "drained by reset=1";
}

TEST_F(CoordinatorTest, AWaiterBypassesAgedAtMaxWait) {
  StartCoordinator(Options(/*max_wait_s=*/0.5));
  auto remote = Remote("", 0.5);
  // Each fills one engine (no request may reserve more than one engine's KV).
  const AdmissionDecision hold = Get(AcquireAsync(*remote, "hold:0", capacity_ / 2));
  ASSERT_EQ(hold.action, AdmissionAction::kAdmit);
  const AdmissionDecision a = Get(AcquireAsync(*remote, "a:0", capacity_ - capacity_ / 2));
  ASSERT_EQ(a.action, AdmissionAction::kAdmit);
  const auto start = std::chrono::steady_clock::now();
  const AdmissionDecision b = Get(AcquireAsync(*remote, "b:0", 10));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 450ms);
  EXPECT_EQ(b.action, AdmissionAction::kBypass);
  EXPECT_EQ(b.reason, AdmissionReason::kAged);
  EXPECT_FALSE(b.lease_id.has_value());
  EXPECT_GE(b.wait, TimeNs::Millis(500));
  EXPECT_EQ(coordinator_->admission().reserved(), capacity_);
  remote->Release(*a.lease_id);
  remote->Release(*hold.lease_id);
}

TEST_F(CoordinatorTest, AClientThatDisconnectsWhileWaitingLeavesNoWaiterAndNoLease) {
  StartCoordinator(Options());
  auto remote = Remote();
  // Each fills one engine (no request may reserve more than one engine's KV).
  const AdmissionDecision hold = Get(AcquireAsync(*remote, "hold:0", capacity_ / 2));
  ASSERT_EQ(hold.action, AdmissionAction::kAdmit);
  const AdmissionDecision a = Get(AcquireAsync(*remote, "a:0", capacity_ - capacity_ / 2));
  ASSERT_EQ(a.action, AdmissionAction::kAdmit);
  auto raw = std::make_unique<net::HttpClient>();
  std::promise<Status> finished;
  raw->AsyncRequest(
      http::verb::post, coordinator_->base_url(), std::string(kAcquirePath),
      {{"Content-Type", "application/json"}}, SerializeAcquireRequest({"gone:0", 100, false}),
      [&finished](StatusOr<net::ClientResponse> r) { finished.set_value(r.status()); });
  ASSERT_TRUE(WaitUntil([this] { return Waiting() == 1; }));
  raw.reset();  // Closes the connection of the request in flight.
  EXPECT_EQ(finished.get_future().get().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(WaitUntil([this] { return Waiting() == 0; })) << "the waiter was not cancelled";
  EXPECT_EQ(AgenticKv().at(std::string(control::kCancelledMetric)), 1.0);
  remote->Release(*a.lease_id);
  remote->Release(*hold.lease_id);
  ASSERT_TRUE(WaitUntil([this] { return coordinator_->admission().reserved() == 0; }));
  EXPECT_EQ(coordinator_->admission().lease_count(), 0) << "the cancelled ticket got no lease";
}

TEST_F(CoordinatorTest, StalledEngineMetricsDegradeTheLedgerAndAcquiresBypass) {
  StartCoordinator(Options(/*max_wait_s=*/10.0, /*staleness_s=*/1.0));
  auto remote = Remote();
  for (const auto& engine : engines_) {
    StatusOr<net::ClientResponse> r =
        client_.Request(http::verb::post, engine->base_url(), "/agentkv/faults",
                        {{"Content-Type", "application/json"}}, R"({"metrics_delay_ms": 5000})");
    ASSERT_TRUE(r.ok() && r->status == 200);
  }
  ASSERT_TRUE(WaitUntil([this] { return coordinator_->admission().degraded(); }, 8s));
  EXPECT_EQ(Call(http::verb::get, "/health").body, R"({"status":"ok","degraded":true})");
  const AdmissionDecision d = Get(AcquireAsync(*remote, "d:0", 10));
  EXPECT_EQ(d.action, AdmissionAction::kBypass);
  EXPECT_EQ(d.reason, AdmissionReason::kDegraded);
  EXPECT_EQ(AgenticKv().at(std::string(control::kBypassDegradedMetric)), 1.0);

  for (const auto& engine : engines_) {
    ASSERT_TRUE(client_
                    .Request(http::verb::post, engine->base_url(), "/agentkv/faults",
                             {{"Content-Type", "application/json"}}, "{}")
                    .ok());
  }
  ASSERT_TRUE(WaitUntil([this] { return !coordinator_->admission().degraded(); }, 8s))
      << "the ledger did not recover";
  const AdmissionDecision e = Get(AcquireAsync(*remote, "e:0", 10));
  EXPECT_EQ(e.action, AdmissionAction::kAdmit);
  // `remote` is destroyed right after this release: its destructor still delivers it, which
  // TearDown checks (reserved back at 0).
  remote->Release(*e.lease_id);
}

TEST_F(CoordinatorTest, AStoppedCoordinatorFailsOpenAndANewOneOnThePortIsUsedAgain) {
  StartCoordinator(Options());
  auto remote = Remote();
  const AdmissionDecision a = Get(AcquireAsync(*remote, "a:0", 10));
  ASSERT_EQ(a.action, AdmissionAction::kAdmit);
  remote->Release(*a.lease_id);
  ASSERT_TRUE(WaitUntil([this] { return coordinator_->admission().reserved() == 0; }));
  const uint16_t port = coordinator_->port();
  coordinator_.reset();

  const AdmissionDecision b = Get(AcquireAsync(*remote, "b:0", 10));
  EXPECT_EQ(b.action, AdmissionAction::kBypass);
  EXPECT_EQ(b.reason, AdmissionReason::kDegraded);
  EXPECT_GE(remote->failures().total(), 1);
  const auto metrics = remote->StepMetrics(false);
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0], (std::pair<std::string, double>{"agentic_kv/budget/degraded", 1.0}));

  CoordinatorOptions options = Options();
  options.http.port = port;
  StartCoordinator(options);
  const AdmissionDecision c = Get(AcquireAsync(*remote, "c:0", 10));
  EXPECT_EQ(c.action, AdmissionAction::kAdmit);
  remote->Release(*c.lease_id);
}

TEST_F(CoordinatorTest, TheBearerTokenGuardsTheAdmissionApiButNotHealthOrMetrics) {
  CoordinatorOptions options = Options();
  options.auth_token = "s3cret";
  StartCoordinator(options);
  const std::string acquire = SerializeAcquireRequest({"t:0", 10, false});
  for (const std::string& token : {std::string(), std::string("wrong"), std::string("s3cre")}) {
    const net::ClientResponse r = Call(http::verb::post, std::string(kAcquirePath), acquire, token);
    EXPECT_EQ(r.status, 401) << token;
    EXPECT_EQ(protocol::ParseErrorMessage(r.body), "missing or invalid bearer token");
  }
  EXPECT_EQ(Call(http::verb::post, std::string(kReleasePath), R"({"lease_id":"x"})").status, 401);
  EXPECT_EQ(Call(http::verb::post, std::string(kCancelPath), R"({"ticket":"x"})").status, 401);
  EXPECT_EQ(Call(http::verb::get, "/health").status, 200);
  EXPECT_EQ(Call(http::verb::get, "/metrics").status, 200);
  EXPECT_EQ(Waiting(), 0);
  EXPECT_EQ(coordinator_->admission().lease_count(), 0) << "a refused request takes nothing";

  const net::ClientResponse ok =
      Call(http::verb::post, std::string(kAcquirePath), acquire, "s3cret");
  ASSERT_EQ(ok.status, 200) << ok.body;
  StatusOr<AdmissionDecision> decision = ParseDecision(ok.body);
  ASSERT_TRUE(decision.ok()) << decision.status();
  EXPECT_EQ(decision->action, AdmissionAction::kAdmit);
  // A retry of the admitted ticket returns the same lease (idempotent by ticket).
  const net::ClientResponse retry =
      Call(http::verb::post, std::string(kAcquirePath), acquire, "s3cret");
  EXPECT_EQ(ParseDecision(retry.body)->lease_id, decision->lease_id);
  EXPECT_EQ(coordinator_->admission().reserved(), 10);

  auto wrong = Remote("wrong");
  EXPECT_EQ(Get(AcquireAsync(*wrong, "w:0", 10)).reason, AdmissionReason::kDegraded);
  EXPECT_EQ(wrong->failures().acquire, 1);
  auto right = Remote("s3cret");
  right->Release(*decision->lease_id);
  ASSERT_TRUE(WaitUntil([this] { return coordinator_->admission().reserved() == 0; }));
  EXPECT_EQ(right->failures().total(), 0);
}

TEST_F(CoordinatorTest, AFailingEngineLeavesTheCeilingOfTheHealthyOne) {
  CoordinatorOptions options = Options();
  options.router_url.clear();
  options.engine_urls = {engines_[0]->base_url(), engines_[1]->base_url() + "@0"};
  StartCoordinator(options);
  EXPECT_EQ(AgenticKv().at(std::string(control::kCeilingMetric)), static_cast<double>(capacity_));
  StatusOr<net::ClientResponse> fault =
      client_.Request(http::verb::post, engines_[1]->base_url(), "/agentkv/faults",
                      {{"Content-Type", "application/json"}}, R"({"metrics_status": 503})");
  ASSERT_TRUE(fault.ok() && fault->status == 200);
  const double healthy = static_cast<double>(engines_[0]->runtime().max_total_num_tokens());
  ASSERT_TRUE(WaitUntil([&] {
    return AgenticKv().at(std::string(control::kCeilingMetric)) == healthy;
  })) << "the ceiling kept the failing engine";
  const std::map<std::string, double> kv = AgenticKv();
  EXPECT_EQ(kv.at(std::string(control::kDegradedMetric)), 0.0) << "degraded per engine";
  EXPECT_EQ(kv.at(std::string(control::kEpochMetric)), 2.0) << "the healthy set changed";
}

TEST_F(CoordinatorTest, DiscoveryFallsBackToListWorkers) {
  // An older router: no /workers, only /list_workers.
  net::Router old_router;
  const std::string urls =
      protocol::SerializeListWorkers({engines_[0]->base_url(), engines_[1]->base_url()});
  old_router.Add(http::verb::get, "/list_workers",
                 [urls](net::Request r, std::shared_ptr<net::ResponseWriter> w) {
                   w->Reply(net::MakeResponse(r, http::status::ok, urls));
                 });
  StatusOr<std::unique_ptr<net::HttpServer>> server =
      net::HttpServer::Start(net::HttpServerOptions{}, old_router.AsHandler());
  ASSERT_TRUE(server.ok()) << server.status();
  CoordinatorOptions options = Options();
  options.router_url = (*server)->base_url();
  StartCoordinator(options);
  EXPECT_EQ(AgenticKv().at(std::string(control::kCeilingMetric)), static_cast<double>(capacity_));
  coordinator_->Shutdown(1s);
  (*server)->Shutdown(1s);
}

TEST_F(CoordinatorTest, ShutdownAnswersWaitersBypassDegraded) {
  StartCoordinator(Options());
  auto remote = Remote();
  // Each fills one engine (no request may reserve more than one engine's KV).
  const AdmissionDecision hold = Get(AcquireAsync(*remote, "hold:0", capacity_ / 2));
  ASSERT_EQ(hold.action, AdmissionAction::kAdmit);
  const AdmissionDecision a = Get(AcquireAsync(*remote, "a:0", capacity_ - capacity_ / 2));
  ASSERT_EQ(a.action, AdmissionAction::kAdmit);
  const Pending b = AcquireAsync(*remote, "b:0", 10);
  ASSERT_TRUE(WaitUntil([this] { return Waiting() == 1; }));
  coordinator_->Shutdown(2s);
  const AdmissionDecision answered = Get(b);
  EXPECT_EQ(answered.action, AdmissionAction::kBypass);
  EXPECT_EQ(answered.reason, AdmissionReason::kDegraded);
  EXPECT_EQ(remote->failures().acquire, 0) << "an answer, not a transport error";
  EXPECT_EQ(coordinator_->admission().reserved(), 0) << "shutdown forgets every lease";
}

TEST_F(CoordinatorTest, BadBodiesAre400NamingTheField) {
  StartCoordinator(Options());
  const net::ClientResponse r = Call(http::verb::post, std::string(kAcquirePath),
                                     R"({"ticket":"t:0","reservation_tokens":-5})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(protocol::ParseErrorMessage(r.body).value_or("").find("reservation_tokens"),
            std::string::npos)
      << r.body;
  const net::ClientResponse release = Call(http::verb::post, std::string(kReleasePath), "{}");
  EXPECT_EQ(release.status, 400);
  EXPECT_NE(release.body.find("lease_id"), std::string::npos) << release.body;
  EXPECT_EQ(Call(http::verb::post, std::string(kCancelPath), "nope").status, 400);
}

// Admission v2 over the wire: the coordinator checks the named engine and reserves a shared
// prefix once across the requests that name it.
TEST_F(CoordinatorTest, AdmissionV2TakesTheEngineAndTheSharedPrefixFromTheWire) {
  CoordinatorOptions options = Options();
  options.agentic.agentic_admission_policy = control::AdmissionPolicy::kV2;
  StartCoordinator(options);
  std::vector<std::string> leases;
  for (const char* ticket : {"g:0", "h:0"}) {
    control::AcquireRequest acquire{ticket, 400, false};
    acquire.engine = engines_[0]->base_url();
    acquire.continuing = true;
    acquire.prefix_key = "group-1";
    acquire.prefix_tokens = 1000;
    const net::ClientResponse r =
        Call(http::verb::post, std::string(kAcquirePath), SerializeAcquireRequest(acquire));
    ASSERT_EQ(r.status, 200) << r.body;
    StatusOr<AdmissionDecision> decision = ParseDecision(r.body);
    ASSERT_TRUE(decision.ok()) << decision.status();
    ASSERT_EQ(decision->action, AdmissionAction::kAdmit) << r.body;
    leases.push_back(*decision->lease_id);
  }
  EXPECT_EQ(coordinator_->admission().reserved(), 1000 + 2 * 400);
  for (const std::string& lease : leases) {
    EXPECT_EQ(
        Call(http::verb::post, std::string(kReleasePath), SerializeReleaseRequest(lease)).status,
        200);
  }
}

}  // namespace
}  // namespace agentkv::service
