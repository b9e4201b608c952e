#include "agentkv/net/error_body.h"

#include <boost/json.hpp>

namespace agentkv::net {

namespace json = boost::json;

ApiFamily ApiFamilyOf(std::string_view target) {
  const std::string_view path = target.substr(0, target.find_first_of("?#"));
  if (path == "/v1" || path.starts_with("/v1/")) return ApiFamily::kOpenAi;
  return ApiFamily::kSglang;
}

std::string_view OpenAiErrorType(int status_code) {
  switch (status_code) {
    case 401:
      return "AuthenticationError";
    case 403:
      return "PermissionDeniedError";
    case 404:
      return "NotFoundError";
    case 409:
      return "ConflictError";
    case 422:
      return "UnprocessableEntityError";
    case 429:
      return "RateLimitError";
    default:
      return status_code >= 400 && status_code < 500 ? "BadRequestError" : "InternalServerError";
  }
}

namespace {

json::object OpenAiError(std::string_view message, int status_code) {
  return json::object{{"object", "error"},
                      {"message", message},
                      {"type", OpenAiErrorType(status_code)},
                      {"param", nullptr},
                      {"code", status_code}};
}

}  // namespace

std::string OpenAiErrorBody(std::string_view message, int status_code) {
  return json::serialize(OpenAiError(message, status_code));
}

std::string OpenAiStreamErrorBody(std::string_view message, int status_code) {
  return json::serialize(json::object{{"error", OpenAiError(message, status_code)}});
}

std::string SglangErrorBody(std::string_view message, int status_code) {
  return json::serialize(
      json::object{{"error", json::object{{"message", message}, {"code", status_code}}}});
}

std::string ErrorBodyFor(std::string_view target, std::string_view message, int status_code) {
  return ApiFamilyOf(target) == ApiFamily::kOpenAi ? OpenAiErrorBody(message, status_code)
                                                   : SglangErrorBody(message, status_code);
}

}  // namespace agentkv::net
