// Helpers shared by the trace readers (Mooncake, Bailian and WEKA): reading a trace as a
// stream of bounded lines, parsing it as JSON while it streams, reading bounded numeric fields,
// reading the named fields of a trace object (one reader for every format), quoting an
// offending JSON value inside an error message and opening a trace file, plain or gzip, with
// the readers' common error statuses. Internal to the sim module; the readers' headers are the
// public contract.
//
// Every trace is hostile input: a line longer than its bound is refused as soon as the bound
// is passed, without reading the rest of it; JSON is parsed chunk by chunk as it is read, so
// memory follows the parsed values, never the raw bytes (a gigabyte of blanks costs nothing).
// Numbers are checked by kind with the rules of agentkv/base/bounds.h. Errors name the source
// and the 1-based line: "<source>:<line>: <message>". A gzip file (RFC 1952, told by its first
// two bytes whatever its name) is decompressed as it is read, so a small file that inflates to
// gigabytes costs time, never memory. Pure functions over their inputs (TraceFile reads the
// file system); thread-safe. No exception escapes.
#ifndef AGENTKV_SIM_WORKLOAD_TRACE_INPUT_H_
#define AGENTKV_SIM_WORKLOAD_TRACE_INPUT_H_

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <functional>
#include <ios>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/base/bounds.h"
#include "agentkv/base/status.h"
#include "agentkv/base/time.h"

namespace agentkv::sim {

// Offending values are quoted in error messages up to this many characters.
inline constexpr size_t kMaxQuotedChars = 40;

// The longest line a trace may have, in bytes (without its newline): the bound of one input
// unit. A Mooncake or Bailian line of a 1e7-token prompt (the largest context windows) holds
// at most 625,000 hash ids, about 8 MB; a WEKA file is usually one line of a few MB.
inline constexpr int64_t kMaxTraceLineBytes = kMaxInputBytes;

// `value` as compact JSON, cut to its first kMaxQuotedChars characters followed by "..." when
// longer, so that an error stays one readable line.
[[nodiscard]] std::string Quote(const boost::json::value& value);

// A trace file opened for reading: its bytes as written, or decompressed when the file is
// gzip (its first two bytes are 1f 8b; several members are read one after the other). Reading
// a corrupt or truncated gzip file stops the readers below with InvalidArgument
// "<source>:<line>: cannot decompress: <reason>". Movable, not copyable; thread-compatible.
class TraceFile {
 public:
  // Opens the file at `path`. InvalidArgument ("cannot read trace file "<path>": Is a
  // directory") when `path` is a directory, NotFound ("cannot open trace file "<path>":
  // <reason from errno>") when it cannot be opened.
  [[nodiscard]] static StatusOr<TraceFile> Open(const std::string& path);

  TraceFile(TraceFile&&) noexcept;
  TraceFile& operator=(TraceFile&&) noexcept;
  ~TraceFile();

  // The file's (decompressed) bytes, from where the last read stopped.
  std::istream& stream();
  // Whether the file is gzip.
  bool compressed() const { return compressed_; }
  // Starts the stream over from the first byte (the WEKA reader reads a file twice to find the
  // line of an error). Unavailable when the file cannot be read from its start again.
  [[nodiscard]] Status Rewind();

 private:
  TraceFile(std::string path, std::unique_ptr<std::ifstream> file, bool compressed);
  // (Re)builds the decompressing stream over file_ from its current position.
  void StartDecompressing();

  std::string path_;
  std::unique_ptr<std::ifstream> file_;
  bool compressed_ = false;
  // Over file_ when compressed_ (a boost::iostreams::filtering_istream, kept out of this
  // header).
  std::unique_ptr<std::istream> gunzip_;
};

// Calls `visit(value, line_number)` with the JSON value of every non-blank line of `in` (a
// JSON Lines trace), in order; line numbers are 1-based and count blank lines too. Errors are
// InvalidArgument "<source>:<line>: <what>": "line longer than <max_line_bytes> bytes" as soon
// as a line passes the bound, "malformed JSON: <reason>" as soon as a line stops being JSON,
// or the message of the first non-OK status `visit` returns, which stops the walk. Unavailable
// when reading `in` fails before its end. Precondition: max_line_bytes >= 1.
[[nodiscard]] Status ForEachJsonLine(
    std::istream& in, std::string_view source,
    const std::function<Status(const boost::json::value& value, int64_t line_number)>& visit,
    int64_t max_line_bytes = kMaxTraceLineBytes);

// Parses all of `in` as one JSON value (a WEKA file), whose lines are bounded as above.
// InvalidArgument "<source>:<line>: line longer than <max_line_bytes> bytes",
// "<source>:<line>: malformed JSON at column <c>: <reason>" (also for text after the value,
// "extra data after the top-level value", and for empty input); Unavailable when reading
// fails. Precondition: max_line_bytes >= 1.
[[nodiscard]] StatusOr<boost::json::value> ReadJsonDocument(
    std::istream& in, std::string_view source, int64_t max_line_bytes = kMaxTraceLineBytes);

// The 1-based line of `in` where the value at JSON `path` begins, e.g. "requests[1].in" (""
// is the top-level value); when no value has that path, the line of its longest prefix that
// exists; nullopt when `path` does not parse ("key", "key[3]", joined by '.'; keys without
// '.' or '[') or `in` holds no JSON value. When keys repeat, the last value wins (as in a
// parsed boost::json::value). Reads `in` to its end, by the same bounded lines as
// ReadJsonDocument, keeping only the current path in memory: the readers use it to locate an
// error found in a parsed document. Precondition: max_line_bytes >= 1.
[[nodiscard]] std::optional<int64_t> FindJsonPathLine(std::istream& in, std::string_view path,
                                                      int64_t max_line_bytes = kMaxTraceLineBytes);

// ---- Bounded fields ----------------------------------------------------------------------
// Each reads one JSON number by the bounds.h rule of its kind. `field` names the value in the
// message (the readers pass `field "input_length"` or a JSON path); errors carry no location,
// the reader adds it. Out of range is the bounds.h message, "<field>: <value> is out of range
// [0, <hi>] <unit>"; a value of the wrong type is "<field>: expected <what>, got <quoted>".

// Tokens: an integer in [0, kMaxTokens].
[[nodiscard]] StatusOr<int64_t> ReadTokens(const boost::json::value& value, std::string_view field);
// A count: an integer in [`min`, kMaxCount]; `min` is 0 or 1. Below `min` is "expected an
// integer >= <min>, got <value>".
[[nodiscard]] StatusOr<int64_t> ReadCount(const boost::json::value& value, std::string_view field,
                                          int64_t min = 0);
// A time or duration given as a JSON number (integer or not) of seconds or milliseconds,
// converted by TimeFromSeconds / TimeFromMillis: [0, 365 days].
[[nodiscard]] StatusOr<TimeNs> ReadSeconds(const boost::json::value& value, std::string_view field);
[[nodiscard]] StatusOr<TimeNs> ReadMillis(const boost::json::value& value, std::string_view field);

// Hash ids: an array of integers in [0, 2^64) (ids are names, not quantities: nothing adds or
// multiplies them, so any id is accepted). "<field>: expected an array of non-negative
// integers, got <quoted>" or "..., element <i> is <quoted>".
[[nodiscard]] StatusOr<std::vector<uint64_t>> ReadHashIds(const boost::json::value& value,
                                                          std::string_view field);

// The number of hash ids a prompt of `input_tokens` may carry: ceil(input_tokens /
// block_size), one per full or partial block. More would make the replayed prompt longer than
// the recorded one (the replay sizes a prompt by the larger of the two). OK or
// InvalidArgument "<field>: <n> ids for <input_field> <tokens>, more than ceil(<tokens> /
// <block_size>) = <max>". Preconditions: 0 <= input_tokens <= kMaxTokens, block_size >= 1.
[[nodiscard]] Status CheckHashIdCount(std::string_view field, size_t count,
                                      std::string_view input_field, int64_t input_tokens,
                                      int64_t block_size);

// InvalidArgument "<source>: no requests (an empty trace)": every reader refuses a trace that
// holds no request (an empty file, blank lines only, a WEKA file whose requests[] are empty),
// since a replay of it would report zeros as if they were measured.
[[nodiscard]] Status EmptyTraceError(std::string_view source);

// "<name>: <expectation>, got <quoted value>", the message of a value of the wrong kind.
[[nodiscard]] Status MistypedError(std::string_view name, std::string_view expectation,
                                   const boost::json::value& got);

// ---- Fields of a trace object ------------------------------------------------------------
// The one reader of named fields for every trace format. It names a field in its messages the
// way its format locates errors: a JSON Lines record (Mooncake, Bailian) as `field "<key>"`
// (ForEachJsonLine adds "<source>:<line>: "), a WEKA document by the field's JSON path, e.g.
// `requests[2].in` (the WEKA reader finds the line of that path). An absent required field is
// "<name>: missing (<expectation>)", where <expectation> is the phrase a value of the wrong
// kind gets ("expected a non-negative integer", "expected a number of seconds", ...); a value
// of the wrong kind or out of range is the message of the matching free reader above. Holds a
// reference to the object, which must outlive it; thread-compatible.
class TraceFields {
 public:
  // The fields of one JSON Lines record: named `field "<key>"`.
  static TraceFields OfRecord(const boost::json::object& object);
  // The fields of the object at JSON `path` ("" for the top level): named by their path.
  static TraceFields AtPath(const boost::json::object& object, std::string path);

  // How field `key` is named in messages.
  [[nodiscard]] std::string Name(std::string_view key) const;
  // InvalidArgument "<Name(key)>: <what>", for a check of the field's value the readers make.
  [[nodiscard]] Status Error(std::string_view key, std::string_view what) const;
  // The value of `key`; nullptr when absent.
  [[nodiscard]] const boost::json::value* Find(std::string_view key) const;
  // Whether `key` is present with a value other than null. An optional field that is absent
  // or null gets its documented fallback; a required one that is null is of the wrong kind.
  [[nodiscard]] bool Has(std::string_view key) const;

  // Required fields, each by the free reader of its kind above.
  [[nodiscard]] StatusOr<int64_t> Tokens(std::string_view key) const;
  [[nodiscard]] StatusOr<int64_t> Count(std::string_view key, int64_t min = 0) const;
  [[nodiscard]] StatusOr<TimeNs> Seconds(std::string_view key) const;
  [[nodiscard]] StatusOr<TimeNs> Millis(std::string_view key) const;
  [[nodiscard]] StatusOr<std::vector<uint64_t>> HashIds(std::string_view key) const;
  // A JSON string ("expected a string").
  [[nodiscard]] StatusOr<std::string> String(std::string_view key) const;
  // A JSON array ("expected an array").
  [[nodiscard]] StatusOr<const boost::json::array*> Array(std::string_view key) const;
  // An id: an integer in [`min`, 2^63). Ids are names, not quantities (nothing adds or
  // multiplies them), so no bounds.h rule applies beyond fitting int64. `expectation` says
  // what is expected, e.g. "expected -1 or a non-negative integer".
  [[nodiscard]] StatusOr<int64_t> Id(std::string_view key, int64_t min,
                                     std::string_view expectation) const;

  // Optional fields: as above when present; zero or "" when absent or null (JSON null is how
  // writers say "not recorded").
  [[nodiscard]] StatusOr<TimeNs> OptionalSeconds(std::string_view key) const;
  [[nodiscard]] StatusOr<TimeNs> OptionalMillis(std::string_view key) const;
  [[nodiscard]] StatusOr<std::string> OptionalString(std::string_view key) const;
  // An array of strings ("expected an array of strings, got <quoted>" or "..., element <i> is
  // <quoted>"), as many as the line bound lets a file hold; empty when absent or null.
  [[nodiscard]] StatusOr<std::vector<std::string>> OptionalStrings(std::string_view key) const;

 private:
  TraceFields(const boost::json::object& object, std::string path, bool record)
      : object_(&object), path_(std::move(path)), record_(record) {}

  // The value of required field `key`, or "<name>: missing (<expectation>)".
  StatusOr<const boost::json::value*> Required(std::string_view key,
                                               std::string_view expectation) const;

  const boost::json::object* object_;
  std::string path_;  // JSON path of the object; unused for a record.
  bool record_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_TRACE_INPUT_H_
