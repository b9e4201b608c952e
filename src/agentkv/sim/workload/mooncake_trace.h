// Reader of Mooncake-format request traces (kvcache-ai/Mooncake, FAST25-release/traces/).
//
// A trace is JSON Lines: one request per line, an object with `timestamp` (ms from the start),
// `input_length` and `output_length` (tokens) and `hash_ids` (one id per 512-token prompt
// block; equal ids at equal positions after equal prefixes mean a shared prefix). Blank lines
// are skipped and unknown fields ignored; everything else that does not fit is an error that
// names the file, the 1-based line number and the field. Every number is checked by the rule
// of its kind (agentkv/base/bounds.h) where it is read, and lines are bounded
// (kMaxTraceLineBytes), so that a hostile file is refused quickly in bounded memory. The
// reader is the workload half of the simulator: it produces plain values and never touches
// the cache. Pure functions over their inputs; thread-safe.
#ifndef AGENTKV_SIM_WORKLOAD_MOONCAKE_TRACE_H_
#define AGENTKV_SIM_WORKLOAD_MOONCAKE_TRACE_H_

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"

namespace agentkv::sim {

// Tokens per Mooncake hash id.
inline constexpr int64_t kMooncakeBlockSize = 512;

// One line of a Mooncake trace. Every field is required.
struct MooncakeRequest {
  // `timestamp`: a number of milliseconds (integer or not) in [0, 365 days], rounded to the
  // nanosecond.
  TimeNs timestamp;
  // `input_length`, `output_length`: integers in [0, 2^40] (tokens).
  int64_t input_length = 0;
  int64_t output_length = 0;
  // `hash_ids`: prompt block ids in order (any integers in [0, 2^64)), one per full or partial
  // 512-token block: at most ceil(input_length / 512) of them.
  std::vector<uint64_t> hash_ids;

  friend bool operator==(const MooncakeRequest&, const MooncakeRequest&) = default;
};

// Parses the trace read from `in`, in file order. `source` names the input in error
// messages (usually the file path). InvalidArgument, naming `source`, the 1-based line and
// the field, for a line that is not a JSON object, a missing field, a value of the wrong type
// or out of its range, too many hash ids, or a line longer than kMaxTraceLineBytes, e.g.
//   trace.jsonl:17: field "hash_ids": expected an array of non-negative integers, got 3
//   trace.jsonl:2: field "input_length": 9223372036854775807 is out of range
//       [0, 1099511627776] tokens
//   trace.jsonl:3: malformed JSON: <reason>
//   trace.jsonl:1: line longer than 67108864 bytes
// and `<source>: no requests (an empty trace)` when no line holds a request. Unavailable when
// reading `in` fails before its end.
StatusOr<std::vector<MooncakeRequest>> ParseMooncakeTrace(std::istream& in,
                                                          std::string_view source);

// Parses the trace in `text` (convenient for tests); equivalent to ParseMooncakeTrace over a
// stream of `text`.
StatusOr<std::vector<MooncakeRequest>> ParseMooncakeTraceText(std::string_view text,
                                                              std::string_view source);

// Reads and parses the trace file at `path` (errors name `path` as given). NotFound when
// the file cannot be opened: `cannot open trace file "x": No such file or directory`; the
// parse errors of ParseMooncakeTrace otherwise.
StatusOr<std::vector<MooncakeRequest>> ReadMooncakeTrace(const std::string& path);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_MOONCAKE_TRACE_H_
