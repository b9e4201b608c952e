#include "agentkv/report/internal/verdict_text.h"

#include <array>
#include <cmath>
#include <cstdio>

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

}  // namespace agentkv::report::internal
