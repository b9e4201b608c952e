// Byte-preserving edits of a JSON object's top-level members.
//
// The gateway forwards a client's /generate body to the router untouched except for the
// members it owns (`rid`, `session_id`). These functions splice those members in place: every
// other byte of the input (whitespace, key order, number spelling, unknown fields, unicode
// escapes) stays identical, so what the engine sees is what the client sent. A small scanner
// records the byte spans of top-level members; nested values are skipped, not parsed.
// Pure functions; no state.
#ifndef AGENTKV_PROTOCOL_JSON_SPLICE_H_
#define AGENTKV_PROTOCOL_JSON_SPLICE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/protocol/json_util.h"

namespace agentkv::protocol {

// One top-level member of a JSON object, as byte offsets into the scanned text.
// text[key_begin, key_end) is the quoted key as written; text[value_begin, value_end) is the
// value as written (no surrounding whitespace).
struct MemberSpan {
  std::string key;  // The key decoded (escapes resolved), for comparison.
  size_t key_begin = 0;
  size_t key_end = 0;
  size_t value_begin = 0;
  size_t value_end = 0;
};

// The layout of one JSON object text.
struct ObjectLayout {
  std::vector<MemberSpan> members;  // In the order they appear.
  size_t open_brace = 0;            // Offset of '{'.
  size_t close_brace = 0;           // Offset of the matching '}'.
};

// Scans `json_object_text`, which must be one JSON object (validated with Boost.JSON under
// `limits` first). InvalidArgument when it is not valid JSON or not an object;
// ResourceExhausted over the limits.
StatusOr<ObjectLayout> ScanTopLevelMembers(std::string_view json_object_text,
                                           const JsonLimits& limits = {});

// Returns `json_object_text` with the value of top-level member `key` replaced by
// `value_json`, or, when there is no such member, with `"key":value_json` inserted after the
// last member (before the final '}' of an empty object). Every other byte is unchanged.
// A JSON object should not repeat a key; if it does, every copy is replaced, so that readers
// keeping the first and readers keeping the last duplicate (Python, Boost.JSON) agree.
// `key` is given unescaped and is escaped on insertion; `value_json` must be one valid JSON
// value. InvalidArgument when the input is not one JSON object or `value_json` is not valid
// JSON; ResourceExhausted over the limits.
StatusOr<std::string> SetTopLevelField(std::string_view json_object_text, std::string_view key,
                                       std::string_view value_json, const JsonLimits& limits = {});

// One member for SetTopLevelFields: `key` unescaped, `value_json` one valid JSON value.
struct FieldEdit {
  std::string_view key;
  std::string_view value_json;
};

// SetTopLevelField for several members at once, in one validation, one scan and one copy of
// the input (the gateway sets `rid`, `session_id` and a parent hint on bodies of up to
// megabytes): the result is byte for byte what applying SetTopLevelField for each edit in
// order would give. Each key must appear in `edits` at most once (InvalidArgument otherwise).
// Same failure statuses as SetTopLevelField.
StatusOr<std::string> SetTopLevelFields(std::string_view json_object_text,
                                        const std::vector<FieldEdit>& edits,
                                        const JsonLimits& limits = {});

// SetTopLevelFields for a caller that has already parsed `json_object_text` as one JSON object
// (under the limits it applies) and wrote each `value_json` itself: nothing is validated again,
// so the edits cost one scan and one copy (the gateway's forwarded bodies). Preconditions:
// `json_object_text` is one valid JSON object, each `value_json` one valid JSON value, each key
// in `edits` at most once. Text that breaks the first is never read out of bounds: it gives
// InvalidArgument, or output as malformed as the input.
StatusOr<std::string> SetTopLevelFieldsOfValidObject(std::string_view json_object_text,
                                                     const std::vector<FieldEdit>& edits);

// Returns `json_object_text` without top-level member `key` (every copy), removing one
// adjacent comma and the whitespace between it and the member; all other bytes are unchanged.
// Absent `key`: the input is returned unchanged. Same failure statuses as SetTopLevelField.
StatusOr<std::string> RemoveTopLevelField(std::string_view json_object_text, std::string_view key,
                                          const JsonLimits& limits = {});

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_JSON_SPLICE_H_
