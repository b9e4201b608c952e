// Invariants of a generated StandardTrace:
// - session_tokens_[s] begins with the prefix and holds exactly the tokens of session s's final
//   sequence, so the prompt of every request of s is a prefix of that buffer.
// - requests_[i] belongs to session i % sessions and turn i / sessions; within a session
//   prompt_len grows strictly with the turn and the last request ends at the buffer's end.
// - draws_ equals prefix_tokens + sum over requests of (2 + new_len + out_len), the position of
//   the random stream after generation.
// Generation runs in two passes over the counter-based stream: the first draws only the lengths
// (skipping token draws by advancing the counter), so every session buffer is reserved once at its
// final size and never reallocates; the second draws the tokens in stream order.
#include "bench/standard_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "agentkv/base/check.h"
#include "agentkv/base/hash.h"
#include "agentkv/base/rng.h"

namespace agentkv::bench {
namespace {

constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

// Aborts on a violated precondition; these are programmer errors, not expected failures.
void CheckOrDie(bool condition, const char* message) {
  AGENTKV_CHECK(condition) << "standard_trace: " << message;
}

// Draw i of a stream is Mix64(seed + (i + 1) * golden), the i-th value of classic splitmix64
// seeded with `seed` (agentkv::Rng); being counter-based, draws can be skipped without being
// computed, which the first generation pass relies on.
class DrawStream {
 public:
  explicit DrawStream(uint64_t seed) : seed_(seed) {}

  uint64_t Next() { return Mix64(seed_ + (++index_) * Rng::kGolden); }
  // Uniform integer in [lo, hi] by the reference's plain modulo; its slight bias is part of the
  // definition and must not be "fixed".
  int Uniform(int lo, int hi) {
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
    return lo + static_cast<int>(Next() % span);
  }
  void Skip(uint64_t count) { index_ += count; }
  uint64_t consumed() const { return index_; }

 private:
  uint64_t seed_;
  uint64_t index_ = 0;  // Draws consumed so far; the next draw uses counter index_ + 1.
};

// FNV-1a-64 fed with uint32 values as four little-endian bytes, independent of host byte order.
class Fnv1a64 {
 public:
  void AddU32(uint32_t value) {
    for (int shift = 0; shift < 32; shift += 8) {
      hash_ ^= (value >> shift) & 0xffu;
      hash_ *= kFnvPrime;
    }
  }
  uint64_t hash() const { return hash_; }

 private:
  uint64_t hash_ = kFnvOffsetBasis;
};

// Returns an empty string when `p` is valid, else a message naming the first bad field. Besides
// the documented ranges it bounds the totals so that every int64 counter is free of overflow.
std::string ValidateParams(const StandardTraceParams& p) {
  if (p.sessions < 1) return "sessions must be >= 1";
  if (p.turns < 1) return "turns must be >= 1";
  if (p.prefix_tokens < 0) return "prefix_tokens must be >= 0";
  if (p.new_min < 0 || p.new_min > p.new_max) return "new_min/new_max must satisfy 0 <= min <= max";
  if (p.out_min < 0 || p.out_min > p.out_max) return "out_min/out_max must satisfy 0 <= min <= max";
  if (p.vocab < 1) return "vocab must be >= 1";
  if (p.block_size < 1) return "block_size must be >= 1";
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t per_turn = int64_t{p.new_max} + p.out_max;
  if (per_turn > (kMax - p.prefix_tokens) / p.turns) return "turns too large for token counts";
  const int64_t longest = p.prefix_tokens + per_turn * p.turns;
  const int64_t requests = int64_t{p.sessions} * p.turns;
  if (longest > 0 && requests > kMax / longest) return "sessions too large for token counts";
  return "";
}

}  // namespace

std::optional<StandardTrace> StandardTrace::Generate(const StandardTraceParams& params,
                                                     std::string* error) {
  if (std::string message = ValidateParams(params); !message.empty()) {
    if (error != nullptr) *error = "StandardTraceParams: " + message;
    return std::nullopt;
  }
  StandardTrace trace;
  trace.params_ = params;
  const int sessions = params.sessions;
  const int64_t num_requests = int64_t{sessions} * params.turns;

  // Pass 1: lengths only. Token draws are skipped by advancing the counter, which is what lets
  // each session buffer be sized exactly before any token is written.
  std::vector<int32_t> new_lens(num_requests);
  trace.requests_.resize(num_requests);
  std::vector<int64_t> session_len(sessions, params.prefix_tokens);
  DrawStream lengths(params.seed);
  lengths.Skip(static_cast<uint64_t>(params.prefix_tokens));
  for (int64_t i = 0; i < num_requests; ++i) {
    const int s = static_cast<int>(i % sessions);
    const int new_len = lengths.Uniform(params.new_min, params.new_max);
    lengths.Skip(static_cast<uint64_t>(new_len));
    const int out_len = lengths.Uniform(params.out_min, params.out_max);
    lengths.Skip(static_cast<uint64_t>(out_len));
    new_lens[i] = new_len;
    RequestExtent& extent = trace.requests_[i];
    extent.prompt_len = session_len[s] + new_len;
    extent.output_len = out_len;
    session_len[s] = extent.prompt_len + out_len;
  }

  // Pass 2: tokens in stream order. The prefix is drawn once and copied into every session.
  DrawStream tokens(params.seed);
  std::vector<uint32_t> prefix(params.prefix_tokens);
  Fnv1a64 prefix_hash;
  for (uint32_t& token : prefix) {
    token = static_cast<uint32_t>(tokens.Next() % params.vocab);
    prefix_hash.AddU32(token);
  }
  trace.session_tokens_.resize(sessions);
  for (int s = 0; s < sessions; ++s) {
    std::vector<uint32_t>& buffer = trace.session_tokens_[s];
    buffer.reserve(static_cast<size_t>(session_len[s]));
    buffer.assign(prefix.begin(), prefix.end());
  }
  Fnv1a64 request_hash;
  for (int64_t i = 0; i < num_requests; ++i) {
    std::vector<uint32_t>& buffer = trace.session_tokens_[i % sessions];
    const RequestExtent& extent = trace.requests_[i];
    const auto append = [&](int32_t count) {
      tokens.Skip(1);  // The length draw, already taken in pass 1.
      request_hash.AddU32(static_cast<uint32_t>(count));
      for (int32_t k = 0; k < count; ++k) {
        const uint32_t token = static_cast<uint32_t>(tokens.Next() % params.vocab);
        request_hash.AddU32(token);
        buffer.push_back(token);
      }
    };
    append(new_lens[i]);
    append(extent.output_len);
    CheckOrDie(static_cast<int64_t>(buffer.size()) == extent.prompt_len + extent.output_len,
               "session buffer out of step with pass 1");

    const int64_t seq_len = extent.prompt_len + extent.output_len;
    trace.prompt_tokens_ += extent.prompt_len;
    trace.total_tokens_ += seq_len;
    trace.full_blocks_ += seq_len / params.block_size;
    if (seq_len > trace.longest_sequence_) trace.longest_sequence_ = seq_len;
  }
  CheckOrDie(tokens.consumed() == lengths.consumed(), "passes consumed different draw counts");

  trace.request_fingerprint_ = request_hash.hash();
  trace.prefix_fingerprint_ = prefix_hash.hash();
  trace.draws_ = static_cast<int64_t>(tokens.consumed());
  trace.working_set_tokens_ = params.prefix_tokens;
  for (int s = 0; s < sessions; ++s) {
    trace.working_set_tokens_ += session_len[s] - params.prefix_tokens;
  }
  return trace;
}

StandardRequest StandardTrace::request(int64_t index) const {
  CheckOrDie(index >= 0 && index < num_requests(), "request index out of range");
  const RequestExtent& extent = requests_[index];
  const int session = static_cast<int>(index % params_.sessions);
  const std::vector<uint32_t>& buffer = session_tokens_[session];
  StandardRequest request;
  request.session = session;
  request.turn = static_cast<int>(index / params_.sessions);
  request.prompt = std::span<const uint32_t>(buffer.data(), static_cast<size_t>(extent.prompt_len));
  request.output = std::span<const uint32_t>(buffer.data() + extent.prompt_len,
                                             static_cast<size_t>(extent.output_len));
  return request;
}

std::span<const uint32_t> StandardTrace::prefix() const {
  return session_tokens(0).first(static_cast<size_t>(params_.prefix_tokens));
}

std::span<const uint32_t> StandardTrace::session_tokens(int session) const {
  CheckOrDie(session >= 0 && session < params_.sessions, "session out of range");
  return session_tokens_[session];
}

int64_t StandardTrace::CapacityTokens(double fraction) const {
  CheckOrDie(std::isfinite(fraction) && fraction >= 0.0, "fraction must be finite and >= 0");
  const double raw = std::floor(fraction * static_cast<double>(working_set_tokens_));
  CheckOrDie(raw < 0x1p63, "capacity does not fit in int64");
  const int64_t tokens = static_cast<int64_t>(raw);
  return tokens - tokens % params_.block_size;
}

namespace {

// Collects "name: expected X, actual Y" lines for every mismatch.
class Mismatches {
 public:
  template <typename T>
  void Expect(const char* name, const T& expected, const T& actual) {
    if (expected == actual) return;
    out_ << name << ": expected " << expected << ", actual " << actual << "\n";
  }
  void ExpectHex(const char* name, uint64_t expected, uint64_t actual) {
    if (expected == actual) return;
    char line[128];
    std::snprintf(line, sizeof(line), "%s: expected %016llx, actual %016llx\n", name,
                  static_cast<unsigned long long>(expected),
                  static_cast<unsigned long long>(actual));
    out_ << line;
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace

std::string VerifyStandardTraceV1(const StandardTrace& trace) {
  // The published values of the reference, section "Check values" and "Parameters (v1)".
  const StandardTraceParams v1;
  const StandardTraceParams& p = trace.params();
  Mismatches m;
  m.Expect("params.seed", v1.seed, p.seed);
  m.Expect("params.sessions", v1.sessions, p.sessions);
  m.Expect("params.turns", v1.turns, p.turns);
  m.Expect("params.prefix_tokens", v1.prefix_tokens, p.prefix_tokens);
  m.Expect("params.new_min", v1.new_min, p.new_min);
  m.Expect("params.new_max", v1.new_max, p.new_max);
  m.Expect("params.out_min", v1.out_min, p.out_min);
  m.Expect("params.out_max", v1.out_max, p.out_max);
  m.Expect("params.vocab", v1.vocab, p.vocab);
  m.Expect("params.block_size", v1.block_size, p.block_size);

  m.Expect<int64_t>("num_requests", 4'000, trace.num_requests());
  m.Expect<int64_t>("prompt_tokens", 65'713'411, trace.prompt_tokens());
  m.Expect<int64_t>("total_tokens", 66'926'133, trace.total_tokens());
  m.Expect<int64_t>("full_blocks", 4'180'998, trace.full_blocks());
  m.Expect<int64_t>("longest_sequence", 36'617, trace.longest_sequence());
  m.Expect<int64_t>("draws", 5'629'956, trace.draws());
  m.ExpectHex("request_fingerprint", 0x8071a0350f0929c5ULL, trace.request_fingerprint());
  m.ExpectHex("prefix_fingerprint", 0x02834588e9b1f128ULL, trace.prefix_fingerprint());

  const std::vector<uint32_t> first_prefix = {4934, 9526, 726, 25207, 13019, 17407, 22934, 26886};
  const std::span<const uint32_t> prefix = trace.prefix();
  m.Expect<size_t>("prefix size >= 8", first_prefix.size(),
                   std::min(prefix.size(), first_prefix.size()));
  for (size_t k = 0; k < first_prefix.size() && k < prefix.size(); ++k) {
    const std::string name = "prefix[" + std::to_string(k) + "]";
    m.Expect<uint32_t>(name.c_str(), first_prefix[k], prefix[k]);
  }

  m.Expect<int64_t>("working_set_tokens", 5'621'956, trace.working_set_tokens());
  m.Expect<int64_t>("CapacityTokens(0.5)", 2'810'976, trace.CapacityTokens(0.5));
  m.Expect<int64_t>("CapacityTokens(0.5) blocks", 175'686,
                    trace.CapacityTokens(0.5) / p.block_size);
  m.Expect<int64_t>("CapacityTokens(1.0)", 5'621'952, trace.CapacityTokens(1.0));
  return m.str();
}

}  // namespace agentkv::bench
