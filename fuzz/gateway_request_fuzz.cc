// Fuzzes what the gateway reads from a client request (service/gateway_request.h): the body
// of each route, the X-Prompt-Tokens header, the reservation and context-length arithmetic on
// what was read, and the body edits applied before forwarding.
//
// Input: one byte choosing the route ('G' /generate, 'C' chat completions, anything else
// completions), the X-Prompt-Tokens value up to the first '\n', then the body.
// Invariants: every function is total; failures are InvalidArgument or ResourceExhausted;
// token counts that parse are in [0, kMaxTokens]; a reservation is in [0, kMaxTokens] for any
// accepted input and any option at its bounds (no overflow, which UBSan would report); a body
// that parsed is forwarded with exactly the gateway's rid, and parses again to the same
// prompt and budget; a parsed body never carries the parent hint member.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agentkv/base/bounds.h"
#include "agentkv/protocol/json_splice.h"
#include "agentkv/service/common/context_limits.h"
#include "agentkv/service/gateway/gateway_request.h"
#include "fuzz_check.h"

namespace {

using agentkv::StatusCode;
using namespace agentkv::service;

bool IsInputError(const agentkv::Status& status) {
  return status.code() == StatusCode::kInvalidArgument ||
         status.code() == StatusCode::kResourceExhausted;
}

bool InTokenRange(int64_t tokens) { return tokens >= 0 && tokens <= agentkv::kMaxTokens; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const GatewayRoute route = input[0] == 'G'   ? GatewayRoute::kGenerate
                             : input[0] == 'C' ? GatewayRoute::kChatCompletions
                                               : GatewayRoute::kCompletions;
  std::string_view rest = input.substr(1);
  const size_t newline = rest.find('\n');
  const std::string_view header = newline == std::string_view::npos ? "" : rest.substr(0, newline);
  const std::string_view body = newline == std::string_view::npos ? rest : rest.substr(newline + 1);

  const agentkv::StatusOr<std::optional<int64_t>> prompt_header = ParsePromptTokensHeader(header);
  if (!prompt_header.ok()) {
    FUZZ_CHECK(IsInputError(prompt_header.status()));
  } else if (prompt_header->has_value()) {
    FUZZ_CHECK(InTokenRange(**prompt_header));
  }
  const std::optional<int64_t> header_tokens =
      prompt_header.ok() ? *prompt_header : std::optional<int64_t>();

  agentkv::StatusOr<ClientRequest> request = ParseClientRequest(route, std::string(body));
  if (!request.ok()) {
    FUZZ_CHECK(IsInputError(request.status()));
    return 0;
  }
  if (request->max_new_tokens.has_value()) FUZZ_CHECK(InTokenRange(*request->max_new_tokens));
  FUZZ_CHECK(request->prompt_text_bytes >= 0);
  if (request->prompt_token_ids.has_value()) FUZZ_CHECK(*request->prompt_token_ids >= 0);

  // The reservation is bounded whatever the options, at their limits too.
  for (const std::optional<int64_t> cap : {std::optional<int64_t>(), std::optional<int64_t>(1),
                                           std::optional<int64_t>(agentkv::kMaxTokens)}) {
    for (const int64_t default_max : {int64_t{0}, int64_t{4096}, agentkv::kMaxTokens}) {
      FUZZ_CHECK(
          InTokenRange(EstimateReservationTokens(*request, header_tokens, cap, default_max)));
    }
  }
  if (const std::optional<int64_t> prompt = ExactPromptTokens(*request, header_tokens)) {
    for (const int64_t context : {int64_t{1}, int64_t{4096}, agentkv::kMaxTokens}) {
      const agentkv::Status fits = CheckContextLength(context, *prompt, request->max_new_tokens);
      FUZZ_CHECK(fits.ok() || fits.code() == StatusCode::kInvalidArgument);
      if (*prompt >= context) FUZZ_CHECK(!fits.ok());
    }
  }

  // Forwarding: the gateway's members are set, nothing else the parser reads changes.
  ForwardEdits edits;
  edits.rid = "gw-rid:0";
  edits.session_id = "session \"x\"";
  edits.parent_session = "parent";
  agentkv::StatusOr<std::string> forwarded = BuildForwardBody(request->body, edits);
  FUZZ_CHECK(forwarded.ok());
  if (route == GatewayRoute::kGenerate && request->has_session_params) return 0;
  edits.parent_session.reset();
  forwarded = BuildForwardBody(request->body, edits);
  FUZZ_CHECK(forwarded.ok());
  agentkv::StatusOr<ClientRequest> again = ParseClientRequest(route, *forwarded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->rid == edits.rid);
  FUZZ_CHECK(again->session_id == edits.session_id);
  FUZZ_CHECK(again->max_new_tokens == request->max_new_tokens);
  FUZZ_CHECK(again->prompt_token_ids == request->prompt_token_ids);
  FUZZ_CHECK(again->prompt_text_bytes == request->prompt_text_bytes);
  FUZZ_CHECK(again->stream == request->stream);
  return 0;
}
