// The pretty printer of the reports' JSON (the replay's and the capacity search's): Boost 1.81's
// serializer is compact only. Objects keep their members' insertion order, integers are written
// exactly, doubles as their shortest round-trip decimal (std::to_chars, "1.0" for a whole
// number), non-finite doubles as null, so equal documents give byte-identical text. Pure;
// thread-safe. Boost.JSON throws only on allocation failure here.
#ifndef AGENTKV_REPORT_INTERNAL_JSON_TEXT_H_
#define AGENTKV_REPORT_INTERNAL_JSON_TEXT_H_

#include <boost/json.hpp>
#include <string>

namespace agentkv::report::internal {

// `document` with a 2-space indent, arrays of plain values on one line, ending with a newline.
std::string JsonText(const boost::json::value& document);

}  // namespace agentkv::report::internal

#endif  // AGENTKV_REPORT_INTERNAL_JSON_TEXT_H_
