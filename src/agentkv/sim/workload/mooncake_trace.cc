// Invariants: every returned request has a timestamp in [0, kMaxTimeNs], lengths in
// [0, kMaxTokens] and at most ceil(input_length / 512) hash ids; requests keep file order; a
// line yields exactly one request or the whole parse fails with the first error. No exception
// escapes: Boost.JSON is used only through its error_code and if_* interfaces.
#include "agentkv/sim/workload/mooncake_trace.h"

#include <boost/json/value.hpp>
#include <sstream>
#include <string>
#include <utility>

#include "agentkv/sim/workload/trace_input.h"

namespace agentkv::sim {
namespace {

// Parses one line's value; errors carry no location.
StatusOr<MooncakeRequest> ParseRequest(const boost::json::value& root) {
  const boost::json::object* obj = root.if_object();
  if (obj == nullptr) return InvalidArgumentError("expected a JSON object, got " + Quote(root));
  const TraceFields fields = TraceFields::OfRecord(*obj);
  MooncakeRequest request;
  AGENTKV_ASSIGN_OR_RETURN(request.timestamp, fields.Millis("timestamp"));
  AGENTKV_ASSIGN_OR_RETURN(request.input_length, fields.Tokens("input_length"));
  AGENTKV_ASSIGN_OR_RETURN(request.output_length, fields.Tokens("output_length"));
  AGENTKV_ASSIGN_OR_RETURN(request.hash_ids, fields.HashIds("hash_ids"));
  AGENTKV_RETURN_IF_ERROR(CheckHashIdCount(fields.Name("hash_ids"), request.hash_ids.size(),
                                           "input_length", request.input_length,
                                           kMooncakeBlockSize));
  return request;
}

}  // namespace

StatusOr<std::vector<MooncakeRequest>> ParseMooncakeTrace(std::istream& in,
                                                          std::string_view source) {
  std::vector<MooncakeRequest> requests;
  AGENTKV_RETURN_IF_ERROR(
      ForEachJsonLine(in, source, [&](const boost::json::value& line, int64_t) -> Status {
        StatusOr<MooncakeRequest> request = ParseRequest(line);
        if (!request.ok()) return request.status();
        requests.push_back(std::move(request).value());
        return Status::Ok();
      }));
  if (requests.empty()) return EmptyTraceError(source);
  return requests;
}

StatusOr<std::vector<MooncakeRequest>> ParseMooncakeTraceText(std::string_view text,
                                                              std::string_view source) {
  std::istringstream in{std::string(text)};
  return ParseMooncakeTrace(in, source);
}

StatusOr<std::vector<MooncakeRequest>> ReadMooncakeTrace(const std::string& path) {
  AGENTKV_ASSIGN_OR_RETURN(TraceFile file, TraceFile::Open(path));
  return ParseMooncakeTrace(file.stream(), path);
}

}  // namespace agentkv::sim
