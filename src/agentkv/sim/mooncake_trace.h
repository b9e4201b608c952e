// Reader of Mooncake-format request traces (kvcache-ai/Mooncake, FAST25-release/traces/).
//
// A trace is JSON Lines: one request per line, an object with `timestamp` (ms from the start),
// `input_length` and `output_length` (tokens) and `hash_ids` (one id per 512-token prompt
// block; equal ids at equal positions after equal prefixes mean a shared prefix). Blank lines
// are skipped and unknown fields ignored; everything else that does not fit is an error that
// names the file, the 1-based line number and the field. The reader is the workload half of
// the simulator: it produces plain values and never touches the cache. Pure functions over
// their inputs; thread-safe.
#ifndef AGENTKV_SIM_MOONCAKE_TRACE_H_
#define AGENTKV_SIM_MOONCAKE_TRACE_H_

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::sim {

// One line of a Mooncake trace. Every field is required and non-negative.
struct MooncakeRequest {
  int64_t timestamp_ms = 0;
  int64_t input_length = 0;
  int64_t output_length = 0;
  // Prompt block ids in order, one per full or partial 512-token block.
  std::vector<uint64_t> hash_ids;

  friend bool operator==(const MooncakeRequest&, const MooncakeRequest&) = default;
};

// Parses the trace read from `in`, in file order. `source` names the input in error
// messages (usually the file path). InvalidArgument, naming `source`, the 1-based line and
// the field, for a line that is not a JSON object, a missing field or a value of the wrong
// type or sign, e.g.
//   trace.jsonl:17: field "hash_ids": expected an array of non-negative integers
//   trace.jsonl:3: malformed JSON: <reason>
// Unavailable when reading `in` fails before its end.
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

#endif  // AGENTKV_SIM_MOONCAKE_TRACE_H_
