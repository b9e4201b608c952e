#include "agentkv/load/live_request.h"

#include <algorithm>
#include <boost/json.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "agentkv/protocol/generate_response.h"
#include "agentkv/protocol/pause_hint.h"

namespace agentkv::load {
namespace {

namespace json = boost::json;

constexpr std::string_view kJson = "application/json";

// `rest` serialized with the member `key`: `ids` first. The ids are written straight into the
// body (a prompt is thousands of them, and a json::array of them costs twice the time).
std::string WithIdsFirst(std::string_view key, const std::vector<int64_t>& ids,
                         const json::object& rest) {
  const std::string others = json::serialize(rest);
  // Written in place: at most 20 digits, a sign and a comma per id.
  std::string body(key.size() + 6 + ids.size() * 22 + others.size(), '\0');
  char* out = body.data();
  const auto put = [&out](std::string_view text) {
    out = std::copy(text.begin(), text.end(), out);
  };
  put("{\"");
  put(key);
  put("\":[");
  char* const end = body.data() + body.size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) *out++ = ',';
    out = std::to_chars(out, end, ids[i]).ptr;
  }
  *out++ = ']';
  // `others` is "{...}": its members follow the ids.
  if (others.size() > 2) {
    *out++ = ',';
    put(std::string_view(others).substr(1));
  } else {
    *out++ = '}';
  }
  body.resize(static_cast<size_t>(out - body.data()));
  return body;
}

// The integer `key` names, when it is a number that fits int64 (a server's counts are input:
// a double past the range, or NaN, is no count).
std::optional<int64_t> IntAt(const json::object& object, std::string_view key) {
  const json::value* v = object.if_contains(key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) {
    const uint64_t u = v->as_uint64();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  const double d = v->as_double();
  // 2^62: well inside int64, far past any count.
  if (!std::isfinite(d) || std::fabs(d) > 4.6e18) return std::nullopt;
  return static_cast<int64_t>(d);
}

}  // namespace

std::string_view LoadApiName(LoadApi api) {
  switch (api) {
    case LoadApi::kGenerate:
      return "generate";
    case LoadApi::kCompletions:
      return "completions";
    case LoadApi::kChat:
      return "chat";
  }
  return "generate";
}

std::optional<LoadApi> ParseLoadApi(std::string_view name) {
  for (LoadApi api : {LoadApi::kGenerate, LoadApi::kCompletions, LoadApi::kChat}) {
    if (LoadApiName(api) == name) return api;
  }
  return std::nullopt;
}

std::string SpellTokens(const std::vector<int64_t>& ids) {
  constexpr std::string_view kDigits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string text;
  text.reserve(ids.size() * 4);
  for (int64_t id : ids) {
    const uint64_t v = static_cast<uint64_t>(id) % (36 * 36 * 36);
    text.push_back(' ');
    text.push_back(kDigits[v / (36 * 36)]);
    text.push_back(kDigits[(v / 36) % 36]);
    text.push_back(kDigits[v % 36]);
  }
  return text;
}

HttpCall BuildCall(const WireRequest& request) {
  HttpCall call;
  json::object body;
  // The prompt's ids, when it is sent as ids, and under which member.
  std::string_view ids_key;
  if (request.api == LoadApi::kGenerate) {
    call.target = "/generate";
    ids_key = "input_ids";
    // ignore_eos: the recorded output length, not a model's choice to stop early.
    body["sampling_params"] =
        json::object{{"max_new_tokens", request.max_new_tokens}, {"ignore_eos", true}};
  } else {
    call.target = request.api == LoadApi::kChat ? "/v1/chat/completions" : "/v1/completions";
    body["model"] = request.model;
    if (request.api == LoadApi::kChat) {
      body["messages"] =
          json::array{json::object{{"role", "user"}, {"content", SpellTokens(request.prompt)}}};
    } else {
      ids_key = "prompt";
    }
    body["max_tokens"] = request.max_new_tokens;
    body["ignore_eos"] = true;
    body["stream_options"] = json::object{{"include_usage", true}};
  }
  body["stream"] = true;
  body["rid"] = request.rid;
  if (request.session.has_value()) body["session_id"] = *request.session;
  call.body = ids_key.empty() ? json::serialize(body) : WithIdsFirst(ids_key, request.prompt, body);

  call.headers.emplace_back("Content-Type", kJson);
  if (request.routing_key.has_value()) {
    call.headers.emplace_back("X-SMG-Routing-Key", *request.routing_key);
  }
  if (request.pause.has_value()) {
    call.headers.emplace_back(std::string(protocol::kPauseHeader),
                              std::string(PauseKindName(*request.pause)));
  }
  if (request.parent_session.has_value()) {
    call.headers.emplace_back("X-Agentkv-Parent-Session", *request.parent_session);
    if (request.parent_signature.has_value()) {
      call.headers.emplace_back("X-Agentkv-Parent-Signature", *request.parent_signature);
    }
  }
  if (request.retain) call.headers.emplace_back("X-Agentkv-Session-Retain", "1");
  return call;
}

std::string SessionCloseTarget(std::string_view session) {
  return "/v1/sessions/" + boost::urls::encode(session, boost::urls::unreserved_chars) + "/close";
}

bool StreamReader::ReadErrorEvent(std::string_view data) {
  std::optional<std::string> message = protocol::ParseErrorMessage(data);
  if (!message.has_value()) return false;
  outcome_.error = std::move(*message);
  // The status the error carries (SGLang's and OpenAI's stream errors both name it `code`).
  boost::system::error_code ec;
  const json::value event = json::parse(data, ec);
  if (!ec && event.is_object()) {
    if (const json::value* error = event.get_object().if_contains("error");
        error != nullptr && error->is_object()) {
      if (std::optional<int64_t> code = IntAt(error->get_object(), "code")) {
        outcome_.error_code = static_cast<int>(std::clamp<int64_t>(*code, 0, 999));
      }
    }
  }
  return true;
}

bool StreamReader::Feed(std::string_view bytes) {
  // The parser reads every byte, also after a malformed event, so that done() does not depend on
  // where the stream was cut.
  const std::vector<std::string> events = parser_.Feed(bytes);
  bool output = false;
  for (const std::string& data : events) {
    if (!status_.ok()) break;
    const bool carried =
        api_ == LoadApi::kGenerate ? ReadGenerateEvent(data) : ReadOpenAiEvent(data);
    if (carried) ++outcome_.output_events;
    output = output || carried;
  }
  if (status_.ok() && !parser_.status().ok()) status_ = parser_.status();
  if (output) outcome_.saw_output = true;
  return output;
}

bool StreamReader::ReadGenerateEvent(std::string_view data) {
  if (ReadErrorEvent(data)) return false;
  StatusOr<protocol::GenerateResponse> event = protocol::ParseGenerateResponse(data);
  if (!event.ok()) {
    status_ = event.status();
    return false;
  }
  const protocol::MetaInfo& meta = event->meta_info;
  const int64_t before = static_cast<int64_t>(outcome_.output_ids.size());
  // SGLang streams the cumulative output by default and the new ids alone with
  // --incremental-streaming-output: the completion count says which.
  if (static_cast<int64_t>(event->output_ids.size()) + before == meta.completion_tokens &&
      before > 0) {
    outcome_.output_ids.insert(outcome_.output_ids.end(), event->output_ids.begin(),
                               event->output_ids.end());
  } else if (event->output_ids.size() >= outcome_.output_ids.size()) {
    outcome_.output_ids = std::move(event->output_ids);
  }
  outcome_.prompt_tokens = meta.prompt_tokens;
  outcome_.completion_tokens = meta.completion_tokens;
  outcome_.cached_tokens = meta.cached_tokens;
  if (meta.cached_tokens_details.has_value()) {
    outcome_.cached_device_tokens = meta.cached_tokens_details->device;
    outcome_.cached_host_tokens = meta.cached_tokens_details->host;
  }
  if (meta.finish_reason.has_value() &&
      meta.finish_reason->type == protocol::FinishReason::Type::kAbort) {
    outcome_.error = "aborted: " + meta.finish_reason->message;
  }
  return meta.completion_tokens > before;
}

bool StreamReader::ReadOpenAiEvent(std::string_view data) {
  if (ReadErrorEvent(data)) return false;
  boost::system::error_code ec;
  const json::value event = json::parse(data, ec);
  if (ec || !event.is_object()) {
    status_ = InvalidArgumentError("a streamed event is not a JSON object: " +
                                   std::string(data.substr(0, 200)));
    return false;
  }
  const json::object& object = event.get_object();
  bool output = false;
  if (const json::value* choices = object.if_contains("choices");
      choices != nullptr && choices->is_array()) {
    for (const json::value& choice : choices->get_array()) {
      if (!choice.is_object()) continue;
      const json::object& c = choice.get_object();
      const json::value* text = c.if_contains("text");
      if (const json::value* delta = c.if_contains("delta");
          delta != nullptr && delta->is_object()) {
        text = delta->get_object().if_contains("content");
      }
      if (text != nullptr && text->is_string() && !text->get_string().empty()) output = true;
    }
  }
  if (const json::value* usage = object.if_contains("usage");
      usage != nullptr && usage->is_object()) {
    const json::object& u = usage->get_object();
    outcome_.prompt_tokens = IntAt(u, "prompt_tokens");
    outcome_.completion_tokens = IntAt(u, "completion_tokens");
    if (const json::value* details = u.if_contains("prompt_tokens_details");
        details != nullptr && details->is_object()) {
      outcome_.cached_tokens = IntAt(details->get_object(), "cached_tokens");
    }
  }
  return output;
}

}  // namespace agentkv::load
