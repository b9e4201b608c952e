// Client compatibility: the calls an OpenAI SDK (and SGLang tooling, RL frameworks,
// Prometheus) makes, sent over plain HTTP the way those clients send them, against an emulated
// engine directly and against the gateway in front of an emulated router and engine. Each test
// asserts the shapes such a client reads: OpenAI's model list, completions, streams with a
// role chunk and a usage chunk, flat error objects on /v1 routes and SGLang's nested ones
// elsewhere, cache_salt namespaces, tokenize, /server_info, the RL routes, the router's and
// engine's Prometheus series, and the SDK's retry decision on the gateway's error answers.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "gateway_test_support.h"
#include "sdk_client.h"

namespace agentkv::service {
namespace {

using namespace gateway_testing;  // NOLINT(google-build-using-namespace): test support.
using namespace sdk_client;       // NOLINT(google-build-using-namespace): test support.

std::string Chat(const std::string& content, const std::string& extra = "") {
  return R"({"model": "llama-3.1-8b", "messages": [{"role": "system", "content": "You are a )"
         R"(careful coding agent with many tools and a long system prompt to cache."}, )"
         R"({"role": "user", "content": ")" +
         content + R"("}], "max_tokens": 4)" + extra + "}";
}

int64_t CachedTokens(const net::ClientResponse& r) {
  return json::parse(r.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64();
}

class ClientCompatTest : public EngineOrGatewayTest {
 protected:
  void SetUp() override { StartServers(EngineOptions()); }
};

TEST_P(ClientCompatTest, ModelsListsTheServedModelAsAModelCard) {
  const net::ClientResponse r = SdkCall(client_, http::verb::get, base_, "/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  const json::value list = json::parse(r.body);
  EXPECT_EQ(list.at("object").as_string(), "list");
  const json::value& card = list.at("data").as_array().at(0);
  EXPECT_EQ(card.at("id").as_string(), "llama-3.1-8b");
  EXPECT_EQ(card.at("object").as_string(), "model");
  EXPECT_EQ(card.at("owned_by").as_string(), "sglang");
  EXPECT_GT(card.at("max_model_len").as_int64(), 0);
}

TEST_P(ClientCompatTest, ChatCompletionHasTheOpenAiShapeWithCachedTokens) {
  const net::ClientResponse first =
      SdkCall(client_, http::verb::post, base_, "/v1/chat/completions", Chat("list the files"));
  ASSERT_EQ(first.status, 200) << first.body;
  const json::value a = json::parse(first.body);
  EXPECT_TRUE(a.at("id").is_string());
  EXPECT_EQ(a.at("object").as_string(), "chat.completion");
  EXPECT_TRUE(a.at("created").is_int64());
  const json::value& choice = a.at("choices").as_array().at(0);
  EXPECT_EQ(choice.at("index").as_int64(), 0);
  EXPECT_EQ(choice.at("message").at("role").as_string(), "assistant");
  EXPECT_TRUE(choice.at("message").at("content").is_string());
  EXPECT_EQ(choice.at("finish_reason").as_string(), "length");
  const json::value& usage = a.at("usage");
  EXPECT_EQ(usage.at("completion_tokens").as_int64(), 4);
  EXPECT_EQ(usage.at("total_tokens").as_int64(),
            usage.at("prompt_tokens").as_int64() + usage.at("completion_tokens").as_int64());
  // The same prompt again is served from the prefix cache.
  const net::ClientResponse second =
      SdkCall(client_, http::verb::post, base_, "/v1/chat/completions", Chat("list the files"));
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_GT(CachedTokens(second), 0);
}

TEST_P(ClientCompatTest, ChatStreamOpensWithTheRoleAndEndsWithUsageThenDone) {
  const Stream stream =
      SdkStream(client_, base_, "/v1/chat/completions",
                Chat("stream it", R"(, "stream": true, )"
                                  R"("stream_options": {"include_usage": true})"));
  EXPECT_EQ(stream.status, 200);
  EXPECT_TRUE(stream.done);
  ASSERT_GE(stream.events.size(), 3u);
  const json::value& first = stream.events.front().at("choices").as_array().at(0);
  EXPECT_EQ(first.at("delta").at("role").as_string(), "assistant");
  for (const json::value& event : stream.events) {
    EXPECT_EQ(event.at("object").as_string(), "chat.completion.chunk");
    EXPECT_EQ(event.at("id"), stream.events.front().at("id"));
  }
  const json::value& last = stream.events.back();
  EXPECT_TRUE(last.at("choices").as_array().empty());
  EXPECT_EQ(last.at("usage").at("completion_tokens").as_int64(), 4);
  const json::value& finish =
      stream.events[stream.events.size() - 2].at("choices").as_array().at(0);
  EXPECT_EQ(finish.at("finish_reason").as_string(), "length");
}

TEST_P(ClientCompatTest, CompletionsServeTextPromptsAndTokenPrompts) {
  for (const std::string prompt : {R"("def main():")", "[1, 2, 3, 4, 5]"}) {
    const net::ClientResponse r =
        SdkCall(client_, http::verb::post, base_, "/v1/completions",
                R"({"model": "llama-3.1-8b", "prompt": )" + prompt + R"(, "max_tokens": 2})");
    ASSERT_EQ(r.status, 200) << r.body;
    const json::value v = json::parse(r.body);
    EXPECT_EQ(v.at("object").as_string(), "text_completion");
    EXPECT_TRUE(v.at("choices").as_array().at(0).at("text").is_string());
    EXPECT_EQ(v.at("usage").at("completion_tokens").as_int64(), 2);
  }
}

TEST_P(ClientCompatTest, OpenAiRoutesAnswerErrorsAsFlatErrorObjects) {
  struct Case {
    std::string path;
    std::string body;
    net::HeaderList headers;
    int status;
    std::string type;
    std::string message_part;
  };
  net::HeaderList text_plain = SdkHeaders();
  text_plain[0].second = "text/plain";
  const Case cases[] = {
      {"/v1/chat/completions", Chat("x", R"(, "n": 2)"), SdkHeaders(), 400, "BadRequestError",
       "n: only n = 1"},
      {"/v1/chat/completions", Chat("x", R"(, "logprobs": true)"), SdkHeaders(), 400,
       "BadRequestError", "logprobs"},
      {"/v1/chat/completions", Chat("x"), text_plain, 400, "BadRequestError",
       "Only 'application/json' is allowed"},
      {"/v1/completions", R"({"prompt": "p", "max_tokens": 1})", text_plain, 400, "BadRequestError",
       "Unsupported Media Type"},
      {"/v1/chat/completions", R"({"messages": 3})", SdkHeaders(), 400, "BadRequestError",
       "messages"},
      {"/v1/no_such_route", "{}", SdkHeaders(), 404, "NotFoundError", "no route"},
  };
  for (const Case& c : cases) {
    const net::ClientResponse r =
        SdkCall(client_, http::verb::post, base_, c.path, c.body, c.headers);
    EXPECT_EQ(r.status, c.status) << c.path << " " << r.body;
    const json::value body = json::parse(r.body);
    EXPECT_EQ(body.at("object").as_string(), "error") << r.body;
    EXPECT_EQ(body.at("type").as_string(), c.type) << r.body;
    EXPECT_TRUE(body.at("param").is_null()) << r.body;
    EXPECT_EQ(body.at("code").as_int64(), c.status) << r.body;
    EXPECT_NE(SdkErrorMessage(body).find(c.message_part), std::string::npos) << r.body;
  }
}

TEST_P(ClientCompatTest, SglangRoutesAnswerErrorsNested) {
  const net::ClientResponse r =
      SdkCall(client_, http::verb::post, base_, "/generate", R"({"input_ids": "oops"})");
  EXPECT_EQ(r.status, 400) << r.body;
  const json::value body = json::parse(r.body);
  EXPECT_FALSE(body.as_object().contains("object")) << r.body;
  EXPECT_TRUE(body.at("error").at("message").is_string()) << r.body;
  EXPECT_EQ(body.at("error").at("code").as_int64(), 400) << r.body;
}

TEST_P(ClientCompatTest, CacheSaltAndExtraKeyKeepPrefixesApart) {
  const std::string prompt = "a shared prompt of a multi-tenant deployment";
  ASSERT_EQ(SdkCall(client_, http::verb::post, base_, "/v1/chat/completions",
                    Chat(prompt, R"(, "cache_salt": "tenant-a")"))
                .status,
            200);
  const net::ClientResponse same = SdkCall(client_, http::verb::post, base_, "/v1/chat/completions",
                                           Chat(prompt, R"(, "cache_salt": "tenant-a")"));
  const net::ClientResponse other =
      SdkCall(client_, http::verb::post, base_, "/v1/chat/completions",
              Chat(prompt, R"(, "cache_salt": "tenant-b")"));
  const net::ClientResponse keyed =
      SdkCall(client_, http::verb::post, base_, "/v1/chat/completions",
              Chat(prompt, R"(, "cache_salt": "tenant-a", "extra_key": "lora-1")"));
  const net::ClientResponse unsalted =
      SdkCall(client_, http::verb::post, base_, "/v1/chat/completions", Chat(prompt));
  EXPECT_GT(CachedTokens(same), 0) << same.body;
  EXPECT_EQ(CachedTokens(other), 0) << other.body;
  EXPECT_EQ(CachedTokens(keyed), 0) << keyed.body;
  EXPECT_EQ(CachedTokens(unsalted), 0) << unsalted.body;
  // The native route's extra_key namespaces alike.
  const std::string generate = R"({"input_ids": )" + InputIds(1, 64) +
                               R"(, "sampling_params": {"max_new_tokens": 1}, "extra_key": "k")";
  ASSERT_EQ(SdkCall(client_, http::verb::post, base_, "/generate", generate + "}").status, 200);
  const net::ClientResponse again =
      SdkCall(client_, http::verb::post, base_, "/generate", generate + "}");
  const net::ClientResponse plain = SdkCall(
      client_, http::verb::post, base_, "/generate",
      R"({"input_ids": )" + InputIds(1, 64) + R"(, "sampling_params": {"max_new_tokens": 1}})");
  EXPECT_GT(json::parse(again.body).at("meta_info").at("cached_tokens").as_int64(), 0);
  EXPECT_EQ(json::parse(plain.body).at("meta_info").at("cached_tokens").as_int64(), 0);
  EXPECT_EQ(SdkCall(client_, http::verb::post, base_, "/v1/chat/completions",
                    Chat(prompt, R"(, "cache_salt": 7)"))
                .status,
            400);
}

TEST_P(ClientCompatTest, TokenizeAndServerInfoAnswerAsSglang) {
  const net::ClientResponse tokens =
      SdkCall(client_, http::verb::post, base_, "/tokenize", R"({"prompt": "hello world"})");
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  const json::value t = json::parse(tokens.body);
  EXPECT_EQ(t.at("count").as_int64(), 3);
  EXPECT_EQ(t.at("tokens").as_array().size(), 3u);
  EXPECT_GT(t.at("max_model_len").as_int64(), 0);
  const net::ClientResponse text =
      SdkCall(client_, http::verb::post, base_, "/v1/detokenize", R"({"tokens": [[7, 8], [9]]})");
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(json::parse(text.body).at("text"), json::parse(R"([" t7 t8", " t9"])"));

  const net::ClientResponse info = SdkCall(client_, http::verb::get, base_, "/server_info");
  ASSERT_EQ(info.status, 200) << info.body;
  const json::object server = json::parse(info.body).as_object();
  EXPECT_GE(server.size(), 60u);
  EXPECT_EQ(server.at("page_size").as_int64(), 16);
  EXPECT_EQ(server.at("served_model_name").as_string(), "llama-3.1-8b");
  EXPECT_EQ(server.at("max_running_requests").as_int64(), 256);
  EXPECT_EQ(server.at("tp_size").as_int64(), 2);
  EXPECT_EQ(server.at("status").as_string(), "ready");
  EXPECT_FALSE(server.contains("api_key"));
  const net::ClientResponse model = SdkCall(client_, http::verb::get, base_, "/get_model_info");
  EXPECT_EQ(json::parse(model.body).at("weight_version").as_string(), "default");
}

INSTANTIATE_TEST_SUITE_P(EngineAndGateway, ClientCompatTest, ::testing::Bool(),
                         EngineOrGatewayName);

// ---- The routes RL frameworks call on engines ----

class RlRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(EngineOptions()); }

  void Start(const EngineEmulatorOptions& options) {
    StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    base_ = engine_->base_url();
  }

  // A /generate sent from another client; its answer arrives in the future.
  std::future<net::ClientResponse> GenerateInBackground(int64_t max_new_tokens = 2) {
    return std::async(std::launch::async, [base = base_, max_new_tokens] {
      net::HttpClient client(ClientOptions());
      return gateway_testing::Post(client, base, "/generate",
                                   R"({"input_ids": )" + InputIds(1, 32) +
                                       R"(, "sampling_params": {"max_new_tokens": )" +
                                       std::to_string(max_new_tokens) + "}}");
    });
  }

  // /get_load's num_reqs (running plus waiting).
  int64_t ActiveRequests() {
    const net::ClientResponse load =
        gateway_testing::Call(client_, http::verb::get, base_, "/get_load");
    return json::parse(load.body).as_array().at(0).at("num_reqs").as_int64();
  }

  net::ClientResponse Call(const std::string& path, const std::string& body = "") {
    return gateway_testing::Post(client_, base_, path, body);
  }

  int64_t CachedTokensOfRepeat() {
    const std::string body =
        R"({"input_ids": )" + InputIds(1, 64) + R"(, "sampling_params": {"max_new_tokens": 1}})";
    const net::ClientResponse r = Call("/generate", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body).at("meta_info").at("cached_tokens").as_int64();
  }

  net::HttpClient client_{ClientOptions()};
  std::unique_ptr<EngineEmulator> engine_;
  std::string base_;
};

TEST_F(RlRoutesTest, PauseInPlaceHoldsRequestsUntilContinue) {
  net::ClientResponse paused = Call("/pause_generation", R"({"mode": "in_place"})");
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(json::parse(paused.body),
            json::parse(R"({"message": "Generation paused successfully.", "status": "ok"})"));
  std::future<net::ClientResponse> answer = GenerateInBackground();
  EXPECT_EQ(answer.wait_for(300ms), std::future_status::timeout) << "served while paused";
  EXPECT_EQ(ActiveRequests(), 1);
  EXPECT_EQ(Call("/continue_generation").status, 200);
  ASSERT_EQ(answer.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(answer.get().status, 200);
  EXPECT_EQ(Call("/pause_generation", R"({"mode": "later"})").status, 400);
}

TEST_F(RlRoutesTest, PauseWithAbortEndsRunningRequests) {
  EXPECT_EQ(Call("/pause_generation", R"({"mode": "in_place"})").status, 200);
  std::future<net::ClientResponse> answer = GenerateInBackground();
  ASSERT_TRUE(WaitFor([&] { return ActiveRequests() == 1; }));
  EXPECT_EQ(Call("/pause_generation").status, 200);  // mode abort, the default
  ASSERT_EQ(answer.wait_for(10s), std::future_status::ready);
  const json::value aborted = json::parse(answer.get().body);
  EXPECT_EQ(aborted.at("meta_info").at("finish_reason").at("type").as_string(), "abort");
  EXPECT_EQ(Call("/continue_generation").status, 200);
}

TEST_F(RlRoutesTest, ReleaseAndResumeMemoryDropAndRestoreTheKvPool) {
  CachedTokensOfRepeat();
  EXPECT_GT(CachedTokensOfRepeat(), 0);
  const net::ClientResponse released =
      Call("/release_memory_occupation", R"({"tags": ["kv_cache"]})");
  ASSERT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(released.body, "null");
  EXPECT_EQ(Call("/resume_memory_occupation").status, 200);
  EXPECT_EQ(CachedTokensOfRepeat(), 0) << "the cache survived a release";
  // Weights only: the KV cache stays.
  EXPECT_EQ(Call("/release_memory_occupation", R"({"tags": ["weights"]})").status, 200);
  EXPECT_GT(CachedTokensOfRepeat(), 0);
  EXPECT_EQ(Call("/release_memory_occupation", R"({"tags": ["gpu"]})").status, 400);
}

TEST_F(RlRoutesTest, WeightUpdatesFlushTheCacheAndSetTheVersion) {
  CachedTokensOfRepeat();
  const net::ClientResponse disk = Call(
      "/update_weights_from_disk", R"({"model_path": "/ckpt/step-10", "weight_version": "10"})");
  ASSERT_EQ(disk.status, 200) << disk.body;
  const json::value d = json::parse(disk.body);
  EXPECT_TRUE(d.at("success").as_bool());
  EXPECT_EQ(d.at("message").as_string(),
            "Succeeded to update model weights. Weight version updated to 10.");
  EXPECT_EQ(d.at("num_paused_requests").as_int64(), 0);
  EXPECT_EQ(CachedTokensOfRepeat(), 0) << "stale KV survived new weights";
  const net::ClientResponse version =
      gateway_testing::Call(client_, http::verb::get, base_, "/get_weight_version");
  EXPECT_EQ(json::parse(version.body), json::parse(R"({"weight_version": "10"})"));
  EXPECT_EQ(Call("/update_weights_from_disk", R"({"weight_version": "11"})").status, 400);

  const std::string distributed =
      R"({"names": ["w"], "dtypes": ["bfloat16"], "shapes": [[4, 4]], "weight_version": "12"})";
  const net::ClientResponse no_group = Call("/update_weights_from_distributed", distributed);
  EXPECT_EQ(no_group.status, 400);
  EXPECT_FALSE(json::parse(no_group.body).at("success").as_bool());
  ASSERT_EQ(Call("/init_weights_update_group",
                 R"({"master_address": "127.0.0.1", "master_port": 1, "rank_offset": 1, )"
                 R"("world_size": 2})")
                .status,
            200);
  CachedTokensOfRepeat();
  // flush_cache false: the weights change, the cache stays (the caller flushes later).
  EXPECT_EQ(Call("/update_weights_from_distributed",
                 R"({"names": ["w"], "dtypes": ["bfloat16"], "shapes": [[4, 4]], )"
                 R"("flush_cache": false, "abort_all_requests": true})")
                .status,
            200);
  EXPECT_GT(CachedTokensOfRepeat(), 0);
  EXPECT_EQ(Call("/update_weights_from_distributed", distributed).status, 200);
  EXPECT_EQ(CachedTokensOfRepeat(), 0);
  EXPECT_EQ(
      json::parse(gateway_testing::Call(client_, http::verb::get, base_, "/get_model_info").body)
          .at("weight_version")
          .as_string(),
      "12");
  EXPECT_EQ(Call("/update_weights_from_distributed",
                 R"({"names": ["w", "v"], "dtypes": ["bfloat16"], "shapes": [[4]]})")
                .status,
            400);
  const net::ClientResponse renamed =
      Call("/update_weight_version", R"({"new_version": "13", "abort_all_requests": false})");
  EXPECT_EQ(json::parse(renamed.body).at("new_version").as_string(), "13");
  EXPECT_EQ(Call("/destroy_weights_update_group", "{}").status, 200);
  EXPECT_EQ(Call("/update_weights_from_distributed", distributed).status, 400);
}

TEST_F(RlRoutesTest, AWeightUpdateWhileRequestsRunIsRefusedUnlessPausedOrAborting) {
  // Paced ten times slower than the modelled GPU: a request of 10,000 tokens runs for minutes
  // (a control call waits for the step under way, a fraction of a second).
  EngineEmulatorOptions slow = EngineOptions();
  slow.runtime.paced = true;
  slow.runtime.speed = 0.1;
  Start(slow);
  std::future<net::ClientResponse> running = GenerateInBackground(10'000);
  ASSERT_TRUE(WaitFor([&] { return ActiveRequests() == 1; }));
  const net::ClientResponse refused = Call("/update_weights_from_disk", R"({"model_path": "m"})");
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_FALSE(json::parse(refused.body).at("success").as_bool());
  // Paused in place: accepted, and the paused request keeps its KV.
  EXPECT_EQ(Call("/pause_generation", R"({"mode": "in_place"})").status, 200);
  EXPECT_EQ(Call("/update_weights_from_disk", R"({"model_path": "m"})").status, 200);
  EXPECT_EQ(ActiveRequests(), 1);
  EXPECT_EQ(Call("/continue_generation").status, 200);
  // Aborting: accepted, the running request ends as an abort.
  const net::ClientResponse aborting =
      Call("/update_weights_from_disk", R"({"model_path": "m", "abort_all_requests": true})");
  EXPECT_EQ(aborting.status, 200) << aborting.body;
  ASSERT_EQ(running.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(json::parse(running.get().body).at("meta_info").at("finish_reason").at("type"),
            "abort");
}

// ---- Prometheus: the router's sgl_router_* series and the engine's SGLang histograms ----

TEST(PrometheusCompatTest, TheRouterExportsSglRouterSeriesAndNamesItsWorkersModel) {
  Fleet fleet = StartFleet(1, "round_robin");
  net::HttpClient client(ClientOptions());
  ASSERT_EQ(SdkCall(client, http::verb::post, fleet.router->base_url(), "/v1/chat/completions",
                    Chat("count me"))
                .status,
            200);
  const net::ClientResponse metrics =
      SdkCall(client, http::verb::get, fleet.router->base_url(), "/metrics");
  ASSERT_EQ(metrics.status, 200);
  StatusOr<std::vector<protocol::MetricFamily>> families =
      protocol::ParsePrometheusFamilies(metrics.body);
  ASSERT_TRUE(families.ok()) << families.status();
  std::map<std::string, std::string> types;
  for (const protocol::MetricFamily& f : *families) types[f.name] = f.type;
  EXPECT_EQ(types["sgl_router_requests_total"], "counter");
  EXPECT_EQ(types["sgl_router_request_duration_seconds"], "histogram");
  EXPECT_EQ(types["sgl_router_processed_requests_total"], "counter");
  EXPECT_EQ(types["sgl_router_active_workers"], "gauge");
  const std::map<std::string, double> values = Gauges(client, fleet.router->base_url());
  EXPECT_EQ(values.at("sgl_router_requests_total"), 1);
  EXPECT_EQ(values.at("sgl_router_active_workers"), 1);
  EXPECT_EQ(values.at("sgl_router_request_duration_seconds_count"), 1);
  const net::ClientResponse workers =
      SdkCall(client, http::verb::get, fleet.router->base_url(), "/workers");
  EXPECT_NE(workers.body.find(R"("model_id":"llama-3.1-8b")"), std::string::npos) << workers.body;
}

TEST(PrometheusCompatTest, TheEngineExportsSglangHistogramsAndHostTierSeries) {
  EngineEmulatorOptions options = EngineOptions();
  options.runtime.engine.kv_pool.hicache_tokens = 65536;
  StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  net::HttpClient client(ClientOptions());
  ASSERT_EQ(gateway_testing::Post(client, (*engine)->base_url(), "/generate",
                                  R"({"input_ids": )" + InputIds(1, 64) +
                                      R"(, "sampling_params": {"max_new_tokens": 8}})")
                .status,
            200);
  StatusOr<std::vector<protocol::Sample>> samples =
      protocol::ParsePrometheusText((*engine)->MetricsText());
  ASSERT_TRUE(samples.ok()) << samples.status();
  std::vector<std::string> itl_bounds;
  std::vector<std::string> ttft_bounds;
  for (const protocol::Sample& s : *samples) {
    if (s.name == "sglang:inter_token_latency_seconds_bucket") {
      itl_bounds.emplace_back(*protocol::FindLabel(s, "le"));
    }
    if (s.name == "sglang:time_to_first_token_seconds_bucket") {
      ttft_bounds.emplace_back(*protocol::FindLabel(s, "le"));
    }
  }
  ASSERT_FALSE(itl_bounds.empty());
  EXPECT_EQ(itl_bounds.front(), "0.002");
  EXPECT_EQ(itl_bounds.size(), 24u);  // SGLang's 23 bounds and +Inf
  ASSERT_FALSE(ttft_bounds.empty());
  EXPECT_EQ(ttft_bounds.front(), "0.1");
  EXPECT_EQ(ttft_bounds.size(), 19u);
  const std::map<std::string, double> values = protocol::MaxByName(*samples);
  // Eight tokens: the first is the TTFT, the other seven are inter-token gaps.
  EXPECT_EQ(values.at("sglang:inter_token_latency_seconds_count"), 7);
  EXPECT_EQ(values.at("sglang:hicache_host_total_tokens"), 65536);
  EXPECT_TRUE(values.contains("sglang:hicache_host_used_tokens"));
  EXPECT_TRUE(values.contains("sglang:load_back_tokens_total"));
  EXPECT_TRUE(values.contains("sglang:eviction_duration_seconds_count"));
  // Without a host tier, SGLang has no HiCache series.
  StatusOr<std::unique_ptr<EngineEmulator>> plain = EngineEmulator::Start(EngineOptions());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->MetricsText().find("hicache"), std::string::npos);
}

// openai-python's retry decision (`BaseClient._should_retry`; every SDK generated the same way
// has it): `x-should-retry` first ("true" retries, "false" does not), then 408, 409, 429 and
// every status >= 500 are retried, nothing else.
bool SdkShouldRetry(const net::ClientResponse& response) {
  for (const auto& [name, value] : response.headers) {
    if (!boost::beast::iequals(name, "x-should-retry")) continue;
    if (value == "true") return true;
    if (value == "false") return false;
  }
  return response.status == 408 || response.status == 409 || response.status == 429 ||
         response.status >= 500;
}

// The answer without its x-should-retry header: what the SDK would do if the gateway said
// nothing.
net::ClientResponse WithoutRetryAdvice(net::ClientResponse response) {
  std::erase_if(response.headers, [](const auto& header) {
    return boost::beast::iequals(header.first, "x-should-retry");
  });
  return response;
}

// The OpenAI SDKs retry a 409 by default: a request that raced its session's close would be
// sent again 0.5 s later and silently open a new incarnation of the session the client just
// closed. The gateway's real answers over loopback, decided by the SDK's own rule: its 409
// (session closing) and 400s are not retried; its 503 (every session busy) and 429 (retention
// bound) still are, where waiting can help.
TEST(SdkRetryTest, ARequestThatRacedItsSessionsCloseIsNotRetriedButOverloadIs) {
  FakeEngine engine(/*hold=*/true);
  engine.SetHung(true);  // Aborts leave the held request running: the close keeps draining.
  LogCapture logs;
  GatewayOptions options = BaseOptions(logs);
  options.engine_urls = {engine.base_url()};
  options.agentic.agentic_session_lifecycle = true;
  options.max_sessions = 2;
  options.max_retained_sessions = 0;
  auto gateway = StartGateway(options);
  ASSERT_NE(gateway, nullptr);
  const std::string base = gateway->base_url();
  net::HttpClient client(ClientOptions());
  std::vector<std::promise<StatusOr<net::ClientResponse>>> held(3);
  const auto hold = [&](size_t i, const std::string& session) {
    net::HeaderList headers = SdkHeaders();
    headers.emplace_back("X-Session-Id", session);
    client.AsyncRequest(http::verb::post, base, "/generate", headers,
                        R"({"text": "long task", "rid": "held-)" + std::to_string(i) + R"("})",
                        [&held, i](StatusOr<net::ClientResponse> r) { held[i].set_value(r); });
  };
  hold(0, "agent");
  ASSERT_TRUE(WaitFor([&] { return engine.held() == 1; }));
  std::promise<StatusOr<net::ClientResponse>> closed;
  client.AsyncRequest(http::verb::post, base, "/v1/sessions/agent/close", {}, "",
                      [&closed](StatusOr<net::ClientResponse> r) { closed.set_value(r); });
  ASSERT_TRUE(WaitFor([&] {
    const auto control = engine.control();
    return !control.empty() && control.front().first == "/abort_request";
  }));

  // The client's next turn raced the close: 409, and the SDK must not send it again.
  net::HeaderList session_headers = SdkHeaders();
  session_headers.emplace_back("X-Session-Id", "agent");
  const net::ClientResponse raced = SdkCall(client, http::verb::post, base, "/v1/chat/completions",
                                            Chat("next turn"), session_headers);
  ASSERT_EQ(raced.status, 409) << raced.body;
  EXPECT_EQ(json::parse(raced.body).at("type").as_string(), "ConflictError");
  EXPECT_FALSE(SdkShouldRetry(raced));
  EXPECT_TRUE(SdkShouldRetry(WithoutRetryAdvice(raced))) << "the header is what stops the SDK";

  // A request that can never be served as it is: not retried either.
  net::HeaderList sessionless_retain = SdkHeaders();
  sessionless_retain.emplace_back("X-Agentkv-Session-Retain", "1");
  const net::ClientResponse bad = SdkCall(client, http::verb::post, base, "/v1/chat/completions",
                                          Chat("hi"), sessionless_retain);
  ASSERT_EQ(bad.status, 400) << bad.body;
  EXPECT_FALSE(SdkShouldRetry(bad));

  // Every session busy (--max-sessions 2): 503, which a retry later may pass.
  hold(1, "a");
  hold(2, "b");
  ASSERT_TRUE(WaitFor([&] { return engine.held() == 3; }));
  net::HeaderList newcomer = SdkHeaders();
  newcomer.emplace_back("X-Session-Id", "c");
  const net::ClientResponse busy =
      SdkCall(client, http::verb::post, base, "/v1/chat/completions", Chat("hi"), newcomer);
  ASSERT_EQ(busy.status, 503) << busy.body;
  EXPECT_TRUE(SdkShouldRetry(busy));
  // A retention past --max-retained-sessions: 429, retried by the SDK's own rule.
  net::HeaderList retain = SdkHeaders();
  retain.emplace_back("X-Session-Id", "a");
  retain.emplace_back("X-Agentkv-Session-Retain", "1");
  const net::ClientResponse over =
      SdkCall(client, http::verb::post, base, "/v1/chat/completions", Chat("hi"), retain);
  ASSERT_EQ(over.status, 429) << over.body;
  EXPECT_EQ(json::parse(over.body).at("type").as_string(), "RateLimitError");
  EXPECT_TRUE(SdkShouldRetry(over));

  while (engine.Answer()) {
  }
  for (auto& answer : held) {
    auto future = answer.get_future();
    ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  }
  auto close_answer = closed.get_future();
  ASSERT_EQ(close_answer.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(close_answer.get()->status, 200);
  gateway->Shutdown(2s);
}

}  // namespace
}  // namespace agentkv::service
