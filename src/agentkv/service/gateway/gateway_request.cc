#include "agentkv/service/gateway/gateway_request.h"

#include <algorithm>
#include <boost/json.hpp>
#include <boost/url/pct_string_view.hpp>
#include <cctype>
#include <charconv>

#include "agentkv/base/bounds.h"
#include "agentkv/control/reservation.h"
#include "agentkv/net/error_body.h"
#include "agentkv/net/http_status.h"
#include "agentkv/protocol/generate.h"
#include "agentkv/protocol/json_splice.h"
#include "agentkv/protocol/json_util.h"
#include "agentkv/service/common/bearer_token.h"
#include "agentkv/service/common/hmac_sha256.h"

namespace agentkv::service {
namespace {

// An empty `rid` counts as absent; a longer one than kMaxRidBytes is refused.
Status NormalizeRid(std::optional<std::string>& rid) {
  if (rid.has_value() && rid->empty()) rid.reset();
  if (rid.has_value() && rid->size() > kMaxRidBytes) {
    return InvalidArgumentError("rid: longer than " + std::to_string(kMaxRidBytes) + " bytes");
  }
  return Status::Ok();
}

constexpr std::string_view kSessionsPrefix = "/v1/sessions/";
constexpr std::string_view kCloseSuffix = "/close";

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

char LowerChar(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// ASCII case-insensitive equality, without allocating (it runs for every header of every
// forwarded request).
bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (LowerChar(a[i]) != LowerChar(b[i])) return false;
  }
  return true;
}

bool StartsWithIgnoreCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && EqualsIgnoreCase(text.substr(0, prefix.size()), prefix);
}

Status RefuseBodyParentHint() {
  return InvalidArgumentError(std::string(kParentSessionField) +
                              ": not accepted in the body; send the signed " +
                              std::string(kParentSessionHeader) + " and " +
                              std::string(kParentSignatureHeader) + " headers instead");
}

std::string JsonString(std::string_view value) {
  std::string out;
  protocol::AppendJsonString(out, value);
  return out;
}

// Bytes of every string under `value` (the text of chat messages, whatever their shape).
int64_t StringBytes(const boost::json::value& value) {
  if (value.is_string()) return static_cast<int64_t>(value.as_string().size());
  int64_t total = 0;
  if (value.is_array()) {
    for (const boost::json::value& item : value.as_array()) total += StringBytes(item);
  } else if (value.is_object()) {
    for (const auto& member : value.as_object()) total += StringBytes(member.value());
  }
  return total;
}

// Integers anywhere under `value` (a prompt of token ids, or a batch of them); nullopt when
// something else appears.
std::optional<int64_t> TokenIdCount(const boost::json::value& value) {
  if (value.is_int64() || value.is_uint64()) return 1;
  if (!value.is_array()) return std::nullopt;
  int64_t total = 0;
  for (const boost::json::value& item : value.as_array()) {
    std::optional<int64_t> n = TokenIdCount(item);
    if (!n.has_value()) return std::nullopt;
    total += *n;
  }
  return total;
}

// The longest prompt of a completions `prompt` of token ids: the list itself, or the longest
// list of a batch. Precondition: TokenIdCount(prompt) has a value.
int64_t LongestTokenPrompt(const boost::json::array& prompt) {
  int64_t longest = 0;
  for (const boost::json::value& item : prompt) {
    if (!item.is_array()) return static_cast<int64_t>(prompt.size());
    longest = std::max(longest, static_cast<int64_t>(item.as_array().size()));
  }
  return longest;
}

// The pause the last chat message shows (ClientRequest::pause).
PauseKind PauseOfMessages(const boost::json::object& object) {
  const boost::json::value* messages = protocol::FindNonNull(object, "messages");
  if (messages == nullptr || !messages->is_array() || messages->as_array().empty()) {
    return PauseKind::kUnknown;
  }
  const boost::json::value& last = messages->as_array().back();
  if (!last.is_object()) return PauseKind::kUnknown;
  const boost::json::value* role = last.as_object().if_contains("role");
  if (role == nullptr || !role->is_string()) return PauseKind::kUnknown;
  if (role->as_string() == "tool") return PauseKind::kToolCall;
  if (role->as_string() != "user") return PauseKind::kUnknown;
  const boost::json::value* content = last.as_object().if_contains("content");
  if (content != nullptr && content->is_array()) {
    for (const boost::json::value& part : content->as_array()) {
      if (!part.is_object()) continue;
      const boost::json::value* type = part.as_object().if_contains("type");
      if (type != nullptr && type->is_string() && type->as_string() == "tool_result") {
        return PauseKind::kToolCall;
      }
    }
  }
  return PauseKind::kHumanTurn;
}

StatusOr<ClientRequest> ParseOpenAiRequest(GatewayRoute route, std::string body) {
  const protocol::JsonLimits limits;
  const char* what =
      route == GatewayRoute::kChatCompletions ? "chat completions request" : "completions request";
  AGENTKV_ASSIGN_OR_RETURN(boost::json::value parsed,
                           protocol::ParseJsonObject(body, limits, what));
  const boost::json::object& object = parsed.as_object();
  ClientRequest request;
  request.route = route;
  AGENTKV_RETURN_IF_ERROR(protocol::ReadOptionalString(object, "rid", "rid", &request.rid));
  AGENTKV_RETURN_IF_ERROR(
      protocol::ReadOptionalString(object, "session_id", "session_id", &request.session_id));
  if (request.session_id.has_value() && request.session_id->empty()) request.session_id.reset();
  AGENTKV_RETURN_IF_ERROR(protocol::ReadBool(object, "stream", "stream", &request.stream));
  std::optional<int64_t> max_tokens;
  AGENTKV_RETURN_IF_ERROR(
      protocol::ReadOptionalInt64(object, "max_tokens", "max_tokens", &max_tokens));
  std::optional<int64_t> max_completion_tokens;
  AGENTKV_RETURN_IF_ERROR(protocol::ReadOptionalInt64(
      object, "max_completion_tokens", "max_completion_tokens", &max_completion_tokens));
  if (max_tokens.has_value()) AGENTKV_RETURN_IF_ERROR(CheckTokens("max_tokens", *max_tokens));
  if (max_completion_tokens.has_value()) {
    AGENTKV_RETURN_IF_ERROR(CheckTokens("max_completion_tokens", *max_completion_tokens));
  }
  request.max_new_tokens = max_completion_tokens.has_value() ? max_completion_tokens : max_tokens;
  if (object.contains(kParentSessionField)) return RefuseBodyParentHint();
  request.has_priority = object.contains("priority");
  if (route == GatewayRoute::kChatCompletions) request.pause = PauseOfMessages(object);
  const char* prompt_key = route == GatewayRoute::kChatCompletions ? "messages" : "prompt";
  if (const boost::json::value* prompt = protocol::FindNonNull(object, prompt_key)) {
    if (route == GatewayRoute::kCompletions && prompt->is_array()) {
      request.prompt_token_ids = TokenIdCount(*prompt);
      if (request.prompt_token_ids.has_value()) {
        request.longest_prompt_token_ids = LongestTokenPrompt(prompt->as_array());
      }
    }
    if (!request.prompt_token_ids.has_value()) request.prompt_text_bytes = StringBytes(*prompt);
  }
  AGENTKV_RETURN_IF_ERROR(NormalizeRid(request.rid));
  request.body = std::move(body);
  return request;
}

}  // namespace

std::string_view RoutePath(GatewayRoute route) {
  switch (route) {
    case GatewayRoute::kGenerate:
      return "/generate";
    case GatewayRoute::kChatCompletions:
      return "/v1/chat/completions";
    case GatewayRoute::kCompletions:
      return "/v1/completions";
  }
  return "/generate";
}

StatusOr<ClientRequest> ParseClientRequest(GatewayRoute route, std::string body) {
  if (route != GatewayRoute::kGenerate) return ParseOpenAiRequest(route, std::move(body));
  // The body is forwarded as it is: the parse only counts input_ids and keeps no copy.
  AGENTKV_ASSIGN_OR_RETURN(
      protocol::GenerateRequest parsed,
      protocol::ParseGenerateRequest(body, {}, protocol::GenerateParseMode::kSummary));
  ClientRequest request;
  request.route = route;
  request.rid = parsed.rid;
  request.session_id = parsed.session_id;
  if (request.session_id.has_value() && request.session_id->empty()) request.session_id.reset();
  request.stream = parsed.stream;
  request.has_session_params = parsed.has_session_params;
  if (parsed.input_id_count.has_value()) {
    request.prompt_token_ids = parsed.input_id_count;
    request.longest_prompt_token_ids = parsed.input_id_count;
  } else {
    request.prompt_text_bytes = static_cast<int64_t>(parsed.text.value_or(std::string()).size());
  }
  AGENTKV_RETURN_IF_ERROR(
      CheckTokens("sampling_params.max_new_tokens", parsed.sampling_params.max_new_tokens));
  request.max_new_tokens = parsed.sampling_params.max_new_tokens;
  request.has_priority = parsed.priority.has_value();
  if (parsed.has_parent_session_field) return RefuseBodyParentHint();
  AGENTKV_RETURN_IF_ERROR(NormalizeRid(request.rid));
  request.body = std::move(body);
  return request;
}

int32_t ProgramFcfsPriority(uint64_t program_arrival) {
  const auto top = static_cast<uint64_t>(kProgramFcfsTopPriority);
  return program_arrival >= top ? 0 : static_cast<int32_t>(top - program_arrival);
}

bool IsValidSessionId(std::string_view id) {
  if (id.empty() || id.size() > kMaxSessionIdBytes) return false;
  return std::all_of(id.begin(), id.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

StatusOr<std::optional<std::string>> ResolveSessionId(const std::optional<std::string>& body_id,
                                                      std::string_view header_value,
                                                      std::string_view header_name) {
  if (body_id.has_value()) {
    if (!IsValidSessionId(*body_id)) {
      return InvalidArgumentError(
          "session_id: expected 1-256 printable ASCII characters without spaces");
    }
    return body_id;
  }
  if (header_value.empty()) return std::optional<std::string>();
  if (!IsValidSessionId(header_value)) {
    return InvalidArgumentError(std::string(header_name) +
                                ": expected 1-256 printable ASCII characters without spaces");
  }
  return std::optional<std::string>(std::string(header_value));
}

StatusOr<std::optional<int64_t>> ParsePromptTokensHeader(std::string_view value) {
  if (value.empty()) return std::optional<int64_t>();
  int64_t tokens = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), tokens);
  if (error == std::errc::result_out_of_range && end == value.data() + value.size()) {
    // All digits, past int64: out of range like any other too-large count.
    return InvalidArgumentError(std::string(kPromptTokensHeader) + ": " +
                                std::string(value.substr(0, 40)) + " is out of range [0, " +
                                std::to_string(kMaxTokens) + "] tokens");
  }
  if (error != std::errc() || end != value.data() + value.size()) {
    return InvalidArgumentError(std::string(kPromptTokensHeader) +
                                ": expected a non-negative integer");
  }
  AGENTKV_RETURN_IF_ERROR(CheckTokens(kPromptTokensHeader, tokens));
  return std::optional<int64_t>(tokens);
}

int64_t MaxPromptTokensOfBody(size_t body_bytes) {
  return std::min(kMaxTokens,
                  SaturatingAdd(static_cast<int64_t>(std::min<size_t>(body_bytes, kMaxTokens)),
                                kPromptTemplateTokens));
}

std::optional<int64_t> BoundPromptTokens(std::optional<int64_t> header_prompt_tokens,
                                         size_t body_bytes) {
  if (!header_prompt_tokens.has_value()) return std::nullopt;
  return std::min(*header_prompt_tokens, MaxPromptTokensOfBody(body_bytes));
}

AdmissionTrust TrustOf(std::string_view authorization, std::string_view bearer_token) {
  return AdmissionTrust{.honour_bypass_headers = BearerMatches(authorization, bearer_token)};
}

StatusOr<bool> ParseProtectedHeader(std::string_view value) {
  const std::string lower = Lower(value);
  if (lower == "1" || lower == "true") return true;
  if (lower.empty() || lower == "0" || lower == "false") return false;
  return InvalidArgumentError(std::string(kProtectedHeader) + ": expected 1, true, 0 or false");
}

StatusOr<std::optional<bool>> ParseRetainHeader(std::string_view value) {
  const std::string lower = Lower(value);
  if (lower.empty()) return std::optional<bool>();
  if (lower == "1" || lower == "true") return std::optional<bool>(true);
  if (lower == "0" || lower == "false") return std::optional<bool>(false);
  constexpr size_t kMaxEchoedBytes = 64;
  return InvalidArgumentError(std::string(kRetainHeader) +
                              ": expected 1, true, 0 or false, got \"" +
                              std::string(value.substr(0, kMaxEchoedBytes)) + "\"");
}

StatusOr<bool> ParseScopeHeader(std::string_view value) {
  if (value.empty() || value == "train") return true;
  if (value == "eval") return false;
  return InvalidArgumentError(std::string(kScopeHeader) + ": expected train or eval");
}

int64_t EstimatePromptTokens(const ClientRequest& request,
                             std::optional<int64_t> header_prompt_tokens) {
  if (request.prompt_token_ids.has_value()) return *request.prompt_token_ids;
  if (header_prompt_tokens.has_value()) return *header_prompt_tokens;
  return (request.prompt_text_bytes + 3) / 4;
}

int64_t EstimateReservationTokens(const ClientRequest& request,
                                  std::optional<int64_t> header_prompt_tokens,
                                  std::optional<int64_t> expected_decode_cap,
                                  int64_t default_max_new_tokens) {
  control::AttemptShape shape;
  shape.prefix_tokens = EstimatePromptTokens(request, header_prompt_tokens);
  shape.max_new_tokens = request.max_new_tokens.value_or(default_max_new_tokens);
  shape.expected_decode_cap = expected_decode_cap;
  return control::ReservationTokens(shape);
}

StatusOr<std::optional<SharedPrefix>> ParseSharedPrefixHeaders(std::string_view key_value,
                                                               std::string_view tokens_value) {
  if (key_value.empty() && tokens_value.empty()) return std::optional<SharedPrefix>();
  if (key_value.empty() || tokens_value.empty()) {
    return InvalidArgumentError(
        std::string(key_value.empty() ? kPrefixKeyHeader : kPrefixTokensHeader) +
        ": required with " +
        std::string(key_value.empty() ? kPrefixTokensHeader : kPrefixKeyHeader));
  }
  if (!IsValidSessionId(key_value)) {
    return InvalidArgumentError(std::string(kPrefixKeyHeader) +
                                ": expected 1 to 256 printable ASCII bytes without spaces");
  }
  int64_t tokens = -1;
  const auto [end, error] =
      std::from_chars(tokens_value.data(), tokens_value.data() + tokens_value.size(), tokens);
  if (error != std::errc() || end != tokens_value.data() + tokens_value.size() || tokens < 0) {
    return InvalidArgumentError(std::string(kPrefixTokensHeader) +
                                ": expected a non-negative integer");
  }
  AGENTKV_RETURN_IF_ERROR(CheckTokens(kPrefixTokensHeader, tokens));
  return std::optional<SharedPrefix>(SharedPrefix{std::string(key_value), tokens});
}

control::UncachedReservation EstimateUncachedReservation(
    const ClientRequest& request, std::optional<int64_t> header_prompt_tokens,
    std::optional<int64_t> expected_decode_cap, int64_t default_max_new_tokens,
    int64_t held_prompt_tokens, int64_t shared_prefix_tokens) {
  control::AttemptShape shape;
  shape.prefix_tokens = EstimatePromptTokens(request, header_prompt_tokens);
  shape.max_new_tokens = request.max_new_tokens.value_or(default_max_new_tokens);
  shape.expected_decode_cap = expected_decode_cap;
  return control::UncachedReservationTokens(shape, held_prompt_tokens, shared_prefix_tokens);
}

std::optional<int64_t> ExactPromptTokens(const ClientRequest& request,
                                         std::optional<int64_t> header_prompt_tokens) {
  if (request.longest_prompt_token_ids.has_value()) return request.longest_prompt_token_ids;
  if (request.prompt_token_ids.has_value()) return request.prompt_token_ids;
  return header_prompt_tokens;
}

bool IsForwardedHeader(std::string_view name) {
  for (const std::string_view forwarded : {"authorization", "x-request-id", "x-correlation-id",
                                           "traceparent", "tracestate", "x-smg-routing-key"}) {
    if (EqualsIgnoreCase(name, forwarded)) return true;
  }
  return StartsWithIgnoreCase(name, "x-request-id-");
}

net::HeaderList ForwardHeaders(const net::Request& request, std::string_view own_bearer_token) {
  net::HeaderList headers;
  for (const auto& field : request) {
    const std::string_view name(field.name_string().data(), field.name_string().size());
    const std::string_view value(field.value().data(), field.value().size());
    if (!IsForwardedHeader(name)) continue;
    if (EqualsIgnoreCase(name, "authorization") && BearerMatches(value, own_bearer_token)) continue;
    headers.emplace_back(std::string(name), std::string(value));
  }
  return headers;
}

void SetHeader(net::HeaderList& headers, std::string_view name, std::string value) {
  std::erase_if(headers, [name](const auto& entry) { return EqualsIgnoreCase(entry.first, name); });
  headers.emplace_back(std::string(name), std::move(value));
}

StatusOr<std::string> BuildForwardBody(std::string_view body, const ForwardEdits& edits) {
  const std::string rid = JsonString(edits.rid);
  std::string session_id;
  std::string parent_session;
  std::vector<protocol::FieldEdit> fields = {{"rid", rid}};
  if (edits.session_id.has_value()) {
    session_id = JsonString(*edits.session_id);
    fields.push_back({"session_id", session_id});
  }
  if (edits.parent_session.has_value()) {
    parent_session = JsonString(*edits.parent_session);
    fields.push_back({kParentSessionField, parent_session});
  }
  const std::string priority = edits.priority.has_value() ? std::to_string(*edits.priority) : "";
  if (edits.priority.has_value()) fields.push_back({"priority", priority});
  const std::string pause = edits.pause.has_value() ? JsonString(*edits.pause) : "";
  if (edits.pause.has_value()) fields.push_back({protocol::kPauseField, pause});
  // ParseClientRequest accepted `body` as one JSON object and the values are written above.
  return protocol::SetTopLevelFieldsOfValidObject(body, fields);
}

std::optional<std::string> ParseSessionClosePath(std::string_view path) {
  if (!path.starts_with(kSessionsPrefix) || !path.ends_with(kCloseSuffix)) return std::nullopt;
  if (path.size() <= kSessionsPrefix.size() + kCloseSuffix.size()) return std::nullopt;
  const std::string_view encoded = path.substr(
      kSessionsPrefix.size(), path.size() - kSessionsPrefix.size() - kCloseSuffix.size());
  if (encoded.find('/') != std::string_view::npos) return std::nullopt;
  boost::system::result<boost::urls::pct_string_view> pct =
      boost::urls::make_pct_string_view(encoded);
  if (!pct) return std::nullopt;
  std::string id = pct->decode();
  if (!IsValidSessionId(id)) return std::nullopt;
  return id;
}

std::string SignParentHint(std::string_view key, std::string_view session_id,
                           std::string_view parent_id) {
  std::string message(session_id);
  message.push_back('\n');
  message.append(parent_id);
  return HexDigest(HmacSha256(key, message));
}

ParentHintVerdict VerifyParentHint(std::string_view key,
                                   const std::optional<std::string>& session_id,
                                   std::string_view parent_id, std::string_view signature_hex) {
  if (parent_id.empty()) return ParentHintVerdict::kAbsent;
  if (key.empty() || !session_id.has_value() || !IsValidSessionId(parent_id)) {
    return ParentHintVerdict::kRejected;
  }
  const std::optional<Sha256Digest> given = ParseHexDigest(signature_hex);
  if (!given.has_value()) return ParentHintVerdict::kRejected;
  std::string message(*session_id);
  message.push_back('\n');
  message.append(parent_id);
  return DigestsEqual(*given, HmacSha256(key, message)) ? ParentHintVerdict::kAccepted
                                                        : ParentHintVerdict::kRejected;
}

int HttpStatusFor(GatewayError error) {
  switch (error) {
    case GatewayError::kBadRequest:
      return 400;
    case GatewayError::kUnauthorized:
      return 401;
    case GatewayError::kNotFound:
      return 404;
    case GatewayError::kMethodNotAllowed:
      return 405;
    case GatewayError::kSessionClosing:
      return 409;
    case GatewayError::kPayloadTooLarge:
      return 413;
    case GatewayError::kTooManyRequests:
      return 429;
    case GatewayError::kClientGone:
      return 499;
    case GatewayError::kInternal:
      return 500;
    case GatewayError::kUpstreamFailed:
      return 502;
    case GatewayError::kShuttingDown:
    case GatewayError::kOverloaded:
      return 503;
    case GatewayError::kUpstreamTimeout:
      return 504;
  }
  return 500;
}

std::optional<bool> ShouldRetry(GatewayError error) {
  switch (error) {
    case GatewayError::kBadRequest:
    case GatewayError::kUnauthorized:
    case GatewayError::kNotFound:
    case GatewayError::kMethodNotAllowed:
    case GatewayError::kSessionClosing:
    case GatewayError::kPayloadTooLarge:
      return false;
    case GatewayError::kTooManyRequests:
    case GatewayError::kClientGone:
    case GatewayError::kInternal:
    case GatewayError::kUpstreamFailed:
    case GatewayError::kShuttingDown:
    case GatewayError::kOverloaded:
    case GatewayError::kUpstreamTimeout:
      break;
  }
  return std::nullopt;
}

net::Response ErrorResponse(const net::Request& request, GatewayError error,
                            std::string_view message) {
  net::Response response = net::MakeErrorResponse(
      request, static_cast<net::http::status>(HttpStatusFor(error)), message);
  if (const std::optional<bool> retry = ShouldRetry(error)) {
    response.set(
        boost::beast::string_view(net::kShouldRetryHeader.data(), net::kShouldRetryHeader.size()),
        *retry ? "true" : "false");
  }
  // A bounded table or share that frees as requests finish: worth a retry in a second.
  if (error == GatewayError::kTooManyRequests || error == GatewayError::kOverloaded) {
    response.set(boost::beast::http::field::retry_after, "1");
  }
  return response;
}

GatewayError ErrorFor(const Status& status) {
  // The gateway is a proxy: Unavailable comes from a call to the router or an engine, which
  // makes it a bad gateway (502), not this server being unavailable. Every other code takes
  // the shared Status-to-HTTP map.
  if (status.code() == StatusCode::kUnavailable) return GatewayError::kUpstreamFailed;
  switch (net::HttpStatusFor(status.code())) {
    case net::http::status::bad_request:
      return GatewayError::kBadRequest;
    case net::http::status::not_found:
      return GatewayError::kNotFound;
    case net::http::status::conflict:
      return GatewayError::kSessionClosing;
    case net::http::status::payload_too_large:
      return GatewayError::kPayloadTooLarge;
    case net::http::status::gateway_timeout:
      return GatewayError::kUpstreamTimeout;
    default:
      return GatewayError::kInternal;
  }
}

}  // namespace agentkv::service
