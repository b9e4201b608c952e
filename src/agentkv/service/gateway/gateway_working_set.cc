// Invariants: program_of_ names only sessions whose agent has not been ended here; a program
// is always the root of a chain (a session's program is never itself a remembered sub-agent's
// session unless that session is its own root).
#include "agentkv/service/gateway/gateway_working_set.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/protocol/json_util.h"

namespace agentkv::service {
namespace {

namespace json = boost::json;

constexpr std::string_view kSessionPrefix = "session:";
constexpr std::string_view kRequestPrefix = "request:";

std::string AgentOf(std::string_view session) {
  return std::string(kSessionPrefix) + std::string(session);
}

// prompt + completion of `usage` (an object with both integers), else nullopt.
std::optional<int64_t> SumOf(const json::value* usage, std::string_view prompt_key,
                             std::string_view completion_key) {
  if (usage == nullptr || !usage->is_object()) return std::nullopt;
  const json::object& o = usage->as_object();
  const json::value* prompt = protocol::FindNonNull(o, prompt_key);
  const json::value* completion = protocol::FindNonNull(o, completion_key);
  if (prompt == nullptr || completion == nullptr) return std::nullopt;
  const std::optional<int64_t> p = protocol::AsInt64(*prompt);
  const std::optional<int64_t> c = protocol::AsInt64(*completion);
  if (!p.has_value() || !c.has_value() || *p < 0 || *c < 0) return std::nullopt;
  return std::min(kMaxTokens, SaturatingAdd(*p, *c));
}

}  // namespace

std::optional<int64_t> ContextTokensOfAnswer(std::string_view body) {
  boost::system::error_code ec;
  const json::value value = json::parse(json::string_view(body.data(), body.size()), ec);
  if (ec || !value.is_object()) return std::nullopt;
  const json::object& o = value.as_object();
  if (std::optional<int64_t> sum =
          SumOf(protocol::FindNonNull(o, "usage"), "prompt_tokens", "completion_tokens")) {
    return sum;
  }
  return SumOf(protocol::FindNonNull(o, "meta_info"), "prompt_tokens", "completion_tokens");
}

StatusOr<std::unique_ptr<GatewayWorkingSet>> GatewayWorkingSet::Create(
    LocalWorkingSetOptions options) {
  AGENTKV_ASSIGN_OR_RETURN(std::unique_ptr<LocalWorkingSet> local,
                           LocalWorkingSet::Create(std::move(options)));
  return std::unique_ptr<GatewayWorkingSet>(new GatewayWorkingSet(std::move(local)));
}

WorkingSetTicket GatewayWorkingSet::Describe(const std::string& ticket,
                                             const std::optional<std::string>& session,
                                             const std::optional<std::string>& parent,
                                             PauseKind pause, bool trusted,
                                             int64_t reservation_tokens,
                                             std::optional<std::string> engine) {
  WorkingSetTicket t;
  t.request.ticket = ticket;
  t.request.reservation_tokens = reservation_tokens;
  t.request.engine = std::move(engine);
  t.pause = trusted || pause == PauseKind::kSessionEnd ? pause : PauseKind::kUnknown;
  if (!session.has_value()) {
    t.sessionless = true;
    t.request.agent = std::string(kRequestPrefix) + ticket;
    t.request.program = t.request.agent;
    return t;
  }
  t.request.agent = AgentOf(*session);
  sync::MutexLock lock(&mu_);
  auto known = program_of_.find(*session);
  if (known == program_of_.end()) {
    // A session's program is fixed by its first request (an agent belongs to one program).
    std::string root = *session;
    if (parent.has_value() && *parent != *session) {
      auto parents = program_of_.find(*parent);
      root = parents != program_of_.end() ? parents->second : *parent;
    }
    known = program_of_.emplace(*session, std::move(root)).first;
  }
  t.request.program = AgentOf(known->second);
  return t;
}

Status GatewayWorkingSet::Acquire(const WorkingSetTicket& ticket, LocalWorkingSet::Callback done) {
  return local_->Acquire(ticket.request, std::move(done));
}

bool GatewayWorkingSet::Cancel(const std::string& ticket) { return local_->Cancel(ticket); }

void GatewayWorkingSet::Finish(const WorkingSetTicket& ticket, int64_t context_tokens,
                               bool served) {
  control::RequestEnd end;
  end.context_tokens = served ? std::clamp<int64_t>(context_tokens, 0, kMaxTokens) : 0;
  end.next_pause = ticket.sessionless ? PauseKind::kSessionEnd : ticket.pause;
  local_->Finish(ticket.request.ticket, end);
  if (ticket.sessionless) local_->EndAgent(ticket.request.agent);
}

void GatewayWorkingSet::EndSession(const std::string& session) {
  {
    sync::MutexLock lock(&mu_);
    program_of_.erase(session);
  }
  local_->EndAgent(AgentOf(session));
}

int64_t GatewayWorkingSet::EndInactive(
    const std::function<bool(const std::string& session)>& active) {
  std::vector<std::string> sessions;
  {
    sync::MutexLock lock(&mu_);
    for (const auto& [session, program] : program_of_) sessions.push_back(session);
  }
  int64_t ended = 0;
  for (const std::string& session : sessions) {
    if (active(session)) continue;
    EndSession(session);
    ++ended;
  }
  return ended;
}

void GatewayWorkingSet::Reconcile(std::span<const control::EngineSnapshot> snapshots) {
  local_->Reconcile(snapshots);
}

void GatewayWorkingSet::Tick() { local_->Tick(); }

void GatewayWorkingSet::Shutdown() { local_->Shutdown(); }

std::vector<protocol::MetricFamily> GatewayWorkingSet::Families() const {
  return WorkingSetFamilies(local_->Gauges(), local_->Counters());
}

int64_t GatewayWorkingSet::sessions() const {
  sync::MutexLock lock(&mu_);
  return static_cast<int64_t>(program_of_.size());
}

}  // namespace agentkv::service
