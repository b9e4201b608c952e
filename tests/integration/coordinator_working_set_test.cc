// The coordinator's program-level endpoints (/admission/program/*) on 127.0.0.1, against one
// engine emulator whose KV holds one 600-token program at a time.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "agentkv/net/http_client.h"
#include "agentkv/protocol/generate_response.h"
#include "agentkv/service/admission/working_set_wire.h"
#include "agentkv/service/coordinator/coordinator_server.h"
#include "agentkv/service/emulator/engine_emulator.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
namespace http = net::http;

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds limit = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

net::HttpClientOptions ClientOptions() {
  net::HttpClientOptions options;
  options.connect_timeout = 2s;
  options.header_timeout = 15s;
  options.body_timeout = 15s;
  return options;
}

class CoordinatorWorkingSetTest : public ::testing::Test {
 protected:
  void Start(const std::string& token = "") {
    EngineEmulatorOptions engine_options;
    engine_options.runtime.paced = false;
    engine_options.runtime.engine.kv_pool.tokens_per_block = 16;
    engine_options.runtime.engine.kv_pool.max_total_tokens = 1024;
    StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(engine_options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    CoordinatorOptions options;
    options.engine_urls = {engine_->base_url()};
    options.agentic.poll_interval_s = 0.1;
    options.agentic.staleness_s = 5.0;
    options.metrics_timeout_s = 0.3;
    options.auth_token = token;
    options.working_set.headroom = 1.0;
    options.working_set.default_hold = TimeNs::Seconds(60);
    options.working_set.max_hold = TimeNs::Seconds(60);
    options.working_set.max_wait = TimeNs::Seconds(60);
    StatusOr<std::unique_ptr<CoordinatorServer>> started = CoordinatorServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    coordinator_ = *std::move(started);
    ASSERT_TRUE(
        WaitUntil([this] { return coordinator_->working_set().Gauges().capacity_tokens > 0; }));
  }
  void TearDown() override {
    if (coordinator_ == nullptr) return;
    EXPECT_TRUE(coordinator_->working_set().CheckInvariants().ok());
    coordinator_->Shutdown(1s);
  }

  net::ClientResponse Call(std::string_view path, const std::string& body,
                           const std::string& token = "", net::HttpClient* client = nullptr) {
    net::HeaderList headers{{"Content-Type", "application/json"}};
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    StatusOr<net::ClientResponse> r =
        (client != nullptr ? *client : client_)
            .Request(http::verb::post, coordinator_->base_url(), std::string(path), headers, body);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *std::move(r) : net::ClientResponse{};
  }

  control::WorkingSetDecision Acquire(const std::string& ticket, const std::string& program,
                                      const std::string& agent) {
    const net::ClientResponse r =
        Call(kProgramAcquirePath, SerializeProgramAcquire({ticket, program, agent, 600}));
    EXPECT_EQ(r.status, 200) << r.body;
    StatusOr<control::WorkingSetDecision> d = ParseProgramDecision(r.body);
    EXPECT_TRUE(d.ok()) << d.status() << " in " << r.body;
    return d.ok() ? *d : control::WorkingSetDecision{};
  }
  // A long-polled acquire on its own connection.
  std::future<control::WorkingSetDecision> AcquireAsync(const std::string& ticket,
                                                        const std::string& program,
                                                        const std::string& agent) {
    return std::async(std::launch::async, [this, ticket, program, agent] {
      net::HttpClient client(ClientOptions());
      const net::ClientResponse r = Call(
          kProgramAcquirePath, SerializeProgramAcquire({ticket, program, agent, 600}), "", &client);
      StatusOr<control::WorkingSetDecision> d = ParseProgramDecision(r.body);
      EXPECT_TRUE(d.ok()) << d.status() << " in " << r.body;
      return d.ok() ? *d : control::WorkingSetDecision{};
    });
  }
  void Finish(const std::string& ticket, int64_t context, std::string_view pause) {
    const net::ClientResponse r =
        Call(kProgramFinishPath, R"({"ticket":")" + ticket + R"(","context_tokens":)" +
                                     std::to_string(context) + R"(,"next_pause":")" +
                                     std::string(pause) + R"("})");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  int64_t Waiting() { return coordinator_->working_set().Gauges().waiting_programs; }

  std::unique_ptr<EngineEmulator> engine_;
  std::unique_ptr<CoordinatorServer> coordinator_;
  net::HttpClient client_{ClientOptions()};
};

TEST_F(CoordinatorWorkingSetTest, ANewProgramWaitsForAHeldContextAndIsAdmittedOnFinishOrEnd) {
  Start();
  const control::WorkingSetDecision a1 = Acquire("a1", "pA", "a");
  EXPECT_TRUE(a1.admitted);
  EXPECT_EQ(a1.reason, control::WorkingSetReason::kFits);
  Finish("a1", 600, "tool_call");
  EXPECT_EQ(coordinator_->working_set().Gauges().held_tokens, 600);

  // B waits beside A's held context; A's return goes at once.
  std::future<control::WorkingSetDecision> b1 = AcquireAsync("b1", "pB", "b");
  ASSERT_TRUE(WaitUntil([this] { return Waiting() == 1; }));
  const control::WorkingSetDecision a2 = Acquire("a2", "pA", "a");
  EXPECT_EQ(a2.reason, control::WorkingSetReason::kContinuing);
  EXPECT_EQ(b1.wait_for(0ms), std::future_status::timeout);

  // A's last request ends (no hold follows): B is admitted.
  Finish("a2", 600, "session_end");
  ASSERT_EQ(b1.wait_for(10s), std::future_status::ready);
  const control::WorkingSetDecision b = b1.get();
  EXPECT_TRUE(b.admitted);
  EXPECT_EQ(b.reason, control::WorkingSetReason::kFits);

  // C waits for B's hold; ending B's agent admits it.
  Finish("b1", 600, "human_turn");
  std::future<control::WorkingSetDecision> c1 = AcquireAsync("c1", "pC", "c");
  ASSERT_TRUE(WaitUntil([this] { return Waiting() == 1; }));
  EXPECT_EQ(Call(kProgramEndAgentPath, R"({"agent":"b"})").status, 200);
  ASSERT_EQ(c1.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(c1.get().admitted);

  // D waits and is cancelled.
  Finish("c1", 600, "tool_call");
  std::future<control::WorkingSetDecision> d1 = AcquireAsync("d1", "pD", "d");
  ASSERT_TRUE(WaitUntil([this] { return Waiting() == 1; }));
  EXPECT_EQ(Call(kProgramCancelPath, R"({"ticket":"d1"})").status, 200);
  ASSERT_EQ(d1.wait_for(10s), std::future_status::ready);
  const control::WorkingSetDecision d = d1.get();
  EXPECT_FALSE(d.admitted);
  EXPECT_EQ(d.reason, control::WorkingSetReason::kCancelled);

  const std::string metrics = coordinator_->MetricsText();
  for (const char* line :
       {"agentic_kv_working_set_waits_total 3", "agentic_kv_working_set_cancelled_total 1",
        R"(agentic_kv_working_set_admitted_total{reason="fits"} 3)",
        R"(agentic_kv_working_set_admitted_total{reason="continuing"} 1)",
        "agentic_kv_working_set_held_tokens 600", "agentic_kv_working_set_capacity_tokens 1024",
        R"(agentkv_coordinator_requests_total{endpoint="program_acquire"} 5)"}) {
    EXPECT_NE(metrics.find(line), std::string::npos) << line << " not in\n" << metrics;
  }
  EXPECT_EQ(Call(kProgramEndAgentPath, R"({"agent":"c"})").status, 200);
  EXPECT_EQ(coordinator_->working_set().Gauges().held_tokens, 0);
}

TEST_F(CoordinatorWorkingSetTest, BadFieldsAre400NamingTheFieldAndTheValue) {
  Start();
  const struct {
    std::string_view path;
    std::string body;
    std::string expect;
  } cases[] = {
      {kProgramAcquirePath, R"({"program":"p","agent":"a","reservation_tokens":1})",
       "ticket: required"},
      {kProgramAcquirePath, R"({"ticket":"t","program":"p","agent":"a","reservation_tokens":-5})",
       "reservation_tokens"},
      {kProgramAcquirePath, R"({"ticket":"t","program":"","agent":"a","reservation_tokens":5})",
       "program: must not be empty"},
      {kProgramAcquirePath,
       R"({"ticket":"t","program":"p","agent":"a","reservation_tokens":5,"egnine":"e"})",
       "egnine: unknown field"},
      {kProgramAcquirePath, R"({"ticket":"t","program":"p","agent":"a","reservation_tokens":"5"})",
       "reservation_tokens"},
      {kProgramFinishPath, R"({"ticket":"t","context_tokens":5,"next_pause":"lunch"})",
       "next_pause: expected unknown, tool_call, subagent_wait, human_turn or session_end, got "
       "\"lunch\""},
      {kProgramFinishPath, R"({"ticket":"t"})", "context_tokens: required"},
      {kProgramCancelPath, R"({})", "ticket: required"},
      {kProgramEndAgentPath, R"({"agent":7})", "agent"},
      {kProgramEndAgentPath, "nope", ""},
  };
  for (const auto& c : cases) {
    const net::ClientResponse r = Call(c.path, c.body);
    EXPECT_EQ(r.status, 400) << c.path << " " << c.body << " -> " << r.body;
    EXPECT_NE(protocol::ParseErrorMessage(r.body).value_or("").find(c.expect), std::string::npos)
        << c.body << " -> " << r.body;
  }
  // An agent named with another program is refused too.
  EXPECT_TRUE(Acquire("t1", "p1", "a").admitted);
  const net::ClientResponse other =
      Call(kProgramAcquirePath, SerializeProgramAcquire({"t2", "p2", "a", 5}));
  EXPECT_EQ(other.status, 400) << other.body;
  const net::ClientResponse again =
      Call(kProgramAcquirePath, SerializeProgramAcquire({"t1", "p1", "a", 5}));
  EXPECT_EQ(again.status, 409) << again.body;
  Finish("t1", 0, "session_end");
  EXPECT_EQ(Call(kProgramEndAgentPath, R"({"agent":"a"})").status, 200);
}

TEST_F(CoordinatorWorkingSetTest, TheBearerTokenGuardsTheProgramEndpoints) {
  Start("s3cret");
  const std::string acquire = SerializeProgramAcquire({"t", "p", "a", 10});
  for (const auto& [path, body] :
       {std::pair{kProgramAcquirePath, acquire},
        std::pair{kProgramFinishPath, std::string(R"({"ticket":"t","context_tokens":1})")},
        std::pair{kProgramCancelPath, std::string(R"({"ticket":"t"})")},
        std::pair{kProgramEndAgentPath, std::string(R"({"agent":"a"})")}}) {
    for (const std::string& token : {std::string(), std::string("wrong")}) {
      const net::ClientResponse r = Call(path, body, token);
      EXPECT_EQ(r.status, 401) << path << " " << token;
    }
  }
  EXPECT_EQ(coordinator_->working_set().Counters().fits, 0) << "a refused call changes nothing";
  const net::ClientResponse ok = Call(kProgramAcquirePath, acquire, "s3cret");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(Call(kProgramFinishPath, R"({"ticket":"t","context_tokens":1})", "s3cret").status, 200);
  EXPECT_EQ(Call(kProgramEndAgentPath, R"({"agent":"a"})", "s3cret").status, 200);
}

}  // namespace
}  // namespace agentkv::service
