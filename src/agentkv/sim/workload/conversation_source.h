// ConversationSource: the conversations of an agentic replay, handed out one at a time, so that
// a replay holds a conversation only from its start to its end.
//
// Two kinds. A workload held whole in memory (InMemoryConversations over an AgenticWorkload:
// trace files read before the run, the rollout generator, tests) hands out pointers into it. A
// streamed source (the synthetic generator's, synthetic_agentic.h) builds conversation k when
// it is asked for it and keeps nothing of it afterwards, so the memory of a replay follows its
// live sessions, not all its sessions. Start times and per-conversation request counts are
// known up front in both (the driver schedules every start at once); the requests and their
// block ids exist only while a caller holds the conversation.
//
// Implementations are immutable after construction and thread-safe: the arms of a replay run
// on several threads over one source.
#ifndef AGENTKV_SIM_WORKLOAD_CONVERSATION_SOURCE_H_
#define AGENTKV_SIM_WORKLOAD_CONVERSATION_SOURCE_H_

#include <cstdint>
#include <memory>

#include "agentkv/base/time.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/weka_trace.h"

namespace agentkv::sim {

class ConversationSource {
 public:
  virtual ~ConversationSource() = default;

  // Conversations in the workload.
  virtual int64_t size() const = 0;
  // When conversation k begins, from the start of the workload. Precondition: 0 <= k < size().
  virtual TimeNs start(int64_t k) const = 0;
  // Conversation k, valid while the pointer is held. Precondition: 0 <= k < size().
  virtual std::shared_ptr<const WekaConversation> Load(int64_t k) const = 0;
  // Conversation k as a value the caller owns and may take apart (the driver keeps a streamed
  // conversation's block ids once per agent, not once per request). By default a copy of
  // Load(k); a streamed source builds it directly.
  virtual std::unique_ptr<WekaConversation> Take(int64_t k) const;
  // The requests a replay under `mode` issues over every conversation (ReplayedRequests, summed).
  virtual int64_t ReplayedRequests(SubagentModels mode) const = 0;
  // The whole workload when it is held in memory (Load points into it), else null: what only
  // an in-memory workload carries (start gates, retention marks) is read from there.
  virtual const AgenticWorkload* in_memory() const = 0;
};

// An AgenticWorkload seen as a source. `workload` must outlive this and not change.
class InMemoryConversations final : public ConversationSource {
 public:
  explicit InMemoryConversations(const AgenticWorkload& workload) : workload_(workload) {}

  int64_t size() const override;
  TimeNs start(int64_t k) const override;
  // Points into the workload (no copy).
  std::shared_ptr<const WekaConversation> Load(int64_t k) const override;
  int64_t ReplayedRequests(SubagentModels mode) const override;
  const AgenticWorkload* in_memory() const override { return &workload_; }

 private:
  const AgenticWorkload& workload_;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_CONVERSATION_SOURCE_H_
