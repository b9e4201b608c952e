// JSON plumbing shared by the protocol parsers and serializers.
//
// Parsing goes through Boost.JSON with explicit size and depth limits, and typed field readers
// that turn a wrong type into an InvalidArgument naming the JSON path
// ("sampling_params.max_new_tokens: expected a non-negative integer"). Writing goes through
// JsonWriter, which prints compact JSON the way SGLang's orjson responses look and prints
// doubles as the shortest text that reads back to the same value. Nothing here throws: Boost
// exceptions are caught at this boundary. Pure functions; JsonWriter is thread-compatible.
#ifndef AGENTKV_PROTOCOL_JSON_UTIL_H_
#define AGENTKV_PROTOCOL_JSON_UTIL_H_

#include <boost/json/object.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/storage_ptr.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::protocol {

// The deepest nesting any parse accepts. Boost.JSON's parser recurses once per level, so a
// larger JsonLimits::max_depth is clamped to this to keep the stack bounded.
inline constexpr int kMaxJsonDepth = 1000;

// Limits applied to one JSON document before and while it is parsed.
struct JsonLimits {
  // Default: 64 MiB. Larger documents are ResourceExhausted before any parsing.
  size_t max_bytes = size_t{64} << 20;
  // Default: 64. Deeper nesting of arrays/objects is ResourceExhausted. Range: [1,
  // kMaxJsonDepth]; values outside are clamped.
  int max_depth = 64;
};

// Parses `text` as exactly one JSON document into a value allocated from `storage`.
// `what` names the document in error messages ("generate request").
// ResourceExhausted when `text` is over `limits.max_bytes` or nests deeper than
// `limits.max_depth`; InvalidArgument when it is not valid JSON (incl. invalid UTF-8).
StatusOr<boost::json::value> ParseJson(std::string_view text, const JsonLimits& limits,
                                       std::string_view what,
                                       boost::json::storage_ptr storage = {});

// ParseJson for documents that must be one JSON object: also InvalidArgument
// "<what>: expected a JSON object" when the document is anything else. On success the value
// is an object (`.as_object()` is safe).
StatusOr<boost::json::value> ParseJsonObject(std::string_view text, const JsonLimits& limits,
                                             std::string_view what,
                                             boost::json::storage_ptr storage = {});

// Checks that `text` is exactly one valid JSON document without building it (constant memory
// apart from the parser's depth stack). Same statuses as ParseJson.
Status ValidateJson(std::string_view text, const JsonLimits& limits, std::string_view what);

// The pieces ParseJson is made of, for parsers that run boost::json::basic_parser with their
// own handler (ParseGenerateRequest counts `input_ids` without building them) and must fail
// exactly as ParseJson does. CheckJsonSize: ResourceExhausted when `text` is over
// `limits.max_bytes`. JsonParseOptionsFor: the parser options for `limits` (depth clamped to
// kMaxJsonDepth). JsonErrorAt: the status for parser error `ec` at byte `offset` of `what`
// (ResourceExhausted for too deep, InvalidArgument otherwise).
Status CheckJsonSize(std::string_view text, const JsonLimits& limits, std::string_view what);
boost::json::parse_options JsonParseOptionsFor(const JsonLimits& limits);
Status JsonErrorAt(const boost::system::error_code& ec, size_t offset, std::string_view what);

// "parent.key", or "key" when `parent` is empty.
std::string JoinPath(std::string_view parent, std::string_view key);
// "parent[index]".
std::string IndexPath(std::string_view parent, size_t index);

// Typed readers for one member of `object`. `path` is the member's JSON path used in errors
// ("<path>: expected ..."). An absent member or a JSON null leaves `*out` unchanged (the
// caller's default) and returns OK; a member of the wrong type returns InvalidArgument.
Status ReadString(const boost::json::object& object, std::string_view key, std::string_view path,
                  std::string* out);
Status ReadOptionalString(const boost::json::object& object, std::string_view key,
                          std::string_view path, std::optional<std::string>* out);
Status ReadBool(const boost::json::object& object, std::string_view key, std::string_view path,
                bool* out);
Status ReadOptionalBool(const boost::json::object& object, std::string_view key,
                        std::string_view path, std::optional<bool>* out);
// Integers must be JSON integers that fit int64 (1.0 is rejected: it is a float to SGLang).
Status ReadInt64(const boost::json::object& object, std::string_view key, std::string_view path,
                 int64_t* out);
Status ReadNonNegativeInt64(const boost::json::object& object, std::string_view key,
                            std::string_view path, int64_t* out);
Status ReadOptionalInt64(const boost::json::object& object, std::string_view key,
                         std::string_view path, std::optional<int64_t>* out);
// Numbers accept JSON integers and floats.
Status ReadDouble(const boost::json::object& object, std::string_view key, std::string_view path,
                  double* out);
Status ReadOptionalDouble(const boost::json::object& object, std::string_view key,
                          std::string_view path, std::optional<double>* out);

// The value as an int64 when it is a JSON integer in range; nullopt otherwise.
std::optional<int64_t> AsInt64(const boost::json::value& value);
// The value as a double when it is a JSON number; nullopt otherwise.
std::optional<double> AsDouble(const boost::json::value& value);
// The member, or nullptr when absent or JSON null.
const boost::json::value* FindNonNull(const boost::json::object& object, std::string_view key);
// The value as an object, or InvalidArgument "<path>: expected an object".
StatusOr<const boost::json::object*> ExpectObject(const boost::json::value& value,
                                                  std::string_view path);
// The member, or InvalidArgument "<key>: required" when absent or JSON null (a required member;
// its type is then checked by one of the readers above).
StatusOr<const boost::json::value*> FindRequired(const boost::json::object& object,
                                                 std::string_view key);

// Appends `value` as a JSON string literal: quotes, backslashes and control characters are
// escaped; other bytes (UTF-8) are copied as they are.
void AppendJsonString(std::string& out, std::string_view value);
// Appends the shortest decimal that reads back as `value`, Python-style: integral values keep
// a ".0" ("1.0", "262144.0"), large or small ones use exponents ("1e-05"). NaN and
// infinities, which JSON cannot spell, become null (as orjson writes them).
void AppendJsonDouble(std::string& out, double value);
// Appends the same shortest round-trip decimal without the NaN/infinity handling; used by the
// Prometheus writer. Precondition: `value` is finite.
void AppendShortestDouble(std::string& out, double value);

// Builds compact JSON text. Commas are inserted automatically; the caller keeps keys and
// values balanced (a Key must be followed by exactly one value or container).
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // Appends `json`, which must already be one valid JSON value.
  JsonWriter& Raw(std::string_view json);
  // Appends a Boost.JSON value (doubles printed as AppendJsonDouble does).
  JsonWriter& Value(const boost::json::value& value);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void BeforeValue();

  std::string out_;
  bool need_comma_ = false;
};

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_JSON_UTIL_H_
