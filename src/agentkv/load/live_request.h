// One replayed request on the wire: the HTTP request `agentkv load` sends for it, and what it
// reads back from the streamed answer.
//
// Three APIs (LoadApi): SGLang's native `/generate` with `input_ids` (token exact: the server
// sees the ids PromptBook made and returns the ids it generated, which the agent's next turn
// re-sends), and the OpenAI routes SGLang serves, `/v1/completions` with the prompt as token
// ids (exact prompt; the answer comes back as text, so the next turn re-sends synthesized ids
// where the agent would re-send the answer) and `/v1/chat/completions` (one user message whose
// text spells each id as one 4-byte word, one pseudo token per word on the engine emulator,
// approximate on a real tokenizer). Every request streams, so the first token's time is seen.
//
// Pure functions and a thread-compatible reader; no I/O.
#ifndef AGENTKV_LOAD_LIVE_REQUEST_H_
#define AGENTKV_LOAD_LIVE_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/pause.h"
#include "agentkv/base/status.h"
#include "agentkv/net/http_types.h"
#include "agentkv/protocol/sse.h"

namespace agentkv::load {

enum class LoadApi : uint8_t { kGenerate, kCompletions, kChat };

// "generate", "completions", "chat"; and back (nullopt for any other name).
std::string_view LoadApiName(LoadApi api);
std::optional<LoadApi> ParseLoadApi(std::string_view name);

// The agent's side of one request, as a framework would send it.
struct WireRequest {
  LoadApi api = LoadApi::kGenerate;
  // The OpenAI routes' `model`.
  std::string model;
  // Unique per attempt.
  std::string rid;
  // The client's session (body `session_id`); none for a plain client.
  std::optional<std::string> session;
  // X-SMG-Routing-Key (the session, or a sub-agent's parent's); none: not sent.
  std::optional<std::string> routing_key;
  std::vector<int64_t> prompt;
  int64_t max_new_tokens = 1;
  // X-Agentkv-Pause; none: not sent.
  std::optional<PauseKind> pause;
  // X-Agentkv-Parent-Session, and X-Agentkv-Parent-Signature when a key signs it.
  std::optional<std::string> parent_session;
  std::optional<std::string> parent_signature;
  // X-Agentkv-Session-Retain: 1.
  bool retain = false;
};

// The request's target path and JSON body, and its headers.
struct HttpCall {
  std::string target;
  std::string body;
  net::HeaderList headers;
};
HttpCall BuildCall(const WireRequest& request);

// The `POST /v1/sessions/{id}/close` of the agentkv gateway, `id` percent-encoded.
std::string SessionCloseTarget(std::string_view session);

// The chat text of `ids`: one 4-byte word per id (" " and three base-36 digits of id modulo
// 36^3).
std::string SpellTokens(const std::vector<int64_t>& ids);

// What the answer said, once its stream ended.
struct StreamOutcome {
  // The first event that carried output had arrived (by the reader's count of events).
  bool saw_output = false;
  // The server's counts: meta_info (generate) or usage (OpenAI); unset when it sent none.
  std::optional<int64_t> prompt_tokens;
  std::optional<int64_t> completion_tokens;
  std::optional<int64_t> cached_tokens;
  // meta_info.cached_tokens_details (generate); unset otherwise.
  std::optional<int64_t> cached_device_tokens;
  std::optional<int64_t> cached_host_tokens;
  // The generated ids (generate only; empty otherwise).
  std::vector<int64_t> output_ids;
  // Events that carried output (at least one new token each).
  int64_t output_events = 0;
  // An error event in the stream (its message, and the HTTP status it names as `code`, in
  // [0, 999]: SGLang streams a request it refuses after the headers as 200 and an error event
  // with code 400), or a finish_reason of type abort.
  std::optional<std::string> error;
  std::optional<int> error_code;
};

// Reads one streamed answer of `api`, chunk by chunk as the socket delivers them.
class StreamReader {
 public:
  explicit StreamReader(LoadApi api) : api_(api) {}

  // Consumes `bytes`; returns true when they completed an event with output (the caller stamps
  // the first token's time on the first such return).
  bool Feed(std::string_view bytes);
  // Whether the stream ended with [DONE].
  bool done() const { return parser_.done(); }
  // OK, or the first malformed event or an event past the parser's bound.
  const Status& status() const { return status_; }
  const StreamOutcome& outcome() const { return outcome_; }

 private:
  // An error event: records it and returns true; false for any other event.
  bool ReadErrorEvent(std::string_view data);
  bool ReadGenerateEvent(std::string_view data);
  bool ReadOpenAiEvent(std::string_view data);

  LoadApi api_;
  protocol::SseParser parser_;
  Status status_;
  StreamOutcome outcome_;
};

}  // namespace agentkv::load

#endif  // AGENTKV_LOAD_LIVE_REQUEST_H_
