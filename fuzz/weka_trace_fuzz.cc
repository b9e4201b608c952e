// Fuzzes the WEKA JSON reader and the line locator its errors use.
//
// Invariants: the reader returns one conversation or one InvalidArgument naming
// "<source>:<line>:" of a line that exists (found by a second pass over the text); every
// accepted request, of the main agent or a sub-agent, has t and think_time in [0, 365 days],
// in and out in [0, 2^40] and at most ceil(in / block_size) hash ids; each agent's think times
// add up to at most 365 days; sub-agent completions, durations and spawns are in [0, 365 days] and
// block_size in [1, 2^20]; the fallbacks counted (fields absent or null) are at most the
// entries that may lack them. FindJsonPathLine never reads past the text and names a line of it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/sim/workload/trace_input.h"
#include "agentkv/sim/workload/weka_trace.h"
#include "fuzz_check.h"
#include "trace_fuzz_support.h"

namespace {

using namespace agentkv;
using namespace agentkv::sim;

constexpr std::string_view kSource = "fuzz.json";

void CheckAgent(const std::vector<WekaRequest>& requests, int32_t block_size) {
  int64_t think_times = 0;
  for (const WekaRequest& r : requests) {
    FUZZ_CHECK(fuzzing::IsTime(r.t));
    FUZZ_CHECK(fuzzing::IsTime(r.think_time));
    FUZZ_CHECK(fuzzing::IsTime(r.api_time));
    FUZZ_CHECK(fuzzing::IsTokens(r.input_tokens));
    FUZZ_CHECK(fuzzing::IsTokens(r.output_tokens));
    FUZZ_CHECK(fuzzing::HashIdsFit(r.hash_ids.size(), r.input_tokens, block_size));
    think_times += r.think_time.ns();  // Bounded terms: no overflow before the check below.
    FUZZ_CHECK(think_times <= kMaxTimeNs);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  StatusOr<WekaConversation> conversation = ParseWekaTrace(text, kSource);
  if (conversation.ok()) {
    FUZZ_CHECK(conversation->source == kSource);
    FUZZ_CHECK(conversation->block_size >= 1 && conversation->block_size <= (1 << 20));
    CheckAgent(conversation->requests, conversation->block_size);
    for (const WekaSubagent& s : conversation->subagents) {
      FUZZ_CHECK(fuzzing::IsTime(s.completion) && fuzzing::IsTime(s.duration));
      FUZZ_CHECK(fuzzing::IsTime(s.spawn()) && s.spawn() <= s.completion);
      CheckAgent(s.requests, conversation->block_size);
    }
    const WekaFallbacks& f = conversation->fallbacks;
    const int64_t requests = conversation->TotalRequests();
    const auto subagents = static_cast<int64_t>(conversation->subagents.size());
    FUZZ_CHECK(f.block_size >= 0 && f.block_size <= 1);
    FUZZ_CHECK(f.think_time >= 0 && f.think_time <= requests);
    FUZZ_CHECK(f.api_time >= 0 && f.api_time <= requests);
    FUZZ_CHECK(f.stop >= 0 && f.stop <= requests);
    FUZZ_CHECK(f.subagent_duration >= 0 && f.subagent_duration <= subagents);
    FUZZ_CHECK(f.subagent_status >= 0 && f.subagent_status <= subagents);
    FUZZ_CHECK(f.none() == f.Describe().empty());
  } else {
    fuzzing::CheckReaderError(conversation.status(), kSource, text);
  }

  // The locator on a path built from the input's first bytes.
  static const std::vector<std::string> kPaths = {"",
                                                  "requests",
                                                  "requests[0]",
                                                  "requests[1].in",
                                                  "requests[0].requests[2].t",
                                                  "a.b[3]",
                                                  "requests[",
                                                  "x[99999999999999999999]"};
  const std::string& path = kPaths[size > 0 ? data[0] % kPaths.size() : 0];
  std::istringstream in{std::string(text)};
  const std::optional<int64_t> line = FindJsonPathLine(in, path);
  if (line.has_value()) FUZZ_CHECK(*line >= 1 && *line <= fuzzing::LineCount(text));
  return 0;
}
