// The fault-and-abuse suite of the gateway and the coordinator (ctest -L chaos): each test
// sends what any client on the network could, or breaks what a fleet breaks, and asserts the
// fixed behaviour: a clear 4xx at once, nothing reserved, nothing else delayed, and every
// table bounded. Loopback only; every client call has a timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../integration/gateway_test_support.h"
#include "agentkv/base/bounds.h"
#include "agentkv/service/admission/admission_wire.h"
#include "agentkv/service/common/engine_directory.h"
#include "chaos_support.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using namespace gateway_testing;
using ::testing::HasSubstr;

// The answer's error message (SGLang's error shape or the coordinator's), or the body.
std::string ErrorMessage(const net::ClientResponse& r) {
  boost::system::error_code error;
  const json::value parsed = json::parse(r.body, error);
  if (error || !parsed.is_object()) return r.body;
  const json::value* message = parsed.as_object().if_contains("message");
  if (message == nullptr) {
    if (const json::value* nested = parsed.as_object().if_contains("error");
        nested != nullptr && nested->is_object()) {
      message = nested->as_object().if_contains("message");
    }
  }
  return message != nullptr && message->is_string() ? std::string(message->as_string()) : r.body;
}

// A coordinator whose ceiling is `engine`'s whole capacity, once it has a fresh snapshot.
std::unique_ptr<CoordinatorServer> StartCoordinatorOver(const FakeEngine& engine, LogCapture& logs,
                                                        double instance_timeout_s = 10.0) {
  CoordinatorOptions options;
  options.instance_timeout_s = instance_timeout_s;
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_admission_headroom = 1.0;
  options.agentic.poll_interval_s = 0.1;
  options.agentic.staleness_s = 5.0;
  options.metrics_timeout_s = 0.5;
  options.log = logs.Sink();
  StatusOr<std::unique_ptr<CoordinatorServer>> started = CoordinatorServer::Start(options);
  EXPECT_TRUE(started.ok()) << started.status();
  if (!started.ok()) return nullptr;
  std::unique_ptr<CoordinatorServer> coordinator = *std::move(started);
  EXPECT_TRUE(WaitFor([&] { return !coordinator->admission().degraded(); }));
  return coordinator;
}

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

// Answers every held request, and those admitted as they return their leases, until every
// call in `calls` has its answer (for up to 5 s).
void AnswerUntilAnswered(AdmissionSetup& setup, std::vector<std::future<int>*> calls) {
  EXPECT_TRUE(WaitFor(
      [&] {
        while (setup.engine->Answer()) {
        }
        return std::all_of(calls.begin(), calls.end(), [](std::future<int>* call) {
          return call->wait_for(0s) == std::future_status::ready;
        });
      },
      5000ms));
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

std::string ChatBody(const std::string& rid, int64_t max_tokens) {
  return R"({"rid": ")" + rid + R"(", "messages": [{"role": "user", "content": "hi"}], )" +
         R"("max_tokens": )" + std::to_string(max_tokens) + "}";
}

// Item 1: token counts from a header or a body that overflow int64 arithmetic, or exceed the
// token bound, are a 400 naming the field, and reserve nothing: the ledger stays exact and the
// next ordinary request is admitted at once.
TEST(GatewayChaosTest, OverflowingTokenCountsAre400AndReserveNothing) {
  AdmissionSetup setup;
  net::HttpClient client(ClientOptions());
  struct Case {
    std::string path;
    std::string body;
    net::HeaderList headers;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"/generate",
       R"({"text": "hi", "sampling_params": {"max_new_tokens": 2000}, "session_id": "x"})",
       {{"X-Prompt-Tokens", "9223372036854775000"}},
       "X-Prompt-Tokens"},
      {"/generate",
       R"({"text": "hi"})",
       {{"X-Prompt-Tokens", "99999999999999999999999"}},
       "X-Prompt-Tokens"},
      {"/generate", R"({"text": "hi"})", {{"X-Prompt-Tokens", "1099511627777"}}, "X-Prompt-Tokens"},
      {"/generate",
       R"({"text": "hi", "sampling_params": {"max_new_tokens": 9223372036854775807}})",
       {},
       "max_new_tokens"},
      {"/v1/chat/completions",
       ChatBody("c", std::numeric_limits<int64_t>::max()),
       {},
       "max_tokens"},
      {"/v1/completions",
       R"({"prompt": "hi", "max_completion_tokens": 1099511627777})",
       {},
       "max_completion_tokens"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path + " " + c.body);
    const net::ClientResponse r =
        Post(client, setup.gateway->base_url(), c.path, c.body, c.headers);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_THAT(ErrorMessage(r), HasSubstr(c.field));
    EXPECT_EQ(setup.admission->reserved(), 0);
    EXPECT_EQ(setup.admission->lease_count(), 0);
  }
  EXPECT_TRUE(setup.engine->generates().empty());
  // The ledger still works: an ordinary request is admitted and reaches the engine at once.
  auto ok = std::async(std::launch::async, [&] {
    net::HttpClient own(ClientOptions());
    return Post(own, setup.gateway->base_url(), "/generate", AdmissionSetup::Body("ok")).status;
  });
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }, 2000ms));
  EXPECT_EQ(setup.admission->reserved(), 100 + 500);
  setup.engine->Answer();
  EXPECT_EQ(ok.get(), 200);
  ExpectLedgerAtRest(*setup.admission);
}

// Item 2: a request whose reservation exceeds the largest engine's whole KV is refused at once
// (it could never run), and the small request behind it does not wait.
TEST(GatewayChaosTest, ARequestThatCanNeverFitIsRefusedAtOnceAndDelaysNobody) {
  AdmissionSetup setup;  // Ceiling 1000 tokens, max wait 30 s.
  net::HttpClient client(ClientOptions());
  const auto started = std::chrono::steady_clock::now();
  const net::ClientResponse huge =
      Post(client, setup.gateway->base_url(), "/v1/chat/completions", ChatBody("huge", 10'000'000));
  EXPECT_EQ(huge.status, 400) << huge.body;
  EXPECT_THAT(ErrorMessage(huge), HasSubstr("1000 tokens of KV the fleet's largest engine holds"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
  auto small = std::async(std::launch::async, [&] {
    net::HttpClient own(ClientOptions());
    return Post(own, setup.gateway->base_url(), "/generate",
                R"({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2}})")
        .status;
  });
  // The engine holds the small request: reaching it at all shows it did not wait.
  EXPECT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }, 1000ms));
  EXPECT_EQ(setup.admission->waiting(), 0);
  EXPECT_EQ(Series(*setup.admission, control::kRefusedOversizedMetric), 1.0);
  setup.engine->Answer();
  EXPECT_EQ(small.get(), 200);
  ExpectLedgerAtRest(*setup.admission);
}

// Issue 29, item 1: three valid requests asking for max_tokens 179990 each used to reserve the
// whole 540,000-token ceiling and stall every other client for the maximum wait. A reservation
// counts at most the expected decode (SGLang's clip, 4096 tokens) unless the operator sets
// --agentic-admission-expected-decode-cap: the three hold little and the next client's request
// reaches the engine at once.
TEST(GatewayChaosTest, HugeMaxTokensReserveTheExpectedDecodeNotTheCeiling) {
  AdmissionSetup setup(/*max_wait_s=*/30.0, control::AdmissionPolicy::kSeed,
                       /*capacity=*/540'000);
  std::vector<std::future<int>> hogs;
  for (int i = 0; i < 3; ++i) {
    hogs.push_back(std::async(std::launch::async, [&setup, i] {
      net::HttpClient own(ClientOptions());
      return Post(own, setup.gateway->base_url(), "/generate",
                  AdmissionSetup::SessionBody("hog-" + std::to_string(i),
                                              "hog-" + std::to_string(i), 2, 179'990))
          .status;
    }));
  }
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 3; }, 3000ms));
  EXPECT_EQ(setup.admission->reserved(), 3 * (2 + kGatewayExpectedDecodeCap));
  const auto started = std::chrono::steady_clock::now();
  auto next = std::async(std::launch::async, [&] {
    net::HttpClient own(ClientOptions());
    return Post(own, setup.gateway->base_url(), "/generate",
                AdmissionSetup::SessionBody("next", "next", 100, 500))
        .status;
  });
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 4; }, 2000ms))
      << "a fourth client waited behind three max_tokens reservations";
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
  EXPECT_EQ(setup.admission->waiting(), 0);
  while (setup.engine->Answer()) {
  }
  for (auto& hog : hogs) EXPECT_EQ(hog.get(), 200);
  EXPECT_EQ(next.get(), 200);
  ExpectLedgerAtRest(*setup.admission);
}

// Issue 29, item 1: X-Prompt-Tokens: 179000 on a two-byte prompt is not believed (a prompt
// cannot hold more tokens than its body has bytes, plus a template's), and neither
// X-Agentkv-Protected nor X-Agentkv-Scope: eval skips admission without the bearer token.
TEST(GatewayChaosTest, AdmissionHeadersAreBoundedAndBypassNeedsTheToken) {
  AdmissionSetup setup(/*max_wait_s=*/30.0, control::AdmissionPolicy::kSeed, /*capacity=*/8000,
                       [](GatewayOptions& o) { o.bearer_token = "admin-secret"; });
  net::HttpClient client(ClientOptions());
  const std::string tiny = R"({"text": "hi", "sampling_params": {"max_new_tokens": 10}})";
  auto claimed = std::async(std::launch::async, [&] {
    net::HttpClient own(ClientOptions());
    return Post(own, setup.gateway->base_url(), "/generate", tiny, {{"X-Prompt-Tokens", "179000"}})
        .status;
  });
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }, 2000ms));
  EXPECT_EQ(setup.admission->reserved(), MaxPromptTokensOfBody(tiny.size()) + 10);
  setup.engine->Answer();
  EXPECT_EQ(claimed.get(), 200);
  ExpectLedgerAtRest(*setup.admission);

  // Fill the ledger (7000 + 500 of 8000), then ask to skip admission without the token: the
  // headers are ignored and counted, and the request waits like any other.
  auto filler = std::async(std::launch::async, [&] {
    net::HttpClient own(ClientOptions());
    return Post(own, setup.gateway->base_url(), "/generate",
                AdmissionSetup::SessionBody("fill", "fill", 7000, 500))
        .status;
  });
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }, 2000ms));
  const std::string body = AdmissionSetup::SessionBody("trusted", "trusted", 100, 500);
  const std::vector<net::HeaderList> untrusted = {
      {{"X-Agentkv-Protected", "1"}},
      {{"X-Agentkv-Scope", "eval"}},
      {{"X-Agentkv-Protected", "1"}, {"Authorization", "Bearer wrong"}}};
  std::vector<std::future<int>> sneaks;
  for (size_t i = 0; i < untrusted.size(); ++i) {
    sneaks.push_back(std::async(std::launch::async, [&setup, &untrusted, i] {
      net::HttpClient own(ClientOptions());
      const std::string id = "sneak-" + std::to_string(i);
      return Post(own, setup.gateway->base_url(), "/generate",
                  AdmissionSetup::SessionBody(id, id, 100, 500), untrusted[i])
          .status;
    }));
  }
  ASSERT_TRUE(WaitFor([&] { return setup.admission->waiting() == 3; }, 2000ms));
  EXPECT_EQ(setup.engine->held(), 1u);
  EXPECT_EQ(Gauges(client, setup.gateway->base_url())["agentkv_gateway_untrusted_bypass_total"],
            3.0);
  // With the token, protected work bypasses at once.
  auto trusted = std::async(std::launch::async, [&] {
    net::HttpClient own(ClientOptions());
    return Post(own, setup.gateway->base_url(), "/generate", body,
                {{"X-Agentkv-Protected", "1"}, {"Authorization", "Bearer admin-secret"}})
        .status;
  });
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 2; }, 2000ms));
  EXPECT_EQ(Series(*setup.admission, control::kBypassProtectedMetric), 1.0);
  // The gateway's token never travels upstream.
  for (const FakeEngine::Received& r : setup.engine->generates()) {
    for (const auto& [name, value] : r.headers) EXPECT_NE(value, "Bearer admin-secret");
  }
  AnswerUntilAnswered(setup, {&filler, &trusted, &sneaks[0], &sneaks[1], &sneaks[2]});
  EXPECT_EQ(filler.get(), 200);
  EXPECT_EQ(trusted.get(), 200);
  for (auto& sneak : sneaks) EXPECT_EQ(sneak.get(), 200);
  ExpectLedgerAtRest(*setup.admission);
}

// Issue 29, item 1: a session over its share of the ceiling (--agentic-admission-session-share,
// 0.5) waits without blocking another session's request, which used to queue behind it.
TEST(GatewayChaosTest, ASessionOverItsShareDoesNotBlockOtherSessions) {
  AdmissionSetup setup;  // Ceiling 1000: one session may hold 500 once it holds a lease.
  std::vector<std::future<int>> calls;
  const auto post = [&setup](std::string body) {
    return std::async(std::launch::async, [&setup, body] {
      net::HttpClient own(ClientOptions());
      return Post(own, setup.gateway->base_url(), "/generate", body).status;
    });
  };
  calls.push_back(post(AdmissionSetup::SessionBody("g1", "greedy", 100, 300)));
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 1; }, 2000ms));
  calls.push_back(post(AdmissionSetup::SessionBody("g2", "greedy", 100, 300)));  // 800 > 500
  ASSERT_TRUE(WaitFor([&] { return setup.admission->waiting() == 1; }, 2000ms));
  calls.push_back(post(AdmissionSetup::SessionBody("p1", "polite", 100, 300)));
  ASSERT_TRUE(WaitFor([&] { return setup.engine->held() == 2; }, 2000ms))
      << "another session's request waited behind an over-share one";
  EXPECT_EQ(setup.admission->waiting(), 1);
  AnswerUntilAnswered(setup, {&calls[0], &calls[1], &calls[2]});
  for (auto& call : calls) EXPECT_EQ(call.get(), 200);
  ExpectLedgerAtRest(*setup.admission);
}

// Item 2, at the coordinator: an acquire of 5,000,000 tokens against a 1000-token ceiling is
// answered `refuse` at once; 2^63-1 is a 400; a small acquire behind them is admitted at once.
TEST(CoordinatorChaosTest, OversizedAndOverflowingAcquiresAreAnsweredAtOnce) {
  FakeEngine engine(/*hold=*/false, /*capacity=*/1000);
  LogCapture logs;
  std::unique_ptr<CoordinatorServer> started = StartCoordinatorOver(engine, logs);
  ASSERT_NE(started, nullptr);
  CoordinatorServer& coordinator = *started;
  net::HttpClient client(ClientOptions());

  const net::ClientResponse overflow =
      Post(client, coordinator.base_url(), "/admission/acquire",
           R"({"ticket": "a", "reservation_tokens": 9223372036854775807})");
  EXPECT_EQ(overflow.status, 400);
  EXPECT_THAT(ErrorMessage(overflow), HasSubstr("reservation_tokens"));

  const auto before = std::chrono::steady_clock::now();
  const net::ClientResponse huge = Post(client, coordinator.base_url(), "/admission/acquire",
                                        R"({"ticket": "b", "reservation_tokens": 5000000})");
  EXPECT_LT(std::chrono::steady_clock::now() - before, 2s);
  ASSERT_EQ(huge.status, 200) << huge.body;
  StatusOr<control::AdmissionDecision> refused = ParseDecision(huge.body);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->action, control::AdmissionAction::kRefuse);
  EXPECT_EQ(refused->reason, control::AdmissionReason::kOversized);
  EXPECT_EQ(refused->ceiling, 1000);

  const net::ClientResponse small = Post(client, coordinator.base_url(), "/admission/acquire",
                                         R"({"ticket": "c", "reservation_tokens": 2})");
  StatusOr<control::AdmissionDecision> admitted = ParseDecision(small.body);
  ASSERT_TRUE(admitted.ok()) << small.body;
  EXPECT_EQ(admitted->action, control::AdmissionAction::kAdmit);
  EXPECT_EQ(coordinator.admission().waiting(), 0);
  EXPECT_EQ(Post(client, coordinator.base_url(), "/admission/release",
                 R"({"lease_id": ")" + *admitted->lease_id + R"("})")
                .status,
            200);
  ExpectLedgerAtRest(coordinator.admission());
}

// Item 2, the model's context: what every engine would refuse is refused by the gateway, with
// SGLang's own messages (clients such as Relax recognise them); a text prompt without a token
// count is never refused on a byte estimate.
TEST(GatewayChaosTest, TheContextLengthIsEnforcedWithSglangsMessages) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.context_length = 4096;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const net::ClientResponse long_input =
      Post(client, gateway->base_url(), "/generate", R"({"input_ids": )" + InputIds(1, 5000) + "}");
  EXPECT_EQ(long_input.status, 400);
  EXPECT_EQ(ErrorMessage(long_input),
            "The input (5000 tokens) is longer than the model's context length (4096 tokens).");
  const net::ClientResponse too_much = Post(
      client, gateway->base_url(), "/generate",
      R"({"input_ids": )" + InputIds(1, 100) + R"(, "sampling_params": {"max_new_tokens": 4000}})");
  EXPECT_EQ(too_much.status, 400);
  EXPECT_THAT(ErrorMessage(too_much),
              HasSubstr("Requested token count exceeds the model's maximum context length of 4096 "
                        "tokens. You requested a total of 4100 tokens"));
  const net::ClientResponse counted = Post(client, gateway->base_url(), "/v1/chat/completions",
                                           ChatBody("c", 200), {{"X-Prompt-Tokens", "4000"}});
  EXPECT_EQ(counted.status, 400);
  EXPECT_EQ(Post(client, gateway->base_url(), "/generate",
                 R"({"text": "hi", "sampling_params": {"max_new_tokens": 100}})")
                .status,
            200);
  EXPECT_EQ(engine.generates().size(), 1u);
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

// Item 4: the parent hint is honoured only from the signed header; a body that carries the
// field (plain or with an escaped key) is refused and reaches no engine.
TEST(GatewayChaosTest, AParentHintInTheBodyIsRefused) {
  FakeEngine engine(/*hold=*/false);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  options.parent_hint_key = "hint-key";
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  net::HttpClient client(ClientOptions());
  const net::HeaderList session = {{"X-Session-Id", "child"}};
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/generate", R"({"text": "hi", "agentkv_parent_session": "victim"})"},
           {"/generate", R"({"text": "hi", "agentkv\u005fparent_session": "victim"})"},
           {"/v1/chat/completions",
            R"({"messages": [], "agentkv_parent_session": "victim", "max_tokens": 1})"},
           {"/v1/completions", R"({"prompt": "hi", "agentkv_parent_session": null})"}}) {
    const net::ClientResponse r = Post(client, gateway->base_url(), path, body, session);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_THAT(ErrorMessage(r), HasSubstr("agentkv_parent_session: not accepted in the body"));
  }
  EXPECT_TRUE(engine.generates().empty());
  // The signed header still works.
  net::HeaderList signed_hint = session;
  signed_hint.emplace_back("X-Agentkv-Parent-Session", "parent");
  signed_hint.emplace_back("X-Agentkv-Parent-Signature",
                           SignParentHint("hint-key", "child", "parent"));
  EXPECT_EQ(Post(client, gateway->base_url(), "/generate", R"({"text": "hi"})", signed_hint).status,
            200);
  ASSERT_EQ(engine.generates().size(), 1u);
  EXPECT_THAT(engine.generates()[0].body, HasSubstr(R"("agentkv_parent_session":"parent")"));
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
