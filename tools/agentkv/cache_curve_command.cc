#include "tools/agentkv/cache_curve_command.h"

#include <fmt/core.h>

#include <chrono>
#include <cstdio>

#include "agentkv/sim/replay/cache_curve.h"
#include "agentkv/sim/workload/mooncake_trace.h"
#include "tools/agentkv/cli_support.h"

namespace agentkv::tools {
namespace {

constexpr int64_t kMaxBlockTokens = int64_t{1} << 20;
constexpr int64_t kMaxCapacityBlocks = int64_t{1} << 30;

constexpr const char* kDescription =
    "Block hit ratio of a Mooncake trace at several device capacities (LRU, no host tier)";

constexpr const char* kFooter = R"(What it does:
  Replays the trace's hash_ids through the KV cache manager, one request at a time in file
  order. Each line is one request (JSON: timestamp, input_length, output_length, hash_ids;
  one hash id per 512-token block, as in kvcache-ai/Mooncake's FAST25-release traces). A
  block is identified by its whole prefix (chained keys), so the same hash id after a
  different prefix is a different block. Each capacity gets a fresh cache of
  max(1, floor(fraction * unique_blocks)) device blocks with no host tier and LRU eviction.
  A request looks up its blocks, computes and caches the ones it missed, then finishes; a
  request longer than the whole device caches only its first `capacity` blocks.

Output: a header line (trace, requests, unique blocks), then one row per capacity:
  capacity%  device capacity as a percentage of the unique blocks
  blocks     device capacity in blocks
  hits       leading request blocks found resident, summed over requests
  total      request blocks (hash ids), summed over requests
  hit_ratio  hits / total
  evictions  blocks evicted from the device to make room
Progress goes to stderr, one line per capacity (--quiet turns it off).

Exit codes: 0 success; 2 bad flags or trace (one `agentkv cache-curve: error:` line on
stderr); 1 internal error.)";

// Checks the flags CLI11 cannot express; the message names the flag and its value.
Status CheckFlags(int64_t block_tokens, const std::vector<double>& fractions, bool has_capacity,
                  int64_t capacity_blocks) {
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--block-tokens", block_tokens, 1, kMaxBlockTokens));
  if (has_capacity) {
    AGENTKV_RETURN_IF_ERROR(
        CheckFlagRange("--capacity-blocks", capacity_blocks, 1, kMaxCapacityBlocks));
    return CheckKvBlocks(fmt::format("--capacity-blocks {}", capacity_blocks), capacity_blocks);
  }
  for (const double f : fractions) {
    AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--fractions", f, 0.0, 1.0, LowerBound::kOpen));
  }
  return Status::Ok();
}

void PrintTable(const std::string& trace_path, const std::vector<sim::MooncakeRequest>& requests,
                int64_t unique_blocks, int64_t block_tokens,
                const std::vector<sim::CacheCurvePoint>& points) {
  fmt::print("trace {}: {} requests, {} unique blocks of {} tokens (host tier 0, LRU)\n",
             trace_path, requests.size(), unique_blocks, block_tokens);
  fmt::print("{:>9}  {:>10}  {:>12}  {:>12}  {:>9}  {:>12}\n", "capacity%", "blocks", "hits",
             "total", "hit_ratio", "evictions");
  for (const sim::CacheCurvePoint& p : points) {
    fmt::print("{:>9.2f}  {:>10}  {:>12}  {:>12}  {:>9.4f}  {:>12}\n", p.fraction * 100.0,
               p.capacity_blocks, p.hits, p.total_blocks, p.hit_ratio, p.evictions);
  }
  std::fflush(stdout);
}

}  // namespace

CacheCurveCommand::CacheCurveCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(kFooter);
  command_->add_option("--trace", trace_path_, "Mooncake-format JSONL trace to replay")
      ->required()
      ->type_name("FILE");
  command_->add_option("--block-tokens", block_tokens_, "Tokens per KV block")
      ->capture_default_str()
      ->type_name("N");
  fractions_option_ =
      command_
          ->add_option("--fractions", fractions_,
                       "Comma-separated device capacities as fractions of the unique blocks, "
                       "each in (0, 1]")
          ->delimiter(',')
          ->type_name("LIST")
          ->default_str("0.01,0.05,0.10,0.25,0.50,1.0");
  capacity_option_ = command_
                         ->add_option("--capacity-blocks", capacity_blocks_,
                                      "One absolute device capacity in blocks (replaces "
                                      "--fractions)")
                         ->type_name("N")
                         ->excludes(fractions_option_);
  command_->add_flag("--quiet", quiet_, "Do not print progress on stderr");
}

int CacheCurveCommand::Run() const {
  const bool has_capacity = capacity_option_->count() > 0;
  if (Status s = CheckFlags(block_tokens_, fractions_, has_capacity, capacity_blocks_); !s.ok()) {
    return ReportError(kName, s);
  }
  StatusOr<std::vector<sim::MooncakeRequest>> requests = sim::ReadMooncakeTrace(trace_path_);
  if (!requests.ok()) return ReportError(kName, requests.status());

  sim::CacheCurveOptions options;
  options.block_tokens = static_cast<int32_t>(block_tokens_);
  options.fractions = fractions_;
  if (has_capacity) options.capacity_blocks = capacity_blocks_;
  const int points = has_capacity ? 1 : static_cast<int>(fractions_.size());
  const auto request_count = static_cast<int64_t>(requests->size());
  // The first point's time includes computing the chained keys of the whole trace.
  auto point_start = std::chrono::steady_clock::now();
  if (!quiet_) {
    options.progress = [&](int point, int64_t requests_done) {
      if (requests_done != request_count) return;
      const auto now = std::chrono::steady_clock::now();
      fmt::print(stderr, "agentkv {}: capacity {}/{} replayed ({} requests) in {:.2f} s\n", kName,
                 point + 1, points, requests_done,
                 std::chrono::duration<double>(now - point_start).count());
      point_start = now;
    };
  }

  const int64_t unique_blocks = sim::CountUniqueBlocks(*requests);
  StatusOr<std::vector<sim::CacheCurvePoint>> curve = sim::RunCacheCurve(*requests, options);
  if (!curve.ok()) return ReportError(kName, curve.status());
  PrintTable(trace_path_, *requests, unique_blocks, block_tokens_, *curve);
  return kExitOk;
}

}  // namespace agentkv::tools
