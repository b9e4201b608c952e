#include "agentkv/protocol/generate.h"

#include <boost/json/monotonic_resource.hpp>
#include <utility>

// Invariants: a successful parse has exactly one of text/input_ids set, `raw` equal to the
// input bytes, and sampling parameters inside the ranges SGLang's SamplingParams.verify()
// accepts. Every failure is a Status naming the JSON path of the offending field.

namespace agentkv::protocol {
namespace {

namespace json = boost::json;

constexpr std::string_view kBatchUnsupported = "batch requests are not supported";

Status ReadTokenIds(const json::value& value, std::string_view path, size_t max_count,
                    std::vector<int64_t>* out) {
  const json::array* array = value.if_array();
  if (array == nullptr) return InvalidArgumentError(std::string(path) + ": expected a list");
  if (array->size() > max_count) {
    return ResourceExhaustedError(std::string(path) + ": " + std::to_string(array->size()) +
                                  " entries, over the limit of " + std::to_string(max_count));
  }
  out->clear();
  out->reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    const std::optional<int64_t> id = AsInt64((*array)[i]);
    if (!id || *id < 0) {
      return InvalidArgumentError(IndexPath(path, i) + ": expected a non-negative integer");
    }
    out->push_back(*id);
  }
  return Status::Ok();
}

Status ReadSamplingParams(const json::object& object, size_t max_ids, SamplingParams* out) {
  constexpr std::string_view kPath = "sampling_params";
  AGENTKV_RETURN_IF_ERROR(ReadNonNegativeInt64(
      object, "max_new_tokens", JoinPath(kPath, "max_new_tokens"), &out->max_new_tokens));
  AGENTKV_RETURN_IF_ERROR(
      ReadOptionalDouble(object, "temperature", JoinPath(kPath, "temperature"), &out->temperature));
  if (out->temperature && *out->temperature < 0) {
    return InvalidArgumentError("sampling_params.temperature: expected a non-negative number");
  }
  AGENTKV_RETURN_IF_ERROR(
      ReadOptionalDouble(object, "top_p", JoinPath(kPath, "top_p"), &out->top_p));
  if (out->top_p && !(*out->top_p > 0 && *out->top_p <= 1)) {
    return InvalidArgumentError("sampling_params.top_p: expected a number in (0, 1]");
  }
  AGENTKV_RETURN_IF_ERROR(ReadInt64(object, "top_k", JoinPath(kPath, "top_k"), &out->top_k));
  if (out->top_k < 1 && out->top_k != -1) {
    return InvalidArgumentError("sampling_params.top_k: expected -1 or a positive integer");
  }
  if (const json::value* stop = FindNonNull(object, "stop")) {
    out->stop.clear();
    if (const json::string* s = stop->if_string()) {
      out->stop.emplace_back(s->data(), s->size());
    } else if (const json::array* list = stop->if_array()) {
      for (size_t i = 0; i < list->size(); ++i) {
        const json::string* entry = (*list)[i].if_string();
        if (entry == nullptr) {
          return InvalidArgumentError(IndexPath("sampling_params.stop", i) + ": expected a string");
        }
        out->stop.emplace_back(entry->data(), entry->size());
      }
    } else {
      return InvalidArgumentError("sampling_params.stop: expected a string or a list of strings");
    }
  }
  if (const json::value* ids = FindNonNull(object, "stop_token_ids")) {
    AGENTKV_RETURN_IF_ERROR(
        ReadTokenIds(*ids, "sampling_params.stop_token_ids", max_ids, &out->stop_token_ids));
  }
  AGENTKV_RETURN_IF_ERROR(
      ReadBool(object, "ignore_eos", JoinPath(kPath, "ignore_eos"), &out->ignore_eos));
  AGENTKV_RETURN_IF_ERROR(ReadNonNegativeInt64(
      object, "min_new_tokens", JoinPath(kPath, "min_new_tokens"), &out->min_new_tokens));
  if (out->min_new_tokens > out->max_new_tokens) {
    return InvalidArgumentError(
        "sampling_params.min_new_tokens: expected at most max_new_tokens (" +
        std::to_string(out->max_new_tokens) + ")");
  }
  return Status::Ok();
}

// Rejects the batch forms of GenerateReqInput before any single-request field is read.
Status RejectBatch(const json::object& object) {
  for (const std::string_view key : {"rid", "sampling_params", "return_logprob"}) {
    const json::value* value = FindNonNull(object, key);
    if (value != nullptr && value->is_array())
      return InvalidArgumentError(std::string(kBatchUnsupported));
  }
  if (const json::value* text = FindNonNull(object, "text"); text != nullptr && text->is_array()) {
    return InvalidArgumentError(std::string(kBatchUnsupported));
  }
  if (const json::value* ids = FindNonNull(object, "input_ids")) {
    if (const json::array* list = ids->if_array();
        list != nullptr && !list->empty() && (*list)[0].is_array()) {
      return InvalidArgumentError(std::string(kBatchUnsupported));
    }
  }
  return Status::Ok();
}

Status ReadPrompt(const json::object& object, const ParseLimits& limits, GenerateRequest* out) {
  const json::value* text = FindNonNull(object, "text");
  const json::value* ids = FindNonNull(object, "input_ids");
  const json::value* embeds = FindNonNull(object, "input_embeds");
  const int given = (text != nullptr) + (ids != nullptr) + (embeds != nullptr);
  if (given == 0) {
    return InvalidArgumentError("one of text, input_ids or input_embeds is required");
  }
  if (given > 1) {
    return InvalidArgumentError("only one of text, input_ids or input_embeds may be given");
  }
  if (embeds != nullptr) return InvalidArgumentError("input_embeds: not supported");
  if (text != nullptr) {
    const json::string* s = text->if_string();
    if (s == nullptr) return InvalidArgumentError("text: expected a string");
    out->text.emplace(s->data(), s->size());
    return Status::Ok();
  }
  std::vector<int64_t> tokens;
  AGENTKV_RETURN_IF_ERROR(ReadTokenIds(*ids, "input_ids", limits.max_input_ids, &tokens));
  out->input_ids = std::move(tokens);
  return Status::Ok();
}

}  // namespace

JsonLimits JsonLimitsFor(const ParseLimits& limits) {
  return JsonLimits{.max_bytes = limits.max_body_bytes, .max_depth = limits.max_depth};
}

StatusOr<GenerateRequest> ParseGenerateRequest(std::string_view body, const ParseLimits& limits) {
  // The DOM lives only for this call; a monotonic arena makes building and dropping it cheap.
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(
      const json::value document,
      ParseJson(body, JsonLimitsFor(limits), "generate request", json::storage_ptr(&arena)));
  const json::object* object = document.if_object();
  if (object == nullptr) {
    if (document.is_array()) return InvalidArgumentError(std::string(kBatchUnsupported));
    return InvalidArgumentError("generate request: expected a JSON object");
  }
  AGENTKV_RETURN_IF_ERROR(RejectBatch(*object));

  GenerateRequest request;
  AGENTKV_RETURN_IF_ERROR(ReadOptionalString(*object, "rid", "rid", &request.rid));
  AGENTKV_RETURN_IF_ERROR(ReadPrompt(*object, limits, &request));
  AGENTKV_RETURN_IF_ERROR(
      ReadOptionalString(*object, "session_id", "session_id", &request.session_id));
  if (const json::value* params = FindNonNull(*object, "session_params")) {
    if (!params->is_object()) return InvalidArgumentError("session_params: expected an object");
    request.has_session_params = true;
  }
  if (request.session_id && request.has_session_params) {
    return InvalidArgumentError("session_id cannot be combined with session_params");
  }
  if (const json::value* params = FindNonNull(*object, "sampling_params")) {
    AGENTKV_ASSIGN_OR_RETURN(const json::object* params_object,
                             ExpectObject(*params, "sampling_params"));
    AGENTKV_RETURN_IF_ERROR(
        ReadSamplingParams(*params_object, limits.max_input_ids, &request.sampling_params));
  }
  AGENTKV_RETURN_IF_ERROR(ReadBool(*object, "stream", "stream", &request.stream));
  AGENTKV_RETURN_IF_ERROR(
      ReadBool(*object, "return_logprob", "return_logprob", &request.return_logprob));
  AGENTKV_RETURN_IF_ERROR(ReadOptionalInt64(*object, "priority", "priority", &request.priority));
  if (const json::value* parent = object->if_contains(kParentSessionField)) {
    request.has_parent_session_field = true;
    if (const json::string* name = parent->if_string()) {
      request.parent_session = std::string(name->data(), name->size());
    }
  }
  AGENTKV_RETURN_IF_ERROR(ReadOptionalString(*object, kPauseField, kPauseField, &request.pause));
  for (const char* key : {"cache_salt", "extra_key"}) {
    std::optional<std::string> part;
    AGENTKV_RETURN_IF_ERROR(ReadOptionalString(*object, key, key, &part));
    if (part.has_value()) request.cache_namespace += *part;
  }
  request.raw.assign(body.data(), body.size());
  return request;
}

}  // namespace agentkv::protocol
