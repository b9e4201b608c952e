// The seed's --agentic-* options (control::AgenticOptions) on the command line, declared in
// one place for every command that has them (gateway, coordinator, replay): the same names,
// defaults, help text and validation everywhere.
//
// A command adds the set it has to its CLI::App, and after parsing reads the options back with
// Options(): the admission scope parsed and the decode cap set only when its flag was given.
// Values are validated by control::AgenticOptions::Validate, the one rule, which the services
// and the replay call on the options they run with. Owned by its command; not copyable (CLI11
// holds pointers into it).
#ifndef AGENTKV_TOOLS_AGENTKV_AGENTIC_FLAGS_H_
#define AGENTKV_TOOLS_AGENTKV_AGENTIC_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "agentkv/base/status.h"
#include "agentkv/control/agentic_options.h"
#include "tools/agentkv/cli_support.h"

namespace agentkv::tools {

class AgenticFlags {
 public:
  // Which of the options a command has.
  enum class Set : uint8_t {
    // The admission budget: headroom, pressure threshold, expected decode cap, max wait and
    // the v2 program-order window.
    // The replay, whose arms switch the features on and which models no polling.
    kBudget,
    // kBudget, the admission policy, the scope, the lease TTL, the staleness and the poll interval:
    // the coordinator,
    // which always admits.
    kAdmission,
    // kAdmission and the two feature switches, --agentic-session-lifecycle and
    // --agentic-program-admission: the gateway.
    kAll,
  };

  AgenticFlags() = default;
  AgenticFlags(const AgenticFlags&) = delete;
  AgenticFlags& operator=(const AgenticFlags&) = delete;

  // Adds the options of `set` to `app`, in option group `group` ("" keeps CLI11's default).
  // Call once, before parsing.
  void Add(CLI::App& app, Set set, FlagSource source, const std::string& group = "");

  // The options given on the command line, not yet validated. InvalidArgument naming
  // --agentic-admission-scope when its value is not "train" or "all", or
  // --agentic-admission-policy when it is not "seed" or "v2". Call after parsing.
  [[nodiscard]] StatusOr<control::AgenticOptions> Options() const;

 private:
  control::AgenticOptions options_;
  std::string scope_ = std::string(control::AdmissionScopeName(control::AdmissionScope::kTrain));
  std::string policy_ = std::string(control::AdmissionPolicyName(control::AdmissionPolicy::kSeed));
  int64_t decode_cap_ = 0;
  CLI::Option* decode_cap_option_ = nullptr;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_AGENTIC_FLAGS_H_
