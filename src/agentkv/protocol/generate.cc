#include "agentkv/protocol/generate.h"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/value_stack.hpp>
#include <exception>
#include <limits>
#include <utility>

// Invariants: a successful parse has exactly one of text/input_ids set, `raw` equal to the
// input bytes, and sampling parameters inside the ranges SGLang's SamplingParams.verify()
// accepts. Every failure is a Status naming the JSON path of the offending field.
//
// The body is parsed once, by Boost.JSON's SAX parser with GenerateHandler: every member is
// built into a DOM as boost::json::parse would, except a top-level `input_ids` list, which the
// handler checks and counts entry by entry while it is parsed (a 100,000-id prompt would
// otherwise be 100,000 DOM values built only to be counted). In the DOM such a list is a
// placeholder [k], k indexing GenerateHandler::lists(); every top-level `input_ids` list is
// replaced, so an `input_ids` array in the DOM is always a placeholder, whichever duplicate the
// DOM keeps.

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

// What the handler saw of one top-level `input_ids` list.
struct IdList {
  int64_t count = 0;                 // Entries, whatever their type.
  std::optional<int64_t> first_bad;  // Index of the first entry that is not a valid id.
  bool first_is_list = false;        // Entry 0 is a list: the batch form.
  std::vector<int64_t> ids;          // The ids (kFull only, at most max_count of them).
};

// A basic_parser handler that builds the DOM as Boost.JSON's own handler does, except for
// top-level `input_ids` lists (see the top of this file). Depth and size limits are the
// parser's; the handler keeps O(1) state per list in kSummary mode.
class GenerateHandler {
 public:
  static constexpr size_t max_object_size = json::object::max_size();
  static constexpr size_t max_array_size = json::array::max_size();
  static constexpr size_t max_key_size = json::string::max_size();
  static constexpr size_t max_string_size = json::string::max_size();

  GenerateHandler(json::storage_ptr storage, bool keep_ids, size_t max_ids)
      : keep_ids_(keep_ids), max_ids_(max_ids) {
    stack_.reset(std::move(storage));
  }

  json::value Release() { return stack_.release(); }
  std::vector<IdList> TakeLists() { return std::move(lists_); }

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }

  bool on_object_begin(boost::system::error_code&) {
    if (in_list_) return ListContainerBegin(/*is_list=*/false);
    ++depth_;
    return true;
  }
  bool on_object_end(size_t n, boost::system::error_code&) {
    if (in_list_) return ListContainerEnd();
    --depth_;
    stack_.push_object(n);
    return true;
  }
  bool on_array_begin(boost::system::error_code&) {
    if (in_list_) return ListContainerBegin(/*is_list=*/true);
    if (depth_ == 1 && key_is_input_ids_) {
      // A top-level `input_ids` list: counted, not built.
      in_list_ = true;
      nesting_ = 0;
      list_ = IdList{};
      return true;
    }
    ++depth_;
    return true;
  }
  bool on_array_end(size_t n, boost::system::error_code&) {
    if (in_list_) {
      if (nesting_ > 0) return ListContainerEnd();
      in_list_ = false;
      stack_.push_int64(static_cast<int64_t>(lists_.size()));
      stack_.push_array(1);
      lists_.push_back(std::move(list_));
      return true;
    }
    --depth_;
    stack_.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, size_t, boost::system::error_code&) {
    if (in_list_) return true;
    stack_.push_chars(s);
    if (depth_ == 1) key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, size_t, boost::system::error_code&) {
    if (in_list_) return true;
    stack_.push_key(s);
    if (depth_ == 1) {
      key_.append(s.data(), s.size());
      key_is_input_ids_ = key_ == "input_ids";
      key_.clear();
    }
    return true;
  }
  bool on_string_part(json::string_view s, size_t, boost::system::error_code&) {
    if (in_list_) return true;
    stack_.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, size_t, boost::system::error_code&) {
    if (in_list_) return ListEntry(std::nullopt);
    stack_.push_string(s);
    return true;
  }
  bool on_number_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_int64(int64_t i, json::string_view, boost::system::error_code&) {
    if (in_list_) return ListEntry(i >= 0 ? std::optional<int64_t>(i) : std::nullopt);
    stack_.push_int64(i);
    return true;
  }
  bool on_uint64(uint64_t u, json::string_view, boost::system::error_code&) {
    if (in_list_) {
      return ListEntry(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                           ? std::optional<int64_t>(static_cast<int64_t>(u))
                           : std::nullopt);
    }
    stack_.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view, boost::system::error_code&) {
    if (in_list_) return ListEntry(std::nullopt);
    stack_.push_double(d);
    return true;
  }
  bool on_bool(bool b, boost::system::error_code&) {
    if (in_list_) return ListEntry(std::nullopt);
    stack_.push_bool(b);
    return true;
  }
  bool on_null(boost::system::error_code&) {
    if (in_list_) return ListEntry(std::nullopt);
    stack_.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(json::string_view, boost::system::error_code&) { return true; }

 private:
  // One entry of the list, or a scalar inside one of its nested entries (ignored). `id` is the
  // entry as a valid token id, or nullopt when it is not one.
  bool ListEntry(std::optional<int64_t> id) {
    if (nesting_ > 0) return true;
    if (!id.has_value() && !list_.first_bad.has_value()) list_.first_bad = list_.count;
    if (id.has_value() && keep_ids_ && list_.ids.size() < max_ids_) list_.ids.push_back(*id);
    ++list_.count;
    return true;
  }
  bool ListContainerBegin(bool is_list) {
    if (nesting_ == 0) {
      if (is_list && list_.count == 0) list_.first_is_list = true;
      ListEntry(std::nullopt);
    }
    ++nesting_;
    return true;
  }
  bool ListContainerEnd() {
    --nesting_;
    return true;
  }

  const bool keep_ids_;
  const size_t max_ids_;
  json::value_stack stack_;
  int depth_ = 0;                  // Open containers outside `input_ids` lists.
  std::string key_;                // The top-level key being read.
  bool key_is_input_ids_ = false;  // The last top-level key was `input_ids`.
  bool in_list_ = false;           // Inside a top-level `input_ids` list.
  int64_t nesting_ = 0;            // Containers open inside that list's entries.
  IdList list_;
  std::vector<IdList> lists_;
};

// The IdList a placeholder in the DOM stands for, or null when `value` is none (a top-level
// `input_ids` that is not a list).
const IdList* ListOf(const json::value& value, const std::vector<IdList>& lists) {
  const json::array* array = value.if_array();
  if (array == nullptr || array->size() != 1 || !(*array)[0].is_int64()) return nullptr;
  const int64_t index = (*array)[0].get_int64();
  if (index < 0 || static_cast<size_t>(index) >= lists.size()) return nullptr;
  return &lists[static_cast<size_t>(index)];
}

Status ReadSamplingParams(const json::object& object, size_t max_ids, SamplingParams* out) {
  AGENTKV_RETURN_IF_ERROR(ReadNonNegativeInt64(
      object, "max_new_tokens", "sampling_params.max_new_tokens", &out->max_new_tokens));
  AGENTKV_RETURN_IF_ERROR(
      ReadOptionalDouble(object, "temperature", "sampling_params.temperature", &out->temperature));
  if (out->temperature && *out->temperature < 0) {
    return InvalidArgumentError("sampling_params.temperature: expected a non-negative number");
  }
  AGENTKV_RETURN_IF_ERROR(
      ReadOptionalDouble(object, "top_p", "sampling_params.top_p", &out->top_p));
  if (out->top_p && !(*out->top_p > 0 && *out->top_p <= 1)) {
    return InvalidArgumentError("sampling_params.top_p: expected a number in (0, 1]");
  }
  AGENTKV_RETURN_IF_ERROR(ReadInt64(object, "top_k", "sampling_params.top_k", &out->top_k));
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
      ReadBool(object, "ignore_eos", "sampling_params.ignore_eos", &out->ignore_eos));
  AGENTKV_RETURN_IF_ERROR(ReadNonNegativeInt64(
      object, "min_new_tokens", "sampling_params.min_new_tokens", &out->min_new_tokens));
  if (out->min_new_tokens > out->max_new_tokens) {
    return InvalidArgumentError(
        "sampling_params.min_new_tokens: expected at most max_new_tokens (" +
        std::to_string(out->max_new_tokens) + ")");
  }
  return Status::Ok();
}

// Rejects the batch forms of GenerateReqInput before any single-request field is read.
Status RejectBatch(const json::object& object, const std::vector<IdList>& lists) {
  for (const std::string_view key : {"rid", "sampling_params", "return_logprob"}) {
    const json::value* value = FindNonNull(object, key);
    if (value != nullptr && value->is_array())
      return InvalidArgumentError(std::string(kBatchUnsupported));
  }
  if (const json::value* text = FindNonNull(object, "text"); text != nullptr && text->is_array()) {
    return InvalidArgumentError(std::string(kBatchUnsupported));
  }
  if (const json::value* ids = FindNonNull(object, "input_ids")) {
    if (const IdList* list = ListOf(*ids, lists); list != nullptr && list->first_is_list) {
      return InvalidArgumentError(std::string(kBatchUnsupported));
    }
  }
  return Status::Ok();
}

// ReadTokenIds for a list the handler read.
Status ReadIdList(const json::value& value, const std::vector<IdList>& lists, size_t max_count,
                  bool keep_ids, GenerateRequest* out) {
  const IdList* list = ListOf(value, lists);
  if (list == nullptr) return InvalidArgumentError("input_ids: expected a list");
  if (static_cast<uint64_t>(list->count) > max_count) {
    return ResourceExhaustedError("input_ids: " + std::to_string(list->count) +
                                  " entries, over the limit of " + std::to_string(max_count));
  }
  if (list->first_bad.has_value()) {
    return InvalidArgumentError(IndexPath("input_ids", static_cast<size_t>(*list->first_bad)) +
                                ": expected a non-negative integer");
  }
  out->input_id_count = list->count;
  if (keep_ids) out->input_ids = list->ids;
  return Status::Ok();
}

Status ReadPrompt(const json::object& object, const std::vector<IdList>& lists,
                  const ParseLimits& limits, bool keep_ids, GenerateRequest* out) {
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
  return ReadIdList(*ids, lists, limits.max_input_ids, keep_ids, out);
}

// Parses `body` with GenerateHandler, failing exactly as ParseJson does.
StatusOr<json::value> ParseWithHandler(std::string_view body, const ParseLimits& limits,
                                       bool keep_ids, json::storage_ptr storage,
                                       std::vector<IdList>* lists) {
  constexpr std::string_view kWhat = "generate request";
  const JsonLimits json_limits = JsonLimitsFor(limits);
  AGENTKV_RETURN_IF_ERROR(CheckJsonSize(body, json_limits, kWhat));
  try {
    json::basic_parser<GenerateHandler> parser(JsonParseOptionsFor(json_limits), std::move(storage),
                                               keep_ids, limits.max_input_ids);
    // As json::stream_parser's write and finish.
    boost::system::error_code ec;
    const size_t consumed = parser.write_some(true, body.data(), body.size(), ec);
    if (ec) return JsonErrorAt(ec, consumed, kWhat);
    if (consumed < body.size()) {
      return JsonErrorAt(json::make_error_code(json::error::extra_data), consumed, kWhat);
    }
    parser.write_some(false, nullptr, 0, ec);
    if (ec) return JsonErrorAt(ec, body.size(), kWhat);
    *lists = parser.handler().TakeLists();
    return parser.handler().Release();
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(std::string(kWhat) + ": out of memory while parsing");
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(kWhat) + ": invalid JSON: " + e.what());
  }
}

}  // namespace

JsonLimits JsonLimitsFor(const ParseLimits& limits) {
  return JsonLimits{.max_bytes = limits.max_body_bytes, .max_depth = limits.max_depth};
}

StatusOr<GenerateRequest> ParseGenerateRequest(std::string_view body, const ParseLimits& limits,
                                               GenerateParseMode mode) {
  const bool full = mode == GenerateParseMode::kFull;
  // The DOM lives only for this call; a monotonic arena (its first 2 KiB on the stack) makes
  // building and dropping it cheap.
  unsigned char first_block[2048];
  json::monotonic_resource arena(first_block, sizeof(first_block));
  std::vector<IdList> lists;
  AGENTKV_ASSIGN_OR_RETURN(const json::value document,
                           ParseWithHandler(body, limits, full, json::storage_ptr(&arena), &lists));
  const json::object* object = document.if_object();
  if (object == nullptr) {
    if (document.is_array()) return InvalidArgumentError(std::string(kBatchUnsupported));
    return InvalidArgumentError("generate request: expected a JSON object");
  }
  AGENTKV_RETURN_IF_ERROR(RejectBatch(*object, lists));

  GenerateRequest request;
  AGENTKV_RETURN_IF_ERROR(ReadOptionalString(*object, "rid", "rid", &request.rid));
  AGENTKV_RETURN_IF_ERROR(ReadPrompt(*object, lists, limits, full, &request));
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
  if (full) request.raw.assign(body.data(), body.size());
  return request;
}

}  // namespace agentkv::protocol
