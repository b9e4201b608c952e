// SGLang /generate responses: the JSON object of a non-streaming reply or of one SSE chunk,
// and the engine's 400 error body.
//
// Shapes follow docs/PROTOCOL.md sections 3.1-3.5: `{"text", "output_ids", "meta_info"}` with the
// three `finish_reason` forms. The emulator serializes these; the gateway and tests parse
// them. Parsing is tolerant: unknown keys are ignored, JSON null counts as absent, and only a
// known key of the wrong type is an error. Pure functions; value types are
// thread-compatible.
#ifndef AGENTKV_PROTOCOL_GENERATE_RESPONSE_H_
#define AGENTKV_PROTOCOL_GENERATE_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::protocol {

// Why a request finished (docs/PROTOCOL.md section 3.3). JSON forms:
//   {"type":"stop","matched":<token id or string>}
//   {"type":"length","length":N}
//   {"type":"abort","message":str,"status_code":int|null,"err_type":str|null}
struct FinishReason {
  enum class Type { kStop, kLength, kAbort };

  Type type = Type::kStop;
  std::optional<int64_t> matched_token;       // kStop: a stop token (or EOS) matched.
  std::optional<std::string> matched_string;  // kStop: a stop string or regex matched.
  int64_t length = 0;                         // kLength: max_new_tokens reached.
  std::string message;                        // kAbort.
  std::optional<int> status_code;             // kAbort.
  std::optional<std::string> err_type;        // kAbort.

  static FinishReason Stop(int64_t matched_token);
  static FinishReason Stop(std::string matched_string);
  static FinishReason Length(int64_t length);
  static FinishReason Abort(std::string message, std::optional<int> status_code = std::nullopt,
                            std::optional<std::string> err_type = std::nullopt);

  friend bool operator==(const FinishReason&, const FinishReason&) = default;
};

// "stop", "length" or "abort".
std::string_view FinishReasonTypeName(FinishReason::Type type);

// Prompt tokens served from each cache tier.
struct CachedTokensDetails {
  int64_t device = 0;
  int64_t host = 0;
  std::optional<int64_t> storage;  // Written only when set.

  friend bool operator==(const CachedTokensDetails&, const CachedTokensDetails&) = default;
};

// One `[logprob, token_id, text_or_null]` entry of `output_token_logprobs`.
struct OutputTokenLogprob {
  double logprob = 0;  // NaN is written as null (and a null reads back as NaN).
  int64_t token_id = 0;
  std::optional<std::string> text;

  friend bool operator==(const OutputTokenLogprob&, const OutputTokenLogprob&) = default;
};

// The `meta_info` object (docs/PROTOCOL.md section 3.2), the keys agentkv reads and writes.
struct MetaInfo {
  std::string id;                             // The request's rid.
  std::optional<FinishReason> finish_reason;  // null while streaming.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  std::optional<CachedTokensDetails> cached_tokens_details;
  double e2e_latency = 0;            // Seconds.
  std::optional<double> queue_time;  // Seconds; present when metrics are enabled.
  std::optional<std::vector<OutputTokenLogprob>> output_token_logprobs;

  friend bool operator==(const MetaInfo&, const MetaInfo&) = default;
};

// A non-streaming response, or one SSE chunk (same shape, finish_reason null until the last).
struct GenerateResponse {
  std::string text;
  std::vector<int64_t> output_ids;
  MetaInfo meta_info;

  friend bool operator==(const GenerateResponse&, const GenerateResponse&) = default;
};

// Compact JSON: {"text":...,"output_ids":[...],"meta_info":{"id":...,"finish_reason":...,
// "prompt_tokens":...,"completion_tokens":...,"cached_tokens":...,["cached_tokens_details"],
// "e2e_latency":...,["queue_time"],["output_token_logprobs"]}}; bracketed keys only when set.
std::string SerializeGenerateResponse(const GenerateResponse& response);

// Parses one response object. InvalidArgument when `body` is not a JSON object, a known key
// has the wrong type, or finish_reason.type is unknown; ResourceExhausted over 64 MiB or 64
// levels of nesting. A body of the form {"error": ...} is InvalidArgument carrying the error
// message (see ParseErrorMessage).
StatusOr<GenerateResponse> ParseGenerateResponse(std::string_view body);

// The message of an error body: `error.message` (SGLang, and an OpenAI stream's error event),
// `error` as a string (older routers), or a top-level `message` (the OpenAI error object). nullopt
// when `body` is none of these.
std::optional<std::string> ParseErrorMessage(std::string_view body);

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_GENERATE_RESPONSE_H_
