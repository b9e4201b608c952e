// PauseKind: the one vocabulary for an agent's pause between two of its model requests (a tool
// call, a wait for sub-agents, a human's turn, or the end of the session).
//
// A request carries one pause: the one that FOLLOWS it (what the session does after the
// answer). Every consumer reads that meaning: the KV cache's gap-aware eviction order and the
// working set hold a finished request's context for it, Continuum pins and stall offload move
// KV by it, the gateway maps it to SGLang's request `priority`, and the wire carries it as
// `X-Agentkv-Pause` / `agentkv_pause` (protocol/pause_hint.h). The pause BEFORE a request is
// therefore the previous request's pause; an agent's first request has none before it, and its
// last request's pause is kSessionEnd.
//
// Plain values and pure functions; thread-safe.
#ifndef AGENTKV_BASE_PAUSE_H_
#define AGENTKV_BASE_PAUSE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace agentkv {

enum class PauseKind : uint8_t {
  // Not known (no hint): policies fall back to plain recency or their defaults.
  kUnknown,
  // The answer called a tool; the next request carries its result.
  kToolCall,
  // The answer started sub-agents; the next request carries their results.
  kSubagentWait,
  // The answer ended the turn (or was cut off); the next request is a human's.
  kHumanTurn,
  // The session ended with this request: nothing of it is needed again.
  kSessionEnd,
};

// Every kind, in declaration order.
inline constexpr PauseKind kAllPauseKinds[] = {PauseKind::kUnknown, PauseKind::kToolCall,
                                               PauseKind::kSubagentWait, PauseKind::kHumanTurn,
                                               PauseKind::kSessionEnd};

// "unknown", "tool_call", "subagent_wait", "human_turn" or "session_end": the wire names.
constexpr std::string_view PauseKindName(PauseKind kind) {
  switch (kind) {
    case PauseKind::kUnknown:
      return "unknown";
    case PauseKind::kToolCall:
      return "tool_call";
    case PauseKind::kSubagentWait:
      return "subagent_wait";
    case PauseKind::kHumanTurn:
      return "human_turn";
    case PauseKind::kSessionEnd:
      return "session_end";
  }
  return "unknown";
}

// The kind whose PauseKindName is `name` (exact, case-sensitive); nullopt for any other text,
// the empty string included. protocol::ParsePauseHint adds the wire's error message.
constexpr std::optional<PauseKind> ParsePauseKind(std::string_view name) {
  for (const PauseKind kind : kAllPauseKinds) {
    if (PauseKindName(kind) == name) return kind;
  }
  return std::nullopt;
}

// True for the pauses a session comes back from (a tool call, a sub-agent wait, a human's
// turn); false for an unknown pause and for the end of the session.
constexpr bool IsReturningPause(PauseKind kind) {
  return kind == PauseKind::kToolCall || kind == PauseKind::kSubagentWait ||
         kind == PauseKind::kHumanTurn;
}

}  // namespace agentkv

#endif  // AGENTKV_BASE_PAUSE_H_
