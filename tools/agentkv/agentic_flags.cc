#include "tools/agentkv/agentic_flags.h"

#include <string_view>

#include "tools/agentkv/cli_support.h"

namespace agentkv::tools {
namespace {

// Adds one option of the set, in its group.
template <typename T>
CLI::Option* AddOne(CLI::App& app, std::string_view flag, T& value, const std::string& help,
                    FlagSource source, const std::string& group) {
  CLI::Option* option = AddFlagOption(app, flag, value, help, source);
  if (!group.empty()) option->group(group);
  return option;
}

CLI::Option* AddSwitch(CLI::App& app, std::string_view flag, bool& value, const std::string& help,
                       FlagSource source, const std::string& group) {
  CLI::Option* option = app.add_flag(std::string(flag), value, help);
  if (source == FlagSource::kCommandLineAndEnvironment) option->envname(FlagEnvName(flag));
  if (!group.empty()) option->group(group);
  return option;
}

}  // namespace

void AgenticFlags::Add(CLI::App& app, Set set, FlagSource source, const std::string& group) {
  control::AgenticOptions& o = options_;
  if (set == Set::kAll) {
    AddSwitch(app, control::kSessionLifecycleFlag, o.agentic_session_lifecycle,
              "Send session_id on generate; close sessions on every engine when they end", source,
              group);
    AddSwitch(app, control::kProgramAdmissionFlag, o.agentic_program_admission,
              "Admit each attempt against the fleet KV budget (global FIFO, token ledger)", source,
              group);
  }
  AddOne(app, control::kHeadroomFlag, o.agentic_admission_headroom,
         "Share of the healthy engines' summed max_total_num_tokens admission may commit, in "
         "(0, 1]",
         source, group);
  AddOne(app, control::kPressureThresholdFlag, o.agentic_admission_pressure_threshold,
         "Worst-engine token_usage at or above which new requests wait, in (0, 1]", source, group);
  // No default shown: unset means each request's own maximum output.
  decode_cap_option_ = AddOne(app, control::kExpectedDecodeCapFlag, decode_cap_,
                              "Most decode tokens one reservation counts, in [1, 2^40] (default: "
                              "the request's maximum output; the gateway: 4096, SGLang's clip)",
                              source, group)
                           ->default_str("")
                           ->type_name("N");
  AddOne(app, control::kMaxWaitFlag, o.agentic_admission_max_wait_s,
         "Longest FIFO wait before the aged bypass, seconds (>= 0)", source, group);
  AddOne(app, control::kProgramWindowFlag, o.agentic_admission_program_window_s,
         "Admission v2: a continuing session's request goes before a new session's first unless "
         "that one has waited this long, seconds (>= 0; 0 = FIFO per engine)",
         source, group);
  if (set == Set::kBudget) return;
  AddOne(app, control::kAdmissionPolicyFlag, policy_,
         "Admission policy: seed (whole-prompt reservations, fleet budget, global FIFO) or v2 "
         "(uncached reservations, per-engine budget and waiting, program-aware order)",
         source, group);
  AddOne(app, control::kScopeFlag, scope_,
         "Which requests admission gates: train or all (X-Agentkv-Scope: train|eval)", source,
         group);
  AddOne(app, control::kSessionShareFlag, o.agentic_admission_session_share,
         "Share of the admission ceiling one session's leases may hold, in (0, 1]; a request "
         "past it waits without blocking others (429 after the maximum wait)",
         source, group);
  AddOne(app, control::kClientShareFlag, o.agentic_admission_client_share,
         "The same for all the leases of one client (an authenticated tenant), in (0, 1]", source,
         group);
  AddOne(app, control::kLeaseTtlFlag, o.lease_ttl_s,
         "Age after which a lease is reclaimed, seconds (> 0)", source, group);
  AddOne(app, control::kStalenessFlag, o.staleness_s,
         "Maximum age of the capacity snapshot before admission bypasses `degraded`, seconds "
         "(>= the poll interval)",
         source, group);
  AddOne(app, control::kPollIntervalFlag, o.poll_interval_s,
         "Seconds between polls of the engines' /metrics and the router's /workers (> 0)", source,
         group);
}

StatusOr<control::AgenticOptions> AgenticFlags::Options() const {
  control::AgenticOptions options = options_;
  AGENTKV_ASSIGN_OR_RETURN(options.agentic_admission_scope, control::ParseAdmissionScope(scope_));
  AGENTKV_ASSIGN_OR_RETURN(options.agentic_admission_policy,
                           control::ParseAdmissionPolicy(policy_));
  if (decode_cap_option_ != nullptr && decode_cap_option_->count() > 0) {
    options.agentic_admission_expected_decode_cap = decode_cap_;
  }
  return options;
}

}  // namespace agentkv::tools
