// The error bodies agentkv's servers answer with: one shape per API family, chosen by the
// request's path, so that a client of each family reads every agentkv error the way it reads
// its own server's.
//
//   OpenAI routes (`/v1/...`), as SGLang's OpenAI layer (`ErrorResponse`) and the OpenAI API
//   write them, flat:  {"object":"error","message":M,"type":T,"param":null,"code":STATUS}
//   every other route (SGLang's native API and agentkv's own), as SGLang's `/generate` writes
//   them plus the status:  {"error":{"message":M,"code":STATUS}}
//
// `type` is the name the OpenAI SDKs give the status's exception class (BadRequestError for
// 400, NotFoundError for 404, RateLimitError for 429, InternalServerError for 5xx, ...), which is
// also what SGLang puts there. Whether such a client retries an error is its own rule unless
// the answer carries kShouldRetryHeader. Pure functions: thread-safe.
#ifndef AGENTKV_NET_ERROR_BODY_H_
#define AGENTKV_NET_ERROR_BODY_H_

#include <string>
#include <string_view>

namespace agentkv::net {

// The API family of a request target (origin-form, query allowed).
enum class ApiFamily {
  kOpenAi,  // "/v1" and everything under "/v1/"
  kSglang,  // every other path
};

ApiFamily ApiFamilyOf(std::string_view target);

// The response header the OpenAI SDKs (openai-python's `_should_retry`, and every SDK generated
// the same way) read before their own retry rule: "true" forces a retry, "false" forbids it;
// without it they retry 408, 409, 429 and every status >= 500 (twice by default, after about
// 0.5 s and 1 s).
inline constexpr std::string_view kShouldRetryHeader = "x-should-retry";

// The OpenAI error type for an HTTP status: "BadRequestError" (400 and any other 4xx without
// its own name), "AuthenticationError" (401), "PermissionDeniedError" (403), "NotFoundError"
// (404), "ConflictError" (409), "UnprocessableEntityError" (422), "RateLimitError" (429),
// "InternalServerError" (500 and any other status).
std::string_view OpenAiErrorType(int status_code);

// {"object":"error","message":<message>,"type":<OpenAiErrorType>,"param":null,"code":<status>}.
std::string OpenAiErrorBody(std::string_view message, int status_code);

// The data of the SSE event an OpenAI stream ends with when the request fails after the
// headers went out, as SGLang's `create_streaming_error_response` writes it: the flat error
// under "error", {"error":{"object":"error","message":...,"type":...,"param":null,"code":...}}.
std::string OpenAiStreamErrorBody(std::string_view message, int status_code);

// {"error":{"message":<message>,"code":<status>}}.
std::string SglangErrorBody(std::string_view message, int status_code);

// The body of `target`'s family: OpenAiErrorBody or SglangErrorBody.
std::string ErrorBodyFor(std::string_view target, std::string_view message, int status_code);

}  // namespace agentkv::net

#endif  // AGENTKV_NET_ERROR_BODY_H_
