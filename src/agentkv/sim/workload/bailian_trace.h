// Reader of Alibaba Bailian usage traces (alibaba-edu/qwen-bailian-usagetraces-anon).
//
// A trace is JSON Lines: one request per line, an object with `chat_id` (request id),
// `parent_chat_id` (-1 for a root; otherwise the previous turn of the same conversation, not a
// parent agent), `timestamp` (seconds from the start of the file), `input_length` and
// `output_length` (tokens), `type` (e.g. "text", "search", "thinking"), `turn` (from 1) and
// `hash_ids` (one id per 16-token prompt block, ceil(input_length / 16) of them). Blank lines
// are skipped and unknown fields ignored; anything else that does not fit (a wrong type, a
// number out of the range of its kind in agentkv/base/bounds.h, a line longer than
// kMaxTraceLineBytes) is an InvalidArgument naming the file, the 1-based line and the field,
// in the style of mooncake_trace.h. GroupBailianConversations turns the requests into the common
// agentic workload shape (agentic_workload.h). Pure functions over their inputs (ReadBailianTrace
// reads the file system); thread-safe. No exception escapes.
#ifndef AGENTKV_SIM_WORKLOAD_BAILIAN_TRACE_H_
#define AGENTKV_SIM_WORKLOAD_BAILIAN_TRACE_H_

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/sim/workload/agentic_workload.h"

namespace agentkv::sim {

// Tokens per Bailian hash id.
inline constexpr int32_t kBailianBlockSize = 16;

// One line of a Bailian trace. Every field is required.
struct BailianRequest {
  // `chat_id`: an integer in [0, 2^63), unique within the file.
  int64_t chat_id = 0;
  // `parent_chat_id`: -1, or the chat_id of an earlier line (the previous turn).
  int64_t parent_chat_id = -1;
  // `timestamp`: a number of seconds in [0, 365 days], rounded to the nanosecond.
  TimeNs timestamp;
  // `input_length`, `output_length`: integers in [0, 2^40] (tokens).
  int64_t input_length = 0;
  int64_t output_length = 0;
  // `type`: a string (not checked against a list; new files add values).
  std::string type;
  // `turn`: an integer in [1, 2^32].
  int64_t turn = 1;
  // `hash_ids`: integers in [0, 2^64), one per 16-token block: at most
  // ceil(input_length / 16), since the replay sizes a prompt by the larger of input_length and
  // its blocks (fewer are accepted: third-party re-chunkings with larger blocks exist).
  std::vector<uint64_t> hash_ids;

  friend bool operator==(const BailianRequest&, const BailianRequest&) = default;
};

// Parses the trace read from `in`, in file order. `source` names the input in messages.
// InvalidArgument `<source>:<line>: field "<name>": <what>` for a missing or ill-typed field,
// e.g. `t.jsonl:4: field "turn": expected an integer >= 1, got 0`, a value out of range
// (`t.jsonl:2: field "timestamp": 1e+300 is out of range [0, 31536000] s`), a duplicate chat_id
// (`field "chat_id": duplicate id 7, first on line 2`) or a parent_chat_id that names no
// earlier line (`field "parent_chat_id": no earlier request has chat_id 55`);
// `<source>:<line>: malformed JSON: <reason>` for a line that is not JSON,
// `<source>:<line>: line longer than <n> bytes`, `<source>: no requests (an empty trace)` when
// no line holds a request. Unavailable when reading `in` fails before its end.
StatusOr<std::vector<BailianRequest>> ParseBailianTrace(std::istream& in, std::string_view source);

// ParseBailianTrace over the text `text` (convenient for tests).
StatusOr<std::vector<BailianRequest>> ParseBailianTraceText(std::string_view text,
                                                            std::string_view source);

// Reads and parses the file at `path` (errors name `path` as given). NotFound when it cannot
// be opened; InvalidArgument for a directory; the errors of ParseBailianTrace otherwise.
StatusOr<std::vector<BailianRequest>> ReadBailianTrace(const std::string& path);

// Groups parsed requests into conversations by following parent_chat_id back to a root: one
// WekaConversation per root, in the order of the roots in `requests`, whose id is the root's
// chat_id as text, block_size is 16, and whose requests are the chain's requests in file
// order with `t` relative to the root's timestamp and `think_time` the gap since the previous
// request of the chain (the trace is open loop, so the gap includes the server time). `stop`
// is empty (Bailian does not record it) and there are no sub-agents. starts[i] is the root's
// timestamp. Precondition: `requests` passed ParseBailianTrace (parents precede children).
AgenticWorkload GroupBailianConversations(const std::vector<BailianRequest>& requests);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_BAILIAN_TRACE_H_
