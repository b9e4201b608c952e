// The replay report's glossary: one definition per row of the arm table (ReplayTableRows), so
// that no row (`drops`, `onboards`, `ttl pins`, ...) is shown without saying what it counts.
// The HTML report lists the definitions of the rows it shows under the table and puts each on
// its row's label as a tooltip; docs/REPLAY.md carries the same words. Pure; thread-safe.
#ifndef AGENTKV_REPORT_REPLAY_GLOSSARY_H_
#define AGENTKV_REPORT_REPLAY_GLOSSARY_H_

#include <string>

#include "agentkv/report/replay_report.h"

namespace agentkv::report {

// What `row` measures, in one or two sentences with its unit; "" for a row the glossary does
// not know (a test keeps every row ReplayTableRows can produce known). Rows of the admission
// section (the agentic_kv series) share one definition naming the series.
std::string RowDefinition(const ReplayTableRow& row);

}  // namespace agentkv::report

#endif  // AGENTKV_REPORT_REPLAY_GLOSSARY_H_
