// What the gateway does to a /generate body before it forwards it, per body size, on one
// thread (issue 18): the parse that reads the request's fields and counts its input_ids
// (ParseClientRequest), the edits of `rid` and `session_id` (BuildForwardBody), both together,
// and, for comparison, the DOM parse that kept every id (protocol::GenerateParseMode::kFull,
// what the gateway did before) and a plain copy of the body. Bodies are bench/gateway_load's:
// N input_ids from 1000 up, max_new_tokens 1 and a session_id (16 ids: 168 bytes; 100,000 ids:
// 592 KB). Wall-clock figures; see docs/PERFORMANCE.md.
//
//   build/release/bench/gateway_body_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "agentkv/protocol/generate.h"
#include "agentkv/service/gateway/gateway_request.h"

namespace agentkv::service {
namespace {

std::string Body(int64_t tokens) {
  std::string body = R"({"input_ids": [)";
  for (int64_t i = 0; i < tokens; ++i) {
    if (i > 0) body += ',';
    body += std::to_string(1000 + i);
  }
  body += R"(], "sampling_params": {"max_new_tokens": 1}, "session_id": "bench-17"})";
  return body;
}

void SetBytes(benchmark::State& state, const std::string& body) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(body.size()));
  state.counters["body_bytes"] = static_cast<double>(body.size());
}

void BM_ParseClientRequest(benchmark::State& state) {
  const std::string body = Body(state.range(0));
  for (auto _ : state) {
    StatusOr<ClientRequest> r = ParseClientRequest(GatewayRoute::kGenerate, body);
    if (!r.ok() || r->prompt_token_ids != state.range(0)) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(r);
  }
  SetBytes(state, body);
}

void BM_BuildForwardBody(benchmark::State& state) {
  const std::string body = Body(state.range(0));
  ForwardEdits edits;
  edits.rid = "gw-0123456789abcdef0123456789abcdef-12345";
  edits.session_id = "bench-17";
  for (auto _ : state) {
    StatusOr<std::string> out = BuildForwardBody(body, edits);
    if (!out.ok()) state.SkipWithError("edit failed");
    benchmark::DoNotOptimize(out);
  }
  SetBytes(state, body);
}

// Everything the gateway does to the body between reading it and handing it to the client.
void BM_ParseAndEdit(benchmark::State& state) {
  const std::string body = Body(state.range(0));
  ForwardEdits edits;
  edits.rid = "gw-0123456789abcdef0123456789abcdef-12345";
  for (auto _ : state) {
    StatusOr<ClientRequest> r = ParseClientRequest(GatewayRoute::kGenerate, body);
    if (!r.ok()) state.SkipWithError("parse failed");
    edits.session_id = r->session_id;
    StatusOr<std::string> out = BuildForwardBody(r->body, edits);
    if (!out.ok()) state.SkipWithError("edit failed");
    benchmark::DoNotOptimize(out);
  }
  SetBytes(state, body);
}

// The parse that builds every id (what the gateway ran before it counted them).
void BM_ParseKeepingIds(benchmark::State& state) {
  const std::string body = Body(state.range(0));
  for (auto _ : state) {
    StatusOr<protocol::GenerateRequest> r = protocol::ParseGenerateRequest(body);
    if (!r.ok()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(r);
  }
  SetBytes(state, body);
}

// The floor any proxy that forwards an edited body pays: one copy.
void BM_CopyBody(benchmark::State& state) {
  const std::string body = Body(state.range(0));
  for (auto _ : state) {
    std::string copy = body;
    benchmark::DoNotOptimize(copy);
  }
  SetBytes(state, body);
}

BENCHMARK(BM_ParseClientRequest)->Arg(16)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BuildForwardBody)->Arg(16)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ParseAndEdit)->Arg(16)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ParseKeepingIds)->Arg(16)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CopyBody)->Arg(16)->Arg(100'000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace agentkv::service

BENCHMARK_MAIN();
