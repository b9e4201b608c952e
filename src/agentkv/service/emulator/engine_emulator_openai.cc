// The OpenAI-compatible routes of the engine emulator: POST /v1/chat/completions and
// /v1/completions, as SGLang serves them, so that agent frameworks speaking the OpenAI API
// (and the agentkv gateway's OpenAI data path) can run against it.
//
// Chat messages are flattened to "role: content\n" lines and pseudo-tokenized like `text`;
// /v1/completions takes `prompt` as a string or a list of token ids. `max_tokens` (or
// `max_completion_tokens`, default 128), `stream`, and SGLang's extra fields `rid`,
// `session_id`, `priority`, `cache_salt` and `extra_key` (the prefix cache namespace) are
// honoured. The body must be sent as application/json (SGLang's validate_json_request). The
// response is the OpenAI shape with `usage` including `prompt_tokens_details.cached_tokens`
// (SGLang's --enable-cache-report); streams are `chat.completion.chunk` / `text_completion` events
// with the new text as the delta (a chat stream opens with a `delta.role: "assistant"` chunk),
// then, with `stream_options.include_usage`, a chunk with empty `choices` and the `usage`, then
// `data: [DONE]`. What the emulator cannot serve is refused with a 400 naming the field, never
// dropped: `n` other than 1 and `logprobs` (it has no model to score tokens with).
#include <boost/json.hpp>
#include <chrono>

#include "agentkv/base/status.h"
#include "agentkv/net/error_body.h"
#include "agentkv/protocol/generate.h"
#include "agentkv/service/emulator/engine_emulator.h"

namespace agentkv::service {
namespace {

namespace http = net::http;
namespace json = boost::json;

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json::object Usage(const GenerateResult& result) {
  const int64_t completion = static_cast<int64_t>(result.output_ids.size());
  return json::object{
      {"prompt_tokens", result.prompt_tokens},
      {"completion_tokens", completion},
      {"total_tokens", result.prompt_tokens + completion},
      {"prompt_tokens_details", json::object{{"cached_tokens", result.cached_tokens}}}};
}

std::string FinishReasonName(const GenerateResult& result) {
  return result.aborted ? "abort" : "length";
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
    text += "\n";
  }
  input.input_ids = PseudoTokenize(text);
  return Status::Ok();
}

// A completion's prompt: a string (pseudo-tokenized) or a list of token ids.
Status ParseCompletionPrompt(const json::object& body, GenerateInput& input) {
  const json::value* prompt = body.if_contains("prompt");
  if (prompt != nullptr && prompt->is_string()) {
    input.input_ids = PseudoTokenize(prompt->as_string());
  } else if (prompt != nullptr && prompt->is_array()) {
    for (const json::value& t : prompt->as_array()) {
      if (!t.is_int64()) return InvalidArgumentError("prompt: expected a string or token ids");
      input.input_ids.push_back(t.as_int64());
    }
  } else {
    return InvalidArgumentError("prompt: expected a string or a list of token ids");
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

// Reads the request; fills `input` (without rid), the model name, whether to stream and
// whether a stream ends with a usage chunk. InvalidArgument naming the field otherwise.
Status ParseOpenAi(const json::object& body, bool chat, GenerateInput& input, std::string& model,
                   bool& stream, bool& include_usage) {
  AGENTKV_RETURN_IF_ERROR(RefuseUnserved(body, chat));
  if (const json::value* m = body.if_contains("model"); m != nullptr && m->is_string()) {
    model = std::string(m->as_string());
  }
  AGENTKV_RETURN_IF_ERROR(chat ? ParseChatMessages(body, input)
                               : ParseCompletionPrompt(body, input));
  input.max_new_tokens = 128;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (const json::value* v = body.if_contains(key); v != nullptr && !v->is_null()) {
      if (!v->is_int64() || v->as_int64() < 0) {
        return InvalidArgumentError(std::string(key) + ": expected a non-negative integer");
      }
      input.max_new_tokens = v->as_int64();
    }
  }
  if (const json::value* v = body.if_contains("stream"); v != nullptr && v->is_bool()) {
    stream = v->as_bool();
  }
  if (const json::value* options = body.if_contains("stream_options");
      options != nullptr && options->is_object()) {
    const json::value* usage = options->as_object().if_contains("include_usage");
    include_usage = usage != nullptr && usage->is_bool() && usage->as_bool();
  }
  return ParseSglangFields(body, input);
}

// What every event or answer of one request repeats.
struct AnswerHead {
  std::string id;
  std::string object;  // "chat.completion(.chunk)" or "text_completion".
  int64_t created = 0;
  std::string model;
  bool chat = false;
};

// One stream event of `head` with `choices`.
json::object StreamEvent(const AnswerHead& head, json::array choices) {
  return json::object{{"id", head.id},
                      {"object", head.object},
                      {"created", head.created},
                      {"model", head.model},
                      {"choices", std::move(choices)}};
}

// Starts the event stream; a chat's first chunk names the role, with empty content (as SGLang
// and OpenAI).
void OpenStream(net::ResponseWriter& writer, const AnswerHead& head) {
  writer.StartStream(http::status::ok,
                     {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}});
  if (head.chat) {
    json::object first{{"index", 0},
                       {"delta", json::object{{"role", "assistant"}, {"content", ""}}},
                       {"finish_reason", nullptr}};
    writer.WriteChunk(protocol::SseEvent(json::serialize(StreamEvent(head, json::array{first}))));
  }
}

// A stream's callbacks: each token batch as a delta chunk; at the end the finish chunk (or the
// abort's error event), the usage chunk when asked, and [DONE].
GenerateCallbacks StreamCallbacks(std::shared_ptr<net::ResponseWriter> writer, AnswerHead head,
                                  bool include_usage) {
  auto event = [head](json::array choices) { return StreamEvent(head, std::move(choices)); };
  auto chunk = [event, chat = head.chat](std::string delta, json::value finish_reason) {
    json::object choice{{"index", 0}, {"finish_reason", finish_reason}};
    if (chat) {
      choice["delta"] = json::object{{"content", delta}};
    } else {
      choice["text"] = delta;
    }
    return protocol::SseEvent(json::serialize(event(json::array{choice})));
  };
  GenerateCallbacks callbacks;
  callbacks.on_tokens = [writer, chunk](std::span<const int64_t> tokens) {
    writer->WriteChunk(chunk(PseudoText(tokens), nullptr));
  };
  callbacks.on_finish = [writer, chunk, event, include_usage](const GenerateResult& result) {
    if (result.abort_status_code != 0) {
      writer->WriteChunk(protocol::SseEvent(
          net::OpenAiStreamErrorBody(result.abort_message, result.abort_status_code)));
      writer->WriteChunk(std::string(protocol::kSseDone));
      writer->EndStream();
      return;
    }
    writer->WriteChunk(chunk("", json::value(FinishReasonName(result))));
    if (include_usage) {
      json::object last = event(json::array{});
      last["usage"] = Usage(result);
      writer->WriteChunk(protocol::SseEvent(json::serialize(last)));
    }
    writer->WriteChunk(std::string(protocol::kSseDone));
    writer->EndStream();
  };
  return callbacks;
}

// A whole answer's callback: the completion with its usage, or the abort's error.
GenerateCallbacks ReplyCallbacks(std::shared_ptr<net::ResponseWriter> writer,
                                 std::shared_ptr<net::Request> request, AnswerHead head) {
  GenerateCallbacks callbacks;
  callbacks.on_finish = [writer, request, head](const GenerateResult& result) {
    if (result.abort_status_code != 0) {
      return writer->Reply(net::MakeErrorResponse(
          *request, static_cast<http::status>(result.abort_status_code), result.abort_message));
    }
    json::object choice{{"index", 0}, {"finish_reason", FinishReasonName(result)}};
    const std::string text = PseudoText(result.output_ids);
    if (head.chat) {
      choice["message"] = json::object{{"role", "assistant"}, {"content", text}};
    } else {
      choice["text"] = text;
    }
    writer->Reply(net::MakeResponse(*request, http::status::ok,
                                    json::serialize(json::object{{"id", head.id},
                                                                 {"object", head.object},
                                                                 {"created", head.created},
                                                                 {"model", head.model},
                                                                 {"choices", json::array{choice}},
                                                                 {"usage", Usage(result)}})));
  };
  return callbacks;
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
  if (error || !parsed.is_object())
    return bad(InvalidArgumentError("the body is not a JSON object"));
  GenerateInput input;
  std::string model = options_.served_model_name;
  bool stream = false;
  bool include_usage = false;
  if (Status s = ParseOpenAi(parsed.as_object(), chat, input, model, stream, include_usage);
      !s.ok())
    return bad(s);
  if (input.rid.empty()) input.rid = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_rid_++);
  const std::string id = input.rid;
  AnswerHead head{.id = id,
                  .object = !chat    ? "text_completion"
                            : stream ? "chat.completion.chunk"
                                     : "chat.completion",
                  .created = NowSeconds(),
                  .model = model,
                  .chat = chat};
  GenerateCallbacks callbacks;
  if (stream) {
    callbacks = StreamCallbacks(writer, head, include_usage);
    OpenStream(*writer, head);
  } else {
    callbacks = ReplyCallbacks(writer, std::make_shared<net::Request>(request), head);
  }
  if (Status s = runtime_->Submit(std::move(input), std::move(callbacks)); !s.ok()) {
    if (stream) {
      writer->WriteChunk(protocol::SseEvent(net::OpenAiStreamErrorBody(s.message(), 400)));
      writer->WriteChunk(std::string(protocol::kSseDone));
      writer->EndStream();
      return;
    }
    return bad(s);
  }
  EngineRuntime* runtime = runtime_.get();
  writer->OnClientGone([runtime, id] { runtime->Abort(id); });
}

}  // namespace agentkv::service
