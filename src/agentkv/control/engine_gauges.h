// From an engine's scraped KV gauges to the ledger's per-engine snapshot.
//
// An SGLang engine with tensor parallelism exports each gauge once per TP rank; the ranks hold
// replicas of the same pool, so a gauge is aggregated by max over ranks, never summed. The
// usage is `token_usage` when exported, else `full_token_usage`, else 0; a usage of 0 with a
// known capacity falls back to used / capacity (seed 000's poller). Parsing the Prometheus text
// is the protocol module's job; this is the rule applied to what it parsed. Pure functions.
#ifndef AGENTKV_CONTROL_ENGINE_GAUGES_H_
#define AGENTKV_CONTROL_ENGINE_GAUGES_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace agentkv::control {

// One TP rank's values of the gauges the ledger reads (absent = not exported).
struct RankGauges {
  std::optional<double> max_total_num_tokens;  // sglang:max_total_num_tokens
  std::optional<double> num_used_tokens;       // sglang:num_used_tokens
  std::optional<double> token_usage;           // sglang:token_usage
  std::optional<double> full_token_usage;      // sglang:full_token_usage
};

// What the ledger knows of one engine at one poll.
struct EngineSnapshot {
  std::string engine_id;  // The engine's base URL.
  int64_t max_total_num_tokens = 0;
  // Fraction of the KV pool in use, as the engine reports it; the ledger clamps to [0, 1].
  double token_usage = 0;
  int64_t num_used_tokens = 0;
  bool healthy = true;

  friend bool operator==(const EngineSnapshot&, const EngineSnapshot&) = default;
};

// Aggregates `ranks` (each gauge by max over the ranks that export it) into a snapshot. A
// token gauge that is not a finite value in [0, kMaxTokens], or a usage that is not finite,
// gives an unhealthy snapshot with zero values: an engine reporting nonsense is treated as one
// that could not be scraped.
EngineSnapshot SnapshotFromGauges(std::string engine_id, std::span<const RankGauges> ranks);

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_ENGINE_GAUGES_H_
