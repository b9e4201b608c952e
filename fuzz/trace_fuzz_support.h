// What the trace-reader fuzz targets share: the shape every reader error must have, and the
// range rules of agentkv/base/bounds.h as predicates over what a reader accepted.
#ifndef AGENTKV_FUZZ_TRACE_FUZZ_SUPPORT_H_
#define AGENTKV_FUZZ_TRACE_FUZZ_SUPPORT_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "agentkv/base/bounds.h"
#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "fuzz_check.h"

namespace agentkv::fuzzing {

// Lines of `text` as the readers number them: one more than its newlines.
inline int64_t LineCount(std::string_view text) {
  return 1 + static_cast<int64_t>(std::count(text.begin(), text.end(), '\n'));
}

// A reader's error on `text` parsed as `source`: InvalidArgument "<source>:<line>: <what>",
// one line of text, naming a line that exists; or the one error about the whole file, a trace
// without requests (EmptyTraceError: "<source>: no requests (an empty trace)").
inline void CheckReaderError(const Status& status, std::string_view source, std::string_view text) {
  FUZZ_CHECK(status.code() == StatusCode::kInvalidArgument);
  const std::string& message = status.message();
  if (message == std::string(source) + ": no requests (an empty trace)") return;
  FUZZ_CHECK(message.starts_with(std::string(source) + ":"));
  size_t at = source.size() + 1;
  int64_t line = 0;
  while (at < message.size() && message[at] >= '0' && message[at] <= '9' && line < (1 << 30)) {
    line = line * 10 + (message[at] - '0');
    ++at;
  }
  FUZZ_CHECK(line >= 1 && line <= LineCount(text));
  FUZZ_CHECK(message.compare(at, 2, ": ") == 0);
  FUZZ_CHECK(message.find('\n') == std::string::npos);
}

inline bool IsTokens(int64_t tokens) { return tokens >= 0 && tokens <= kMaxTokens; }
inline bool IsTime(TimeNs t) { return t >= TimeNs(0) && t.ns() <= kMaxTimeNs; }
// At most ceil(input / block) hash ids.
inline bool HashIdsFit(size_t ids, int64_t input_tokens, int64_t block) {
  return static_cast<int64_t>(ids) <= input_tokens / block + (input_tokens % block != 0 ? 1 : 0);
}

}  // namespace agentkv::fuzzing

#endif  // AGENTKV_FUZZ_TRACE_FUZZ_SUPPORT_H_
