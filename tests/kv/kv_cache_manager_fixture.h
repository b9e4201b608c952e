// The shared fixture of the scenario suites that drive the KV cache through KvCacheManager
// (kv_cache_manager_test.cc, the core's block_cache_eviction_test.cc and
// block_cache_retention_test.cc, and the agentic layers' session_table_test.cc,
// conversation_retention_test.cc and subagent_demotion_test.cc).
//
// KvCacheManagerTest builds a manager with small, deterministic options (4 tokens per block,
// a fixed hash seed) and speaks the domain: Admit, Reserve, Commit, Finish, RunRequest (a whole
// prefill-only request), SetPriority, PriorityOf, Advance (scheduler steps), TryReset, Events
// and KeysOf; for the agentic policies AdmitWith and RunRequestWith (taking RequestOptions, built
// with testing_internal::Opts()), CloseSession and ApplyRetention. Admit, Reserve, Commit,
// Finish and SetPriority also come as Try* variants that
// return the status instead of expecting success. Every helper checks CheckInvariants() after
// each mutation: the manager's own invariants plus the gauge identities stats() promises.
// testing_internal holds the value helpers the scenarios share (Tokens, Concat, From,
// WholePrompt, Matched, Ev, Opts); the PrintTo overloads give readable failure messages.
#ifndef AGENTKV_TESTS_KV_KV_CACHE_MANAGER_FIXTURE_H_
#define AGENTKV_TESTS_KV_KV_CACHE_MANAGER_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <span>
#include <utility>
#include <vector>

#include "agentkv/kv/kv_cache_manager.h"

namespace agentkv::kv {

// Readable failure messages for the value types the suites compare. They live in the
// namespace of the types so that GoogleTest finds them by argument-dependent lookup.
inline void PrintTo(const PrefixMatch& m, std::ostream* os) {
  *os << "{device_blocks=" << m.device_blocks << " host_blocks=" << m.host_blocks << "}";
}
inline void PrintTo(Tier t, std::ostream* os) { *os << (t == Tier::kDevice ? "device" : "host"); }
inline void PrintTo(KvEventKind k, std::ostream* os) { *os << KvEventKindName(k); }
inline void PrintTo(SessionCloseMode m, std::ostream* os) { *os << SessionCloseModeName(m); }
inline void PrintTo(const KvEvent& e, std::ostream* os) {
  *os << "{" << KvEventKindName(e.kind) << " " << e.key << " "
      << (e.tier == Tier::kDevice ? "device" : "host") << " " << e.step << "}";
}

namespace testing_internal {

constexpr PrefixMatch Matched(int64_t device, int64_t host) { return PrefixMatch{device, host}; }

inline KvEvent Ev(KvEventKind kind, BlockKey key, Tier tier, int64_t step = 0) {
  return KvEvent{kind, key, tier, Step(step)};
}

inline std::vector<int32_t> Tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

inline std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline std::span<const BlockKey> From(const std::vector<BlockKey>& keys, int64_t first) {
  return std::span<const BlockKey>(keys).subspan(static_cast<size_t>(first));
}

inline RetentionConfig WholePrompt(Priority priority,
                                   std::optional<int64_t> duration = std::nullopt) {
  RetentionConfig config;
  TokenRangeRetention range;
  range.priority = priority;
  if (duration.has_value()) range.duration = Step(*duration);
  config.token_ranges.push_back(range);
  return config;
}

// Builds the RequestOptions of an agentic request, e.g.
// `Opts().Prompt(8).Session(1).Conversation(2).Parent(1)`; converts to RequestOptions.
class RequestOptionsBuilder {
 public:
  RequestOptionsBuilder& Prompt(int64_t tokens) {
    options_.prompt_tokens = tokens;
    return *this;
  }
  RequestOptionsBuilder& Session(int64_t id) {
    options_.session = SessionId(id);
    return *this;
  }
  RequestOptionsBuilder& Conversation(int64_t id) {
    options_.conversation = ConversationId(id);
    return *this;
  }
  // A sub-agent affinity hint naming `id` as the parent conversation.
  RequestOptionsBuilder& Parent(int64_t id, bool authenticated = true) {
    options_.parent_conversation = ConversationId(id);
    options_.parent_hint_authenticated = authenticated;
    return *this;
  }
  RequestOptionsBuilder& Retention(RetentionConfig config) {
    options_.retention = std::move(config);
    return *this;
  }
  // Gap-aware retention: what the session does after this request.
  RequestOptionsBuilder& Pause(PauseKind kind, std::string tool = {}) {
    options_.next_pause = kind;
    options_.next_tool = std::move(tool);
    return *this;
  }
  operator RequestOptions() const { return options_; }  // NOLINT: a builder converts implicitly

 private:
  RequestOptions options_;
};

inline RequestOptionsBuilder Opts() { return RequestOptionsBuilder(); }

}  // namespace testing_internal

class KvCacheManagerTest : public ::testing::Test {
 protected:
  static constexpr int32_t kTokensPerBlock = 4;

  static KvCacheOptions Options(int64_t device_blocks, int64_t host_blocks,
                                int32_t tokens_per_block = kTokensPerBlock) {
    KvCacheOptions o;
    o.tokens_per_block = tokens_per_block;
    o.device_blocks = device_blocks;
    o.host_blocks = host_blocks;
    o.hash_seed = 1234;
    o.event_log_capacity = 256;
    return o;
  }

  void Build(const KvCacheOptions& options) {
    StatusOr<KvCacheManager> created = KvCacheManager::Create(options);
    ASSERT_TRUE(created.ok()) << created.status();
    cache_.reset();
    cache_.emplace(std::move(created).value());
    CheckInvariants();
  }
  void Build(int64_t device_blocks, int64_t host_blocks) {
    Build(Options(device_blocks, host_blocks));
  }

  KvCacheManager& cache() { return *cache_; }

  // Every invariant of the manager, plus the gauge identities stats() promises.
  void CheckInvariants() {
    const Status s = cache_->CheckInvariants();
    ASSERT_TRUE(s.ok()) << s;
    const KvCacheStats st = cache_->stats();
    ASSERT_EQ(st.device.free + st.device.held + st.device.evictable, st.device.capacity) << st;
    ASSERT_EQ(st.host.free + st.host.held + st.host.evictable, st.host.capacity) << st;
    ASSERT_EQ(st.host.held, 0) << st;
    ASSERT_EQ(st.host.cached, st.host.evictable) << st;
    ASSERT_LE(st.device.cached, st.device.held + st.device.evictable) << st;
    ASSERT_GE(st.device.cached, st.device.evictable) << st;
  }

  std::vector<BlockKey> Keys(const std::vector<int32_t>& tokens, uint64_t extra_key = 0) {
    return cache().hasher().KeysFromTokens(tokens, cache().tokens_per_block(), extra_key);
  }

  // ---- Request lifecycle --------------------------------------------------------------

  StatusOr<PrefixMatch> TryAdmit(int64_t id, std::span<const BlockKey> keys,
                                 const RequestOptions& options = {}) {
    StatusOr<PrefixMatch> m = cache().AddRequest(RequestId(id), keys, options);
    CheckInvariants();
    return m;
  }
  // Admits request `id` whose prompt has `prompt_tokens` tokens and full-block keys `keys`.
  PrefixMatch Admit(int64_t id, std::span<const BlockKey> keys, int64_t prompt_tokens,
                    std::optional<RetentionConfig> retention = std::nullopt) {
    RequestOptions options;
    options.prompt_tokens = prompt_tokens;
    options.retention = std::move(retention);
    const StatusOr<PrefixMatch> m = TryAdmit(id, keys, options);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : PrefixMatch{};
  }
  Status TryReserve(int64_t id, int64_t total_tokens) {
    const Status s = cache().Reserve(RequestId(id), total_tokens);
    CheckInvariants();
    return s;
  }
  void Reserve(int64_t id, int64_t total_tokens) {
    const Status s = TryReserve(id, total_tokens);
    EXPECT_TRUE(s.ok()) << s;
  }
  Status TryCommit(int64_t id, std::span<const BlockKey> keys) {
    const Status s = cache().Commit(RequestId(id), keys);
    CheckInvariants();
    return s;
  }
  void Commit(int64_t id, std::span<const BlockKey> keys) {
    const Status s = TryCommit(id, keys);
    EXPECT_TRUE(s.ok()) << s;
  }
  Status TryFinish(int64_t id) {
    const Status s = cache().Release(RequestId(id));
    CheckInvariants();
    return s;
  }
  void Finish(int64_t id) {
    const Status s = TryFinish(id);
    EXPECT_TRUE(s.ok()) << s;
  }

  // A whole prefill-only request: admit the prompt, hold `tokens` tokens, commit the full
  // blocks after the matched prefix, release. Returns what the admission matched.
  PrefixMatch RunRequest(int64_t id, const std::vector<BlockKey>& keys, int64_t tokens,
                         std::optional<RetentionConfig> retention = std::nullopt) {
    const PrefixMatch m = Admit(id, keys, tokens, std::move(retention));
    Reserve(id, tokens);
    Commit(id, testing_internal::From(keys, m.total_blocks()));
    Finish(id);
    return m;
  }

  // ---- Agentic requests, sessions, retention handles -----------------------------------

  PrefixMatch AdmitWith(int64_t id, std::span<const BlockKey> keys, const RequestOptions& options) {
    const StatusOr<PrefixMatch> m = TryAdmit(id, keys, options);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : PrefixMatch{};
  }
  // RunRequest with full RequestOptions; a prompt_tokens of 0 becomes `tokens`.
  PrefixMatch RunRequestWith(int64_t id, const std::vector<BlockKey>& keys, int64_t tokens,
                             RequestOptions options) {
    if (options.prompt_tokens == 0) options.prompt_tokens = tokens;
    const PrefixMatch m = AdmitWith(id, keys, options);
    Reserve(id, tokens);
    Commit(id, testing_internal::From(keys, m.total_blocks()));
    Finish(id);
    return m;
  }
  int64_t CloseSession(int64_t session) {
    const int64_t freed = cache().CloseSession(SessionId(session));
    CheckInvariants();
    return freed;
  }
  int64_t ApplyRetention(const CommittedRetentionHandle& handle, Priority priority) {
    const int64_t applied = cache().ApplyCommittedRetention(handle, priority);
    CheckInvariants();
    return applied;
  }

  // ---- Priorities, time, reset ---------------------------------------------------------

  Status TrySetPriority(BlockKey key, Priority p, std::optional<int64_t> duration = std::nullopt,
                        bool evict_first = false) {
    std::optional<Step> d;
    if (duration.has_value()) d = Step(*duration);
    const Status s = cache().SetPriority(key, p, d, evict_first);
    CheckInvariants();
    return s;
  }
  void SetPriority(BlockKey key, Priority p, std::optional<int64_t> duration = std::nullopt,
                   bool evict_first = false) {
    const Status s = TrySetPriority(key, p, duration, evict_first);
    EXPECT_TRUE(s.ok()) << s;
  }
  Priority PriorityOf(BlockKey key) {
    const StatusOr<Priority> p = cache().GetPriority(key);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : -1;
  }
  void Advance(int steps = 1) {
    for (int i = 0; i < steps; ++i) {
      cache().Step();
      CheckInvariants();
    }
  }
  Status TryReset() {
    const Status s = cache().Reset();
    CheckInvariants();
    return s;
  }

  std::vector<KvEvent> Events() { return cache().TakeEvents(); }
  // Keys of the events of `kind`, in order.
  static std::vector<BlockKey> KeysOf(const std::vector<KvEvent>& events, KvEventKind kind) {
    std::vector<BlockKey> keys;
    for (const KvEvent& e : events) {
      if (e.kind == kind) keys.push_back(e.key);
    }
    return keys;
  }

  std::optional<KvCacheManager> cache_;
};

}  // namespace agentkv::kv

#endif  // AGENTKV_TESTS_KV_KV_CACHE_MANAGER_FIXTURE_H_
