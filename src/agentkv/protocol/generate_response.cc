#include "agentkv/protocol/generate_response.h"

#include <boost/json/monotonic_resource.hpp>
#include <limits>
#include <utility>

#include "agentkv/protocol/json_util.h"

// Invariants: SerializeGenerateResponse output always parses back with ParseGenerateResponse
// to an equal value (doubles print as their shortest round-trip text; NaN logprobs excepted).

namespace agentkv::protocol {
namespace {

namespace json = boost::json;

void WriteFinishReason(const FinishReason& reason, JsonWriter& w) {
  w.BeginObject().Key("type").String(FinishReasonTypeName(reason.type));
  switch (reason.type) {
    case FinishReason::Type::kStop:
      w.Key("matched");
      if (reason.matched_token) {
        w.Int(*reason.matched_token);
      } else if (reason.matched_string) {
        w.String(*reason.matched_string);
      } else {
        w.Null();
      }
      break;
    case FinishReason::Type::kLength:
      w.Key("length").Int(reason.length);
      break;
    case FinishReason::Type::kAbort:
      w.Key("message").String(reason.message);
      w.Key("status_code");
      if (reason.status_code) {
        w.Int(*reason.status_code);
      } else {
        w.Null();
      }
      w.Key("err_type");
      if (reason.err_type) {
        w.String(*reason.err_type);
      } else {
        w.Null();
      }
      break;
  }
  w.EndObject();
}

Status ReadFinishReason(const json::value& value, FinishReason* out) {
  constexpr std::string_view kPath = "meta_info.finish_reason";
  AGENTKV_ASSIGN_OR_RETURN(const json::object* object, ExpectObject(value, kPath));
  std::string type;
  AGENTKV_RETURN_IF_ERROR(ReadString(*object, "type", JoinPath(kPath, "type"), &type));
  FinishReason reason;
  if (type == "stop") {
    reason.type = FinishReason::Type::kStop;
    if (const json::value* matched = FindNonNull(*object, "matched")) {
      if (const json::string* s = matched->if_string()) {
        reason.matched_string.emplace(s->data(), s->size());
      } else if (const std::optional<int64_t> token = AsInt64(*matched)) {
        reason.matched_token = *token;
      } else {
        return InvalidArgumentError(std::string(kPath) +
                                    ".matched: expected a token id or a string");
      }
    }
  } else if (type == "length") {
    reason.type = FinishReason::Type::kLength;
    AGENTKV_RETURN_IF_ERROR(
        ReadInt64(*object, "length", JoinPath(kPath, "length"), &reason.length));
  } else if (type == "abort") {
    reason.type = FinishReason::Type::kAbort;
    AGENTKV_RETURN_IF_ERROR(
        ReadString(*object, "message", JoinPath(kPath, "message"), &reason.message));
    std::optional<int64_t> status_code;
    AGENTKV_RETURN_IF_ERROR(
        ReadOptionalInt64(*object, "status_code", JoinPath(kPath, "status_code"), &status_code));
    if (status_code) {
      if (*status_code < 0 || *status_code > 999) {
        return InvalidArgumentError(std::string(kPath) + ".status_code: expected an HTTP status");
      }
      reason.status_code = static_cast<int>(*status_code);
    }
    AGENTKV_RETURN_IF_ERROR(
        ReadOptionalString(*object, "err_type", JoinPath(kPath, "err_type"), &reason.err_type));
  } else {
    return InvalidArgumentError(std::string(kPath) + ".type: unknown finish reason \"" + type +
                                "\"");
  }
  *out = std::move(reason);
  return Status::Ok();
}

Status ReadLogprobs(const json::value& value, std::vector<OutputTokenLogprob>* out) {
  constexpr std::string_view kPath = "meta_info.output_token_logprobs";
  const json::array* entries = value.if_array();
  if (entries == nullptr) return InvalidArgumentError(std::string(kPath) + ": expected a list");
  out->reserve(entries->size());
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string path = IndexPath(kPath, i);
    const json::array* entry = (*entries)[i].if_array();
    if (entry == nullptr || entry->size() < 2 || entry->size() > 3) {
      return InvalidArgumentError(path + ": expected [logprob, token_id, text_or_null]");
    }
    OutputTokenLogprob logprob;
    if ((*entry)[0].is_null()) {
      logprob.logprob = std::numeric_limits<double>::quiet_NaN();
    } else if (const std::optional<double> d = AsDouble((*entry)[0])) {
      logprob.logprob = *d;
    } else {
      return InvalidArgumentError(path + "[0]: expected a number");
    }
    const std::optional<int64_t> token = AsInt64((*entry)[1]);
    if (!token) return InvalidArgumentError(path + "[1]: expected an integer");
    logprob.token_id = *token;
    if (entry->size() == 3 && !(*entry)[2].is_null()) {
      const json::string* text = (*entry)[2].if_string();
      if (text == nullptr) return InvalidArgumentError(path + "[2]: expected a string or null");
      logprob.text.emplace(text->data(), text->size());
    }
    out->push_back(std::move(logprob));
  }
  return Status::Ok();
}

Status ReadMetaInfo(const json::object& object, MetaInfo* out) {
  constexpr std::string_view kPath = "meta_info";
  AGENTKV_RETURN_IF_ERROR(ReadString(object, "id", JoinPath(kPath, "id"), &out->id));
  if (const json::value* reason = FindNonNull(object, "finish_reason")) {
    FinishReason parsed;
    AGENTKV_RETURN_IF_ERROR(ReadFinishReason(*reason, &parsed));
    out->finish_reason = std::move(parsed);
  }
  AGENTKV_RETURN_IF_ERROR(
      ReadInt64(object, "prompt_tokens", JoinPath(kPath, "prompt_tokens"), &out->prompt_tokens));
  AGENTKV_RETURN_IF_ERROR(ReadInt64(object, "completion_tokens",
                                    JoinPath(kPath, "completion_tokens"), &out->completion_tokens));
  AGENTKV_RETURN_IF_ERROR(
      ReadInt64(object, "cached_tokens", JoinPath(kPath, "cached_tokens"), &out->cached_tokens));
  if (const json::value* details = FindNonNull(object, "cached_tokens_details")) {
    AGENTKV_ASSIGN_OR_RETURN(const json::object* details_object,
                             ExpectObject(*details, "meta_info.cached_tokens_details"));
    CachedTokensDetails parsed;
    AGENTKV_RETURN_IF_ERROR(ReadInt64(*details_object, "device",
                                      "meta_info.cached_tokens_details.device", &parsed.device));
    AGENTKV_RETURN_IF_ERROR(
        ReadInt64(*details_object, "host", "meta_info.cached_tokens_details.host", &parsed.host));
    AGENTKV_RETURN_IF_ERROR(ReadOptionalInt64(
        *details_object, "storage", "meta_info.cached_tokens_details.storage", &parsed.storage));
    out->cached_tokens_details = parsed;
  }
  AGENTKV_RETURN_IF_ERROR(
      ReadDouble(object, "e2e_latency", JoinPath(kPath, "e2e_latency"), &out->e2e_latency));
  AGENTKV_RETURN_IF_ERROR(
      ReadOptionalDouble(object, "queue_time", JoinPath(kPath, "queue_time"), &out->queue_time));
  if (const json::value* logprobs = FindNonNull(object, "output_token_logprobs")) {
    std::vector<OutputTokenLogprob> parsed;
    AGENTKV_RETURN_IF_ERROR(ReadLogprobs(*logprobs, &parsed));
    out->output_token_logprobs = std::move(parsed);
  }
  return Status::Ok();
}

}  // namespace

FinishReason FinishReason::Stop(int64_t matched_token) {
  FinishReason reason;
  reason.type = Type::kStop;
  reason.matched_token = matched_token;
  return reason;
}

FinishReason FinishReason::Stop(std::string matched_string) {
  FinishReason reason;
  reason.type = Type::kStop;
  reason.matched_string = std::move(matched_string);
  return reason;
}

FinishReason FinishReason::Length(int64_t length) {
  FinishReason reason;
  reason.type = Type::kLength;
  reason.length = length;
  return reason;
}

FinishReason FinishReason::Abort(std::string message, std::optional<int> status_code,
                                 std::optional<std::string> err_type) {
  FinishReason reason;
  reason.type = Type::kAbort;
  reason.message = std::move(message);
  reason.status_code = status_code;
  reason.err_type = std::move(err_type);
  return reason;
}

std::string_view FinishReasonTypeName(FinishReason::Type type) {
  switch (type) {
    case FinishReason::Type::kStop:
      return "stop";
    case FinishReason::Type::kLength:
      return "length";
    case FinishReason::Type::kAbort:
      return "abort";
  }
  return "stop";
}

std::string SerializeGenerateResponse(const GenerateResponse& response) {
  JsonWriter w;
  w.BeginObject().Key("text").String(response.text);
  w.Key("output_ids").BeginArray();
  for (const int64_t id : response.output_ids) w.Int(id);
  w.EndArray();
  const MetaInfo& meta = response.meta_info;
  w.Key("meta_info").BeginObject().Key("id").String(meta.id);
  w.Key("finish_reason");
  if (meta.finish_reason) {
    WriteFinishReason(*meta.finish_reason, w);
  } else {
    w.Null();
  }
  w.Key("prompt_tokens").Int(meta.prompt_tokens);
  w.Key("completion_tokens").Int(meta.completion_tokens);
  w.Key("cached_tokens").Int(meta.cached_tokens);
  if (meta.cached_tokens_details) {
    w.Key("cached_tokens_details").BeginObject();
    w.Key("device").Int(meta.cached_tokens_details->device);
    w.Key("host").Int(meta.cached_tokens_details->host);
    if (meta.cached_tokens_details->storage) {
      w.Key("storage").Int(*meta.cached_tokens_details->storage);
    }
    w.EndObject();
  }
  w.Key("e2e_latency").Double(meta.e2e_latency);
  if (meta.queue_time) w.Key("queue_time").Double(*meta.queue_time);
  if (meta.output_token_logprobs) {
    w.Key("output_token_logprobs").BeginArray();
    for (const OutputTokenLogprob& entry : *meta.output_token_logprobs) {
      w.BeginArray().Double(entry.logprob).Int(entry.token_id);
      if (entry.text) {
        w.String(*entry.text);
      } else {
        w.Null();
      }
      w.EndArray();
    }
    w.EndArray();
  }
  w.EndObject().EndObject();
  return w.Take();
}

StatusOr<GenerateResponse> ParseGenerateResponse(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(
      const json::value document,
      ParseJsonObject(body, JsonLimits{}, "generate response", json::storage_ptr(&arena)));
  const json::object* object = &document.as_object();
  if (object->contains("error") && !object->contains("meta_info")) {
    const std::optional<std::string> message = ParseErrorMessage(body);
    return InvalidArgumentError("generate response is an error: " + message.value_or("?"));
  }
  GenerateResponse response;
  AGENTKV_RETURN_IF_ERROR(ReadString(*object, "text", "text", &response.text));
  if (const json::value* ids = FindNonNull(*object, "output_ids")) {
    const json::array* list = ids->if_array();
    if (list == nullptr) return InvalidArgumentError("output_ids: expected a list");
    response.output_ids.reserve(list->size());
    for (size_t i = 0; i < list->size(); ++i) {
      const std::optional<int64_t> id = AsInt64((*list)[i]);
      if (!id) return InvalidArgumentError(IndexPath("output_ids", i) + ": expected an integer");
      response.output_ids.push_back(*id);
    }
  }
  if (const json::value* meta = FindNonNull(*object, "meta_info")) {
    AGENTKV_ASSIGN_OR_RETURN(const json::object* meta_object, ExpectObject(*meta, "meta_info"));
    AGENTKV_RETURN_IF_ERROR(ReadMetaInfo(*meta_object, &response.meta_info));
  }
  return response;
}

std::optional<std::string> ParseErrorMessage(std::string_view body) {
  json::monotonic_resource arena;
  StatusOr<json::value> document =
      ParseJson(body, JsonLimits{}, "error body", json::storage_ptr(&arena));
  if (!document.ok()) return std::nullopt;
  const json::object* object = document->if_object();
  if (object == nullptr) return std::nullopt;
  if (const json::value* error = FindNonNull(*object, "error")) {
    if (const json::string* s = error->if_string()) return std::string(s->data(), s->size());
    if (const json::object* nested = error->if_object()) {
      if (const json::value* message = FindNonNull(*nested, "message")) {
        if (const json::string* s = message->if_string()) {
          return std::string(s->data(), s->size());
        }
      }
    }
    return std::nullopt;
  }
  if (const json::value* message = FindNonNull(*object, "message")) {
    if (const json::string* s = message->if_string()) return std::string(s->data(), s->size());
  }
  return std::nullopt;
}

}  // namespace agentkv::protocol
