// SGLang's and sgl-router's own command lines start the emulators: each is SGLang's, with
// `python -m sglang.launch_server` (or sglang_router's launch_router / launch_server) replaced by
// `agentkv emulate engine` (router / fleet), the host set to 127.0.0.1, every port to 0
// (ephemeral) and worker URLs to emulated engines; nothing else changes. The test reads the
// startup lines (the ignored flags' line, then the serving line), then asks the running server
// what the flags should have made it: the served model, the context length, the KV pool, the
// router's policy and its Prometheus listener. Refused flags exit 2 naming the flag and why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../chaos/chaos_support.h"
#include "agentkv/net/http_client.h"
#include "cli_test_support.h"

#ifndef AGENTKV_BINARY
#error "AGENTKV_BINARY must name the agentkv binary (see tests/tools/CMakeLists.txt)"
#endif

namespace agentkv {
namespace {

namespace http = net::http;
namespace json = boost::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// A command line as SGLang's docs and CI scripts write it, made to run here: the launcher
// becomes `agentkv emulate MODE`, --host becomes 127.0.0.1 and every port 0.
std::vector<std::string> Emulate(const std::string& mode, const std::string& sglang_flags) {
  std::vector<std::string> argv = {"/bin/sh", "-c", ""};
  std::istringstream words(sglang_flags);
  std::string command = std::string("exec '") + AGENTKV_BINARY + "' emulate " + mode;
  std::string word;
  std::string previous;
  while (words >> word) {
    if (previous == "--host" || previous == "--prometheus-host" ||
        previous == "--router-prometheus-host") {
      word = "127.0.0.1";
    } else if (previous == "--port" || previous.ends_with("-port")) {
      word = "0";
    }
    command += " " + word;
    previous = word;
  }
  if (sglang_flags.find("--port") == std::string::npos) command += " --port 0";
  // The ignored flags' line goes to stderr: merged, so that the test reads both lines in order.
  argv[2] = command + " 2>&1";
  return argv;
}

// A started server: its startup lines, and the URL its serving line names first.
struct Started {
  std::unique_ptr<chaos::ChildProcess> process;
  std::vector<std::string> lines;
  std::string url;
};

Started Start(const std::string& mode, const std::string& sglang_flags) {
  Started started;
  started.process = chaos::ChildProcess::Spawn(Emulate(mode, sglang_flags));
  EXPECT_NE(started.process, nullptr);
  if (started.process == nullptr) return started;
  while (started.url.empty()) {
    const std::optional<std::string> line = started.process->ReadLine(20s);
    if (!line.has_value()) break;
    started.lines.push_back(*line);
    if (const size_t at = line->find("http://"); at != std::string::npos) {
      started.url = line->substr(at, line->find_first_of(" ,)", at) - at);
    }
  }
  EXPECT_FALSE(started.url.empty())
      << "no serving line: " << ::testing::PrintToString(started.lines);
  return started;
}

// The status of GET `path` with `headers`.
int StatusOf(const std::string& base, const std::string& path, net::HeaderList headers = {}) {
  net::HttpClient client(net::HttpClientOptions{});
  StatusOr<net::ClientResponse> r = client.Request(http::verb::get, base, path, headers, "");
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->status : 0;
}

json::value Get(const std::string& base, const std::string& path) {
  net::HttpClient client(net::HttpClientOptions{});
  StatusOr<net::ClientResponse> r = client.Request(http::verb::get, base, path, {}, "");
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return json::value();
  EXPECT_EQ(r->status, 200) << path << " " << r->body;
  const bool is_json = !r->body.empty() && (r->body.front() == '{' || r->body.front() == '[');
  return is_json ? json::parse(r->body) : json::value(json::string(r->body));
}

// The realistic command line of a CI job that serves Llama 3.1 70B on 4 H100s for an agent
// suite, with what such jobs add: kernels, CUDA graphs, logging, a tool-call parser.
constexpr const char* kCiLaunch =
    "--model-path meta-llama/Meta-Llama-3.1-70B-Instruct --host 0.0.0.0 --port 30000 "
    "--tp-size 4 --mem-fraction-static 0.85 --context-length 8192 --max-running-requests 64 "
    "--chunked-prefill-size 4096 --page-size 16 --enable-metrics --enable-cache-report "
    "--trust-remote-code --attention-backend flashinfer --sampling-backend flashinfer "
    "--cuda-graph-max-bs 64 --disable-custom-all-reduce --kv-cache-dtype auto --dtype bfloat16 "
    "--log-level warning --log-requests --tool-call-parser llama3 --random-seed 42 "
    "--watchdog-timeout 600 --enable-hierarchical-cache --hicache-ratio 2 "
    "--skip-server-warmup";

TEST(SglangCommandLineTest, ARealisticLaunchServerCommandLineStartsTheEngineItDescribes) {
  const Started engine = Start("engine", kCiLaunch);
  ASSERT_FALSE(engine.url.empty());
  // One line names every ignored flag with its value; the mapped ones are not in it.
  ASSERT_GE(engine.lines.size(), 2u);
  const std::string& ignored = engine.lines.front();
  for (const char* flag :
       {"--trust-remote-code", "--attention-backend flashinfer", "--cuda-graph-max-bs 64",
        "--tool-call-parser llama3", "--log-level warning", "--skip-server-warmup"}) {
    EXPECT_THAT(ignored, HasSubstr(flag));
  }
  for (const char* mapped : {"--tp-size", "--model-path", "--context-length", "--hicache-ratio"}) {
    EXPECT_THAT(ignored, ::testing::Not(HasSubstr(mapped)));
  }
  EXPECT_THAT(engine.lines.back(), HasSubstr("llama-3.1-70b on h100"));
  // Then SGLang's readiness line, which CI scripts wait for.
  EXPECT_EQ(engine.process->ReadLine(20s), "The server is fired up and ready to roll!");
  // The served model is the model path, with the context length asked.
  const json::value models = Get(engine.url, "/v1/models");
  const json::value& card = models.at("data").as_array().at(0);
  EXPECT_EQ(card.at("id").as_string(), "meta-llama/Meta-Llama-3.1-70B-Instruct");
  EXPECT_EQ(card.at("max_model_len").as_int64(), 8192);
  const json::value info = Get(engine.url, "/server_info");
  EXPECT_EQ(info.at("tp_size").as_int64(), 4);
  EXPECT_EQ(info.at("max_running_requests").as_int64(), 64);
  EXPECT_EQ(info.at("chunked_prefill_size").as_int64(), 4096);
  EXPECT_DOUBLE_EQ(info.at("mem_fraction_static").to_number<double>(), 0.85);
  // The host tier is twice the device pool (--hicache-ratio 2), and /metrics is SGLang's.
  EXPECT_TRUE(info.at("enable_hierarchical_cache").as_bool());
  EXPECT_EQ(info.at("agentkv_emulator").at("hicache_tokens").as_int64(),
            2 * info.at("max_total_num_tokens").as_int64());
  const std::string metrics(Get(engine.url, "/metrics").as_string());
  EXPECT_THAT(metrics, HasSubstr("sglang:num_running_reqs"));
}

TEST(SglangCommandLineTest, TheDocsLaunchServerCommandLinesStart) {
  for (const char* flags :
       {"--model-path meta-llama/Meta-Llama-3-8B-Instruct --tp 2",
        "--model-path meta-llama/Meta-Llama-3-8B-Instruct --mem-fraction-static 0.7",
        "--model-path meta-llama/Meta-Llama-3-8B-Instruct --chunked-prefill-size 4096",
        "--model meta-llama/Meta-Llama-3.1-8B-Instruct --port 8000"}) {
    const Started engine = Start("engine", flags);
    EXPECT_FALSE(engine.url.empty()) << flags;
    if (engine.url.empty()) continue;
    EXPECT_THAT(engine.lines.back(), HasSubstr("llama-3.1-8b on h100")) << flags;
    EXPECT_EQ(Get(engine.url, "/v1/models")
                  .at("data")
                  .at(0)
                  .at("id")
                  .as_string()
                  .find("meta-llama/Meta-Llama-3"),
              0u);
  }
}

// sgl-router's docs: a router in front of two workers, with its Prometheus listener, retries,
// circuit breaker and request-id headers; the fleet as sglang_router.launch_server starts one.
TEST(SglangCommandLineTest, TheDocsRouterCommandLinesStartTheRouterTheyDescribe) {
  const Started a = Start("engine", "--model meta-llama/Meta-Llama-3.1-8B-Instruct --port 8000");
  const Started b = Start("engine", "--model meta-llama/Meta-Llama-3.1-8B-Instruct --port 8001");
  ASSERT_FALSE(a.url.empty());
  ASSERT_FALSE(b.url.empty());
  const Started router = Start(
      "router", "--worker-urls " + a.url + " " + b.url +
                    " --policy cache_aware --host 0.0.0.0 --port 30000 --prometheus-host 0.0.0.0 "
                    "--prometheus-port 29000 --request-id-headers x-request-id x-trace-id "
                    "--retry-max-retries 5 --retry-initial-backoff-ms 50 --retry-max-backoff-ms "
                    "30000 --retry-backoff-multiplier 1.5 --retry-jitter-factor 0.2 "
                    "--cb-failure-threshold 5 --cb-success-threshold 2 --cb-timeout-duration-secs "
                    "30 --cb-window-duration-secs 60 --log-level debug");
  ASSERT_FALSE(router.url.empty());
  EXPECT_THAT(router.lines.front(), HasSubstr("--retry-max-retries 5"));
  EXPECT_THAT(router.lines.back(), HasSubstr("cache_aware over 2 workers"));
  EXPECT_EQ(Get(router.url, "/list_workers").at("urls").as_array().size(), 2u);
  // /metrics also on the Prometheus port the serving line names.
  const std::string& serving = router.lines.back();
  const size_t at = serving.find("also on port ");
  ASSERT_NE(at, std::string::npos) << serving;
  const std::string port = serving.substr(at + 13, serving.find(')', at) - at - 13);
  EXPECT_THAT(std::string(Get("http://127.0.0.1:" + port, "/metrics").as_string()),
              HasSubstr("sgl_router_"));

  const Started fleet = Start("fleet",
                              "--model meta-llama/Meta-Llama-3.1-8B-Instruct --dp-size 4 --host "
                              "0.0.0.0 --port 30000 --router-policy round_robin "
                              "--router-prometheus-port 10001 --router-health-success-threshold 2 "
                              "--router-health-check-interval-secs 60 --router-log-level debug");
  ASSERT_FALSE(fleet.url.empty());
  EXPECT_THAT(fleet.lines.back(), HasSubstr("(round_robin) over 4 engines"));
  EXPECT_EQ(Get(fleet.url, "/list_workers").at("urls").as_array().size(), 4u);
}

// SGLang's --api-key: every route but the health and metrics ones needs the bearer key.
TEST(SglangCommandLineTest, AnApiKeyGuardsEveryRouteButHealthAndMetrics) {
  const Started engine = Start("engine", "--model-path org/m --api-key s3cr3t");
  ASSERT_FALSE(engine.url.empty());
  for (const std::string& line : engine.lines)
    EXPECT_THAT(line, ::testing::Not(HasSubstr("s3cr3t")));
  EXPECT_EQ(StatusOf(engine.url, "/v1/models"), 401);
  EXPECT_EQ(StatusOf(engine.url, "/v1/models", {{"Authorization", "Bearer wrong"}}), 401);
  EXPECT_EQ(StatusOf(engine.url, "/v1/models", {{"Authorization", "Bearer s3cr3t"}}), 200);
  EXPECT_EQ(StatusOf(engine.url, "/health"), 200);
  EXPECT_EQ(StatusOf(engine.url, "/metrics"), 200);
  const int info = StatusOf(engine.url, "/server_info", {{"Authorization", "Bearer s3cr3t"}});
  EXPECT_EQ(info, 200);
}

TEST(SglangCommandLineTest, AFlagTheEmulatorCannotModelIsRefusedNamingItAndWhy) {
  struct Case {
    std::string mode;
    std::string flags;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {"engine", "--model-path org/m --speculative-algorithm EAGLE",
            "--speculative-algorithm EAGLE: speculative decoding is not modelled"},
           {"engine", "--model-path org/m --enable-lora --lora-paths a=b",
            "LoRA adapters are not modelled"},
           {"engine", "--model-path org/m --pp-size 2", "--pp-size 2: pipeline parallelism"},
           {"engine", "--model-path org/m --dp-size 2", "emulate fleet --dp-size 2"},
           {"engine", "--model-path org/m --admin-api-key s3cr3t", "--admin-api-key ***:"},
           {"engine", "--model-path org/m --frobnicate 3", "--frobnicate"},
           {"engine", "--model-path llama-3-8b", "or a model path with a '/'"},
           {"router", "--worker-urls http://127.0.0.1:9 --pd-disaggregation",
            "prefill/decode disaggregation"},
           {"router", "--worker-urls http://127.0.0.1:9 --backend openai",
            "--backend openai: only SGLang workers"},
           {"fleet", "--dp-size 2 --engines 3", "disagree"}}) {
    std::unique_ptr<chaos::ChildProcess> p = chaos::ChildProcess::Spawn(Emulate(c.mode, c.flags));
    ASSERT_NE(p, nullptr);
    std::string out;
    while (std::optional<std::string> line = p->ReadLine(20s)) out += *line + "\n";
    const int status = p->Kill(SIGKILL);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << c.flags << "\n" << out;
    EXPECT_THAT(out, HasSubstr("agentkv emulate " + c.mode + ": error: ")) << c.flags;
    EXPECT_THAT(out, HasSubstr(c.error)) << c.flags;
    EXPECT_THAT(out, ::testing::Not(HasSubstr("s3cr3t"))) << "a credential was echoed";
  }
  // The value that keeps SGLang's default is accepted (and ignored).
  const Started engine =
      Start("engine", "--model-path org/m --pp-size 1 --disaggregation-mode null");
  ASSERT_FALSE(engine.url.empty());
  EXPECT_THAT(engine.lines.front(), HasSubstr("--pp-size 1"));
}

}  // namespace
}  // namespace agentkv
