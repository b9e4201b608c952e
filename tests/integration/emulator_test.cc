// End-to-end tests of the SGLang engine emulator and the sgl-router emulator on 127.0.0.1:
// every request goes over HTTP, through net::HttpClient, and is checked against the wire
// format of docs/PROTOCOL.md.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/protocol/generate.h"
#include "agentkv/protocol/prometheus.h"
#include "agentkv/protocol/sse.h"
#include "agentkv/protocol/workers.h"
#include "agentkv/routing/router.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/service/emulator/router_emulator.h"

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;
namespace http = net::http;
namespace json = boost::json;

EngineEmulatorOptions EngineOptions(bool paced = false) {
  EngineEmulatorOptions options;
  options.runtime.paced = paced;
  options.runtime.engine.kv_pool.tokens_per_block = 16;
  options.runtime.engine.kv_pool.max_total_tokens = 16384;
  options.runtime.enable_session_radix_cache = true;
  options.runtime.engine.cache.session_close_mode = kv::SessionCloseMode::kRelease;
  options.runtime.engine.tp = 2;
  return options;
}

std::unique_ptr<EngineEmulator> StartEngine(EngineEmulatorOptions options = EngineOptions()) {
  StatusOr<std::unique_ptr<EngineEmulator>> engine = EngineEmulator::Start(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

std::string InputIds(int64_t first, int64_t n) {
  json::array ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(first + i);
  return json::serialize(ids);
}

std::string GenerateBody(const std::string& input_ids, int64_t max_new_tokens,
                         const std::string& extra = "") {
  return R"({"input_ids": )" + input_ids + R"(, "sampling_params": {"max_new_tokens": )" +
         std::to_string(max_new_tokens) + "}" + extra + "}";
}

net::ClientResponse Post(net::HttpClient& client, const std::string& base, const std::string& path,
                         const std::string& body,
                         std::vector<std::pair<std::string, std::string>> headers = {}) {
  headers.emplace_back("Content-Type", "application/json");
  StatusOr<net::ClientResponse> r = client.Request(http::verb::post, base, path, headers, body);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : net::ClientResponse{};
}

std::map<std::string, double> Gauges(net::HttpClient& client, const std::string& base) {
  StatusOr<net::ClientResponse> r = client.Request(http::verb::get, base, "/metrics");
  EXPECT_TRUE(r.ok() && r->status == 200);
  StatusOr<std::vector<protocol::Sample>> samples = protocol::ParsePrometheusText(r->body);
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? protocol::MaxByName(*samples) : std::map<std::string, double>{};
}

TEST(EngineEmulatorTest, MultiTurnSessionCachedTokensGrowTurnByTurn) {
  auto engine = StartEngine();
  net::HttpClient client;
  std::vector<int64_t> context(200);
  std::iota(context.begin(), context.end(), 1);
  int64_t previous = -1;
  for (int turn = 0; turn < 4; ++turn) {
    json::array ids;
    for (int64_t t : context) ids.push_back(t);
    const net::ClientResponse r = Post(client, engine->base_url(), "/generate",
                                       GenerateBody(json::serialize(ids), 16,
                                                    R"(, "rid": "turn-)" + std::to_string(turn) +
                                                        R"(", "session_id": "agent-42")"));
    ASSERT_EQ(r.status, 200) << r.body;
    StatusOr<protocol::GenerateResponse> response = protocol::ParseGenerateResponse(r.body);
    ASSERT_TRUE(response.ok()) << response.status() << r.body;
    EXPECT_EQ(response->meta_info.id, "turn-" + std::to_string(turn));
    EXPECT_EQ(response->meta_info.prompt_tokens, static_cast<int64_t>(context.size()));
    EXPECT_EQ(response->meta_info.completion_tokens, 16);
    ASSERT_TRUE(response->meta_info.finish_reason.has_value());
    EXPECT_EQ(response->meta_info.finish_reason->type, protocol::FinishReason::Type::kLength);
    EXPECT_GT(response->meta_info.cached_tokens, previous) << "turn " << turn;
    previous = response->meta_info.cached_tokens;
    context.insert(context.end(), response->output_ids.begin(), response->output_ids.end());
    for (int i = 0; i < 40; ++i) context.push_back(50'000 + turn * 100 + i);
  }
}

TEST(EngineEmulatorTest, CloseSessionInReleaseModeRaisesAvailableTokensOnceAndIsIdempotent) {
  auto engine = StartEngine();
  net::HttpClient client;
  ASSERT_EQ(Post(client, engine->base_url(), "/generate",
                 GenerateBody(InputIds(1, 321), 4, R"(, "session_id": "s-1")"))
                .status,
            200);
  const auto before = Gauges(client, engine->base_url());
  const net::ClientResponse close =
      Post(client, engine->base_url(), "/close_session", R"({"session_id": "s-1"})");
  EXPECT_EQ(close.status, 200);
  EXPECT_EQ(close.body, "");
  const auto after = Gauges(client, engine->base_url());
  // The session's unique pages: 320 prompt tokens (the last one is recomputed) = 20 pages.
  EXPECT_EQ(after.at("sglang:kv_available_tokens"), before.at("sglang:kv_available_tokens") + 320);
  EXPECT_EQ(after.at("sglang:kv_evictable_tokens"), before.at("sglang:kv_evictable_tokens") - 320);
  // Idempotent; an unknown session is fine too.
  EXPECT_EQ(Post(client, engine->base_url(), "/close_session", R"({"session_id": "s-1"})").status,
            200);
  EXPECT_EQ(Post(client, engine->base_url(), "/close_session", R"({"session_id": "nope"})").status,
            200);
  EXPECT_EQ(Gauges(client, engine->base_url()).at("sglang:kv_available_tokens"),
            after.at("sglang:kv_available_tokens"));
}

TEST(EngineEmulatorTest, AbortEndsARunningRequestWithTheAbortFinishReasonAndPartialTokens) {
  auto engine = StartEngine(EngineOptions(/*paced=*/true));
  net::HttpClient client;
  std::promise<StatusOr<net::ClientResponse>> done;
  client.AsyncRequest(http::verb::post, engine->base_url(), "/generate",
                      {{"Content-Type", "application/json"}},
                      GenerateBody(InputIds(1, 64), 2000, R"(, "rid": "req-17:0")"),
                      [&done](StatusOr<net::ClientResponse> r) { done.set_value(std::move(r)); });
  // Let it produce some tokens (each decode step is about 7 ms), then abort it.
  std::this_thread::sleep_for(100ms);
  const net::ClientResponse abort =
      Post(client, engine->base_url(), "/abort_request", R"({"rid": "req-17:0"})");
  EXPECT_EQ(abort.status, 200);
  EXPECT_EQ(abort.body, "");
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  StatusOr<net::ClientResponse> r = future.get();
  ASSERT_TRUE(r.ok()) << r.status();
  StatusOr<protocol::GenerateResponse> response = protocol::ParseGenerateResponse(r->body);
  ASSERT_TRUE(response.ok()) << r->body;
  ASSERT_TRUE(response->meta_info.finish_reason.has_value());
  EXPECT_EQ(response->meta_info.finish_reason->type, protocol::FinishReason::Type::kAbort);
  EXPECT_GT(response->output_ids.size(), 0u);
  EXPECT_LT(response->output_ids.size(), 2000u);
  // Unknown and repeated aborts are ignored with 200.
  EXPECT_EQ(Post(client, engine->base_url(), "/abort_request", R"({"rid": "req-17:0"})").status,
            200);
  EXPECT_EQ(Post(client, engine->base_url(), "/abort_request", R"({"rid": "nope"})").status, 200);
}

// SGLang raises a rid already in flight as a ValueError ("Duplicate request ID detected"),
// answered 400 like every validation error; the emulator keeps that code although the shared
// Status-to-HTTP map answers AlreadyExists 409.
TEST(EngineEmulatorTest, ARidStillRunningIsA400) {
  auto engine = StartEngine(EngineOptions(/*paced=*/true));
  net::HttpClient client;
  std::promise<StatusOr<net::ClientResponse>> done;
  client.AsyncRequest(http::verb::post, engine->base_url(), "/generate",
                      {{"Content-Type", "application/json"}},
                      GenerateBody(InputIds(1, 64), 2000, R"(, "rid": "dup")"),
                      [&done](StatusOr<net::ClientResponse> r) { done.set_value(std::move(r)); });
  std::this_thread::sleep_for(100ms);
  const net::ClientResponse again = Post(client, engine->base_url(), "/generate",
                                         GenerateBody(InputIds(1, 64), 4, R"(, "rid": "dup")"));
  EXPECT_EQ(again.status, 400);
  EXPECT_NE(again.body.find("already running"), std::string::npos) << again.body;
  EXPECT_EQ(Post(client, engine->base_url(), "/abort_request", R"({"rid": "dup"})").status, 200);
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  StatusOr<net::ClientResponse> first = future.get();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->status, 200);
}

TEST(EngineEmulatorTest, MetricsAgreeWithTheEngineStateAndAreReplicatedPerTpRank) {
  auto engine = StartEngine();
  net::HttpClient client;
  Post(client, engine->base_url(), "/generate", GenerateBody(InputIds(1, 100), 5));
  StatusOr<net::ClientResponse> r = client.Request(http::verb::get, engine->base_url(), "/metrics");
  ASSERT_TRUE(r.ok());
  StatusOr<std::vector<protocol::Sample>> samples = protocol::ParsePrometheusText(r->body);
  ASSERT_TRUE(samples.ok()) << samples.status();
  int usage_lines = 0;
  for (const protocol::Sample& s : *samples) usage_lines += s.name == "sglang:token_usage";
  EXPECT_EQ(usage_lines, 2);  // One per TP rank.
  const auto g = protocol::MaxByName(*samples);
  const RuntimeSnapshot snapshot = engine->runtime().Snapshot();
  EXPECT_EQ(g.at("sglang:max_total_num_tokens"), 16384);
  EXPECT_EQ(g.at("sglang:kv_available_tokens"), snapshot.gauges.available_tokens);
  EXPECT_EQ(g.at("sglang:kv_evictable_tokens"), snapshot.gauges.evictable_tokens);
  EXPECT_EQ(g.at("sglang:kv_available_tokens") + g.at("sglang:kv_evictable_tokens") +
                g.at("sglang:kv_used_tokens"),
            g.at("sglang:max_total_num_tokens"));
  EXPECT_EQ(g.at("sglang:num_requests_total"), 1);
  EXPECT_EQ(g.at("sglang:generation_tokens_total"), 5);
  EXPECT_EQ(g.at("sglang:prompt_tokens_total"), 100);
  EXPECT_EQ(g.at("sglang:num_running_reqs"), 0);
  EXPECT_EQ(g.at("sglang:e2e_request_latency_seconds_count"), 1);
}

TEST(EngineEmulatorTest, StreamsSseChunksEndingWithDone) {
  auto engine = StartEngine();
  net::HttpClient client;
  protocol::SseParser parser;
  std::vector<std::string> events;
  std::promise<Status> done;
  int status = 0;
  client.AsyncStream(
      http::verb::post, engine->base_url(), "/generate", {{"Content-Type", "application/json"}},
      GenerateBody(InputIds(1, 40), 6, R"(, "stream": true, "rid": "s")"),
      [&status](int s, const auto&) { status = s; },
      [&](std::string_view chunk) {
        for (std::string& e : parser.Feed(chunk)) events.push_back(std::move(e));
      },
      [&done](Status s) { done.set_value(s); });
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(future.get().ok());
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(parser.done());
  ASSERT_GE(events.size(), 2u);
  StatusOr<protocol::GenerateResponse> last = protocol::ParseGenerateResponse(events.back());
  ASSERT_TRUE(last.ok()) << events.back();
  EXPECT_EQ(last->output_ids.size(), 6u);
  ASSERT_TRUE(last->meta_info.finish_reason.has_value());
  StatusOr<protocol::GenerateResponse> first = protocol::ParseGenerateResponse(events.front());
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->meta_info.finish_reason.has_value());
}

TEST(EngineEmulatorTest, RejectsBadRequestsWith400AndAClearMessage) {
  auto engine = StartEngine();
  net::HttpClient client;
  const net::ClientResponse bad =
      Post(client, engine->base_url(), "/generate", R"({"input_ids": "x"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("input_ids"), std::string::npos);
  // agentkv's one pause member: a known pause is served, an unknown one names the valid ones.
  EXPECT_EQ(Post(client, engine->base_url(), "/generate",
                 R"({"input_ids": [1, 2, 3], "agentkv_pause": "tool_call"})")
                .status,
            200);
  const net::ClientResponse bad_pause =
      Post(client, engine->base_url(), "/generate",
           R"({"input_ids": [1, 2, 3], "agentkv_pause": "soon"})");
  EXPECT_EQ(bad_pause.status, 400);
  EXPECT_NE(bad_pause.body.find(R"(agentkv_pause: expected unknown, tool_call, subagent_wait, )"
                                R"(human_turn or session_end, got \"soon\")"),
            std::string::npos)
      << bad_pause.body;
  // SGLang's tokenizer-manager messages: an input over the context, then input plus output.
  const net::ClientResponse too_long =
      Post(client, engine->base_url(), "/generate", GenerateBody(InputIds(1, 20000), 4));
  EXPECT_EQ(too_long.status, 400);
  EXPECT_NE(too_long.body.find("The input (20000 tokens) is longer than the model's context "
                               "length (16384 tokens)."),
            std::string::npos)
      << too_long.body;
  const net::ClientResponse too_much =
      Post(client, engine->base_url(), "/generate", GenerateBody(InputIds(1, 16000), 1000));
  EXPECT_EQ(too_much.status, 400);
  EXPECT_NE(too_much.body.find("Requested token count exceeds the model's maximum context length "
                               "of 16384 tokens"),
            std::string::npos)
      << too_much.body;
  StatusOr<net::ClientResponse> info =
      client.Request(http::verb::get, engine->base_url(), "/server_info");
  ASSERT_TRUE(info.ok());
  const json::value v = json::parse(info->body);
  EXPECT_EQ(v.at("enable_session_radix_cache").as_bool(), true);
  EXPECT_EQ(v.at("max_total_num_tokens").to_number<int64_t>(), 16384);
  // SGLang's max_req_input_len: min(context - 1, pool - 1) - 5.
  EXPECT_EQ(v.at("max_req_input_len").to_number<int64_t>(), 16378);
}

// GET /v1/models (what OpenAI clients, LiteLLM and agent SDKs call first): SGLang's ModelList
// of one ModelCard for the served model.
TEST(EngineEmulatorTest, ListsTheServedModelAsSglangDoes) {
  EngineEmulatorOptions options = EngineOptions();
  options.served_model_name = "org/served-model";
  auto engine = StartEngine(options);
  ASSERT_NE(engine, nullptr);
  net::HttpClient client;
  StatusOr<net::ClientResponse> r =
      client.Request(http::verb::get, engine->base_url(), "/v1/models");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  const json::value v = json::parse(r->body);
  EXPECT_EQ(v.at("object").as_string(), "list");
  ASSERT_EQ(v.at("data").as_array().size(), 1U);
  const json::object& card = v.at("data").as_array()[0].as_object();
  EXPECT_EQ(card.at("id").as_string(), "org/served-model");
  EXPECT_EQ(card.at("object").as_string(), "model");
  EXPECT_EQ(card.at("owned_by").as_string(), "sglang");
  EXPECT_EQ(card.at("root").as_string(), "org/served-model");
  EXPECT_TRUE(card.at("parent").is_null());
  // No --context-length: the KV pool's 16384 tokens, as in the length checks above.
  EXPECT_EQ(card.at("max_model_len").to_number<int64_t>(), 16384);
  EXPECT_GT(card.at("created").to_number<int64_t>(), 1'600'000'000);  // Seconds since 1970.
}

// --- Router ---

struct Fleet {
  std::vector<std::unique_ptr<EngineEmulator>> engines;
  std::unique_ptr<RouterEmulator> router;
};

Fleet StartFleet(int n, const std::string& policy) {
  Fleet fleet;
  RouterEmulatorOptions options;
  options.policy = routing::ParseRouterPolicy(policy).value();
  options.health_check_interval = 0ms;
  for (int i = 0; i < n; ++i) {
    fleet.engines.push_back(StartEngine());
    options.worker_urls.push_back(fleet.engines.back()->base_url());
  }
  StatusOr<std::unique_ptr<RouterEmulator>> router = RouterEmulator::Start(options);
  EXPECT_TRUE(router.ok()) << router.status();
  if (router.ok()) fleet.router = *std::move(router);
  return fleet;
}

json::array Received(net::HttpClient& client, const std::string& base) {
  StatusOr<net::ClientResponse> r = client.Request(http::verb::get, base, "/agentkv/requests");
  EXPECT_TRUE(r.ok());
  return json::parse(r->body).as_array();
}

TEST(EngineEmulatorTest, ServesOpenAiChatAndCompletionsWithCachedTokensInUsage) {
  auto engine = StartEngine();
  net::HttpClient client;
  const std::string chat =
      R"({"model": "m", "messages": [{"role": "system", "content": "You are a )"
      R"(careful coding agent with many tools."}, {"role": "user", "content": )"
      R"("list the files"}], "max_tokens": 4, "session_id": "c1"})";
  const net::ClientResponse first = Post(client, engine->base_url(), "/v1/chat/completions", chat);
  ASSERT_EQ(first.status, 200) << first.body;
  const json::object a = json::parse(first.body).as_object();
  EXPECT_EQ(a.at("object").as_string(), "chat.completion");
  EXPECT_EQ(a.at("choices").as_array()[0].at("finish_reason").as_string(), "length");
  EXPECT_EQ(a.at("usage").at("completion_tokens").to_number<int64_t>(), 4);
  const net::ClientResponse second = Post(client, engine->base_url(), "/v1/chat/completions", chat);
  const json::object b = json::parse(second.body).as_object();
  EXPECT_GT(b.at("usage").at("prompt_tokens_details").at("cached_tokens").to_number<int64_t>(), 0);
  const net::ClientResponse completion = Post(client, engine->base_url(), "/v1/completions",
                                              R"({"prompt": [1, 2, 3, 4, 5], "max_tokens": 2})");
  ASSERT_EQ(completion.status, 200) << completion.body;
  EXPECT_EQ(json::parse(completion.body).at("object").as_string(), "text_completion");
  EXPECT_EQ(Post(client, engine->base_url(), "/v1/chat/completions", R"({"messages": 3})").status,
            400);
  // Streaming: deltas, then a chunk with the finish reason, then [DONE].
  protocol::SseParser parser;
  std::vector<std::string> events;
  std::promise<Status> done;
  client.AsyncStream(
      http::verb::post, engine->base_url(), "/v1/chat/completions",
      {{"Content-Type", "application/json"}},
      R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "stream": true})",
      [](int, const auto&) {},
      [&](std::string_view chunk) {
        for (std::string& e : parser.Feed(chunk)) events.push_back(std::move(e));
      },
      [&done](Status st) { done.set_value(st); });
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(parser.done());
  ASSERT_GE(events.size(), 3u);
  // The first chunk names the role, with empty content, as SGLang and OpenAI do.
  const json::value opening = json::parse(events.front()).at("choices").as_array()[0];
  EXPECT_EQ(opening.at("delta").at("role").as_string(), "assistant");
  EXPECT_EQ(opening.at("delta").at("content").as_string(), "");
  EXPECT_TRUE(opening.at("finish_reason").is_null());
  EXPECT_EQ(json::parse(events.back()).at("choices").as_array()[0].at("finish_reason").as_string(),
            "length");
}

// stream_options.include_usage ends a stream with a chunk of empty choices and the usage.
TEST(EngineEmulatorTest, AStreamWithIncludeUsageEndsWithTheUsageChunk) {
  auto engine = StartEngine();
  net::HttpClient client;
  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    const std::string body =
        std::string(path) == "/v1/chat/completions"
            ? R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, )"
              R"("stream": true, "stream_options": {"include_usage": true}})"
            : R"({"prompt": "hi", "max_tokens": 3, "stream": true, )"
              R"("stream_options": {"include_usage": true}})";
    const net::ClientResponse r = Post(client, engine->base_url(), path, body);
    ASSERT_EQ(r.status, 200) << r.body;
    protocol::SseParser parser;
    const std::vector<std::string> events = parser.Feed(r.body);
    EXPECT_TRUE(parser.done()) << path;
    ASSERT_GE(events.size(), 2u) << path;
    const json::value last = json::parse(events.back());
    EXPECT_TRUE(last.at("choices").as_array().empty()) << path;
    EXPECT_EQ(last.at("usage").at("completion_tokens").to_number<int64_t>(), 3) << path;
    EXPECT_GT(last.at("usage").at("prompt_tokens").to_number<int64_t>(), 0) << path;
    // The chunk before it carries the finish reason.
    EXPECT_EQ(json::parse(events[events.size() - 2])
                  .at("choices")
                  .as_array()[0]
                  .at("finish_reason")
                  .as_string(),
              "length")
        << path;
  }
}

// What the emulator cannot serve is a 400 naming the field, never silently dropped.
TEST(EngineEmulatorTest, SeveralChoicesAndLogprobsAreRefusedNotDropped) {
  auto engine = StartEngine();
  net::HttpClient client;
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, )";
  const std::string completion = R"({"prompt": "hi", "max_tokens": 2, )";
  const std::vector<std::tuple<std::string, std::string, std::string>> refused = {
      {"/v1/chat/completions", chat + R"("n": 2})", "n: only n = 1 is served"},
      {"/v1/chat/completions", chat + R"("logprobs": true})", "logprobs: not served"},
      {"/v1/chat/completions", chat + R"("top_logprobs": 2})", "top_logprobs: not served"},
      {"/v1/completions", completion + R"("n": 3})", "n: only n = 1 is served"},
      {"/v1/completions", completion + R"("logprobs": 1})", "logprobs: not served"},
  };
  for (const auto& [path, body, message] : refused) {
    const net::ClientResponse r = Post(client, engine->base_url(), path, body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_NE(r.body.find(message), std::string::npos) << r.body;
  }
  // n = 1 and logprobs false (or null) are what is served.
  for (const std::string& body : {chat + R"("n": 1, "logprobs": false})",
                                  chat + R"("logprobs": null, "top_logprobs": null})"}) {
    EXPECT_EQ(Post(client, engine->base_url(), "/v1/chat/completions", body).status, 200) << body;
  }
}

TEST(EngineEmulatorTest, InjectedFaultsAndRecordedControlRequests) {
  auto engine = StartEngine();
  net::HttpClient client;
  EXPECT_EQ(Post(client, engine->base_url(), "/agentkv/faults",
                 R"({"metrics_status": 503, "health_status": 503, "close_session_status": 500})")
                .status,
            200);
  EXPECT_EQ(client.Request(http::verb::get, engine->base_url(), "/metrics")->status, 503);
  EXPECT_EQ(client.Request(http::verb::get, engine->base_url(), "/health")->status, 503);
  EXPECT_EQ(Post(client, engine->base_url(), "/close_session", R"({"session_id": "x"})").status,
            500);
  EXPECT_EQ(
      Post(client, engine->base_url(), "/agentkv/faults", R"({"metrics_delay_ms": 300})").status,
      200);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(client.Request(http::verb::get, engine->base_url(), "/metrics")->status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  EXPECT_EQ(client.Request(http::verb::get, engine->base_url(), "/health")->status, 200);
  EXPECT_EQ(Post(client, engine->base_url(), "/abort_request", R"({"rid": "r1"})").status, 200);
  const json::array recorded = Received(client, engine->base_url());
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_EQ(recorded[0].at("path").as_string(), "/close_session");
  EXPECT_EQ(recorded[1].at("path").as_string(), "/abort_request");
  EXPECT_EQ(json::parse(recorded[1].at("body").as_string()).at("rid").as_string(), "r1");
}

TEST(RouterEmulatorTest, ConsistentHashingKeepsEachSessionOnOneEngine) {
  Fleet fleet = StartFleet(3, "consistent_hashing");
  net::HttpClient client;
  for (int turn = 0; turn < 4; ++turn) {
    for (int s = 0; s < 8; ++s) {
      const std::string session = "session-" + std::to_string(s);
      const net::ClientResponse r = Post(client, fleet.router->base_url(), "/generate",
                                         GenerateBody(InputIds(s * 1000, 40 + turn * 8), 2),
                                         {{"X-SMG-Routing-Key", session}});
      ASSERT_EQ(r.status, 200) << r.body;
    }
  }
  std::map<std::string, std::set<std::string>> workers_of;
  std::set<std::string> used;
  for (const json::value& entry : Received(client, fleet.router->base_url())) {
    const json::object& e = entry.as_object();
    workers_of[std::string(e.at("routing_key").as_string())].insert(
        std::string(e.at("worker").as_string()));
    used.insert(std::string(e.at("worker").as_string()));
  }
  ASSERT_EQ(workers_of.size(), 8u);
  for (const auto& [session, workers] : workers_of) EXPECT_EQ(workers.size(), 1u) << session;
  EXPECT_GE(used.size(), 2u) << "8 sessions should spread over several engines";
}

TEST(RouterEmulatorTest, NeverForwardsCloseSessionOrAbort) {
  Fleet fleet = StartFleet(2, "round_robin");
  net::HttpClient client;
  EXPECT_EQ(
      Post(client, fleet.router->base_url(), "/close_session", R"({"session_id": "x"})").status,
      404);
  EXPECT_EQ(Post(client, fleet.router->base_url(), "/abort_request", R"({"rid": "x"})").status,
            404);
  EXPECT_EQ(Post(client, fleet.router->base_url(), "/open_session", R"({"capacity_of_str_len": 1})")
                .status,
            404);
  for (const auto& engine : fleet.engines) {
    EXPECT_TRUE(Received(client, engine->base_url()).empty()) << engine->base_url();
  }
}

TEST(RouterEmulatorTest, PassesStreamsThroughAndServesBothWorkerShapes) {
  Fleet fleet = StartFleet(2, "cache_aware");
  net::HttpClient client;
  protocol::SseParser parser;
  int events = 0;
  std::promise<Status> done;
  client.AsyncStream(
      http::verb::post, fleet.router->base_url(), "/generate",
      {{"Content-Type", "application/json"}},
      GenerateBody(InputIds(1, 40), 5, R"(, "stream": true)"), [](int, const auto&) {},
      [&](std::string_view chunk) { events += static_cast<int>(parser.Feed(chunk).size()); },
      [&done](Status s) { done.set_value(s); });
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(future.get().ok());
  EXPECT_TRUE(parser.done());
  EXPECT_GE(events, 2);
  StatusOr<net::ClientResponse> workers =
      client.Request(http::verb::get, fleet.router->base_url(), "/workers");
  ASSERT_TRUE(workers.ok());
  StatusOr<std::vector<protocol::WorkerInfo>> parsed = protocol::ParseWorkers(workers->body);
  ASSERT_TRUE(parsed.ok()) << workers->body;
  EXPECT_EQ(parsed->size(), 2u);
  StatusOr<net::ClientResponse> list =
      client.Request(http::verb::get, fleet.router->base_url(), "/list_workers");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(protocol::ParseListWorkers(list->body)->size(), 2u);
}

TEST(RouterEmulatorTest, DpAwareEntriesGoToTheBaseUrlWithTheRankInjected) {
  auto engine = StartEngine();
  RouterEmulatorOptions options;
  options.policy = routing::RouterPolicy::kRoundRobin;
  options.health_check_interval = 0ms;
  options.worker_urls = {engine->base_url() + "@0", engine->base_url() + "@1"};
  auto router = RouterEmulator::Start(options).value();
  net::HttpClient client;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(
        Post(client, router->base_url(), "/generate", GenerateBody(InputIds(1, 20), 1)).status,
        200);
  }
  StatusOr<net::ClientResponse> list =
      client.Request(http::verb::get, router->base_url(), "/list_workers");
  ASSERT_TRUE(list.ok());
  StatusOr<std::vector<std::string>> urls = protocol::ParseListWorkers(list->body);
  ASSERT_TRUE(urls.ok());
  EXPECT_EQ(protocol::EngineBaseUrls(*urls), std::vector<std::string>{engine->base_url()});
  EXPECT_EQ(engine->runtime().Snapshot().num_requests_total, 2);
  // A rank out of range is a 400 (it used to throw out of std::stoll: a 500).
  const net::ClientResponse huge =
      Post(client, router->base_url(),
           "/add_worker?url=" + engine->base_url() + "@99999999999999999999", "");
  EXPECT_EQ(huge.status, 400) << huge.body;
  EXPECT_NE(huge.body.find("out of range"), std::string::npos) << huge.body;
  options.worker_urls = {engine->base_url() + "@4294967297"};
  EXPECT_EQ(RouterEmulator::Start(options).status().code(), StatusCode::kInvalidArgument);
}

TEST(RouterEmulatorTest, FlushCacheIsPartialWhenAnEngineIsDown) {
  Fleet fleet = StartFleet(2, "round_robin");
  net::HttpClient client;
  EXPECT_EQ(Post(client, fleet.router->base_url(), "/flush_cache", "").status, 200);
  fleet.engines[1]->Shutdown(0ms);
  const net::ClientResponse partial = Post(client, fleet.router->base_url(), "/flush_cache", "");
  EXPECT_EQ(partial.status, 206);
  EXPECT_NE(partial.body.find("partial_success"), std::string::npos);
}

TEST(RouterEmulatorTest, HealthChecksTakeADeadEngineOutOfRotation) {
  auto a = StartEngine();
  auto b = StartEngine();
  RouterEmulatorOptions options;
  options.policy = routing::RouterPolicy::kRoundRobin;
  options.health_check_interval = 50ms;
  options.worker_urls = {a->base_url(), b->base_url()};
  auto router = RouterEmulator::Start(options).value();
  net::HttpClient client;
  b->Shutdown(0ms);
  for (int i = 0; i < 100; ++i) {
    bool b_healthy = true;
    for (const protocol::WorkerInfo& w : router->workers()) {
      if (w.url == b->base_url()) b_healthy = w.is_healthy;
    }
    if (!b_healthy) break;
    std::this_thread::sleep_for(20ms);
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(
        Post(client, router->base_url(), "/generate", GenerateBody(InputIds(i, 20), 1)).status,
        200);
  }
  EXPECT_EQ(a->runtime().Snapshot().num_requests_total, 4);
}

// A worker that answers POST /generate `delay` after it arrives (from a thread of its own, so
// its server stays responsive), and 404 to everything else.
class SlowWorker {
 public:
  explicit SlowWorker(std::chrono::milliseconds delay) {
    server_ = net::HttpServer::Start({}, [this, delay](net::Request request,
                                                       std::shared_ptr<net::ResponseWriter> w) {
                if (request.target() != "/generate") {
                  return w->Reply(net::MakeErrorResponse(request, http::status::not_found, "no"));
                }
                auto shared = std::make_shared<net::Request>(std::move(request));
                std::lock_guard<std::mutex> lock(mu_);
                answers_.emplace_back([shared, w, delay] {
                  std::this_thread::sleep_for(delay);
                  w->Reply(net::MakeResponse(*shared, http::status::ok, R"({"text": "late"})"));
                });
              }).value();
  }
  ~SlowWorker() {
    std::vector<std::thread> answers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      answers.swap(answers_);
    }
    for (std::thread& t : answers) t.join();
    server_->Shutdown(0ms);
  }
  std::string base_url() const { return server_->base_url(); }

 private:
  std::mutex mu_;
  std::vector<std::thread> answers_;
  std::unique_ptr<net::HttpServer> server_;
};

TEST(RouterEmulatorTest, ANonStreamedRequestWaitsForItsWorkerUpToTheRequestTimeout) {
  // sgl-router's --request-timeout-secs default.
  EXPECT_EQ(RouterEmulatorOptions{}.request_timeout, std::chrono::seconds(1800));
  SlowWorker worker(700ms);
  RouterEmulatorOptions options;
  options.policy = routing::RouterPolicy::kRoundRobin;
  options.health_check_interval = 0ms;
  options.worker_urls = {worker.base_url()};
  // The client's answer timeout (30 s by default) scaled down: a forwarded request outlives it.
  options.client.header_timeout = 200ms;
  options.request_timeout = 5s;
  net::HttpClient client;
  {
    auto router = RouterEmulator::Start(options).value();
    const net::ClientResponse slow =
        Post(client, router->base_url(), "/generate", GenerateBody(InputIds(1, 4), 1));
    EXPECT_EQ(slow.status, 200) << slow.body;
    EXPECT_EQ(slow.body, R"({"text": "late"})");
  }
  // Past the request timeout the router answers 504 without waiting for the worker.
  options.request_timeout = 250ms;
  auto router = RouterEmulator::Start(options).value();
  const auto start = std::chrono::steady_clock::now();
  const net::ClientResponse cut =
      Post(client, router->base_url(), "/generate", GenerateBody(InputIds(1, 4), 1));
  EXPECT_EQ(cut.status, 504) << cut.body;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 650ms);
  options.request_timeout = 0ms;
  EXPECT_EQ(RouterEmulator::Start(options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace agentkv::service
