// The JSON bodies of the `agentkv coordinator` admission API (docs/COORDINATOR.md).
//
// CoordinatorServer parses requests and writes decisions with these functions; RemoteAdmission
// writes requests and parses decisions with the same ones, so both ends agree by construction.
// The shapes follow Relax's coordinator (the admission protocol of seed 000) with `ticket` for
// its `ticket_id` (which parsing also accepts):
//   POST /admission/acquire  {"ticket": str, "reservation_tokens": int, "protected": bool
//                             [, "engine": str, "continuing": bool, "prefix_key": str,
//                             "prefix_tokens": int][, "session": str, "client": str]
//                             [, "instance": str]}
//     The first bracketed fields are admission v2's (control::AcquireRequest), optional and
//     sent only when set: a seed body is unchanged, and a coordinator running the seed policy
//     ignores them. `session` and `client` name the fair-share holder (both policies).
//     "instance" (agentkv's addition, optional) names the caller's process: the ticket is
//     that instance's, ended when it stops heartbeating.
//     -> 200 {"action": "admit"|"bypass"|"refuse", "reason": str, "ticket": str,
//             "reservation_tokens": int, "lease_id": str|null, "owner_epoch": int,
//             "wait_s": float[, "ceiling": int]}
//     "refuse" is agentkv's addition, with the "ceiling" that refused it: reason "oversized"
//     (the reservation exceeds the largest engine's KV) or "over_share" (its session or client
//     held more than its share for the whole maximum wait); the caller must not send it.
//   POST /admission/release  {"lease_id": str} -> 200 {}
//   POST /admission/cancel   {"ticket": str}   -> 200 {}
//   POST /admission/heartbeat {"instance": str} -> 200 {}  (agentkv's addition: a sign of life
//     of the instance; see docs/COORDINATOR.md, "Instance liveness")
//   GET  /agentic_kv         -> 200 {"agentic_kv/...": number, ...}
// Errors are `{"error": {"message": ..., "code": ...}}` (net::SglangErrorBody), the message
// naming the field.
// Pure functions over value types; thread-safe.
#ifndef AGENTKV_SERVICE_ADMISSION_ADMISSION_WIRE_H_
#define AGENTKV_SERVICE_ADMISSION_ADMISSION_WIRE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/control/admission_coordinator.h"

namespace agentkv::service {

inline constexpr std::string_view kAcquirePath = "/admission/acquire";
inline constexpr std::string_view kReleasePath = "/admission/release";
inline constexpr std::string_view kCancelPath = "/admission/cancel";
inline constexpr std::string_view kHeartbeatPath = "/admission/heartbeat";
inline constexpr std::string_view kAgenticKvPath = "/agentic_kv";
inline constexpr std::string_view kCoordinatorMetricsPath = "/metrics";
inline constexpr std::string_view kCoordinatorHealthPath = "/health";

// Parses an AdmissionReason name ("capacity_available", ..., "cancelled"); InvalidArgument
// naming `reason` and the text otherwise.
[[nodiscard]] StatusOr<control::AdmissionReason> ParseAdmissionReason(std::string_view text);

// `{"ticket":...,"reservation_tokens":...,"protected":...}`, with `"instance"` when `instance`
// is not empty.
std::string SerializeAcquireRequest(const control::AcquireRequest& request,
                                    std::string_view instance = {});
// InvalidArgument naming the field when the body is not a JSON object, `ticket` (or its alias
// `ticket_id`) is missing, empty, longer than control::kMaxTicketBytes or not a string,
// `reservation_tokens` is missing or not an integer in [0, kMaxTokens] (base/bounds.h),
// `protected` or `continuing` is present and not a bool, `engine`, `prefix_key`, `session`,
// `client` or `instance` is present and not a string of 1 to kMaxTicketBytes bytes, or
// `prefix_tokens` is present and not an integer in [0, kMaxTokens]. Unknown fields are
// ignored. ResourceExhausted over 1 MiB. The instance, when `instance` is not null, is stored
// there (empty when absent).
[[nodiscard]] StatusOr<control::AcquireRequest> ParseAcquireRequest(
    std::string_view body, std::string* instance = nullptr);

// The final decision as the acquire endpoint answers it; `wait` in seconds as `wait_s`.
// Precondition: decision.action is kAdmit or kBypass (a server never answers kWait).
std::string SerializeDecision(const control::AdmissionDecision& decision);
// InvalidArgument naming the field when a field is missing, of the wrong type or out of range
// (tokens past kMaxTokens, `wait_s` past a year), `action` is not "admit"/"bypass"/"refuse",
// `reason` is unknown, an admit has no `lease_id`, or a refuse is not "oversized". `wait_s` is
// rounded to the nearest nanosecond: Serialize/Parse round-trips exactly for the waits a FIFO
// sees (the tests check 0 to 30 s) and within a microsecond up to the one-year bound (it
// travels as a double of seconds).
[[nodiscard]] StatusOr<control::AdmissionDecision> ParseDecision(std::string_view body);

// `{"lease_id":...}`; parsing requires a non-empty string `lease_id`.
std::string SerializeReleaseRequest(std::string_view lease_id);
[[nodiscard]] StatusOr<std::string> ParseReleaseRequest(std::string_view body);

// `{"ticket":...}`; parsing requires a non-empty string `ticket` (or `ticket_id`).
std::string SerializeCancelRequest(std::string_view ticket);
[[nodiscard]] StatusOr<std::string> ParseCancelRequest(std::string_view body);

// `{"instance":...}`; parsing requires a string `instance` of 1 to kMaxTicketBytes bytes.
std::string SerializeHeartbeatRequest(std::string_view instance);
[[nodiscard]] StatusOr<std::string> ParseHeartbeatRequest(std::string_view body);

// The agentic_kv/ series as one JSON object, in the given order.
std::string SerializeStepMetrics(const std::vector<std::pair<std::string, double>>& metrics);
// InvalidArgument unless `body` is an object whose every value is a finite number; keeps the
// order.
[[nodiscard]] StatusOr<std::vector<std::pair<std::string, double>>> ParseStepMetrics(
    std::string_view body);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_ADMISSION_ADMISSION_WIRE_H_
