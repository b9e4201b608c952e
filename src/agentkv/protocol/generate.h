// SGLang `POST /generate`: the request the gateway forwards and the emulator serves.
//
// ParseGenerateRequest reads the single-request form of SGLang's GenerateReqInput
// (docs/PROTOCOL.md section 2) into typed fields while keeping the body as received in `raw`, which
// is what gets forwarded (after SetTopLevelField edits of `rid`/`session_id`, json_splice.h).
// Unknown fields are ignored by the parser and survive in `raw`. Responses, SSE framing and
// error bodies live in generate_response.h and sse.h; this header includes them so that one
// include gives the whole /generate surface. Pure functions; value types are
// thread-compatible.
#ifndef AGENTKV_PROTOCOL_GENERATE_H_
#define AGENTKV_PROTOCOL_GENERATE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/protocol/generate_response.h"
#include "agentkv/protocol/json_splice.h"
#include "agentkv/protocol/pause_hint.h"
#include "agentkv/protocol/sse.h"

namespace agentkv::protocol {

// The `sampling_params` keys the emulator needs; every other key stays in the raw body.
struct SamplingParams {
  int64_t max_new_tokens = 128;       // SGLang's default.
  std::optional<double> temperature;  // >= 0 when present.
  std::optional<double> top_p;        // In (0, 1] when present.
  int64_t top_k = -1;                 // -1 (all) or >= 1.
  std::vector<std::string> stop;      // `stop` as a string or a list of strings.
  std::vector<int64_t> stop_token_ids;
  bool ignore_eos = false;
  int64_t min_new_tokens = 0;  // In [0, max_new_tokens].

  friend bool operator==(const SamplingParams&, const SamplingParams&) = default;
};

// agentkv's sub-agent parent hint as a top-level body member. Only the gateway sets it, from a
// verified signed header; stock SGLang ignores it.
inline constexpr std::string_view kParentSessionField = "agentkv_parent_session";

// agentkv's pause hint as a top-level body member: kPauseField (pause_hint.h).

// One /generate request. Exactly one of `text` / `input_id_count` is set; `input_ids` is set
// with `input_id_count` when the parse kept the ids (GenerateParseMode::kFull).
struct GenerateRequest {
  std::string raw;  // The body as received, byte for byte (kFull only).
  std::optional<std::string> rid;
  std::optional<std::string> session_id;  // Top-level session tag (sglang PR #29436).
  std::optional<std::string> text;
  std::optional<std::vector<int64_t>> input_ids;
  // Entries of `input_ids` (in both modes), when the prompt is token ids.
  std::optional<int64_t> input_id_count;
  SamplingParams sampling_params;
  bool stream = false;
  bool return_logprob = false;
  std::optional<int64_t> priority;
  bool has_session_params = false;  // The legacy `session_params` object was present.
  // A top-level kParentSessionField member was present (any value, escaped key or not).
  bool has_parent_session_field = false;
  // Its value when it is a string (an engine that demotes finished sub-agents reads it); any
  // other value is left unread here (the gateway refuses the member in a client's body).
  std::optional<std::string> parent_session;
  // The kPauseField member, when it is a string (its value is not checked here: the reader
  // parses it with ParsePauseHint).
  std::optional<std::string> pause;
  // SGLang's prefix cache namespace: `cache_salt` then `extra_key`, concatenated (either may
  // be absent); requests with different namespaces never share KV. Empty: the default one.
  std::string cache_namespace;
};

// Bounds on what ParseGenerateRequest accepts.
struct ParseLimits {
  // Default: 64 MiB. Larger bodies are ResourceExhausted.
  size_t max_body_bytes = size_t{64} << 20;
  // Default: 4,000,000. Longer `input_ids` are ResourceExhausted.
  size_t max_input_ids = 4'000'000;
  // Default: 64. Deeper JSON nesting is ResourceExhausted. Range: [1, kMaxJsonDepth]
  // (json_util.h); values outside are clamped.
  int max_depth = 64;
};

// What ParseGenerateRequest keeps of a body it accepts. Both modes accept and refuse exactly the
// same bodies with the same statuses.
enum class GenerateParseMode {
  // Every field, `raw` and the `input_ids` values (the engine emulator).
  kFull,
  // For a proxy that forwards the body it holds (the gateway): `raw` stays empty and `input_ids`
  // is checked and counted as it is parsed, never stored, so that a prompt of 100,000 ids costs
  // one pass over its bytes and no memory per id (`input_id_count`; `input_ids` stays unset).
  kSummary,
};

// The JSON limits ParseGenerateRequest applies; pass them to SetTopLevelField so that a body
// that parsed can always be edited.
JsonLimits JsonLimitsFor(const ParseLimits& limits);

// Parses a /generate body (single-request form). A JSON null counts as absent.
// ResourceExhausted: over `limits`. InvalidArgument, naming the JSON path:
//   not valid JSON or not an object; a batch (`text`/`input_ids` as a list of prompts, `rid`
//   or `sampling_params` as a list) -> "batch requests are not supported"; none or more than
//   one of text/input_ids/input_embeds; `input_embeds` (not supported); `session_id` together
//   with `session_params` (SGLang raises ValueError); a field of the wrong type or out of the
//   range SGLang accepts, e.g. "sampling_params.max_new_tokens: expected a non-negative
//   integer". Never crashes on arbitrary bytes. `input_ids` is read as the JSON is parsed
//   (no DOM of the list), in O(1) memory in kSummary mode.
StatusOr<GenerateRequest> ParseGenerateRequest(std::string_view body,
                                               const ParseLimits& limits = {},
                                               GenerateParseMode mode = GenerateParseMode::kFull);

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_GENERATE_H_
