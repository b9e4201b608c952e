// The OpenAI-compatible routes of the engine emulator: POST /v1/chat/completions and
// /v1/completions, as SGLang serves them, so that agent frameworks speaking the OpenAI API
// (and the agentkv gateway's OpenAI data path) can run against it.
//
// Chat messages are flattened to "role: content\n" lines (an assistant's `tool_calls` written
// after its content) and pseudo-tokenized like `text`. /v1/completions takes `prompt` as a
// string or a list of token ids (one prompt), or a list of strings or of token-id lists (a
// batch, at most kMaxBatchPrompts, one choice per prompt, run as requests "<rid>-<i>").
// `max_tokens` (or `max_completion_tokens`, default 128), `stream`, `stream_options`, `seed`,
// and SGLang's extra fields `rid`, `session_id`, `priority`, `cache_salt` and `extra_key` (the
// prefix cache namespace) are honoured; a chat's `tools` and `tool_choice` decide a tool call
// (openai_tools.h). The body must be sent as application/json (SGLang's
// validate_json_request). Answers and streams: openai_answer.h. Ids are "chatcmpl-" or "cmpl-"
// and 32 hex digits no other engine or run repeats (UniqueIds), or the client's rid. What the
// emulator cannot serve is refused with a 400 naming the field, never dropped: `n` other than 1
// and `logprobs` (it has no model to score tokens with).
#include <boost/json.hpp>
#include <chrono>

#include "agentkv/base/hash.h"
#include "agentkv/base/status.h"
#include "agentkv/net/error_body.h"
#include "agentkv/protocol/generate.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/service/emulator/openai_answer.h"
#include "agentkv/service/emulator/openai_tools.h"

namespace agentkv::service {
namespace {

namespace http = net::http;
namespace json = boost::json;

// The most prompts of one batch completion.
constexpr size_t kMaxBatchPrompts = 1024;

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Refuses, naming the field, what the emulator does not serve: several choices, and log
// probabilities (a chat's `logprobs: true` or `top_logprobs`; a completion's `logprobs: k`).
Status RefuseUnserved(const json::object& body, bool chat) {
  if (const json::value* n = body.if_contains("n"); n != nullptr && !n->is_null()) {
    if (!n->is_int64() || n->as_int64() != 1) {
      return InvalidArgumentError("n: only n = 1 is served (one choice per request), got " +
                                  json::serialize(*n));
    }
  }
  // Off: absent, null, or a chat's `false`; a completion's `logprobs: 0` still asks for them.
  const json::value* logprobs = body.if_contains("logprobs");
  const bool off = logprobs == nullptr || logprobs->is_null() ||
                   (chat && logprobs->is_bool() && !logprobs->as_bool());
  if (!off) {
    return InvalidArgumentError(
        "logprobs: not served by the emulator (it has no model to score "
        "tokens with), got " +
        json::serialize(*logprobs));
  }
  if (const json::value* top = body.if_contains("top_logprobs");
      chat && top != nullptr && !top->is_null()) {
    return InvalidArgumentError("top_logprobs: not served by the emulator, got " +
                                json::serialize(*top));
  }
  return Status::Ok();
}

// A chat's messages as the prompt: "role: content\n" lines (a content list's text parts
// joined), pseudo-tokenized.
Status ParseChatMessages(const json::object& body, GenerateInput& input) {
  const json::value* messages = body.if_contains("messages");
  if (messages == nullptr || !messages->is_array() || messages->as_array().empty()) {
    return InvalidArgumentError("messages: expected a non-empty array of messages");
  }
  std::string text;
  for (const json::value& message : messages->as_array()) {
    const json::object* m = message.if_object();
    const json::value* role = m != nullptr ? m->if_contains("role") : nullptr;
    const json::value* content = m != nullptr ? m->if_contains("content") : nullptr;
    if (role == nullptr || !role->is_string()) {
      return InvalidArgumentError("messages[].role: expected a string");
    }
    text += std::string(role->as_string()) + ": ";
    if (content != nullptr && content->is_string()) {
      text += std::string(content->as_string());
    } else if (content != nullptr && content->is_array()) {
      for (const json::value& part : content->as_array()) {
        const json::value* t = part.is_object() ? part.as_object().if_contains("text") : nullptr;
        if (t != nullptr && t->is_string()) text += std::string(t->as_string());
      }
    }
    // An assistant's earlier tool calls are part of the context the model reads.
    if (const json::value* calls = m->if_contains("tool_calls"); calls != nullptr) {
      if (!calls->is_array())
        return InvalidArgumentError("messages[].tool_calls: expected an array");
      for (const json::value& call : calls->as_array()) text += json::serialize(call);
    }
    text += "\n";
  }
  input.input_ids = PseudoTokenize(text);
  return Status::Ok();
}

// A prompt that is a list of token ids: true, and `ids` filled; false when it is not one.
bool TokenIds(const json::array& prompt, std::vector<int64_t>& ids) {
  for (const json::value& t : prompt) {
    if (!t.is_int64()) return false;
    ids.push_back(t.as_int64());
  }
  return true;
}

// A completion's prompts: a string (pseudo-tokenized) or a list of token ids, one prompt; a list
// of strings or of token-id lists, a batch of them (one choice each).
Status ParseCompletionPrompts(const json::object& body,
                              std::vector<std::vector<int64_t>>& prompts) {
  constexpr const char* kExpected =
      "prompt: expected a string, a list of token ids, or a non-empty list of strings or of "
      "token-id lists";
  const json::value* prompt = body.if_contains("prompt");
  if (prompt != nullptr && prompt->is_string()) {
    prompts.push_back(PseudoTokenize(prompt->as_string()));
    return Status::Ok();
  }
  if (prompt == nullptr || !prompt->is_array() || prompt->as_array().empty()) {
    return InvalidArgumentError(kExpected);
  }
  const json::array& list = prompt->as_array();
  if (std::vector<int64_t> ids; list.front().is_int64() && TokenIds(list, ids)) {
    prompts.push_back(std::move(ids));
    return Status::Ok();
  }
  if (list.size() > kMaxBatchPrompts) {
    return InvalidArgumentError("prompt: at most " + std::to_string(kMaxBatchPrompts) +
                                " prompts in a batch, got " + std::to_string(list.size()));
  }
  for (const json::value& one : list) {
    std::vector<int64_t> ids;
    if (one.is_string()) {
      ids = PseudoTokenize(one.as_string());
    } else if (!one.is_array() || !TokenIds(one.as_array(), ids)) {
      return InvalidArgumentError(kExpected);
    }
    prompts.push_back(std::move(ids));
  }
  return Status::Ok();
}

// SGLang's extra fields: session_id, priority, the pause, rid and the prefix cache's namespace.
Status ParseSglangFields(const json::object& body, GenerateInput& input) {
  if (const json::value* v = body.if_contains("session_id"); v != nullptr && v->is_string()) {
    input.session_id = std::string(v->as_string());
  }
  if (const json::value* v = body.if_contains("priority"); v != nullptr && v->is_int64()) {
    input.priority = v->as_int64();
  }
  if (const json::value* v = body.if_contains(protocol::kPauseField);
      v != nullptr && v->is_string()) {
    AGENTKV_ASSIGN_OR_RETURN(
        input.pause,
        protocol::ParsePauseHint(protocol::kPauseField, std::string_view(v->as_string())));
  }
  if (const json::value* v = body.if_contains("rid"); v != nullptr && v->is_string()) {
    input.rid = std::string(v->as_string());
  }
  // SGLang's _compute_extra_key: cache_salt then extra_key, concatenated, name the prefix
  // cache's namespace; requests in different namespaces never share KV.
  for (const char* key : {"cache_salt", "extra_key"}) {
    const json::value* v = body.if_contains(key);
    if (v == nullptr || v->is_null()) continue;
    if (!v->is_string()) return InvalidArgumentError(std::string(key) + ": expected a string");
    input.cache_namespace += std::string(v->as_string());
  }
  return Status::Ok();
}

// An OpenAI request, read: what its prompts share, the prompts, and the answer's shape.
struct OpenAiCall {
  // Everything but the rid and the input ids.
  GenerateInput common;
  std::vector<std::vector<int64_t>> prompts;
  AnswerHead head;
  // The request's `seed`, when it has an integer one.
  std::optional<uint64_t> seed;
};

// Reads the request into `call`; InvalidArgument naming the field otherwise.
Status ParseOpenAi(const json::object& body, bool chat, OpenAiCall& call) {
  AGENTKV_RETURN_IF_ERROR(RefuseUnserved(body, chat));
  if (const json::value* m = body.if_contains("model"); m != nullptr && m->is_string()) {
    call.head.model = std::string(m->as_string());
  }
  if (chat) {
    AGENTKV_RETURN_IF_ERROR(ParseChatMessages(body, call.common));
    call.prompts.push_back(std::move(call.common.input_ids));
    call.common.input_ids.clear();
  } else {
    AGENTKV_RETURN_IF_ERROR(ParseCompletionPrompts(body, call.prompts));
  }
  call.common.max_new_tokens = 128;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (const json::value* v = body.if_contains(key); v != nullptr && !v->is_null()) {
      if (!v->is_int64() || v->as_int64() < 0) {
        return InvalidArgumentError(std::string(key) + ": expected a non-negative integer");
      }
      call.common.max_new_tokens = v->as_int64();
    }
  }
  if (const json::value* v = body.if_contains("stream"); v != nullptr && v->is_bool()) {
    call.head.stream = v->as_bool();
  }
  if (const json::value* options = body.if_contains("stream_options");
      options != nullptr && options->is_object()) {
    const json::value* usage = options->as_object().if_contains("include_usage");
    call.head.include_usage = usage != nullptr && usage->is_bool() && usage->as_bool();
  }
  if (const json::value* v = body.if_contains("seed"); v != nullptr && v->is_int64()) {
    call.seed = static_cast<uint64_t>(v->as_int64());
  }
  return ParseSglangFields(body, call.common);
}

// The seed of a chat's tool choice: the request's, else the prompt's hash.
uint64_t ToolSeed(const OpenAiCall& call) {
  if (call.seed.has_value()) return *call.seed;
  return Hash64(std::as_bytes(std::span<const int64_t>(call.prompts.front())), 0);
}

}  // namespace

void EngineEmulator::HandleOpenAi(net::Request request, std::shared_ptr<net::ResponseWriter> writer,
                                  bool chat) {
  auto bad = [&](const Status& status) {
    writer->Reply(net::MakeErrorResponse(request, http::status::bad_request, status.message()));
  };
  if (Status s = net::CheckJsonContentType(request); !s.ok()) return bad(s);
  json::error_code error;
  const json::value parsed = json::parse(request.body(), error);
  if (error || !parsed.is_object()) {
    return bad(InvalidArgumentError("the body is not a JSON object"));
  }
  OpenAiCall call;
  call.head.model = options_.served_model_name;
  if (Status s = ParseOpenAi(parsed.as_object(), chat, call); !s.ok()) return bad(s);
  std::optional<ToolCall> tool_call;
  if (chat) {
    StatusOr<std::optional<ToolCall>> planned =
        PlanToolCall(parsed.as_object(), ToolSeed(call), "call_" + ids_.Next());
    if (!planned.ok()) return bad(planned.status());
    tool_call = *std::move(planned);
  }
  // The response's id: the client's rid, else a new one; a batch's prompts run as "<rid>-<i>".
  const std::string rid = call.common.rid.empty() ? ids_.Next() : call.common.rid;
  call.head.id = call.common.rid.empty() ? (chat ? "chatcmpl-" : "cmpl-") + rid : rid;
  call.head.object = !chat              ? "text_completion"
                     : call.head.stream ? "chat.completion.chunk"
                                        : "chat.completion";
  call.head.created = NowSeconds();
  call.head.chat = chat;
  const size_t prompts = call.prompts.size();
  auto answer = std::make_shared<OpenAiAnswer>(call.head, prompts, std::move(tool_call), writer,
                                               std::move(request));
  if (call.head.stream) answer->Open();
  std::vector<std::string> rids;
  for (size_t i = 0; i < prompts; ++i) {
    GenerateInput input = call.common;
    input.rid = prompts == 1 ? rid : rid + "-" + std::to_string(i);
    input.input_ids = std::move(call.prompts[i]);
    rids.push_back(input.rid);
    if (Status s = runtime_->Submit(std::move(input), answer->CallbacksFor(i)); !s.ok()) {
      for (const std::string& submitted : rids) runtime_->Abort(submitted);
      return answer->Refuse(s);
    }
  }
  EngineRuntime* runtime = runtime_.get();
  writer->OnClientGone([runtime, rids] {
    for (const std::string& submitted : rids) runtime->Abort(submitted);
  });
}

}  // namespace agentkv::service
