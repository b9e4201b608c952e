// GatewayWorkingSet: the gateway's side of program-level working-set admission
// (--agentic-working-set; docs/GATEWAY.md, "Working-set admission").
//
// It owns the gateway's one LocalWorkingSet (the pure control::WorkingSetAdmission behind a
// mutex, with its deadline timer) and says who a request is to it: its agent is its session
// (tenant-namespaced as the gateway namespaces sessions), its program the root of the session's
// parent chain as verified parent hints named it (a sub-agent's sub-agent belongs to the main
// agent's program), and a request without a session is a program of its own. The pause after a
// request (X-Agentkv-Pause or what a chat body shows) decides how long its context is held; a
// caller without the gateway's bearer token cannot claim a pause (its requests hold for the
// `unknown` kind's learned time, and `session_end` is honoured from anyone): a claimed pause
// kind would otherwise teach every program's holds its length. The program a request joins
// comes only from a verified hint, so no caller can jump the queue of new programs by naming a
// live one.
//
// Thread-safe: one mutex guards the program map; LocalWorkingSet has its own. No lock is held
// while a callback runs. Not copyable.
#ifndef AGENTKV_SERVICE_GATEWAY_GATEWAY_WORKING_SET_H_
#define AGENTKV_SERVICE_GATEWAY_GATEWAY_WORKING_SET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/control/working_set.h"
#include "agentkv/protocol/prometheus.h"
#include "agentkv/service/admission/working_set_local.h"
#include "agentkv/service/gateway/gateway_request.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

// One request's place in the working set, kept by its exchange from Acquire to Finish.
struct WorkingSetTicket {
  control::ProgramRequest request;
  // The request had no session: its agent ends with it.
  bool sessionless = false;
  // The pause that follows it (kUnknown unless honoured).
  PauseKind pause = PauseKind::kUnknown;
};

// The context a served answer leaves (prompt + output tokens): /generate's
// meta_info.prompt_tokens + completion_tokens, or the OpenAI routes' usage.prompt_tokens +
// completion_tokens; nullopt when the body is not JSON or names neither.
std::optional<int64_t> ContextTokensOfAnswer(std::string_view body);

class GatewayWorkingSet {
 public:
  // InvalidArgument naming the bad option. `options.timer` false: tests call Tick.
  static StatusOr<std::unique_ptr<GatewayWorkingSet>> Create(LocalWorkingSetOptions options);

  GatewayWorkingSet(const GatewayWorkingSet&) = delete;
  GatewayWorkingSet& operator=(const GatewayWorkingSet&) = delete;

  // Who the request of attempt `ticket` is: agent "session:<session>" and program
  // "session:<root>", where root is `parent`'s program when it is known (else `parent`), else
  // the session itself; without a session both are "request:<ticket>". Remembers the session's
  // program until EndSession. `trusted`: the caller presented the bearer token (its pause
  // counts; otherwise only kSessionEnd does).
  WorkingSetTicket Describe(const std::string& ticket, const std::optional<std::string>& session,
                            const std::optional<std::string>& parent, PauseKind pause, bool trusted,
                            int64_t reservation_tokens,
                            std::optional<std::string> engine = std::nullopt);

  // LocalWorkingSet::Acquire for `ticket`: `done` runs once (admitted or cancelled), or a bad
  // request's status comes back and `done` never runs.
  [[nodiscard]] Status Acquire(const WorkingSetTicket& ticket, LocalWorkingSet::Callback done);
  // Cancels `ticket`'s wait; whether it was waiting.
  bool Cancel(const std::string& ticket);
  // The attempt ended: `context_tokens` held for its pause when it was served (`served`), none
  // otherwise. A sessionless request's agent ends with it.
  void Finish(const WorkingSetTicket& ticket, int64_t context_tokens, bool served);
  // The session ended (closed, idle, evicted): its agent ends and its program is forgotten.
  void EndSession(const std::string& session);
  // Ends every remembered session for which `active` is false (sessions that ended without a
  // close request: the idle timeout, eviction). Returns how many.
  int64_t EndInactive(const std::function<bool(const std::string& session)>& active);
  void Reconcile(std::span<const control::EngineSnapshot> snapshots);
  void Tick();
  // Cancels every waiter; afterwards every request is admitted at once.
  void Shutdown();

  std::vector<protocol::MetricFamily> Families() const;
  control::WorkingSetGauges Gauges() const { return local_->Gauges(); }
  control::WorkingSetCounters Counters() const { return local_->Counters(); }
  // Sessions whose program is remembered.
  int64_t sessions() const;

 private:
  explicit GatewayWorkingSet(std::unique_ptr<LocalWorkingSet> local) : local_(std::move(local)) {}

  std::unique_ptr<LocalWorkingSet> local_;
  mutable sync::Mutex mu_;
  // The program (root session) of each session seen with a request.
  std::map<std::string, std::string, std::less<>> program_of_ AGENTKV_GUARDED_BY(mu_);
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_GATEWAY_GATEWAY_WORKING_SET_H_
