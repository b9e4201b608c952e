// ContinuumPolicy: the time-to-live decision of Continuum (arXiv 2511.02230) for the KV of a
// turn that ended in a tool call. It learns online, per pause class (kv::PauseClass: the
// pause's kind and whether a sub-agent takes it, e.g. a main agent's tool call and a
// sub-agent's), the empirical
// distribution of pause durations (a fixed log-spaced histogram: bounded memory), and for a
// finished tool-call turn chooses the TTL that maximizes
//   net(ttl) = P(pause <= ttl) * (prefill saved + queueing saved)
//            - pinned tokens * E[min(pause, ttl)] * price(KV pressure),
// pinning only when the best net is positive. The pause lengths are a kv::PauseEstimator on
// the octave grid (kv/pause_estimator.h), the estimator stall offload, the eviction order and
// the working set share. The prefill saved is the cost model's
// estimate of recomputing the pinned tokens; the price of a token-second of KV rises with the
// pressure on the pool, price(p) = memory_price * p / (1 - p). Until a class has samples, a prior
// of `prior_weight` pseudo-samples distributed exponentially with mean `prior_pause` stands in for
// them (Continuum's cold start assumes exponential tool durations; as pseudo-samples, real samples
// outweigh the prior as they arrive).
//
// Pure: no I/O, clocks or globals; time enters as durations. Deterministic. The simulator's
// gateway model runs it; a gateway or an engine can run the same object. Thread-compatible:
// const methods may run concurrently; Observe* need external synchronization. Copyable value.
#ifndef AGENTKV_ENGINE_CONTINUUM_POLICY_H_
#define AGENTKV_ENGINE_CONTINUUM_POLICY_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/kv/pause_estimator.h"

namespace agentkv::engine {

struct ContinuumPolicyOptions {
  // Seconds of server time one token of KV held for one second costs at KV pressure 0.5
  // (price(p) = memory_price * p / (1 - p)). Default: 1e-6: llama-3.1-8b on an H100 prefills
  // a token in about 30 us, so at half pressure a pin pays for itself when the program returns
  // within about 30 s, at pressure 0.9 within about 3 s. Range: [0, 1].
  double memory_price = 1e-6;
  // Pressure is clamped to this before pricing, so the price stays finite.
  // Default: 0.99. Range: (0, 1).
  double max_pressure = 0.99;
  // The prior: `prior_weight` pseudo-samples in every class, exponentially distributed with
  // mean `prior_pause`. Default: 4 samples of mean 2 s (most tool calls of coding agents
  // return within seconds).
  // Ranges: prior_weight [0, 1 << 20]; prior_pause [1 ms, 1 day].
  int64_t prior_weight = 4;
  TimeNs prior_pause = TimeNs::Seconds(2);
  // When a class has seen this many samples, every count is halved (old samples fade, the
  // distribution follows drift). Default: 4096. Range: [2, 1 << 30].
  int64_t decay_at = 4096;

  // The estimator's part of these options (kv::PauseEstimator::DistributionOptions with this
  // prior and fading).
  kv::PauseEstimator::Options distribution() const;

  // InvalidArgument naming the first field out of range.
  Status Validate() const;
};

// What the caller knows about a turn that just finished with a tool call.
struct PinRequest {
  // The pause class (its kind a returning one).
  kv::PauseClass pause_class{PauseKind::kToolCall};
  // Tokens the pin would hold (the turn's prompt blocks). Range: >= 0.
  int64_t tokens = 0;
  // Queueing the returning request avoids when its KV is still there (it re-enters the batch
  // at once instead of waiting for memory). Range: >= 0.
  TimeNs queueing_saved;
  // Share of the engine's KV pool held now (running requests and pins). Range: [0, 1].
  double kv_pressure = 0.0;
};

struct PinDecision {
  // The TTL to pin for; unset: do not pin.
  std::optional<TimeNs> ttl;
  // The best candidate's terms (seconds of server time) and return probability.
  double benefit_s = 0.0;
  double cost_s = 0.0;
  double return_probability = 0.0;
  // Set when a candidate had a positive benefit but none beat its cost.
  bool declined_by_cost = false;
};

class ContinuumPolicy {
 public:
  // Validates `options` (InvalidArgument naming the field).
  static StatusOr<ContinuumPolicy> Create(const ContinuumPolicyOptions& options);

  const ContinuumPolicyOptions& options() const { return options_; }

  // Records one pause of `pause_class` that ended after `pause` (the program's next request
  // arrived). A negative pause is ignored.
  void ObservePause(kv::PauseClass pause_class, TimeNs pause) {
    pauses_.Observe(pause_class, pause);
  }
  // Records a pause that never ended (the program stopped after the tool call).
  void ObserveNoReturn(kv::PauseClass pause_class) { pauses_.ObserveNoReturn(pause_class); }

  // The pin decision for `request` on an engine priced by `cost_model` (the prefill saved is
  // its estimate of prefilling request.tokens alone). Precondition: fields in range.
  PinDecision Decide(const PinRequest& request, const CostModel& cost_model) const;
  // The same with the prefill time saved given directly (tests, callers without a model).
  PinDecision DecideWithPrefill(const PinRequest& request, TimeNs prefill_saved) const;

  // P(pause <= ttl) for `pause_class` under the learned distribution and the prior.
  double ReturnProbability(kv::PauseClass pause_class, TimeNs ttl) const {
    return pauses_.ReturnProbability(pause_class, ttl);
  }
  // Real samples recorded for `pause_class` (after decay), without the prior.
  int64_t samples(kv::PauseClass pause_class) const { return pauses_.samples(pause_class); }
  // The learned pause lengths.
  const kv::PauseEstimator& pauses() const { return pauses_; }
  // The candidate TTLs: the finite bucket edges, ascending (250 ms .. 2048 s).
  // Precondition: bucket in [0, pauses().grid().finite_buckets()).
  TimeNs BucketEdge(int32_t bucket) const { return pauses_.grid().edge(bucket); }
  // The bucket a pause falls in (finite_buckets() past the last edge).
  int32_t BucketOf(TimeNs pause) const { return pauses_.grid().BucketOf(pause); }

 private:
  ContinuumPolicy(const ContinuumPolicyOptions& options, kv::PauseEstimator pauses);

  ContinuumPolicyOptions options_;
  kv::PauseEstimator pauses_;
};

}  // namespace agentkv::engine

#endif  // AGENTKV_ENGINE_CONTINUUM_POLICY_H_
