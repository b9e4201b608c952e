// GET /metrics of a running gateway and a running coordinator, checked by Prometheus' own
// linter (`promtool check metrics`, Debian package `prometheus`) after requests have given
// every counter and histogram samples, and after a step reset (GET /agentic_kv?reset=1),
// which the `_total` counters must survive. The engine emulator keeps SGLang's `sglang:`
// names on purpose and is not linted. Fails, naming the package, when promtool is absent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gateway_test_support.h"

namespace agentkv::service::gateway_testing {
namespace {

using ::testing::HasSubstr;

// promtool on PATH, or nullopt.
std::optional<std::filesystem::path> FindPromtool() {
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "";
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
    if (dir.empty()) continue;
    const std::filesystem::path candidate = std::filesystem::path(dir) / "promtool";
    std::error_code error;
    if (std::filesystem::is_regular_file(candidate, error)) return candidate;
  }
  return std::nullopt;
}

struct LintResult {
  int exit_code = -1;  // -1 when promtool did not exit normally.
  std::string output;  // stdout and stderr together: the problems it found.
};

// Runs `promtool check metrics` over `exposition`.
LintResult Lint(const std::filesystem::path& promtool, const std::string& exposition) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path input = std::filesystem::path(::testing::TempDir()) /
                                      ("agentkv_promtool_" + std::string(info->name()) + ".txt");
  std::ofstream(input, std::ios::binary) << exposition;
  const std::string command =
      "'" + promtool.string() + "' check metrics < '" + input.string() + "' 2>&1";
  LintResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::filesystem::remove(input);
  return result;
}

// The value of the unlabelled sample `name` in `exposition`, or nullopt.
std::optional<double> SampleValue(const std::string& exposition, const std::string& name) {
  StatusOr<std::vector<protocol::Sample>> samples = protocol::ParsePrometheusText(exposition);
  EXPECT_TRUE(samples.ok()) << samples.status();
  if (!samples.ok()) return std::nullopt;
  for (const protocol::Sample& sample : *samples) {
    if (sample.name == name && sample.labels.empty()) return sample.value;
  }
  return std::nullopt;
}

class PrometheusLintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    promtool_ = FindPromtool();
    if (!promtool_.has_value()) {
      // A missing tool is a broken setup, not a reason to pass: the lint is what this checks.
      FAIL() << "promtool is not on PATH (Debian package `prometheus`, installed by "
                "scripts/install-deps.sh)";
    }
  }

  void ExpectClean(const std::string& exposition) {
    const LintResult lint = Lint(*promtool_, exposition);
    EXPECT_EQ(lint.exit_code, 0) << lint.output << "\n--- exposition ---\n" << exposition;
    EXPECT_EQ(lint.output, "") << exposition;
  }

  std::optional<std::filesystem::path> promtool_;
};

// The check can fail: promtool flags the two defects /metrics used to have.
TEST_F(PrometheusLintTest, TheLinterFlagsAGaugeNamedCountAndAnUnsuffixedCounter) {
  const LintResult lint = Lint(*promtool_,
                               "# HELP agentic_kv_budget_lease_count Live leases.\n"
                               "# TYPE agentic_kv_budget_lease_count gauge\n"
                               "agentic_kv_budget_lease_count 1\n"
                               "# HELP agentic_kv_admission_admit Requests admitted.\n"
                               "# TYPE agentic_kv_admission_admit counter\n"
                               "agentic_kv_admission_admit 3\n");
  EXPECT_NE(lint.exit_code, 0);
  EXPECT_THAT(lint.output, HasSubstr("agentic_kv_budget_lease_count"));
  EXPECT_THAT(lint.output, HasSubstr("_total"));
}

TEST_F(PrometheusLintTest, GatewayWithInProcessAdmissionAndTheLifecyclePassesAfterAStepReset) {
  FakeEngine engine(/*hold=*/false);
  control::AgenticOptions agentic;
  agentic.agentic_program_admission = true;
  agentic.agentic_session_lifecycle = true;
  agentic.agentic_admission_headroom = 1.0;
  agentic.poll_interval_s = 0.05;
  agentic.staleness_s = 5.0;
  std::shared_ptr<LocalAdmission> admission = StartLocalAdmission(agentic);
  ASSERT_NE(admission, nullptr);
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic = agentic;
  auto gateway = StartGateway(options, admission);
  ASSERT_NE(gateway, nullptr);
  ASSERT_TRUE(WaitFor([&] { return !admission->degraded(); }));

  net::HttpClient client(ClientOptions());
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Post(client, gateway->base_url(), "/generate",
                   AdmissionSetup::SessionBody("r" + std::to_string(i), "agent-1", 10, 5))
                  .status,
              200);
  }
  ASSERT_EQ(Post(client, gateway->base_url(), "/generate", R"({"input_ids": "not ids"})").status,
            400);
  ASSERT_EQ(Post(client, gateway->base_url(), "/v1/sessions/agent-1/close", "").status, 200);
  // A step reset, as a trainer does once per step: the per-step window restarts...
  ASSERT_EQ(Call(client, http::verb::get, gateway->base_url(), "/agentic_kv?reset=1").status, 200);
  const json::value step =
      json::parse(Call(client, http::verb::get, gateway->base_url(), "/agentic_kv").body);
  EXPECT_FALSE(step.as_object().contains(control::kAdmitMetric));
  EXPECT_TRUE(step.as_object().contains(control::kLeaseCountMetric)) << step;

  const net::ClientResponse metrics =
      Call(client, http::verb::get, gateway->base_url(), "/metrics");
  ASSERT_EQ(metrics.status, 200);
  ExpectClean(metrics.body);
  // ... and the counters do not.
  EXPECT_EQ(SampleValue(metrics.body, "agentic_kv_admission_admit_total"), 3.0) << metrics.body;
  EXPECT_EQ(SampleValue(metrics.body, "agentic_kv_session_close_total"), 1.0);
  EXPECT_EQ(SampleValue(metrics.body, "agentic_kv_budget_leases"), 0.0);
  EXPECT_EQ(SampleValue(metrics.body, "agentic_kv_admission_wait_seconds_count"), 0.0);
  EXPECT_EQ(SampleValue(metrics.body, "agentic_kv_budget_lease_count"), std::nullopt);
  EXPECT_THAT(metrics.body, HasSubstr("agentkv_gateway_request_duration_seconds_bucket{"));
  gateway->Shutdown(2s);
}

TEST_F(PrometheusLintTest, CoordinatorAndTheGatewayInFrontOfItPass) {
  FakeEngine engine(/*hold=*/false);
  LogCapture coordinator_logs;
  CoordinatorOptions coordinator_options;
  coordinator_options.engine_urls = {engine.base_url()};
  coordinator_options.agentic.agentic_admission_headroom = 1.0;
  coordinator_options.agentic.poll_interval_s = 0.1;
  coordinator_options.agentic.staleness_s = 5.0;
  coordinator_options.metrics_timeout_s = 0.5;
  coordinator_options.log = coordinator_logs.Sink();
  StatusOr<std::unique_ptr<CoordinatorServer>> started =
      CoordinatorServer::Start(coordinator_options);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<CoordinatorServer> coordinator = *std::move(started);
  ASSERT_TRUE(WaitFor([&] { return !coordinator->admission().degraded(); }));

  RemoteAdmissionOptions remote_options;
  remote_options.coordinator_url = coordinator->base_url();
  StatusOr<std::unique_ptr<RemoteAdmission>> remote = RemoteAdmission::Create(remote_options);
  ASSERT_TRUE(remote.ok()) << remote.status();
  std::shared_ptr<RemoteAdmission> backend(*std::move(remote));
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_program_admission = true;
  options.poll_fleet_metrics = false;  // The coordinator polls the fleet.
  auto gateway = StartGateway(options, backend);
  ASSERT_NE(gateway, nullptr);

  net::HttpClient client(ClientOptions());
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(Post(client, gateway->base_url(), "/generate",
                   AdmissionSetup::Body("remote-" + std::to_string(i)))
                  .status,
              200);
    // The gateway returns the lease after answering: wait for it, so that the next request is
    // admitted at once (an admit), not queued behind it (a wait).
    ASSERT_TRUE(WaitFor(
        [&] { return Series(coordinator->admission(), "agentic_kv/budget/lease_count") == 0; }));
  }
  // A reservation past the whole ceiling is refused at once (a counter of its own).
  ASSERT_EQ(Post(client, coordinator->base_url(), "/admission/acquire",
                 R"({"ticket": "huge", "reservation_tokens": 1000000})")
                .status,
            200);
  ASSERT_EQ(Call(client, http::verb::get, coordinator->base_url(), "/agentic_kv?reset=1").status,
            200);

  const net::ClientResponse coordinator_metrics =
      Call(client, http::verb::get, coordinator->base_url(), "/metrics");
  ASSERT_EQ(coordinator_metrics.status, 200);
  ExpectClean(coordinator_metrics.body);
  EXPECT_EQ(SampleValue(coordinator_metrics.body, "agentic_kv_admission_admit_total"), 2.0)
      << coordinator_metrics.body;
  EXPECT_EQ(SampleValue(coordinator_metrics.body, "agentic_kv_admission_refused_oversized_total"),
            1.0);
  EXPECT_EQ(SampleValue(coordinator_metrics.body, "agentic_kv_budget_ceiling"), 1000.0);
  // The coordinator fans out no session closes, so it exports no session counters.
  EXPECT_EQ(SampleValue(coordinator_metrics.body, "agentic_kv_session_close_total"), std::nullopt);

  const net::ClientResponse gateway_metrics =
      Call(client, http::verb::get, gateway->base_url(), "/metrics");
  ASSERT_EQ(gateway_metrics.status, 200);
  ExpectClean(gateway_metrics.body);
  // The coordinator's decisions are counted once, on the coordinator; its gauges pass through.
  EXPECT_EQ(SampleValue(gateway_metrics.body, "agentic_kv_admission_admit_total"), std::nullopt);
  EXPECT_EQ(SampleValue(gateway_metrics.body, "agentic_kv_budget_ceiling"), 1000.0)
      << gateway_metrics.body;
  gateway->Shutdown(2s);
  coordinator->Shutdown(1s);
}

}  // namespace
}  // namespace agentkv::service::gateway_testing
