// AgentTarget: what an AgentDriver (agent_driver.h) sends its agents' requests to.
//
// In the simulator it is the GatewayModel in front of a simulated fleet; `agentkv load` puts a
// live endpoint behind it (load/live_target.h), so one driver, with one set of timing rules,
// drives both the prediction and the measurement. The driver calls, on its loop's thread:
// hasher() and tokens_per_block() once when it is built, set_completion_callback() once at
// Start(), then Submit() per request and EndSession() per ended agent. The target calls the
// completion callback once per request it accepted, from inside the driver's loop (an event, or
// the code the loop runs between events), never from another thread.
#ifndef AGENTKV_SIM_FLEET_AGENT_TARGET_H_
#define AGENTKV_SIM_FLEET_AGENT_TARGET_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/kv/block_key.h"

namespace agentkv::sim {

struct GatewayRequest;
struct GatewayRecord;
struct EngineRequestRecord;

class AgentTarget {
 public:
  // A request completed (engine record set: served, or rejected with its report saying so), or
  // could not be served (engine record null, gateway record's dispatch_error set).
  using CompletionCallback =
      std::function<void(const GatewayRecord&, const EngineRequestRecord* engine_record)>;

  virtual ~AgentTarget() = default;

  // The hasher that chains prompt block ids into keys, and the tokens per block the workload
  // must have.
  virtual const kv::BlockKeyHasher& hasher() const = 0;
  virtual int32_t tokens_per_block() const = 0;
  virtual void set_completion_callback(CompletionCallback callback) = 0;
  // Takes `request` now. An error refuses it: nothing will complete.
  virtual Status Submit(GatewayRequest request) = 0;
  // The agent of `session` ended. Returns the tokens a close freed per engine, when known now.
  virtual std::vector<int64_t> EndSession(SessionId session) = 0;
  // Every agent of a conversation ended, and no later request can name any of `keys` (the
  // conversation's own: the driver chains its ids under its own namespace past the shared
  // prefix). A simulated fleet forgets what it keeps per key for them; a live one keeps nothing.
  virtual void RetireKeys(std::span<const kv::BlockKey> keys) { static_cast<void>(keys); }
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_FLEET_AGENT_TARGET_H_
