// Helpers shared by the trace readers (Mooncake, Bailian and WEKA): quoting an offending JSON
// value inside an error message, opening a trace file with the readers' common error
// statuses, and walking the lines of a JSONL trace with the readers' error format. Internal to the
// sim module; the readers' headers are the public contract. Pure functions over their inputs
// (OpenTraceFile reads the file system); thread-safe. No exception escapes.
#ifndef AGENTKV_SIM_TRACE_INPUT_H_
#define AGENTKV_SIM_TRACE_INPUT_H_

#include <boost/json/value.hpp>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <ios>
#include <istream>
#include <string>
#include <string_view>

#include "agentkv/base/status.h"

namespace agentkv::sim {

// Offending values are quoted in error messages up to this many characters.
inline constexpr size_t kMaxQuotedChars = 40;

// `value` as compact JSON, cut to its first kMaxQuotedChars characters followed by "..." when
// longer, so that an error stays one readable line.
[[nodiscard]] std::string Quote(const boost::json::value& value);

// Opens the trace file at `path` for reading in `mode`. Returns InvalidArgument ("cannot read
// trace file "<path>": Is a directory") when `path` is a directory, and NotFound ("cannot open
// trace file "<path>": <reason from errno>") when it cannot be opened.
[[nodiscard]] StatusOr<std::ifstream> OpenTraceFile(const std::string& path,
                                                    std::ios::openmode mode = std::ios::in);

// Calls `visit(line, line_number)` for every non-blank line of `in` (numbers are 1-based and
// count blank lines too). The first non-OK status `visit` returns stops the walk and comes
// back as InvalidArgument "<source>:<line>: <its message>"; a stream that fails while reading
// gives Unavailable naming the last line read.
[[nodiscard]] Status ForEachJsonLine(
    std::istream& in, std::string_view source,
    const std::function<Status(std::string_view line, int64_t line_number)>& visit);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_TRACE_INPUT_H_
