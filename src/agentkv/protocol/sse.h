// Server-Sent Events framing of streamed /generate responses (docs/PROTOCOL.md section 3.4).
//
// SGLang writes each chunk as `data: <json>\n\n` and ends the stream with `data: [DONE]\n\n`.
// SseEvent/kSseDone produce those bytes; SseParser reassembles events from byte chunks split
// anywhere, as they arrive from a socket. SseParser is thread-compatible and owns its buffers.
#ifndef AGENTKV_PROTOCOL_SSE_H_
#define AGENTKV_PROTOCOL_SSE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::protocol {

// The terminating event of an SGLang stream.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// `"data: " + data + "\n\n"`. Precondition: `data` holds no line break (JSON from
// SerializeGenerateResponse never does).
std::string SseEvent(std::string_view data);

// Incremental SSE parser. Lines may end in "\n", "\r\n" or "\r" (also when a chunk boundary
// falls between '\r' and '\n'); an event's `data` lines are joined with "\n"; comment lines
// (starting with ':') and other fields (`event`, `id`, `retry`) are ignored; a blank line ends
// an event, and an event without data is dropped. The data `[DONE]` sets done() and is not
// returned; bytes after it are ignored.
class SseParser {
 public:
  // Default: 64 MiB per event (data plus the line being read). Range: >= 1.
  static constexpr size_t kDefaultMaxEventBytes = size_t{64} << 20;

  explicit SseParser(size_t max_event_bytes = kDefaultMaxEventBytes);

  // Consumes `bytes` and returns the data of every event they complete, in order. After
  // done() or a failed status(), returns nothing.
  std::vector<std::string> Feed(std::string_view bytes);

  // True once the `[DONE]` event has been seen.
  bool done() const { return done_; }

  // OK, or ResourceExhausted once an event grew past max_event_bytes (the parser then stops).
  Status status() const { return status_; }

  // Bytes of an event still being assembled (data lines plus the partial line).
  size_t buffered_bytes() const { return line_.size() + data_.size(); }

 private:
  // Handles one complete line (without its terminator); may append to `events`.
  void HandleLine(std::vector<std::string>& events);

  size_t max_event_bytes_;
  std::string line_;       // The current, unterminated line.
  std::string data_;       // Data lines of the current event, joined with '\n'.
  bool has_data_ = false;  // The current event has at least one data line.
  bool after_cr_ = false;  // The last byte seen was '\r' (a following '\n' is the same break).
  bool done_ = false;
  Status status_;
};

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_SSE_H_
