// The replay report's verdict: what a reader of one `agentkv replay` run wants first, which arms
// beat the baseline beyond seed noise, by how much on mean server time and uncached tokens,
// what is worth turning on, and how far that is from the bounds (the arms named
// "infinite-cache" and "oracle"). The terminal table (replay_report.cc) prints it before the
// table and the HTML report (replay_report_html.cc) opens with it.
//
// A replay runs one seed, so a result carries no noise estimate of its own. An arm's change is
// therefore counted only beyond a noise floor, by default kSeedNoise: the seed-to-seed spread
// of the changes measured over five seeds (docs/REPLAY.md, "Measured (WEKA traces ...)"). The
// verdict says so in words. Pure functions; thread-safe.
#ifndef AGENTKV_REPORT_REPLAY_VERDICT_H_
#define AGENTKV_REPORT_REPLAY_VERDICT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "agentkv/sim/replay/replay_result.h"

namespace agentkv::report {

// The relative change (as a fraction) within which an arm is taken to equal the baseline:
// about +-5 %, the seed-to-seed spread of single-seed changes measured in docs/REPLAY.md.
inline constexpr double kSeedNoise = 0.05;

// Where an arm stands against the baseline.
enum class ArmStanding : uint8_t {
  kBetter,       // Some headline metric better beyond the noise, none worse beyond it.
  kWithinNoise,  // No headline metric beyond the noise either way.
  kWorse,        // Some headline metric worse beyond the noise.
};

// One arm against the baseline on the two headline metrics (lower is better for both).
struct ArmVerdict {
  size_t arm = 0;
  // (arm - baseline) / baseline of ArmResult::server_time.mean_s and of uncached_tokens;
  // nullopt where the baseline's is 0 or either value is not finite.
  std::optional<double> server_time_change;
  std::optional<double> uncached_change;
  ArmStanding standing = ArmStanding::kWithinNoise;
};

struct ReplayVerdict {
  // BaselineArmIndex; nullopt without arms (then everything below is empty).
  std::optional<size_t> baseline;
  // The noise floor the standings were decided with (a fraction, >= 0).
  double noise = kSeedNoise;
  // Every arm but the baseline and the bounds, in arm order.
  std::vector<ArmVerdict> arms;
  // The arms that beat the baseline, best first: by server time change, then uncached change,
  // then arm order. Indices into `arms`.
  std::vector<size_t> ranked;
  // The first of `ranked` and those whose mean server time is within the noise of its (the
  // arms to choose between); indices into `arms`. Empty when no arm beats the baseline.
  std::vector<size_t> leaders;
  // The bound arms present ("infinite-cache", then "oracle"), with their changes.
  std::vector<ArmVerdict> bounds;
};

// Decides the verdict with noise floor `noise` (a fraction; negative is taken as 0). An arm
// named "infinite-cache" or "oracle" is a bound, never a candidate.
ReplayVerdict DecideVerdict(const sim::ReplayResult& result, double noise = kSeedNoise);

// One statement of the verdict: a short label ("turn on", "bounds", ...) and its sentence.
struct VerdictLine {
  std::string label;
  std::string text;
};

// The verdict in words, in reading order: the answer ("turn on" or "keep"), the arms as good
// as the best, the other arms that beat the baseline, those within noise and those worse (each
// only when there is one), the bounds and the best arm's share of each bound's gap, sessions at
// the SLO (not in a replay: `agentkv capacity` measures them) and how noise was decided. Plain
// text (not escaped). Empty when the result has no arms.
std::vector<VerdictLine> VerdictLines(const sim::ReplayResult& result,
                                      const ReplayVerdict& verdict);

// A share of a reference gap as the report prints it: "42.0%"; "exceeds the bound" above 100 %
// (as rounded to one decimal), for a share past the reference is not a percentage of anything
// the reader can use; "-" when not finite.
std::string ShareOfBoundText(double share);

}  // namespace agentkv::report

#endif  // AGENTKV_REPORT_REPLAY_VERDICT_H_
