#include "agentkv/report/internal/text_wrap.h"

namespace agentkv::report::internal {
namespace {

void TrimRight(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

}  // namespace

std::vector<std::string> WrapText(std::string_view text, size_t width, std::string_view first,
                                  std::string_view rest) {
  std::vector<std::string> lines;
  std::string line(first);
  // Whether `line` holds a word yet (a prefix alone takes any word, however long).
  bool has_word = false;
  size_t at = 0;
  while (at < text.size()) {
    if (text[at] == ' ') {
      ++at;
      continue;
    }
    size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(at, end - at);
    if (has_word && line.size() + 1 + word.size() > width) {
      TrimRight(line);
      lines.push_back(std::move(line));
      line = std::string(rest);
      has_word = false;
    }
    if (has_word) line += ' ';
    line += word;
    has_word = true;
    at = end;
  }
  TrimRight(line);
  lines.push_back(std::move(line));
  return lines;
}

}  // namespace agentkv::report::internal
