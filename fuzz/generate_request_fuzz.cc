// Fuzzes ParseGenerateRequest and the byte-preserving SetTopLevelField(s)/RemoveTopLevelField.
//
// Invariants: failures are InvalidArgument/ResourceExhausted; when a body parses, setting
// `rid` succeeds, the result parses with rid == "x" and every other field unchanged, every
// other top-level member is byte-identical, and removing `rid` again yields a valid request.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/protocol/generate.h"
#include "fuzz_check.h"

namespace {

using agentkv::StatusCode;
using namespace agentkv::protocol;

bool IsInputError(const agentkv::Status& status) {
  return status.code() == StatusCode::kInvalidArgument ||
         status.code() == StatusCode::kResourceExhausted;
}

// (key as written, value as written) of every top-level member except `rid`.
std::vector<std::pair<std::string_view, std::string_view>> OtherMembers(std::string_view text) {
  agentkv::StatusOr<ObjectLayout> layout = ScanTopLevelMembers(text);
  FUZZ_CHECK(layout.ok());
  std::vector<std::pair<std::string_view, std::string_view>> members;
  for (const MemberSpan& m : layout->members) {
    if (m.key == "rid") continue;
    members.emplace_back(text.substr(m.key_begin, m.key_end - m.key_begin),
                         text.substr(m.value_begin, m.value_end - m.value_begin));
  }
  return members;
}

void CheckSameExceptRid(const GenerateRequest& a, const GenerateRequest& b) {
  FUZZ_CHECK(a.session_id == b.session_id);
  FUZZ_CHECK(a.text == b.text);
  FUZZ_CHECK(a.input_ids == b.input_ids);
  FUZZ_CHECK(a.sampling_params == b.sampling_params);
  FUZZ_CHECK(a.stream == b.stream);
  FUZZ_CHECK(a.return_logprob == b.return_logprob);
  FUZZ_CHECK(a.priority == b.priority);
  FUZZ_CHECK(a.has_session_params == b.has_session_params);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const agentkv::StatusOr<GenerateRequest> parsed = ParseGenerateRequest(body);
  // The gateway's parse (input_ids counted, not kept) accepts and refuses exactly the same.
  const agentkv::StatusOr<GenerateRequest> summary =
      ParseGenerateRequest(body, {}, GenerateParseMode::kSummary);
  FUZZ_CHECK(summary.status() == parsed.status());
  if (!parsed.ok()) {
    FUZZ_CHECK(IsInputError(parsed.status()));
    // The splice functions must cope with anything too.
    const agentkv::StatusOr<std::string> edited = SetTopLevelField(body, "rid", "\"x\"");
    FUZZ_CHECK(edited.ok() || IsInputError(edited.status()));
    const agentkv::StatusOr<std::string> removed = RemoveTopLevelField(body, "rid");
    FUZZ_CHECK(removed.ok() == edited.ok());
    return 0;
  }
  FUZZ_CHECK(parsed->raw == body);
  FUZZ_CHECK(parsed->text.has_value() != parsed->input_ids.has_value());
  FUZZ_CHECK(parsed->input_ids.has_value() == parsed->input_id_count.has_value());
  FUZZ_CHECK(!parsed->input_ids.has_value() ||
             static_cast<int64_t>(parsed->input_ids->size()) == *parsed->input_id_count);
  FUZZ_CHECK(summary->input_id_count == parsed->input_id_count);
  FUZZ_CHECK(!summary->input_ids.has_value() && summary->raw.empty());
  FUZZ_CHECK(summary->text == parsed->text && summary->rid == parsed->rid);

  const agentkv::StatusOr<std::string> edited =
      SetTopLevelField(body, "rid", "\"x\"", JsonLimitsFor(ParseLimits{}));
  FUZZ_CHECK(edited.ok());
  // The gateway's one-pass edit equals the edits one after the other.
  const agentkv::StatusOr<std::string> both = SetTopLevelFields(
      body, {{"rid", "\"x\""}, {"session_id", "\"s\""}}, JsonLimitsFor(ParseLimits{}));
  FUZZ_CHECK(both.ok());
  FUZZ_CHECK(*both ==
             *SetTopLevelField(*edited, "session_id", "\"s\"", JsonLimitsFor(ParseLimits{})));
  // And without revalidation, as the gateway calls it on a body it parsed.
  FUZZ_CHECK(*both ==
             *SetTopLevelFieldsOfValidObject(body, {{"rid", "\"x\""}, {"session_id", "\"s\""}}));
  const agentkv::StatusOr<GenerateRequest> reparsed = ParseGenerateRequest(*edited);
  FUZZ_CHECK(reparsed.ok());
  FUZZ_CHECK(reparsed->rid == "x");
  CheckSameExceptRid(*parsed, *reparsed);
  FUZZ_CHECK(OtherMembers(body) == OtherMembers(*edited));

  // Everything outside the rid values is the input's bytes: the lengths add up.
  const agentkv::StatusOr<ObjectLayout> layout = ScanTopLevelMembers(body);
  FUZZ_CHECK(layout.ok());
  size_t old_rid_bytes = 0;
  size_t rid_members = 0;
  for (const MemberSpan& m : layout->members) {
    if (m.key != "rid") continue;
    old_rid_bytes += m.value_end - m.value_begin;
    ++rid_members;
  }
  if (rid_members > 0) {
    FUZZ_CHECK(edited->size() == body.size() - old_rid_bytes + 3 * rid_members);
  } else {
    const size_t inserted = layout->members.empty() ? 9 : 10;  // [,]"rid":"x"
    FUZZ_CHECK(edited->size() == body.size() + inserted);
  }

  const agentkv::StatusOr<std::string> removed = RemoveTopLevelField(*edited, "rid");
  FUZZ_CHECK(removed.ok());
  const agentkv::StatusOr<GenerateRequest> without = ParseGenerateRequest(*removed);
  FUZZ_CHECK(without.ok());
  FUZZ_CHECK(!without->rid.has_value());
  CheckSameExceptRid(*parsed, *without);
  FUZZ_CHECK(OtherMembers(*removed) == OtherMembers(body));
  return 0;
}
