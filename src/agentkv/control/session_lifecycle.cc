#include "agentkv/control/session_lifecycle.h"

#include <string>

#include "agentkv/base/check.h"

namespace agentkv::control {

std::string FormatAttemptRid(std::string_view request_id, int64_t attempt) {
  AGENTKV_CHECK_GE(attempt, 0) << "attempt numbers start at 0";
  std::string rid(request_id);
  rid += ':';
  rid += std::to_string(attempt);
  return rid;
}

std::string_view SessionPhaseName(SessionPhase phase) {
  switch (phase) {
    case SessionPhase::kActive:
      return "active";
    case SessionPhase::kDraining:
      return "draining";
    case SessionPhase::kClosing:
      return "closing";
    case SessionPhase::kTerminal:
      return "terminal";
  }
  return "unknown";
}

std::string_view TerminalReasonName(TerminalReason reason) {
  switch (reason) {
    case TerminalReason::kFinished:
      return "finished";
    case TerminalReason::kDiscarded:
      return "discarded";
    case TerminalReason::kFailed:
      return "failed";
    case TerminalReason::kDropped:
      return "dropped";
  }
  return "unknown";
}

bool CloseSucceededOnEveryEngine(std::span<const Status> per_engine_results) {
  if (per_engine_results.empty()) return false;
  for (const Status& result : per_engine_results) {
    if (!result.ok()) return false;
  }
  return true;
}

}  // namespace agentkv::control
