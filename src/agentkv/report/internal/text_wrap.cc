#include "agentkv/report/internal/text_wrap.h"

#include <algorithm>

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

size_t WidestLine(const std::vector<std::string>& lines) {
  size_t width = 0;
  for (const std::string& line : lines) width = std::max(width, line.size());
  return width;
}

std::vector<std::string> LabelledLines(
    const std::string& title, const std::vector<std::pair<std::string, std::string>>& items,
    size_t width, size_t min_text) {
  std::vector<std::string> lines = {title};
  size_t label_width = 0;
  for (const auto& [label, text] : items) label_width = std::max(label_width, label.size());
  const std::string indent(label_width + 4, ' ');
  width = std::max(width, indent.size() + min_text);
  for (const auto& [label, text] : items) {
    const std::string padded = label + std::string(label_width - label.size(), ' ');
    for (std::string& line : WrapText(text, width, "  " + padded + "  ", indent)) {
      lines.push_back(std::move(line));
    }
  }
  return lines;
}

}  // namespace agentkv::report::internal
