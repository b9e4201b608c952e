// What the agentkv gateway reads from a client request and what it forwards, as pure
// functions: the routes, session identity, the admission reservation estimate, sgl-router's
// header allowlist, the byte-preserving body edits, the signed sub-agent parent hint, the
// control-plane bearer token and the one mapping from gateway errors to HTTP status codes.
//
// The gateway (gateway.h) calls these on every request; they hold no state and do no I/O, so
// the unit tests pin each rule down without a socket. Pure functions; thread-safe.
#ifndef AGENTKV_SERVICE_GATEWAY_GATEWAY_REQUEST_H_
#define AGENTKV_SERVICE_GATEWAY_GATEWAY_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/control/reservation.h"
#include "agentkv/net/http_types.h"
#include "agentkv/protocol/generate.h"
#include "agentkv/protocol/pause_hint.h"

namespace agentkv::service {

// The data-path routes the gateway forwards.
enum class GatewayRoute : uint8_t { kGenerate, kChatCompletions, kCompletions };

// "/generate", "/v1/chat/completions", "/v1/completions".
std::string_view RoutePath(GatewayRoute route);

// Request headers the gateway reads (docs/GATEWAY.md lists them for clients).
inline constexpr std::string_view kDefaultSessionHeader = "X-Session-Id";
// "1" or "true": protected work, which always bypasses admission. Honoured only from a caller
// that presents the gateway's --bearer-token (AdmissionTrust); anyone else's is ignored.
inline constexpr std::string_view kProtectedHeader = "X-Agentkv-Protected";
// "train" (default) or "eval": with --agentic-admission-scope train, eval skips admission.
// Honoured only from an authenticated caller, as kProtectedHeader.
inline constexpr std::string_view kScopeHeader = "X-Agentkv-Scope";
// The prompt's token count when the client knows it (text prompts; the gateway has no
// tokenizer).
inline constexpr std::string_view kPromptTokensHeader = "X-Prompt-Tokens";
// Admission v2's shared prefix: a name the client gives the prefix its prompt starts with (a
// GRPO group's prompt, the tools+system prompt), and that prefix's token count. Requests that
// name the same key share one reservation of the prefix while any of them is in flight.
inline constexpr std::string_view kPrefixKeyHeader = "X-Agentkv-Prefix-Key";
inline constexpr std::string_view kPrefixTokensHeader = "X-Agentkv-Prefix-Tokens";

// Gap-aware retention on the served path: the pause the client expects after this request
// (protocol::kPauseHeader, read with protocol::ParsePauseHint); overrides what the body shows.
using protocol::kPauseHeader;
// Session retention (partial rollout, fully async retention): "1" or "true" marks the request's
// session retained, "0" or "false" clears the mark; absent leaves it. A retained session is
// never idled out (--session-idle-timeout-s) nor evicted at --max-sessions; only its close ends
// it. The mark belongs to the session's incarnation.
inline constexpr std::string_view kRetainHeader = "X-Agentkv-Session-Retain";
// The signed sub-agent parent hint.
inline constexpr std::string_view kParentSessionHeader = "X-Agentkv-Parent-Session";
inline constexpr std::string_view kParentSignatureHeader = "X-Agentkv-Parent-Signature";
// The body field an honoured parent hint is forwarded as (stock SGLang ignores it). A client
// body that carries it is refused: the hint is accepted only from the signed header.
using protocol::kParentSessionField;

// Session ids and parent ids: 1 to 256 bytes of printable ASCII without spaces (they travel
// in a URL path and in the X-SMG-Routing-Key header).
inline constexpr size_t kMaxSessionIdBytes = 256;
// A client `rid`: 1 to 512 bytes.
inline constexpr size_t kMaxRidBytes = 512;

// --agentic-program-fcfs: the SGLang request `priority` of a program that arrived
// `program_arrival`-th (control::GatewayFlow::ProgramArrival): kProgramFcfsTopPriority less
// the arrival, never below 0. Older programs get higher values, which SGLang's priority
// scheduling serves first in its default direction (without
// --schedule-low-priority-values-first) and which its --radix-eviction-policy priority evicts
// last. Values stay in [0, 2^30]: sgl-router reads `priority` as a 32-bit integer, and a
// trusted caller's own priority above 2^30 still outranks every stamped one. After 2^30
// programs in one gateway's life the values saturate at 0 (those programs are served FIFO).
inline constexpr int32_t kProgramFcfsTopPriority = int32_t{1} << 30;
int32_t ProgramFcfsPriority(uint64_t program_arrival);

// What the gateway needs from a client body; the body itself is forwarded byte for byte
// except for the edits of ForwardEdits.
struct ClientRequest {
  GatewayRoute route = GatewayRoute::kGenerate;
  std::string body;
  // Top-level `rid` (a string), if the client sent one.
  std::optional<std::string> rid;
  // Top-level `session_id` (a non-empty string), if the client sent one.
  std::optional<std::string> session_id;
  // `"stream": true`.
  bool stream = false;
  // The legacy `session_params` object (/generate): such a body never gets `session_id` added,
  // because SGLang rejects the two together.
  bool has_session_params = false;
  // Prompt size: the token count when the body carries token ids (`input_ids`, or a
  // completions `prompt` of integers), else the bytes of its text (`text`, `prompt`, the
  // strings under `messages`).
  std::optional<int64_t> prompt_token_ids;
  // Of those, the longest single prompt's (a batch completion's `prompt` is several prompts,
  // each held to the context length on its own). Set with prompt_token_ids.
  std::optional<int64_t> longest_prompt_token_ids;
  int64_t prompt_text_bytes = 0;
  // sampling_params.max_new_tokens (/generate, SGLang default 128 when absent), or
  // max_completion_tokens / max_tokens (OpenAI routes; absent = nullopt). In [0, kMaxTokens].
  std::optional<int64_t> max_new_tokens;
  // Chat completions: the pause its `messages` show, read as the pause that will follow it (an
  // agent in a tool loop keeps calling tools): kToolCall when the last message has role "tool"
  // (or is a "user" message whose content holds a "tool_result" part), kHumanTurn when it is
  // any other "user" message; kUnknown otherwise and on the other routes.
  PauseKind pause = PauseKind::kUnknown;
  // The body sets a top-level `priority` (kept, except that --agentic-program-fcfs replaces
  // an untrusted caller's).
  bool has_priority = false;
};

// Reads `body` for `route`. /generate: protocol::ParseGenerateRequest (its InvalidArgument or
// ResourceExhausted). OpenAI routes: InvalidArgument unless the body is one JSON object and
// `rid` / `session_id` (if present) are strings, `stream` a bool. Both: InvalidArgument naming
// the field when a token budget (max_new_tokens, max_tokens, max_completion_tokens) is not an
// integer in [0, kMaxTokens] (base/bounds.h), or the body carries kParentSessionField. Over
// 64 MiB or 64 levels of nesting: ResourceExhausted.
StatusOr<ClientRequest> ParseClientRequest(GatewayRoute route, std::string body);

// Whether `id` is a valid session or parent id (see kMaxSessionIdBytes).
bool IsValidSessionId(std::string_view id);

// The request's session: the body's top-level `session_id`, else the value of the session
// header (empty = none). nullopt: no session. InvalidArgument naming the source when the id
// is not valid.
StatusOr<std::optional<std::string>> ResolveSessionId(const std::optional<std::string>& body_id,
                                                      std::string_view header_value,
                                                      std::string_view header_name);

// X-Prompt-Tokens: nullopt when empty; a decimal integer in [0, kMaxTokens]; else
// InvalidArgument naming the header and the value.
StatusOr<std::optional<int64_t>> ParsePromptTokensHeader(std::string_view value);

// The most prompt tokens a body of `body_bytes` can hold, which bounds what X-Prompt-Tokens may
// claim: every token of text is at least one byte, and a chat template adds at most
// kPromptTemplateTokens of its own (role markers, a default system prompt).
inline constexpr int64_t kPromptTemplateTokens = 4096;
int64_t MaxPromptTokensOfBody(size_t body_bytes);
// `header_prompt_tokens` bounded by MaxPromptTokensOfBody: a client cannot reserve (or be
// refused for) a prompt its body cannot hold. nullopt stays nullopt.
std::optional<int64_t> BoundPromptTokens(std::optional<int64_t> header_prompt_tokens,
                                         size_t body_bytes);

// The decode tokens one reservation counts at most when --agentic-admission-expected-decode-cap
// is not given: SGLang's own clip of max_new_tokens in its scheduler's estimate
// (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION, 4096), so that a request asking for a huge max_tokens
// does not reserve KV it will most likely never use.
inline constexpr int64_t kGatewayExpectedDecodeCap = 4096;

// What the admission headers of one request may do.
struct AdmissionTrust {
  // X-Agentkv-Protected and X-Agentkv-Scope are honoured (the caller is authenticated).
  bool honour_bypass_headers = false;
};
// Only a caller that presents the gateway's bearer token may mark its work protected or out of
// scope: with no token configured nobody can. `authorization` is the request's header value.
AdmissionTrust TrustOf(std::string_view authorization, std::string_view bearer_token);
// X-Agentkv-Protected: true for "1" or "true" (any case); false when empty, "0" or "false";
// else InvalidArgument.
StatusOr<bool> ParseProtectedHeader(std::string_view value);
// X-Agentkv-Scope: whether the request is a training rollout: true for "" or "train", false
// for "eval"; else InvalidArgument.
StatusOr<bool> ParseScopeHeader(std::string_view value);
// X-Agentkv-Session-Retain: nullopt when empty; true for "1" or "true", false for "0" or
// "false" (any case); else InvalidArgument naming the header and the value.
StatusOr<std::optional<bool>> ParseRetainHeader(std::string_view value);

// The prompt tokens admission counts: the token ids when the body has them, else the
// X-Prompt-Tokens value when given, else ceil(text bytes / 4), the documented estimate.
int64_t EstimatePromptTokens(const ClientRequest& request,
                             std::optional<int64_t> header_prompt_tokens);

// The tokens one attempt reserves (control::ReservationTokens): the estimated prompt plus
// max_new_tokens (`default_max_new_tokens` when the body sets none), the decode part capped by
// `expected_decode_cap` when set. In [0, kMaxTokens] whatever the inputs.
int64_t EstimateReservationTokens(const ClientRequest& request,
                                  std::optional<int64_t> header_prompt_tokens,
                                  std::optional<int64_t> expected_decode_cap,
                                  int64_t default_max_new_tokens);

// A shared prefix as the client names it (kPrefixKeyHeader, kPrefixTokensHeader).
struct SharedPrefix {
  std::string key;
  int64_t tokens = 0;

  friend bool operator==(const SharedPrefix&, const SharedPrefix&) = default;
};

// The two prefix headers: nullopt when both are empty; else the key must be a valid session id
// (IsValidSessionId) and the tokens a decimal integer in [0, kMaxTokens]. InvalidArgument
// naming the header when one is given without the other or a value is invalid.
StatusOr<std::optional<SharedPrefix>> ParseSharedPrefixHeaders(std::string_view key_value,
                                                               std::string_view tokens_value);

// Admission v2's reservation of one attempt (control::UncachedReservationTokens): the estimated
// prompt (EstimatePromptTokens) less what the session holds (`held_prompt_tokens`, its last
// dispatched prompt) or the shared prefix, plus the decode part as EstimateReservationTokens.
control::UncachedReservation EstimateUncachedReservation(
    const ClientRequest& request, std::optional<int64_t> header_prompt_tokens,
    std::optional<int64_t> expected_decode_cap, int64_t default_max_new_tokens,
    int64_t held_prompt_tokens, int64_t shared_prefix_tokens);

// The prompt's token count when the gateway knows it exactly: its token ids (a batch's longest
// prompt), else the X-Prompt-Tokens value; nullopt for a text prompt without that header (the
// gateway has no tokenizer, and a byte estimate must never refuse a request). The gateway checks it
// with CheckContextLength (context_limits.h), SGLang's own rule and messages.
std::optional<int64_t> ExactPromptTokens(const ClientRequest& request,
                                         std::optional<int64_t> header_prompt_tokens);

// sgl-router's forwarded-header allowlist (case-insensitive): authorization, x-request-id,
// x-request-id-*, x-correlation-id, traceparent, tracestate, x-smg-routing-key.
bool IsForwardedHeader(std::string_view name);

// The allowlisted headers of `request`, in order, except an Authorization that carries the
// gateway's own bearer token (`own_bearer_token` non-empty), which must not leak upstream.
net::HeaderList ForwardHeaders(const net::Request& request, std::string_view own_bearer_token);

// Replaces every `name` entry (case-insensitive) of `headers` with one `name: value`.
void SetHeader(net::HeaderList& headers, std::string_view name, std::string value);

// The members the gateway sets in a forwarded body; nothing else changes.
struct ForwardEdits {
  std::string rid;
  std::optional<std::string> session_id;
  std::optional<std::string> parent_session;
  // SGLang's request `priority`, spliced in when set (gap-aware retention's served part).
  std::optional<int32_t> priority;
  // protocol::kPauseField (agentkv's engines read it), spliced in when set.
  std::optional<std::string> pause;
};

// `body` with top-level `rid`, `session_id` (when set), kParentSessionField (when set),
// `priority` (when set) and protocol::kPauseField (when set)
// spliced in, in one pass, by protocol::SetTopLevelFields; every other byte is unchanged.
StatusOr<std::string> BuildForwardBody(std::string_view body, const ForwardEdits& edits);

// The session id of a close path "/v1/sessions/{id}/close" (percent-decoded); nullopt when
// `path` is not one or the id is not valid.
std::optional<std::string> ParseSessionClosePath(std::string_view path);

// The signed sub-agent parent hint: hex(HMAC-SHA256(key, "<session_id>\n<parent_id>")).
std::string SignParentHint(std::string_view key, std::string_view session_id,
                           std::string_view parent_id);

enum class ParentHintVerdict : uint8_t {
  kAbsent,    // No X-Agentkv-Parent-Session header.
  kAccepted,  // Signed with the configured key for this session: forward it.
  kRejected,  // Present but not honoured: no key, no session, bad id or bad signature.
};

// Verifies a parent hint (constant-time comparison of the digests).
ParentHintVerdict VerifyParentHint(std::string_view key,
                                   const std::optional<std::string>& session_id,
                                   std::string_view parent_id, std::string_view signature_hex);

// Every error the gateway answers itself. HttpStatusFor is the one place that maps them to
// HTTP status codes (docs/GATEWAY.md has the table).
enum class GatewayError : uint8_t {
  kBadRequest,        // 400: invalid body or header, or a request that can never fit.
  kUnauthorized,      // 401: control endpoint without the bearer token.
  kNotFound,          // 404.
  kMethodNotAllowed,  // 405: a control route asked with the wrong method.
  kSessionClosing,    // 409: the session is closing or its attempt was cancelled by a close.
  kPayloadTooLarge,   // 413.
  kTooManyRequests,   // 429: a retention mark past --max-retained-sessions, a session over
                      // its admission share for the whole wait (or 2^20 live attempts of
                      // one request id).
  kClientGone,        // 499 (recorded only; nobody reads the answer).
  kInternal,          // 500.
  kUpstreamFailed,    // 502: the router or engine could not be reached or broke the answer.
  kShuttingDown,      // 503.
  kOverloaded,        // 503: a bounded table (sessions) is full of active entries.
  kUpstreamTimeout,   // 504.
};

int HttpStatusFor(GatewayError error);

// Whether a client should retry `error`'s answer, which the answer tells the OpenAI SDKs with
// `x-should-retry` (net::kShouldRetryHeader). false where the same request cannot succeed later
// (400, 401, 404, 413: nothing about it changes) or where a retry would do harm (409: its session
// was closed, and a retry would silently open a new incarnation of the session the client just
// closed). nullopt, no header, where a retry later can succeed, so the SDK's own rule (retry 429
// and >= 500) is right: 429 (a retained session may be closed meanwhile), 5xx (shutdown, the
// session cap full of busy sessions, upstream failures and timeouts).
std::optional<bool> ShouldRetry(GatewayError error);

// The gateway's own error answer to `request`: HttpStatusFor(error), the error body of the
// request's API family (net::ErrorBodyFor) with `message`, `x-should-retry` when
// ShouldRetry(error) has a value, and `Retry-After: 1` for kTooManyRequests and kOverloaded
// (a share or a table that frees as requests finish). Every error the gateway answers itself is
// built here.
net::Response ErrorResponse(const net::Request& request, GatewayError error,
                            std::string_view message);

// The error for a failed Status, by the shared net::HttpStatusFor: InvalidArgument ->
// kBadRequest, ResourceExhausted -> kPayloadTooLarge, NotFound -> kNotFound,
// FailedPrecondition / AlreadyExists -> kSessionClosing (409), DeadlineExceeded ->
// kUpstreamTimeout, anything else -> kInternal; except Unavailable -> kUpstreamFailed (502, not
// 503: an unavailable upstream makes the gateway a bad gateway).
GatewayError ErrorFor(const Status& status);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_GATEWAY_GATEWAY_REQUEST_H_
