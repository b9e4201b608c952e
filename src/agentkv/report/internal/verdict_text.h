// The words the reports' verdicts share (the replay's, replay_verdict.h, and the capacity
// run's, capacity_verdict.h), so that both write a change and a list alike. Pure; thread-safe.
#ifndef AGENTKV_REPORT_INTERNAL_VERDICT_TEXT_H_
#define AGENTKV_REPORT_INTERNAL_VERDICT_TEXT_H_

#include <string>
#include <vector>

#include "agentkv/report/replay_verdict.h"

namespace agentkv::report::internal {

// A relative change as a signed percentage, one decimal below 10 % ("-51%", "-7.6%", "+0.0%";
// never "-0.0%"); "unbounded" for +infinity, "n/a" for any other value that is not finite.
std::string PercentChangeText(double change);

// "a", "a and b", "a, b and c".
std::string ListedText(const std::vector<std::string>& items);

// A verdict as a page's opening box: the heading, `lead` (plain text) and each line as a
// label and its sentence; escaped. Empty for no lines.
std::string VerdictBoxHtml(const std::string& lead, const std::vector<VerdictLine>& lines);

}  // namespace agentkv::report::internal

#endif  // AGENTKV_REPORT_INTERNAL_VERDICT_TEXT_H_
