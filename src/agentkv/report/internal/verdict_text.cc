#include "agentkv/report/internal/verdict_text.h"

#include <array>
#include <cmath>
#include <cstdio>

#include "agentkv/report/internal/svg_chart.h"

namespace agentkv::report::internal {

std::string PercentChangeText(double change) {
  if (!std::isfinite(change)) return change > 0 ? "unbounded" : "n/a";
  const double percent = change * 100;
  std::array<char, 32> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%+.*f%%", std::fabs(percent) < 9.95 ? 1 : 0,
                percent);
  std::string text(buffer.data());
  if (text == "-0.0%") text = "+0.0%";
  return text;
}

std::string ListedText(const std::vector<std::string>& items) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += i + 1 == items.size() ? " and " : ", ";
    text += items[i];
  }
  return text;
}

std::string VerdictBoxHtml(const std::string& lead, const std::vector<VerdictLine>& lines) {
  if (lines.empty()) return "";
  std::string html = "<section class=\"verdict\" id=\"verdict\">\n<h2>Verdict</h2>\n";
  html += "<p class=\"lead\">" + Escape(lead) + "</p>\n<dl class=\"verdict\">\n";
  for (const VerdictLine& line : lines) {
    html += "<div><dt>" + Escape(line.label) + "</dt><dd>" + Escape(line.text) + "</dd></div>\n";
  }
  return html + "</dl>\n</section>\n";
}

}  // namespace agentkv::report::internal
