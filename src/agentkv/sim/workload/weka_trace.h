// Reader of WEKA Claude Code traces (callanjfox/kv-cache-tester, `traces/*.json`).
//
// One file is one conversation: a JSON object whose `requests[]` holds, in timeline order,
// the main agent's model requests and `type: "subagent"` entries, each with its own nested
// `requests[]` whose times are relative to the sub-agent's spawn. A request carries `t`
// (seconds), `model`, `in` and `out` (tokens), `hash_ids` (one id per full 64-token prompt
// block, local to the file; sub-agents share the parent's namespace), `input_types` and
// `output_types` (the kinds of content sent and produced: "text", "tool_result", "thinking",
// "tool_use"), `stop`, `api_time` (server seconds) and `think_time`. A sub-agent entry's `t` is
// its COMPLETION on the parent's timeline (in the public traces, `t - duration_ms / 1000` is the
// end of the parent request that launched it, to within a second), `duration_ms` its run time,
// `status` "completed" (the parent waited for its result) or "async_launched" (it ran in the
// background). Unknown fields are ignored. An optional field that is absent or null (how
// writers say "not recorded": the public traces have `"duration_ms": null` on sub-agents
// launched in the background) gets the fallback its field documents below, and the reader
// counts it per kind (WekaFallbacks), so that a replay can say what it filled in. Anything
// else that does not fit a field (a wrong type, a
// number out of the range of its kind in agentkv/base/bounds.h, a line longer than
// kMaxTraceLineBytes) is an InvalidArgument naming the file, the line and the JSON path of the
// field, e.g. `trace_0004.json:1: requests[12].hash_ids: expected an array of non-negative
// integers, element 3 is "x"`; a required field that is null is of the wrong type. The file
// is parsed as it is read (decompressed first when it is gzip), so memory follows its values,
// not its bytes. The reader is the workload half of the agentic replay (agentic_replay.h): it
// produces plain values and never touches the cache. No exception escapes. Pure functions over
// their inputs (the file functions read the file system); thread-safe.
#ifndef AGENTKV_SIM_WORKLOAD_WEKA_TRACE_H_
#define AGENTKV_SIM_WORKLOAD_WEKA_TRACE_H_

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"

namespace agentkv::sim {

// One model request, of the main agent or of a sub-agent. The fields after `hash_ids` are
// optional in the file and default when absent or null.
struct WekaRequest {
  // `t`: offset from the conversation start (main agent) or from the spawn (sub-agent),
  // rounded to the nanosecond. Required; a number of seconds in [0, 365 days].
  TimeNs t;
  // `in` and `out`: prompt and output tokens. Required; integers in [0, 2^40].
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  // `hash_ids`: prompt block ids in order, one per full block (WEKA drops the trailing partial
  // block, so there are floor(in / block_size)). Required; integers in [0, 2^64), at most
  // ceil(in / block_size) of them.
  std::vector<uint64_t> hash_ids;
  // `stop`: "tool_use", "end_turn", or empty. Optional string; default "".
  std::string stop;
  // `think_time`: client delay before this request (after a tool_use turn it includes the
  // tool's execution). Optional; a number of seconds in [0, 365 days]; default 0, and the
  // replay then takes the gap from `t` less the previous request's api_time. The think
  // times of one agent (the main agent, or one sub-agent) add up to at most 365 days.
  TimeNs think_time;
  // `api_time`: server time of the request as recorded (first byte sent to last byte
  // received). Optional; a number of seconds in [0, 365 days]; default 0 (not recorded).
  TimeNs api_time;
  // `model`, e.g. "claude-opus-4-5-20251101". Optional string; default "".
  std::string model;
  // `input_types` / `output_types`: the kinds of content the request sent since the previous
  // one and the response produced, e.g. ["tool_result"] and ["thinking", "tool_use"]. Optional
  // arrays of strings; default empty (not recorded).
  std::vector<std::string> input_types;
  std::vector<std::string> output_types;

  friend bool operator==(const WekaRequest&, const WekaRequest&) = default;
};

// `status` of a sub-agent entry.
enum class SubagentStatus {
  // Absent, or a value this reader does not know.
  kUnknown,
  // "completed": the parent's Task tool call returned the sub-agent's result, so the parent
  // waited for it.
  kCompleted,
  // "async_launched": the call returned at once and the sub-agent ran in the background.
  kAsyncLaunched,
};

// "completed", "async_launched" or "unknown".
std::string_view SubagentStatusName(SubagentStatus status);

// A `type: "subagent"` entry of the main agent's `requests[]`.
struct WekaSubagent {
  // `agent_id`, e.g. "agent_001". Required string.
  std::string agent_id;
  // `subagent_type`, e.g. "Explore". Optional string; default "".
  std::string subagent_type;
  // `t` of the entry: when the sub-agent COMPLETED, on the main agent's timeline (offset from
  // the conversation start). Required; seconds in [0, 365 days].
  TimeNs completion;
  // `duration_ms`: how long it ran, spawn to completion. Optional; milliseconds in [0, 365
  // days]; default 0: the sub-agent spawns at its recorded `t` (the public traces record no
  // duration for sub-agents launched in the background, whose `t` is then their launch).
  TimeNs duration;
  // `status`. Optional string; "completed" and "async_launched" are known, anything else
  // (or none) is kUnknown, which the replay treats as completed (the parent waits for it).
  SubagentStatus status = SubagentStatus::kUnknown;
  // `models`: the models its requests used. Optional array of strings; default empty.
  std::vector<std::string> models;
  // The nested `requests[]`, in file order; their `t` is relative to spawn(). Required array
  // (possibly empty); sub-agents do not nest.
  std::vector<WekaRequest> requests;

  // When it was spawned on the main agent's timeline: completion - duration, clamped at 0.
  TimeNs spawn() const;

  friend bool operator==(const WekaSubagent&, const WekaSubagent&) = default;
};

// What the reader filled in for optional fields that a file left out or set to null, counted
// per kind; only the fields whose fallback changes what a replay does are counted.
struct WekaFallbacks {
  // Files without `block_size`: 64 tokens per hash id.
  int64_t block_size = 0;
  // Requests without `think_time`: the gap before them is `t` less the previous request's `t`
  // and api_time.
  int64_t think_time = 0;
  // Requests without `api_time`: no recorded server time (gaps and the oracle's timing take 0).
  int64_t api_time = 0;
  // Requests without `stop`: the pause after them is classified by their content types alone.
  int64_t stop = 0;
  // Sub-agents without `duration_ms`: spawned at their recorded `t`.
  int64_t subagent_duration = 0;
  // Sub-agents without a known `status`: joined by their parent as completed ones are.
  int64_t subagent_status = 0;

  // Whether nothing was filled in.
  bool none() const;
  WekaFallbacks& operator+=(const WekaFallbacks& other);
  // One line per kind that occurred, in the order above, e.g. "4 sub-agents without
  // duration_ms: spawned at their recorded t".
  std::vector<std::string> Describe() const;

  friend bool operator==(const WekaFallbacks&, const WekaFallbacks&) = default;
};

// One WEKA file.
struct WekaConversation {
  // The `source` the file was parsed as (its path), for messages.
  std::string source;
  // Top-level `id`. Optional string; default "".
  std::string id;
  // `block_size`: tokens per hash id. Optional; an integer in [1, 2^20]; default 64.
  int32_t block_size = 64;
  // The main agent's requests and the sub-agents, each in file order (entries are split by
  // `type`; their relative order is not kept, times carry it).
  std::vector<WekaRequest> requests;
  std::vector<WekaSubagent> subagents;
  // What the reader filled in for this file (zero for conversations built otherwise).
  WekaFallbacks fallbacks;

  // Requests of the main agent and of every sub-agent.
  int64_t TotalRequests() const;
  // Whether `subagent` runs on a model the main agent uses: one of its models (its `models`,
  // or its requests' `model` when `models` is empty) is the `model` of a main-agent request.
  // True when either side records no model (nothing says they differ).
  bool SharesMainModel(const WekaSubagent& subagent) const;

  friend bool operator==(const WekaConversation&, const WekaConversation&) = default;
};

// The fallbacks of every conversation, summed.
WekaFallbacks TotalFallbacks(const std::vector<WekaConversation>& conversations);

// Parses one WEKA file read from `in`. `source` names it in error messages and is stored in
// the result. InvalidArgument `<source>:<line>: <json path>: <what>` for a missing, ill-typed
// or out-of-range field, where <line> is the line of the value (or of the object that lacks
// it), e.g. `t.json:1: requests[3].in: expected a non-negative integer, got "5"`,
// `t.json:4: requests[3].in: -5 is out of range [0, 1099511627776] tokens` or
// `t.json:1: requests[2].requests[0].hash_ids: missing (expected an array of non-negative
// integers)`; `<source>:<line>: malformed JSON at column <c>: <reason>` for text that is not
// JSON; `<source>:<line>: line longer than <n> bytes`; `<source>:1: expected a JSON object at
// the top level, got ...` otherwise; `<source>: no requests (an empty trace)` for a file with
// no request, its own or a sub-agent's. The line of a field error is found by reading `in` again
// from where the parse began; a stream that cannot seek gives `<source>: <json path>: ...`.
// Unavailable when reading fails.
StatusOr<WekaConversation> ParseWekaTrace(std::istream& in, std::string_view source);

// ParseWekaTrace over the text `text` (tests, fuzzing).
StatusOr<WekaConversation> ParseWekaTrace(std::string_view text, std::string_view source);

// Reads and parses the file at `path`, plain or gzip (errors name `path` as given; a gzip file
// that cannot be decompressed is InvalidArgument `<path>:<line>: cannot decompress: <reason>`).
// NotFound when it cannot be opened (`cannot open trace file "x": No such file or directory`),
// InvalidArgument for a directory; the errors of ParseWekaTrace otherwise.
StatusOr<WekaConversation> ReadWekaTrace(const std::string& path);

// Expands command-line trace paths into files, keeping the order given: a directory becomes
// its `*.json` and `*.json.gz` regular files sorted by file name; any other path is kept as is
// (ReadWekaTrace reports it if it is missing). InvalidArgument for an empty `paths` or a directory
// without such files; Unavailable when a directory cannot be listed.
StatusOr<std::vector<std::string>> ExpandWekaTracePaths(const std::vector<std::string>& paths);

// Reads every file of ExpandWekaTracePaths(paths), in that order: the conversations of one
// agentic replay. The first error of any file, as ReadWekaTrace reports it.
StatusOr<std::vector<WekaConversation>> ReadWekaTraces(const std::vector<std::string>& paths);

// Whether sub-agents that run on another model than their main agent (SharesMainModel false)
// are replayed on the same fleet as the main agents, or left out (a fleet that serves one
// model: in the public traces, Haiku sub-agents of Opus sessions).
enum class SubagentModels {
  kShare,
  kExclude,
};

// "share" or "exclude"; and back (nullopt for any other name).
std::string_view SubagentModelsName(SubagentModels mode);
std::optional<SubagentModels> ParseSubagentModels(std::string_view name);

// Whether `subagent` of `conversation` is replayed under `mode`: always under kShare, under
// kExclude only when it shares its main agent's model.
bool IsReplayed(const WekaConversation& conversation, const WekaSubagent& subagent,
                SubagentModels mode);

// The requests of `conversation` a replay under `mode` issues: the main agent's and those of
// every replayed sub-agent.
int64_t ReplayedRequests(const WekaConversation& conversation, SubagentModels mode);

// `conversations` with, under kExclude, every sub-agent that does not share its main agent's
// model removed (the others keep their order); unchanged under kShare.
std::vector<WekaConversation> ApplySubagentModels(std::vector<WekaConversation> conversations,
                                                  SubagentModels mode);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_WEKA_TRACE_H_
