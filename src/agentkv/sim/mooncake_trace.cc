// Invariants: every returned request has non-negative lengths and timestamp; requests keep
// file order; a line yields exactly one request or the whole parse fails with the first error.
// No exception escapes: Boost.JSON is used only through its error_code and if_* interfaces.
#include "agentkv/sim/mooncake_trace.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "agentkv/sim/trace_input.h"

namespace agentkv::sim {
namespace {

constexpr std::string_view kIntegerExpectation = "expected a non-negative integer";
constexpr std::string_view kHashIdsExpectation = "expected an array of non-negative integers";

std::string FieldError(std::string_view field, std::string_view what) {
  return "field \"" + std::string(field) + "\": " + std::string(what);
}

bool IsNonNegativeInteger(const boost::json::value& v) {
  if (const int64_t* i = v.if_int64()) return *i >= 0;
  return v.is_uint64();
}

// Reads the non-negative int64 `field` of `obj`; on failure returns a message without
// location (the caller adds it).
StatusOr<int64_t> ReadLength(const boost::json::object& obj, std::string_view field) {
  const boost::json::value* v = obj.if_contains(field);
  if (v == nullptr) {
    return InvalidArgumentError(
        FieldError(field, "missing (" + std::string(kIntegerExpectation) + ")"));
  }
  if (const int64_t* i = v->if_int64(); i != nullptr && *i >= 0) return *i;
  // Boost.JSON stores integers of 2^63 and above as uint64; no length or time is that large.
  const std::string expectation =
      std::string(kIntegerExpectation) + (v->is_uint64() ? " below 2^63" : "");
  return InvalidArgumentError(FieldError(field, expectation + ", got " + Quote(*v)));
}

StatusOr<std::vector<uint64_t>> ReadHashIds(const boost::json::object& obj) {
  constexpr std::string_view kField = "hash_ids";
  const boost::json::value* v = obj.if_contains(kField);
  if (v == nullptr) {
    return InvalidArgumentError(
        FieldError(kField, "missing (" + std::string(kHashIdsExpectation) + ")"));
  }
  const boost::json::array* array = v->if_array();
  if (array == nullptr) {
    return InvalidArgumentError(
        FieldError(kField, std::string(kHashIdsExpectation) + ", got " + Quote(*v)));
  }
  std::vector<uint64_t> ids;
  ids.reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    const boost::json::value& e = (*array)[i];
    if (!IsNonNegativeInteger(e)) {
      return InvalidArgumentError(FieldError(
          kField,
          std::string(kHashIdsExpectation) + ", element " + std::to_string(i) + " is " + Quote(e)));
    }
    ids.push_back(e.is_uint64() ? e.get_uint64() : static_cast<uint64_t>(e.get_int64()));
  }
  return ids;
}

// Parses one non-blank line; errors carry no location.
StatusOr<MooncakeRequest> ParseLine(std::string_view line) {
  std::error_code ec;
  const boost::json::value root =
      boost::json::parse(boost::json::string_view(line.data(), line.size()), ec);
  if (ec) return InvalidArgumentError("malformed JSON: " + ec.message());
  const boost::json::object* obj = root.if_object();
  if (obj == nullptr) return InvalidArgumentError("expected a JSON object, got " + Quote(root));

  MooncakeRequest request;
  AGENTKV_ASSIGN_OR_RETURN(request.timestamp_ms, ReadLength(*obj, "timestamp"));
  AGENTKV_ASSIGN_OR_RETURN(request.input_length, ReadLength(*obj, "input_length"));
  AGENTKV_ASSIGN_OR_RETURN(request.output_length, ReadLength(*obj, "output_length"));
  AGENTKV_ASSIGN_OR_RETURN(request.hash_ids, ReadHashIds(*obj));
  return request;
}

}  // namespace

StatusOr<std::vector<MooncakeRequest>> ParseMooncakeTrace(std::istream& in,
                                                          std::string_view source) {
  std::vector<MooncakeRequest> requests;
  AGENTKV_RETURN_IF_ERROR(
      ForEachJsonLine(in, source, [&](std::string_view line, int64_t) -> Status {
        StatusOr<MooncakeRequest> request = ParseLine(line);
        if (!request.ok()) return request.status();
        requests.push_back(std::move(request).value());
        return Status::Ok();
      }));
  return requests;
}

StatusOr<std::vector<MooncakeRequest>> ParseMooncakeTraceText(std::string_view text,
                                                              std::string_view source) {
  std::istringstream in{std::string(text)};
  return ParseMooncakeTrace(in, source);
}

StatusOr<std::vector<MooncakeRequest>> ReadMooncakeTrace(const std::string& path) {
  AGENTKV_ASSIGN_OR_RETURN(std::ifstream in, OpenTraceFile(path));
  return ParseMooncakeTrace(in, path);
}

}  // namespace agentkv::sim
