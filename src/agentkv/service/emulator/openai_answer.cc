#include "agentkv/service/emulator/openai_answer.h"

#include <boost/json.hpp>
#include <utility>

#include "agentkv/base/check.h"
#include "agentkv/net/error_body.h"
#include "agentkv/protocol/generate.h"
#include "agentkv/service/emulator/engine_emulator.h"

namespace agentkv::service {
namespace {

namespace http = net::http;
namespace json = boost::json;

// The arguments of a streamed tool call go out in pieces of this many bytes.
constexpr size_t kArgumentPieceBytes = 16;

json::object Usage(std::span<const GenerateResult* const> results) {
  int64_t prompt = 0;
  int64_t completion = 0;
  int64_t cached = 0;
  for (const GenerateResult* r : results) {
    prompt += r->prompt_tokens;
    completion += static_cast<int64_t>(r->output_ids.size());
    cached += r->cached_tokens;
  }
  return json::object{{"prompt_tokens", prompt},
                      {"completion_tokens", completion},
                      {"total_tokens", prompt + completion},
                      {"prompt_tokens_details", json::object{{"cached_tokens", cached}}}};
}

json::object ToolCallJson(const ToolCall& call) {
  return json::object{
      {"id", call.id},
      {"type", "function"},
      {"function", json::object{{"name", call.name}, {"arguments", call.arguments}}}};
}

}  // namespace

OpenAiAnswer::OpenAiAnswer(AnswerHead head, size_t prompts, std::optional<ToolCall> tool_call,
                           std::shared_ptr<net::ResponseWriter> writer, net::Request request)
    : head_(std::move(head)),
      tool_call_(std::move(tool_call)),
      writer_(std::move(writer)),
      request_(std::move(request)),
      slots_(prompts) {
  AGENTKV_CHECK(prompts >= 1);
  AGENTKV_CHECK(!tool_call_.has_value() || (head_.chat && prompts == 1));
}

std::string OpenAiAnswer::Event(json::array choices) const {
  return protocol::SseEvent(json::serialize(json::object{{"id", head_.id},
                                                         {"object", head_.object},
                                                         {"created", head_.created},
                                                         {"model", head_.model},
                                                         {"choices", std::move(choices)}}));
}

std::string OpenAiAnswer::TextChunk(size_t index, const std::string& text,
                                    json::value finish_reason) const {
  if (head_.chat) return DeltaChunk(index, json::object{{"content", text}}, finish_reason);
  return Event(json::array{
      json::object{{"index", index}, {"text", text}, {"finish_reason", std::move(finish_reason)}}});
}

std::string OpenAiAnswer::DeltaChunk(size_t index, json::object delta,
                                     json::value finish_reason) const {
  return Event(json::array{json::object{
      {"index", index}, {"delta", std::move(delta)}, {"finish_reason", std::move(finish_reason)}}});
}

void OpenAiAnswer::Open() {
  AGENTKV_CHECK(head_.stream);
  writer_->StartStream(http::status::ok,
                       {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}});
  // A chat's first chunk names the role, with empty content (as SGLang and OpenAI).
  if (head_.chat) {
    writer_->WriteChunk(
        DeltaChunk(0, json::object{{"role", "assistant"}, {"content", ""}}, nullptr));
  }
}

GenerateCallbacks OpenAiAnswer::CallbacksFor(size_t index) {
  // The callbacks hold the answer until the engine is done with the prompt.
  GenerateCallbacks callbacks;
  std::shared_ptr<OpenAiAnswer> self = shared_from_this();
  if (head_.stream) {
    callbacks.on_tokens = [self, index](std::span<const int64_t> tokens) {
      self->OnTokens(index, tokens);
    };
  }
  callbacks.on_finish = [self, index](const GenerateResult& result) {
    self->OnFinish(index, result);
  };
  return callbacks;
}

void OpenAiAnswer::OnTokens(size_t index, std::span<const int64_t> tokens) {
  sync::MutexLock lock(&mu_);
  if (ended_ || tokens.empty()) return;
  if (!tool_call_.has_value()) {
    writer_->WriteChunk(TextChunk(index, PseudoText(tokens), nullptr));
    return;
  }
  OpenToolCall(index);
}

void OpenAiAnswer::OpenToolCall(size_t index) {
  if (slots_[index].call_opened) return;
  slots_[index].call_opened = true;
  json::object opening = ToolCallJson(*tool_call_);
  opening["function"].as_object()["arguments"] = "";
  opening["index"] = 0;
  writer_->WriteChunk(
      DeltaChunk(index, json::object{{"tool_calls", json::array{opening}}}, nullptr));
}

void OpenAiAnswer::OnFinish(size_t index, const GenerateResult& result) {
  sync::MutexLock lock(&mu_);
  if (ended_) return;
  AGENTKV_CHECK(index < slots_.size() && !slots_[index].result.has_value());
  if (result.abort_status_code != 0) {
    return EndWithError(result.abort_message, result.abort_status_code);
  }
  slots_[index].result = result;
  ++finished_;
  if (head_.stream) return StreamFinish(index, result);
  if (finished_ == slots_.size()) ReplyWhole();
}

void OpenAiAnswer::StreamFinish(size_t index, const GenerateResult& result) {
  if (tool_call_.has_value() && !result.aborted) {
    OpenToolCall(index);
    for (size_t at = 0; at < tool_call_->arguments.size(); at += kArgumentPieceBytes) {
      json::object piece{
          {"index", 0},
          {"function",
           json::object{{"arguments", tool_call_->arguments.substr(at, kArgumentPieceBytes)}}}};
      writer_->WriteChunk(
          DeltaChunk(index, json::object{{"tool_calls", json::array{piece}}}, nullptr));
    }
    writer_->WriteChunk(DeltaChunk(index, json::object{}, "tool_calls"));
  } else {
    writer_->WriteChunk(TextChunk(index, "", result.aborted ? "abort" : "length"));
  }
  if (finished_ < slots_.size()) return;
  ended_ = true;
  if (head_.include_usage) {
    std::vector<const GenerateResult*> results;
    for (const Slot& slot : slots_) results.push_back(&*slot.result);
    json::object last{{"id", head_.id},           {"object", head_.object},
                      {"created", head_.created}, {"model", head_.model},
                      {"choices", json::array{}}, {"usage", Usage(results)}};
    writer_->WriteChunk(protocol::SseEvent(json::serialize(last)));
  }
  writer_->WriteChunk(std::string(protocol::kSseDone));
  writer_->EndStream();
}

void OpenAiAnswer::ReplyWhole() {
  ended_ = true;
  json::array choices;
  std::vector<const GenerateResult*> results;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const GenerateResult& result = *slots_[i].result;
    results.push_back(&result);
    const bool call = tool_call_.has_value() && !result.aborted;
    json::object choice{{"index", i},
                        {"finish_reason", call             ? "tool_calls"
                                          : result.aborted ? "abort"
                                                           : "length"}};
    const std::string text = PseudoText(result.output_ids);
    if (!head_.chat) {
      choice["text"] = text;
    } else if (call) {
      choice["message"] = json::object{{"role", "assistant"},
                                       {"content", nullptr},
                                       {"tool_calls", json::array{ToolCallJson(*tool_call_)}}};
    } else {
      choice["message"] = json::object{{"role", "assistant"}, {"content", text}};
    }
    choices.push_back(std::move(choice));
  }
  writer_->Reply(net::MakeResponse(request_, http::status::ok,
                                   json::serialize(json::object{{"id", head_.id},
                                                                {"object", head_.object},
                                                                {"created", head_.created},
                                                                {"model", head_.model},
                                                                {"choices", std::move(choices)},
                                                                {"usage", Usage(results)}})));
}

void OpenAiAnswer::EndWithError(const std::string& message, int status) {
  ended_ = true;
  if (!head_.stream) {
    return writer_->Reply(
        net::MakeErrorResponse(request_, static_cast<http::status>(status), message));
  }
  writer_->WriteChunk(protocol::SseEvent(net::OpenAiStreamErrorBody(message, status)));
  writer_->WriteChunk(std::string(protocol::kSseDone));
  writer_->EndStream();
}

void OpenAiAnswer::Refuse(const Status& status) {
  sync::MutexLock lock(&mu_);
  if (!ended_) EndWithError(status.message(), 400);
}

}  // namespace agentkv::service
