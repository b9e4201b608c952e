// The gateway's and the coordinator's answers to hostile input (ctest -L chaos): token counts
// that overflow or can never fit, admission headers a client could forge, requests past the
// context length, a parent hint smuggled in the body, and one session hogging the ceiling. Each
// is a clear 4xx at once or a bounded reservation: nothing reserved by mistake, nobody else
// delayed. Loopback only; every client call has a timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "../integration/gateway_test_support.h"
#include "agentkv/service/admission/admission_wire.h"
#include "gateway_chaos_support.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
using namespace gateway_testing;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace agentkv::service
