// Fuzzes the Mooncake JSONL reader and the bounded line reader every JSONL trace goes through.
//
// Invariants: the reader returns requests or one InvalidArgument naming "<source>:<line>:" of a
// line that exists; every accepted request has a timestamp in [0, 365 days], lengths in
// [0, 2^40] and at most ceil(input_length / 512) hash ids; writing the accepted requests back
// as JSONL and reading them again gives the same requests (timestamps to within rounding).
// The line reader (ForEachJsonLine, here with a small line bound taken from the input) visits
// the same lines with the same values and stops at the same line as a whole-line reference:
// std::getline, then boost::json::parse of each non-blank line.
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/sim/workload/mooncake_trace.h"
#include "agentkv/sim/workload/trace_input.h"
#include "fuzz_check.h"
#include "trace_fuzz_support.h"

namespace {

using namespace agentkv;
using namespace agentkv::sim;

constexpr std::string_view kSource = "fuzz.jsonl";

void CheckAccepted(const std::vector<MooncakeRequest>& requests) {
  for (const MooncakeRequest& r : requests) {
    FUZZ_CHECK(fuzzing::IsTime(r.timestamp));
    FUZZ_CHECK(fuzzing::IsTokens(r.input_length));
    FUZZ_CHECK(fuzzing::IsTokens(r.output_length));
    FUZZ_CHECK(fuzzing::HashIdsFit(r.hash_ids.size(), r.input_length, kMooncakeBlockSize));
  }
  std::string text;
  for (const MooncakeRequest& r : requests) {
    char timestamp[40];
    std::snprintf(timestamp, sizeof(timestamp), "%.17g",
                  static_cast<double>(r.timestamp.ns()) / 1e6);
    text += std::string(R"({"timestamp": )") + timestamp +
            ", \"input_length\": " + std::to_string(r.input_length) +
            ", \"output_length\": " + std::to_string(r.output_length) + ", \"hash_ids\": [";
    for (size_t i = 0; i < r.hash_ids.size(); ++i) {
      text += (i > 0 ? "," : "") + std::to_string(r.hash_ids[i]);
    }
    text += "]}\n";
  }
  StatusOr<std::vector<MooncakeRequest>> again = ParseMooncakeTraceText(text, kSource);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->size() == requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const MooncakeRequest& a = requests[i];
    const MooncakeRequest& b = (*again)[i];
    FUZZ_CHECK(a.input_length == b.input_length && a.output_length == b.output_length);
    FUZZ_CHECK(a.hash_ids == b.hash_ids);
    const int64_t drift = a.timestamp.ns() - b.timestamp.ns();
    FUZZ_CHECK(drift >= -16 && drift <= 16);
  }
}

// What ForEachJsonLine, or the reference, saw: (line, compact JSON) of each visited line, then
// the line of the error (0 when none) and whether it was the line bound.
struct Walk {
  std::vector<std::pair<int64_t, std::string>> lines;
  int64_t error_line = 0;
  bool too_long = false;
};

Walk Streamed(std::string_view text, int64_t max_line_bytes) {
  Walk walk;
  std::istringstream in{std::string(text)};
  const Status status = ForEachJsonLine(
      in, kSource,
      [&](const boost::json::value& value, int64_t line) {
        walk.lines.emplace_back(line, boost::json::serialize(value));
        return Status::Ok();
      },
      max_line_bytes);
  if (!status.ok()) {
    fuzzing::CheckReaderError(status, kSource, text);
    walk.error_line = std::stoll(status.message().substr(kSource.size() + 1));
    walk.too_long = status.message().find(": line longer than ") != std::string::npos;
  }
  return walk;
}

Walk Reference(std::string_view text, int64_t max_line_bytes) {
  constexpr std::string_view kBlank = " \t\r\n\f\v";
  Walk walk;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const size_t first = line.find_first_not_of(kBlank);
    if (static_cast<int64_t>(line.size()) > max_line_bytes) {
      walk.error_line = number;
      walk.too_long = true;
      return walk;
    }
    if (first == std::string::npos) continue;
    std::error_code ec;
    const boost::json::value value = boost::json::parse(std::string_view(line).substr(first), ec);
    if (ec) {
      walk.error_line = number;
      return walk;
    }
    walk.lines.emplace_back(number, boost::json::serialize(value));
  }
  return walk;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  StatusOr<std::vector<MooncakeRequest>> requests = ParseMooncakeTraceText(text, kSource);
  if (requests.ok()) {
    CheckAccepted(*requests);
  } else {
    fuzzing::CheckReaderError(requests.status(), kSource, text);
  }

  // The line reader against the reference, with a bound of 1 to 256 bytes from the first byte.
  const int64_t max_line_bytes = size > 0 ? 1 + data[0] : 256;
  const Walk streamed = Streamed(text, max_line_bytes);
  const Walk reference = Reference(text, max_line_bytes);
  FUZZ_CHECK(streamed.lines == reference.lines);
  FUZZ_CHECK(streamed.error_line == reference.error_line);
  // A line both too long and malformed may fail either way, whichever the stream meets first.
  if (!reference.too_long) FUZZ_CHECK(!streamed.too_long);
  return 0;
}
