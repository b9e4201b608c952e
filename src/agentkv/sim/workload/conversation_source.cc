#include "agentkv/sim/workload/conversation_source.h"

#include "agentkv/base/check.h"

namespace agentkv::sim {

std::unique_ptr<WekaConversation> ConversationSource::Take(int64_t k) const {
  return std::make_unique<WekaConversation>(*Load(k));
}

int64_t InMemoryConversations::size() const {
  return static_cast<int64_t>(workload_.conversations.size());
}

TimeNs InMemoryConversations::start(int64_t k) const {
  AGENTKV_CHECK(k >= 0 && k < static_cast<int64_t>(workload_.starts.size())) << k;
  return workload_.starts[static_cast<size_t>(k)];
}

std::shared_ptr<const WekaConversation> InMemoryConversations::Load(int64_t k) const {
  AGENTKV_CHECK(k >= 0 && k < size()) << k;
  // Non-owning: the workload outlives every holder.
  return std::shared_ptr<const WekaConversation>(std::shared_ptr<const WekaConversation>(),
                                                 &workload_.conversations[static_cast<size_t>(k)]);
}

int64_t InMemoryConversations::ReplayedRequests(SubagentModels mode) const {
  int64_t total = 0;
  for (const WekaConversation& c : workload_.conversations) total += sim::ReplayedRequests(c, mode);
  return total;
}

}  // namespace agentkv::sim
