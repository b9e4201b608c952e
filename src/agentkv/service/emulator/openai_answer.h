// OpenAiAnswer: the answer of one OpenAI request of the engine emulator, whole or streamed,
// over the prompts it runs as: one for a chat, one per prompt for a batch completion (a `prompt`
// that is a list of strings or of token lists), each its choice with its index.
//
// A whole answer is written when every prompt has finished: the choices in index order and the
// usage summed over them. A stream writes each prompt's new text as it comes (a chat stream
// opens with the `delta.role: "assistant"` chunk), each prompt's finish chunk when it finishes,
// then (stream_options.include_usage) a chunk with empty `choices` and the summed usage, then
// `data: [DONE]`. A chat answered with a tool call (openai_tools.h) carries no content: its
// message holds `tool_calls` and finish_reason "tool_calls"; streamed, the first token opens the
// call (id, type, name, empty arguments) and the arguments follow in pieces at the end.
//
// A prompt the engine aborted with a status (refused before it ran) ends the answer with that
// error: a whole answer replies it, a stream writes it as an error event and [DONE]. So does
// Refuse, for a prompt that could not be submitted. Whatever finishes after the end is dropped.
//
// Thread-safe: the callbacks run on the engine's thread, Refuse on a handler's.
#ifndef AGENTKV_SERVICE_EMULATOR_OPENAI_ANSWER_H_
#define AGENTKV_SERVICE_EMULATOR_OPENAI_ANSWER_H_

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/net/http_types.h"
#include "agentkv/net/response_writer.h"
#include "agentkv/service/emulator/engine_runtime.h"
#include "agentkv/service/emulator/openai_tools.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

// What every event or answer of one request repeats.
struct AnswerHead {
  std::string id;
  // "chat.completion", "chat.completion.chunk" or "text_completion".
  std::string object;
  int64_t created = 0;
  std::string model;
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
};

class OpenAiAnswer : public std::enable_shared_from_this<OpenAiAnswer> {
 public:
  // An answer of `prompts` choices (at least 1; a tool call only with one chat prompt).
  OpenAiAnswer(AnswerHead head, size_t prompts, std::optional<ToolCall> tool_call,
               std::shared_ptr<net::ResponseWriter> writer, net::Request request);

  // Starts the event stream (a stream, before any prompt is submitted).
  void Open();
  // The callbacks of prompt `index` (< prompts); they hold the answer. Precondition: the
  // answer is owned by a shared_ptr.
  GenerateCallbacks CallbacksFor(size_t index);
  // Ends the answer with a 400 for `status`.
  void Refuse(const Status& status);

 private:
  struct Slot {
    std::optional<GenerateResult> result;
    bool call_opened = false;
  };

  void OnTokens(size_t index, std::span<const int64_t> tokens);
  void OnFinish(size_t index, const GenerateResult& result);
  // Streams the opening of prompt `index`'s tool call, once.
  void OpenToolCall(size_t index) AGENTKV_REQUIRES(mu_);
  // The stream's events for a finished prompt, and (all finished) the usage and [DONE].
  void StreamFinish(size_t index, const GenerateResult& result) AGENTKV_REQUIRES(mu_);
  void ReplyWhole() AGENTKV_REQUIRES(mu_);
  void EndWithError(const std::string& message, int status) AGENTKV_REQUIRES(mu_);
  // One stream event: prompt `index`'s new `text` (a chat's delta content, a completion's
  // text), or a chat's `delta` as given.
  std::string TextChunk(size_t index, const std::string& text,
                        boost::json::value finish_reason) const;
  std::string DeltaChunk(size_t index, boost::json::object delta,
                         boost::json::value finish_reason) const;
  std::string Event(boost::json::array choices) const;

  const AnswerHead head_;
  const std::optional<ToolCall> tool_call_;
  const std::shared_ptr<net::ResponseWriter> writer_;
  const net::Request request_;

  sync::Mutex mu_;
  std::vector<Slot> slots_ AGENTKV_GUARDED_BY(mu_);
  size_t finished_ AGENTKV_GUARDED_BY(mu_) = 0;
  bool ended_ AGENTKV_GUARDED_BY(mu_) = false;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_EMULATOR_OPENAI_ANSWER_H_
