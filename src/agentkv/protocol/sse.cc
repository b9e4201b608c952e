#include "agentkv/protocol/sse.h"

#include <utility>

// Invariants: buffered_bytes() <= max_event_bytes_ while status() is OK; once done() or a
// failed status(), Feed() consumes nothing.

namespace agentkv::protocol {

std::string SseEvent(std::string_view data) {
  std::string event;
  event.reserve(data.size() + 8);
  event += "data: ";
  event += data;
  event += "\n\n";
  return event;
}

SseParser::SseParser(size_t max_event_bytes)
    : max_event_bytes_(max_event_bytes == 0 ? 1 : max_event_bytes) {}

std::vector<std::string> SseParser::Feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (size_t i = 0; i < bytes.size() && !done_ && status_.ok(); ++i) {
    const char c = bytes[i];
    if (c == '\n' && after_cr_) {
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      HandleLine(events);
      continue;
    }
    // Append the run of ordinary bytes up to the next line break in one step.
    size_t end = i;
    while (end < bytes.size() && bytes[end] != '\n' && bytes[end] != '\r') ++end;
    line_.append(bytes.substr(i, end - i));
    i = end - 1;
    if (buffered_bytes() > max_event_bytes_) {
      status_ = ResourceExhaustedError("SSE event longer than " + std::to_string(max_event_bytes_) +
                                       " bytes");
    }
  }
  return events;
}

void SseParser::HandleLine(std::vector<std::string>& events) {
  std::string line = std::move(line_);
  line_.clear();
  if (line.empty()) {
    if (has_data_) {
      std::string data = std::move(data_);
      data_.clear();
      has_data_ = false;
      if (data == "[DONE]") {
        done_ = true;
        return;
      }
      events.push_back(std::move(data));
    }
    return;
  }
  if (line[0] == ':') return;  // A comment.
  const size_t colon = line.find(':');
  const std::string_view field = std::string_view(line).substr(0, colon);
  if (field != "data") return;
  std::string_view value;
  if (colon != std::string::npos) {
    value = std::string_view(line).substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
  if (buffered_bytes() > max_event_bytes_) {
    status_ = ResourceExhaustedError("SSE event longer than " + std::to_string(max_event_bytes_) +
                                     " bytes");
  }
}

}  // namespace agentkv::protocol
