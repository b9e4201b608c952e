// The vocabulary of seed 000's session KV lifecycle (Relax's `_finish_session_once`), shared by
// control::GatewayFlow (gateway_flow.h), which runs it, and by the services and the simulator
// that drive that flow: attempt rids, session phases, terminal reasons, the identity fields of
// a generate payload, the close outcome rule and the close counters.
//
// A session is registered with its backend attempts, each with a unique rid
// "{request}:{attempt}" that doubles as the admission ticket. When a session becomes terminal
// it cancels attempts that never reached an engine, aborts each dispatched one on every
// engine, waits until every dispatched attempt finished, and then closes the session on every
// engine exactly once (only with `agentic_session_lifecycle` on). Close is fail-open: its
// outcome is counted but never blocks the terminal state. Pure functions and plain values;
// thread-safe.
#ifndef AGENTKV_CONTROL_SESSION_LIFECYCLE_H_
#define AGENTKV_CONTROL_SESSION_LIFECYCLE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "agentkv/base/status.h"

namespace agentkv::control {

// The unique backend request id of attempt `attempt` of request `request_id`:
// "{request_id}:{attempt}", e.g. "request-1:0". It is both the generate `rid` and the
// admission ticket. Precondition: attempt >= 0.
std::string FormatAttemptRid(std::string_view request_id, int64_t attempt);

// Where one session stands.
enum class SessionPhase : uint8_t {
  // Accepting attempts.
  kActive,
  // Terminating: aborts were requested; waiting for dispatched attempts to finish.
  kDraining,
  // Terminating: one close was emitted; waiting for its outcome.
  kClosing,
  // Logically ended. A close failure still ends here.
  kTerminal,
};

// "active", "draining", "closing", "terminal".
std::string_view SessionPhaseName(SessionPhase phase);

// Why a session is being terminated.
enum class TerminalReason : uint8_t {
  kFinished,
  kDiscarded,
  kFailed,
  // Ended by the gateway itself: idle past the idle timeout, or evicted at the session cap.
  kDropped,
};

// "finished", "discarded", "failed", "dropped".
std::string_view TerminalReasonName(TerminalReason reason);

// The identity fields of a generate payload for one attempt.
struct GenerateIdentity {
  std::string rid;
  // The session's id, present only when the lifecycle is enabled (the engine then tracks the
  // session's KV so a later close can release it).
  std::optional<std::string> session_id;
  friend bool operator==(const GenerateIdentity&, const GenerateIdentity&) = default;
};

// Whether a close fanned out to every engine succeeded: true only if there was at least one
// engine and every engine's post returned OK (Relax's close_session returns false on any
// exception or the timeout; an empty worker list is an error there too).
bool CloseSucceededOnEveryEngine(std::span<const Status> per_engine_results);

// Close counters as the agentic_kv/session/ metrics report them.
struct SessionLifecycleCounters {
  // Close outcomes consumed (agentic_kv/session/close). Counted only when a close was emitted,
  // so always 0 with the lifecycle off.
  int64_t close = 0;
  // Close outcomes that failed (agentic_kv/session/close_failure).
  int64_t close_failure = 0;
  // Sessions that reached kTerminal.
  int64_t terminated = 0;
  friend bool operator==(const SessionLifecycleCounters&,
                         const SessionLifecycleCounters&) = default;
};

// An active session remembers at most this many ended (finished or cancelled) attempts: older
// ones are forgotten, oldest first, so that a session that lives for millions of requests
// holds memory for its live attempts plus this many. A forgotten rid may be begun again.
inline constexpr int64_t kMaxEndedAttemptsPerSession = 1024;

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_SESSION_LIFECYCLE_H_
