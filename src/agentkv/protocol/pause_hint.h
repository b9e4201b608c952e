// The pause hint on the wire: the pause a client expects after a request (base/pause.h), as the
// gateway's `X-Agentkv-Pause` header, the `agentkv_pause` body member agentkv's engines read,
// and the coordinator's working-set `next_pause` member; and the gateway's mapping of it to
// SGLang's request `priority` (--agentic-pause-priority). One parser reads all three places,
// with one error message naming the field. Pure functions over values; thread-safe.
#ifndef AGENTKV_PROTOCOL_PAUSE_HINT_H_
#define AGENTKV_PROTOCOL_PAUSE_HINT_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "agentkv/base/pause.h"
#include "agentkv/base/status.h"

namespace agentkv::protocol {

// The gateway's header: the pause the client expects after this request ("tool_call",
// "subagent_wait", "human_turn", or "session_end" for a session's last request); overrides
// what the body shows.
inline constexpr std::string_view kPauseHeader = "X-Agentkv-Pause";

// agentkv's pause hint as a top-level body member: the pause expected after this request. The
// gateway sets it with --agentic-forward-pause; agentkv's engines read it (the gap-aware
// eviction order and stall offload), stock SGLang ignores it.
inline constexpr std::string_view kPauseField = "agentkv_pause";

// The pause `value` names, read from `field` (kPauseHeader, kPauseField, "next_pause", ...):
// kUnknown for the empty string (no hint), else the kind whose PauseKindName it is (exact).
// Any other value: InvalidArgument "<field>: expected unknown, tool_call, subagent_wait,
// human_turn or session_end, got \"<value>\"".
[[nodiscard]] StatusOr<PauseKind> ParsePauseHint(std::string_view field, std::string_view value);

// --agentic-pause-priority: the SGLang request `priority` per expected pause; unset kinds get
// none.
struct PausePriorities {
  std::optional<int32_t> tool_call;
  std::optional<int32_t> subagent_wait;
  std::optional<int32_t> human_turn;
  std::optional<int32_t> session_end;

  bool empty() const {
    return !tool_call.has_value() && !subagent_wait.has_value() && !human_turn.has_value() &&
           !session_end.has_value();
  }
  // The priority of `pause` (nullopt for kUnknown or an unset kind).
  std::optional<int32_t> For(PauseKind pause) const;
  friend bool operator==(const PausePriorities&, const PausePriorities&) = default;
};

// Parses "KIND=P[,KIND=P...]" (KIND: tool_call, subagent_wait, human_turn, session_end, each at
// most once; P an integer in [0, 1000000]); "" is the empty map. InvalidArgument naming
// --agentic-pause-priority and the bad part.
[[nodiscard]] StatusOr<PausePriorities> ParsePausePriorities(std::string_view text);

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_PAUSE_HINT_H_
