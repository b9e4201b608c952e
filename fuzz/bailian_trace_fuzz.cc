// Fuzzes the Bailian JSONL reader and the grouping of its requests into conversations.
//
// Invariants: the reader returns requests or one InvalidArgument naming "<source>:<line>:" of a
// line that exists; every accepted request has a timestamp in [0, 365 days], lengths in
// [0, 2^40], turn in [1, 2^32], at most ceil(input_length / 16) hash ids, a chat_id unique in
// the file and a parent that is -1 or an earlier chat_id. Grouping accepted requests never
// aborts, keeps every request exactly once, and gives times and think times in [0, 365 days]
// (relative to each conversation's start, which is a timestamp of the file).
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

#include "agentkv/sim/workload/bailian_trace.h"
#include "fuzz_check.h"
#include "trace_fuzz_support.h"

namespace {

using namespace agentkv;
using namespace agentkv::sim;

constexpr std::string_view kSource = "fuzz.jsonl";

void CheckAccepted(const std::vector<BailianRequest>& requests) {
  std::set<int64_t> seen;
  for (const BailianRequest& r : requests) {
    FUZZ_CHECK(fuzzing::IsTime(r.timestamp));
    FUZZ_CHECK(fuzzing::IsTokens(r.input_length));
    FUZZ_CHECK(fuzzing::IsTokens(r.output_length));
    FUZZ_CHECK(r.turn >= 1 && r.turn <= kMaxCount);
    FUZZ_CHECK(fuzzing::HashIdsFit(r.hash_ids.size(), r.input_length, kBailianBlockSize));
    FUZZ_CHECK(r.chat_id >= 0);
    FUZZ_CHECK(r.parent_chat_id == -1 || seen.contains(r.parent_chat_id));
    FUZZ_CHECK(seen.insert(r.chat_id).second);
  }

  const AgenticWorkload workload = GroupBailianConversations(requests);
  FUZZ_CHECK(workload.starts.size() == workload.conversations.size());
  size_t grouped = 0;
  for (size_t k = 0; k < workload.conversations.size(); ++k) {
    const WekaConversation& c = workload.conversations[k];
    FUZZ_CHECK(fuzzing::IsTime(workload.starts[k]));
    FUZZ_CHECK(c.block_size == kBailianBlockSize);
    FUZZ_CHECK(c.subagents.empty());
    FUZZ_CHECK(!c.requests.empty());
    for (const WekaRequest& r : c.requests) {
      FUZZ_CHECK(fuzzing::IsTime(r.t));
      FUZZ_CHECK(fuzzing::IsTime(r.think_time));
      FUZZ_CHECK(fuzzing::IsTokens(r.input_tokens) && fuzzing::IsTokens(r.output_tokens));
    }
    grouped += c.requests.size();
  }
  FUZZ_CHECK(grouped == requests.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  StatusOr<std::vector<BailianRequest>> requests = ParseBailianTraceText(text, kSource);
  if (requests.ok()) {
    CheckAccepted(*requests);
  } else {
    fuzzing::CheckReaderError(requests.status(), kSource, text);
  }
  return 0;
}
