// The JSON bodies of the coordinator's program-level (working-set) endpoints
// (docs/COORDINATOR.md, "Working-set admission"), for frameworks that call engines themselves:
//   POST /admission/program/acquire {"ticket": str, "program": str, "agent": str,
//                                    "reservation_tokens": int[, "engine": str]}
//     -> 200 {"ticket": str, "admitted": bool, "reason": str, "wait_s": float}
//     answered when the decision is final: at once (continuing, fits, no_capacity), or once a
//     finish, end of agent, poll or the maximum wait admits it (fits, aged), or `cancelled`
//     (admitted false: do not send the request).
//   POST /admission/program/finish  {"ticket": str, "context_tokens": int
//                                    [, "next_pause": str, "tool": str]} -> 200 {}
//     next_pause: "unknown" (default), "tool_call", "subagent_wait", "human_turn" or
//     "session_end" (no hold).
//   POST /admission/program/cancel  {"ticket": str} -> 200 {}
//   POST /admission/program/end_agent {"agent": str} -> 200 {}
// Every field is checked: an unknown member, a wrong type, an empty or over-long string or a
// number out of range is InvalidArgument naming the field and the value. Pure functions over
// value types; thread-safe. Parse* never throws.
#ifndef AGENTKV_SERVICE_ADMISSION_WORKING_SET_WIRE_H_
#define AGENTKV_SERVICE_ADMISSION_WORKING_SET_WIRE_H_

#include <string>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/control/working_set.h"

namespace agentkv::service {

inline constexpr std::string_view kProgramAcquirePath = "/admission/program/acquire";
inline constexpr std::string_view kProgramFinishPath = "/admission/program/finish";
inline constexpr std::string_view kProgramCancelPath = "/admission/program/cancel";
inline constexpr std::string_view kProgramEndAgentPath = "/admission/program/end_agent";

// The longest ticket, program, agent, engine or tool (control::ProgramRequest's bound).
inline constexpr size_t kMaxProgramFieldBytes = 1024;

struct ProgramFinish {
  std::string ticket;
  control::RequestEnd end;
};

[[nodiscard]] StatusOr<control::ProgramRequest> ParseProgramAcquire(std::string_view body);
std::string SerializeProgramAcquire(const control::ProgramRequest& request);
std::string SerializeProgramDecision(const control::WorkingSetDecision& decision);
[[nodiscard]] StatusOr<control::WorkingSetDecision> ParseProgramDecision(std::string_view body);

[[nodiscard]] StatusOr<ProgramFinish> ParseProgramFinish(std::string_view body);
std::string SerializeProgramFinish(const ProgramFinish& finish);

// {"ticket": str} of /admission/program/cancel, {"agent": str} of /admission/program/end_agent.
[[nodiscard]] StatusOr<std::string> ParseProgramCancel(std::string_view body);
[[nodiscard]] StatusOr<std::string> ParseProgramEndAgent(std::string_view body);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_ADMISSION_WORKING_SET_WIRE_H_
