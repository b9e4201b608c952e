// Options of the cluster control plane: session KV lifecycle and program-aware admission.
//
// The field names are the seed's option names (Relax's `--agentic-*` flags with '-' -> '_'),
// so a user can move between Relax and agentkv without a translation table. The command line
// (tools/) fills an AgenticOptions and calls Validate() once; the admission coordinator, the
// budget ledger and the gateway then read it. Both features are off by default and
// independent. A plain value type with no I/O; thread-compatible.
#ifndef AGENTKV_CONTROL_AGENTIC_OPTIONS_H_
#define AGENTKV_CONTROL_AGENTIC_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"

namespace agentkv::control {

// Which requests program-aware admission gates (`--agentic-admission-scope`).
enum class AdmissionScope : uint8_t {
  // Training rollouts only; evaluation requests take the existing path. The seed's default.
  kTrain,
  // Training and evaluation rollouts.
  kAll,
};

// "train" or "all", the exact flag values.
std::string_view AdmissionScopeName(AdmissionScope scope);

// Parses the exact, case-sensitive flag values "train" and "all". Anything else, including
// "Train" or " all", is InvalidArgument naming `--agentic-admission-scope` and the value.
[[nodiscard]] StatusOr<AdmissionScope> ParseAdmissionScope(std::string_view text);

// Whether admission applies to a request of the given kind under `scope`: kAll covers every
// request, kTrain only training ones. (Whether admission is enabled at all is the caller's
// separate check of `agentic_program_admission`.)
bool InScope(AdmissionScope scope, bool is_train);

// Which admission policy runs when program-aware admission is on
// (`--agentic-admission-policy`).
enum class AdmissionPolicy : uint8_t {
  // Seed 000's: each attempt reserves its whole prompt plus decode against the fleet ceiling,
  // the worst engine's usage guards pressure, one strict global FIFO. The default.
  kSeed,
  // agentkv's admission v2: a reservation counts the expected uncached tokens (what the session
  // already holds is not reserved again, a named shared prefix counts once); budget and pressure
  // are checked on the engine the request lands on when the router makes it knowable (the fleet
  // otherwise), with one waiting queue per engine; a continuing session's request goes before a
  // new session's first within the program-order window (the aging bound); a reservation over
  // the ceiling is capped, one over an engine's whole KV refused at once.
  kV2,
};

// "seed" or "v2", the exact flag values.
std::string_view AdmissionPolicyName(AdmissionPolicy policy);

// Parses the exact, case-sensitive flag values "seed" and "v2"; anything else is
// InvalidArgument naming `--agentic-admission-policy` and the value.
[[nodiscard]] StatusOr<AdmissionPolicy> ParseAdmissionPolicy(std::string_view text);

// Flag spellings, used in validation messages and by the command line. The last three are
// agentkv additions: Relax hard-codes those values as coordinator constants.
inline constexpr std::string_view kSessionLifecycleFlag = "--agentic-session-lifecycle";
inline constexpr std::string_view kProgramAdmissionFlag = "--agentic-program-admission";
inline constexpr std::string_view kHeadroomFlag = "--agentic-admission-headroom";
inline constexpr std::string_view kPressureThresholdFlag = "--agentic-admission-pressure-threshold";
inline constexpr std::string_view kExpectedDecodeCapFlag =
    "--agentic-admission-expected-decode-cap";
inline constexpr std::string_view kMaxWaitFlag = "--agentic-admission-max-wait-s";
inline constexpr std::string_view kScopeFlag = "--agentic-admission-scope";
inline constexpr std::string_view kLeaseTtlFlag = "--agentic-admission-lease-ttl-s";
inline constexpr std::string_view kStalenessFlag = "--agentic-admission-staleness-s";
inline constexpr std::string_view kPollIntervalFlag = "--agentic-admission-poll-interval-s";
// agentkv's admission v2 (AdmissionPolicy::kV2).
inline constexpr std::string_view kAdmissionPolicyFlag = "--agentic-admission-policy";
inline constexpr std::string_view kProgramWindowFlag = "--agentic-admission-program-window-s";
// agentkv's fair shares (both policies).
inline constexpr std::string_view kSessionShareFlag = "--agentic-admission-session-share";
inline constexpr std::string_view kClientShareFlag = "--agentic-admission-client-share";

// The shortest --agentic-admission-lease-ttl-s accepted, in seconds.
inline constexpr double kMinLeaseTtlSeconds = 1.0;

struct AgenticOptions {
  // --agentic-session-lifecycle: send `session_id` on generate and, when a session becomes
  // terminal or is dropped, abort and join its attempts and close it on every engine.
  // Requires engines started with the session radix cache and priority eviction (checked by
  // the service at startup, not here). Default: false.
  bool agentic_session_lifecycle = false;

  // --agentic-program-admission: gate each backend attempt with the fleet token ledger and
  // the global FIFO. Default: false. The numeric fields below are validated only when true.
  bool agentic_program_admission = false;

  // --agentic-admission-headroom: fraction of the healthy engines' summed
  // max_total_num_tokens usable as the admission ceiling. Default: 0.90. Range: (0, 1].
  double agentic_admission_headroom = 0.90;

  // --agentic-admission-pressure-threshold: worst-engine token_usage at or above which new
  // requests wait. Default: 0.92. Range: (0, 1].
  double agentic_admission_pressure_threshold = 0.92;

  // --agentic-admission-expected-decode-cap: upper bound on the decode tokens one
  // reservation counts; it does not change the actual generation limit. Unset means the
  // maximum response length (Relax: --rollout-max-response-len); see ExpectedDecodeCap().
  // Default: unset. Range: [1, kMaxTokens] when set.
  std::optional<int64_t> agentic_admission_expected_decode_cap;

  // --agentic-admission-max-wait-s: longest FIFO wait before the oldest waiter bypasses
  // (`aged`); 0 ages a refused request at its first drain. Default: 30.0. Range: [0, 1 year].
  double agentic_admission_max_wait_s = 30.0;

  // --agentic-admission-scope. Default: kTrain.
  AdmissionScope agentic_admission_scope = AdmissionScope::kTrain;

  // --agentic-admission-policy: seed (seed 000's ledger and global FIFO) or v2 (see
  // AdmissionPolicy). Default: kSeed.
  AdmissionPolicy agentic_admission_policy = AdmissionPolicy::kSeed;

  // --agentic-admission-program-window-s (v2 only): a continuing session's request waits as if
  // it had arrived this much earlier than a new session's first request, so it goes first
  // unless the new one has already waited this long (the aging bound of program-aware order:
  // no request waits behind requests that arrived more than this after it). 0 is plain FIFO
  // within each engine's queue. Default: 5.0. Range: [0, 1 year].
  double agentic_admission_program_window_s = 5.0;

  // --agentic-admission-session-share: the share of the admission ceiling one session's leases
  // may hold at once. A request of a session that already holds a lease and would exceed it
  // waits without blocking anyone else's request, and is refused (`over_share`) if it is still
  // over at the maximum wait. A session's first lease is never held back by it. Applies to
  // requests that name their session (AcquireRequest::session). Default: 0.5. Range: (0, 1].
  double agentic_admission_session_share = 0.5;

  // --agentic-admission-client-share: the same bound for all the leases of one client
  // (AcquireRequest::client: the gateway names an authenticated tenant, never a bare address,
  // which proxies share and attackers change). Default: 0.5. Range: (0, 1].
  double agentic_admission_client_share = 0.5;

  // Age after which a lease is reclaimed (a dead holder's backstop). Default: 600.0.
  // Range: [max(kMinLeaseTtlSeconds, poll_interval_s), 1 year]: a lease reclaimed while its
  // attempt still runs would silently turn admission off.
  double lease_ttl_s = 600.0;

  // Maximum age of the last successful capacity snapshot before the ledger is degraded and
  // admission bypasses. Relax derives it as max(3 x poll interval, 5 s) = 6 s.
  // Default: 6.0. Range: at most a year, >= poll_interval_s (a shorter one would degrade the
  // ledger between every two polls and silently turn admission into bypass).
  double staleness_s = 6.0;

  // Interval between engine /metrics polls (reconcile, TTL reclaim, FIFO drain).
  // Default: 2.0. Range: (0, 1 year].
  double poll_interval_s = 2.0;

  // OK, or InvalidArgument naming the first out-of-range option in its flag form and its
  // value, e.g. "--agentic-admission-headroom must be in (0, 1], got 1.5". When
  // agentic_program_admission is false nothing numeric is checked (as in Relax), so a
  // disabled feature never blocks startup.
  Status Validate() const;

  // The decode cap a reservation uses: agentic_admission_expected_decode_cap when set, else
  // `max_response_len` (returned unchanged).
  int64_t ExpectedDecodeCap(int64_t max_response_len) const;

  // The second-valued options as durations. Values beyond the TimeNs range saturate at its
  // maximum; call these only on validated options.
  TimeNs max_wait() const;
  TimeNs lease_ttl() const;
  TimeNs staleness() const;
  TimeNs poll_interval() const;
  TimeNs program_window() const;
};

// The poll-timing rule of the services that scrape the fleet (gateway, coordinator): a poll
// waits at most `metrics_timeout_s` for discovery and as long again for the engines' /metrics,
// then the next one starts after poll_interval_s, so poll_interval_s + 2 x metrics_timeout_s
// must stay below staleness_s, or a single engine that stops answering would leave the ledger
// degraded between polls. InvalidArgument naming the three flags (`timeout_flag` spells the
// service's own flag), or naming `timeout_flag` when it is not finite, > 0 and at most a
// year. Checked only with admission on.
Status CheckPollTiming(const AgenticOptions& options, std::string_view timeout_flag,
                       double metrics_timeout_s);

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_AGENTIC_OPTIONS_H_
