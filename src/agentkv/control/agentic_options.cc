#include "agentkv/control/agentic_options.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>

#include "agentkv/base/bounds.h"

namespace agentkv::control {
namespace {

// The shortest text that reads back as `value` ("1.5", "0.1", "nan", "-inf"), so a message
// shows the value the user typed rather than a 17-digit expansion of it.
std::string FormatDouble(double value) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  if (ec != std::errc()) return std::to_string(value);
  return std::string(buf, end);
}

Status Invalid(std::string_view flag, std::string_view requirement, const std::string& got) {
  return InvalidArgumentError(std::string(flag) + " must " + std::string(requirement) + ", got " +
                              got);
}

// A fraction in (0, 1]; NaN fails both comparisons and is rejected.
Status CheckUnitFraction(std::string_view flag, double value) {
  if (!(value > 0.0 && value <= 1.0)) return Invalid(flag, "be in (0, 1]", FormatDouble(value));
  return Status::Ok();
}

// Durations from outside are at most a year (base/bounds.h: kMaxTimeNs).
constexpr double kMaxSeconds = static_cast<double>(kMaxTimeNs) / 1e9;

Status CheckAtMostAYear(std::string_view flag, double value) {
  if (!std::isfinite(value)) return Invalid(flag, "be finite", FormatDouble(value));
  if (value > kMaxSeconds) {
    return Invalid(flag, "be at most " + FormatDouble(kMaxSeconds) + " (a year)",
                   FormatDouble(value));
  }
  return Status::Ok();
}

Status CheckNonNegativeSeconds(std::string_view flag, double value) {
  if (!(value >= 0.0)) return Invalid(flag, "be >= 0", FormatDouble(value));
  return CheckAtMostAYear(flag, value);
}

Status CheckPositiveSeconds(std::string_view flag, double value) {
  if (!(value > 0.0)) return Invalid(flag, "be > 0", FormatDouble(value));
  return CheckAtMostAYear(flag, value);
}

// Seconds as TimeNs, saturating instead of overflowing the int64 conversion.
TimeNs SaturatingSeconds(double s) {
  // Just under INT64_MAX ns (~292 years), so that s * 1e9 cannot round up past it.
  constexpr double kLimitSeconds = 9.2e9;
  if (!(s < kLimitSeconds)) return TimeNs(std::numeric_limits<int64_t>::max());
  if (s <= -kLimitSeconds) return TimeNs(std::numeric_limits<int64_t>::min());
  return TimeNs::Seconds(s);
}

}  // namespace

std::string_view AdmissionScopeName(AdmissionScope scope) {
  return scope == AdmissionScope::kAll ? "all" : "train";
}

StatusOr<AdmissionScope> ParseAdmissionScope(std::string_view text) {
  if (text == "train") return AdmissionScope::kTrain;
  if (text == "all") return AdmissionScope::kAll;
  return Invalid(kScopeFlag, "be \"train\" or \"all\"", "\"" + std::string(text) + "\"");
}

std::string_view AdmissionPolicyName(AdmissionPolicy policy) {
  return policy == AdmissionPolicy::kV2 ? "v2" : "seed";
}

StatusOr<AdmissionPolicy> ParseAdmissionPolicy(std::string_view text) {
  if (text == "seed") return AdmissionPolicy::kSeed;
  if (text == "v2") return AdmissionPolicy::kV2;
  return Invalid(kAdmissionPolicyFlag, "be \"seed\" or \"v2\"", "\"" + std::string(text) + "\"");
}

bool InScope(AdmissionScope scope, bool is_train) {
  return scope == AdmissionScope::kAll || is_train;
}

Status AgenticOptions::Validate() const {
  if (!agentic_program_admission) return Status::Ok();
  AGENTKV_RETURN_IF_ERROR(CheckUnitFraction(kHeadroomFlag, agentic_admission_headroom));
  AGENTKV_RETURN_IF_ERROR(
      CheckUnitFraction(kPressureThresholdFlag, agentic_admission_pressure_threshold));
  AGENTKV_RETURN_IF_ERROR(CheckUnitFraction(kSessionShareFlag, agentic_admission_session_share));
  AGENTKV_RETURN_IF_ERROR(CheckUnitFraction(kClientShareFlag, agentic_admission_client_share));
  if (agentic_admission_expected_decode_cap.has_value() &&
      (*agentic_admission_expected_decode_cap <= 0 ||
       *agentic_admission_expected_decode_cap > kMaxTokens)) {
    return Invalid(kExpectedDecodeCapFlag, "be in [1, " + std::to_string(kMaxTokens) + "]",
                   std::to_string(*agentic_admission_expected_decode_cap));
  }
  AGENTKV_RETURN_IF_ERROR(CheckNonNegativeSeconds(kMaxWaitFlag, agentic_admission_max_wait_s));
  AGENTKV_RETURN_IF_ERROR(
      CheckNonNegativeSeconds(kProgramWindowFlag, agentic_admission_program_window_s));
  AGENTKV_RETURN_IF_ERROR(CheckPositiveSeconds(kLeaseTtlFlag, lease_ttl_s));
  AGENTKV_RETURN_IF_ERROR(CheckPositiveSeconds(kPollIntervalFlag, poll_interval_s));
  AGENTKV_RETURN_IF_ERROR(CheckPositiveSeconds(kStalenessFlag, staleness_s));
  if (staleness_s < poll_interval_s) {
    return Invalid(
        kStalenessFlag,
        "be >= " + std::string(kPollIntervalFlag) + " (" + FormatDouble(poll_interval_s) + ")",
        FormatDouble(staleness_s));
  }
  // A lease reclaimed while its attempt still runs frees its tokens for others: a TTL that
  // short would turn admission off without a word.
  if (lease_ttl_s < kMinLeaseTtlSeconds) {
    return Invalid(kLeaseTtlFlag,
                   "be >= " + FormatDouble(kMinLeaseTtlSeconds) +
                       " (a shorter lease is reclaimed while its attempt runs, which turns "
                       "admission off)",
                   FormatDouble(lease_ttl_s));
  }
  if (lease_ttl_s < poll_interval_s) {
    return Invalid(
        kLeaseTtlFlag,
        "be >= " + std::string(kPollIntervalFlag) + " (" + FormatDouble(poll_interval_s) + ")",
        FormatDouble(lease_ttl_s));
  }
  return Status::Ok();
}

Status CheckPollTiming(const AgenticOptions& options, std::string_view timeout_flag,
                       double metrics_timeout_s) {
  AGENTKV_RETURN_IF_ERROR(CheckPositiveSeconds(timeout_flag, metrics_timeout_s));
  if (!options.agentic_program_admission) return Status::Ok();
  const double cycle = options.poll_interval_s + 2 * metrics_timeout_s;
  if (cycle < options.staleness_s) return Status::Ok();
  return InvalidArgumentError(
      std::string(kPollIntervalFlag) + " (" + FormatDouble(options.poll_interval_s) + ") + 2 x " +
      std::string(timeout_flag) + " (" + FormatDouble(metrics_timeout_s) + ") must be < " +
      std::string(kStalenessFlag) + " (" + FormatDouble(options.staleness_s) +
      "): a poll that waits out a slow engine would leave the capacity snapshot stale and turn "
      "admission into bypass");
}

int64_t AgenticOptions::ExpectedDecodeCap(int64_t max_response_len) const {
  return agentic_admission_expected_decode_cap.value_or(max_response_len);
}

TimeNs AgenticOptions::max_wait() const { return SaturatingSeconds(agentic_admission_max_wait_s); }
TimeNs AgenticOptions::lease_ttl() const { return SaturatingSeconds(lease_ttl_s); }
TimeNs AgenticOptions::staleness() const { return SaturatingSeconds(staleness_s); }
TimeNs AgenticOptions::poll_interval() const { return SaturatingSeconds(poll_interval_s); }
TimeNs AgenticOptions::program_window() const {
  return SaturatingSeconds(agentic_admission_program_window_s);
}

}  // namespace agentkv::control
