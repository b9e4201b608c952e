// Invariants of a generated workload: starts are non-decreasing from 0; in every session (and
// every sub-agent) request k's hash_ids has floor(input_tokens / 64) ids and extends request
// k-1's; ids [0, shared prefix blocks) open every session; sub-agent ids are disjoint from the
// main agent's, and siblings share the sub-agent prefix; the last main request stops with
// end_turn. All randomness comes from one Rng seeded with options.seed, drawn in a fixed order.
#include "agentkv/sim/workload/synthetic_agentic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"
#include "agentkv/sim/workload/option_checks.h"

namespace agentkv::sim {
namespace {

constexpr double kZ90 = 1.2815515655446004;
constexpr std::string_view kToolUse = "tool_use";
constexpr std::string_view kEndTurn = "end_turn";

// Generates one session; all draws from `rng`.
class SessionGenerator {
 public:
  SessionGenerator(const SyntheticAgenticOptions& options, Rng& rng)
      : options_(options), rng_(rng) {}

  WekaConversation Generate(int64_t index) {
    WekaConversation conversation;
    conversation.source = "synthetic";
    conversation.id = "synthetic-" + std::to_string(index);
    conversation.block_size = kSyntheticBlockSize;

    const int64_t prefix_tokens = Scale(options_.shared_prefix_tokens);
    next_id_ = static_cast<uint64_t>(prefix_tokens / kSyntheticBlockSize);
    subagent_prefix_.clear();
    has_subagent_prefix_ = false;
    const int64_t max_blocks = std::max<int64_t>(
        1, std::llround(static_cast<double>(options_.max_context_blocks) * options_.context_scale));
    const int64_t turns =
        std::clamp<int64_t>(std::llround(options_.turns.Sample(rng_)), 1, options_.max_turns);

    std::vector<uint64_t> ids;
    for (uint64_t id = 0; id < next_id_; ++id) ids.push_back(id);
    int64_t context = prefix_tokens + Draw(options_.new_input_tokens);
    TimeNs t;
    TimeNs think_time;
    for (int64_t k = 0;; ++k) {
      WekaRequest request;
      request.t = t;
      request.think_time = think_time;
      request.input_tokens = context;
      Extend(ids, context);
      request.hash_ids = ids;
      request.output_tokens = Draw(options_.output_tokens);

      bool last = k + 1 >= turns;
      int64_t next_input = 0;
      if (!last) {
        next_input = Draw(options_.new_input_tokens);
        last = (context + request.output_tokens + next_input) / kSyntheticBlockSize > max_blocks;
      }
      const bool end_turn = last || rng_.Bernoulli(options_.end_turn_probability);
      request.stop = std::string(end_turn ? kEndTurn : kToolUse);
      if (end_turn) {
        think_time = SecondsDraw(options_.human_gap_s);
      } else if (rng_.Bernoulli(options_.subagent_spawn_probability)) {
        think_time = SpawnSubagents(t, conversation.subagents);
      } else {
        think_time = SecondsDraw(options_.tool_gap_s);
      }
      context += request.output_tokens + next_input;
      conversation.requests.push_back(std::move(request));
      if (last) break;
      t += think_time;
    }
    return conversation;
  }

 private:
  int64_t Scale(int64_t tokens) const {
    return std::llround(static_cast<double>(tokens) * options_.context_scale);
  }

  // A token count drawn from `d`, scaled, at least 1.
  int64_t Draw(const LogNormal& d) {
    return std::max<int64_t>(1, std::llround(d.Sample(rng_) * options_.context_scale));
  }

  TimeNs SecondsDraw(const LogNormal& d) { return TimeNs::Seconds(d.Sample(rng_)); }

  // Appends fresh ids until `ids` covers every full block of `tokens`.
  void Extend(std::vector<uint64_t>& ids, int64_t tokens) {
    while (static_cast<int64_t>(ids.size()) < tokens / kSyntheticBlockSize) {
      ids.push_back(next_id_++);
    }
  }

  // Spawns the siblings of one tool_use turn at `spawn`; returns the longest duration.
  TimeNs SpawnSubagents(TimeNs spawn, std::vector<WekaSubagent>& subagents) {
    const int64_t prefix_tokens = Scale(options_.subagent_prefix_tokens);
    if (!has_subagent_prefix_) {
      has_subagent_prefix_ = true;
      Extend(subagent_prefix_, prefix_tokens);
    }
    int64_t siblings = 1;
    while (siblings < options_.max_siblings && rng_.Bernoulli(options_.extra_sibling_probability)) {
      ++siblings;
    }
    TimeNs longest;
    for (int64_t s = 0; s < siblings; ++s) {
      WekaSubagent subagent;
      char name[32];
      std::snprintf(name, sizeof(name), "agent_%03zu", subagents.size() + 1);
      subagent.agent_id = name;
      const int64_t n = std::clamp<int64_t>(std::llround(options_.subagent_requests.Sample(rng_)),
                                            1, options_.max_subagent_requests);
      const TimeNs duration = SecondsDraw(options_.subagent_duration_s);
      const TimeNs interval = n > 1 ? TimeNs(duration.ns() / (n - 1)) : TimeNs();
      std::vector<uint64_t> ids = subagent_prefix_;
      int64_t context = prefix_tokens + Draw(options_.subagent_new_input_tokens);
      for (int64_t i = 0; i < n; ++i) {
        WekaRequest request;
        request.t = TimeNs(interval.ns() * i);
        request.think_time = i == 0 ? TimeNs() : interval;
        request.input_tokens = context;
        Extend(ids, context);
        request.hash_ids = ids;
        request.output_tokens = Draw(options_.output_tokens);
        request.stop = std::string(i + 1 == n ? kEndTurn : kToolUse);
        context += request.output_tokens + Draw(options_.subagent_new_input_tokens);
        subagent.requests.push_back(std::move(request));
      }
      // WEKA's meaning: `t` is the completion, `duration_ms` the run, and the parent waited.
      subagent.duration = subagent.requests.back().t;
      subagent.completion = spawn + subagent.duration;
      subagent.status = SubagentStatus::kCompleted;
      longest = std::max(longest, subagent.duration);
      subagents.push_back(std::move(subagent));
    }
    return longest;
  }

  const SyntheticAgenticOptions& options_;
  Rng& rng_;
  uint64_t next_id_ = 0;
  bool has_subagent_prefix_ = false;
  std::vector<uint64_t> subagent_prefix_;
};

// The time from one session start to the next: an exponential draw of the mean inter-arrival.
TimeNs NextInterarrival(const SyntheticAgenticOptions& options, Rng& rng) {
  const double mean_s = options.mean_session_interarrival.seconds();
  return TimeNs::Seconds(-mean_s * std::log(1.0 - rng.UniformDouble()));
}

}  // namespace

LogNormal LogNormal::FromMedianP90(double median, double p90) {
  AGENTKV_CHECK(median > 0.0 && median <= p90) << median << " " << p90;
  return LogNormal{median, std::log(p90 / median) / kZ90};
}

double LogNormal::Sample(Rng& rng) const {
  const double u1 = 1.0 - rng.UniformDouble();  // (0, 1]: the logarithm is finite.
  const double u2 = rng.UniformDouble();
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  return median * std::exp(sigma * z);
}

Status ValidateSyntheticAgenticOptions(const SyntheticAgenticOptions& o) {
  const OptionChecks check("SyntheticAgenticOptions");
  AGENTKV_RETURN_IF_ERROR(check.Int("sessions", o.sessions, 1, kMaxReplayConversations));
  if (!(o.mean_session_interarrival >= TimeNs() &&
        o.mean_session_interarrival <= TimeNs::Seconds(1e6))) {
    return check.OutOfRange("mean_session_interarrival", "[0, 1e6 s]",
                            std::to_string(o.mean_session_interarrival.ns()) + "ns");
  }
  AGENTKV_RETURN_IF_ERROR(check.Distribution("turns", o.turns));
  AGENTKV_RETURN_IF_ERROR(check.Int("max_turns", o.max_turns, 1, 100'000));
  AGENTKV_RETURN_IF_ERROR(check.Probability("end_turn_probability", o.end_turn_probability));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("tool_gap_s", o.tool_gap_s));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("human_gap_s", o.human_gap_s));
  AGENTKV_RETURN_IF_ERROR(check.Int("shared_prefix_tokens", o.shared_prefix_tokens, 0, 10'000'000));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("new_input_tokens", o.new_input_tokens));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("output_tokens", o.output_tokens));
  AGENTKV_RETURN_IF_ERROR(check.Int("max_context_blocks", o.max_context_blocks, 1, 10'000'000));
  if (!(o.context_scale > 0.0 && o.context_scale <= 1.0)) {
    return check.OutOfRange("context_scale", "(0, 1]", OptionChecks::Num(o.context_scale));
  }
  AGENTKV_RETURN_IF_ERROR(
      check.Probability("subagent_spawn_probability", o.subagent_spawn_probability));
  AGENTKV_RETURN_IF_ERROR(
      check.Probability("extra_sibling_probability", o.extra_sibling_probability));
  AGENTKV_RETURN_IF_ERROR(check.Int("max_siblings", o.max_siblings, 1, 64));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("subagent_requests", o.subagent_requests));
  AGENTKV_RETURN_IF_ERROR(check.Int("max_subagent_requests", o.max_subagent_requests, 1, 10'000));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("subagent_duration_s", o.subagent_duration_s));
  AGENTKV_RETURN_IF_ERROR(
      check.Int("subagent_prefix_tokens", o.subagent_prefix_tokens, 0, 10'000'000));
  AGENTKV_RETURN_IF_ERROR(
      check.Distribution("subagent_new_input_tokens", o.subagent_new_input_tokens));
  return Status();
}

int64_t EstimateSyntheticAgenticBytes(const SyntheticAgenticOptions& options) {
  constexpr int64_t kSampleSessions = 8;
  AGENTKV_CHECK_GE(options.sessions, 1);
  SyntheticAgenticOptions sample = options;
  sample.sessions = std::min(options.sessions, kSampleSessions);
  const int64_t bytes = ApproximateBytes(GenerateSyntheticAgentic(sample).value());
  // In double: the product may pass int64 for a hostile session count.
  const double scaled = static_cast<double>(bytes) / static_cast<double>(sample.sessions) *
                        static_cast<double>(options.sessions);
  return scaled >= 9e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(scaled);
}

StatusOr<AgenticWorkload> GenerateSyntheticAgentic(const SyntheticAgenticOptions& options) {
  AGENTKV_RETURN_IF_ERROR(ValidateSyntheticAgenticOptions(options));
  Rng rng(options.seed);
  SessionGenerator generator(options, rng);
  AgenticWorkload workload;
  TimeNs start;
  for (int64_t i = 0; i < options.sessions; ++i) {
    if (i > 0) start += NextInterarrival(options, rng);
    workload.starts.push_back(start);
    workload.conversations.push_back(generator.Generate(i));
  }
  return workload;
}

namespace {

// The streamed sessions: session k is regenerated from a copy of the random stream as it stood
// when GenerateSyntheticAgentic began it.
class SyntheticSessions final : public ConversationSource {
 public:
  struct Session {
    TimeNs start;
    Rng stream;
    int64_t requests = 0;
  };
  SyntheticSessions(const SyntheticAgenticOptions& options, std::vector<Session> sessions)
      : options_(options), sessions_(std::move(sessions)) {
    for (const Session& s : sessions_) requests_ += s.requests;
  }

  int64_t size() const override { return static_cast<int64_t>(sessions_.size()); }
  TimeNs start(int64_t k) const override { return At(k).start; }
  std::shared_ptr<const WekaConversation> Load(int64_t k) const override { return Take(k); }
  std::unique_ptr<WekaConversation> Take(int64_t k) const override {
    Rng rng = At(k).stream;
    SessionGenerator generator(options_, rng);
    return std::make_unique<WekaConversation>(generator.Generate(k));
  }
  // Sub-agents record no model, so every one is replayed under either mode.
  int64_t ReplayedRequests(SubagentModels /*mode*/) const override { return requests_; }
  const AgenticWorkload* in_memory() const override { return nullptr; }

 private:
  const Session& At(int64_t k) const {
    AGENTKV_CHECK(k >= 0 && k < size()) << k;
    return sessions_[static_cast<size_t>(k)];
  }
  const SyntheticAgenticOptions options_;
  const std::vector<Session> sessions_;
  int64_t requests_ = 0;
};

// What a replay needs of a generated session: token counts in range, ids kept distinct.
Status CheckStreamedSession(int64_t k, const WekaConversation& c) {
  constexpr size_t kMaxSubagents = 999;
  const std::string name = "synthetic session " + std::to_string(k);
  if (c.subagents.size() > kMaxSubagents) {
    return InvalidArgumentError(name + " has " + std::to_string(c.subagents.size()) +
                                " sub-agents, at most " + std::to_string(kMaxSubagents));
  }
  const auto check = [&](const std::vector<WekaRequest>& requests) -> Status {
    for (const WekaRequest& r : requests) {
      AGENTKV_RETURN_IF_ERROR(CheckTokens(name + " input_tokens", r.input_tokens));
      AGENTKV_RETURN_IF_ERROR(CheckTokens(name + " output_tokens", r.output_tokens));
    }
    return Status::Ok();
  };
  AGENTKV_RETURN_IF_ERROR(check(c.requests));
  for (const WekaSubagent& sub : c.subagents) AGENTKV_RETURN_IF_ERROR(check(sub.requests));
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<const ConversationSource>> StreamSyntheticAgentic(
    const SyntheticAgenticOptions& options) {
  SyntheticAgenticOptions one = options;
  one.sessions = 1;
  AGENTKV_RETURN_IF_ERROR(ValidateSyntheticAgenticOptions(one));
  AGENTKV_RETURN_IF_ERROR(OptionChecks("SyntheticAgenticOptions")
                              .Int("sessions", options.sessions, 1, kMaxStreamedConversations));
  Rng rng(options.seed);
  SessionGenerator generator(options, rng);
  std::vector<SyntheticSessions::Session> sessions;
  sessions.reserve(static_cast<size_t>(options.sessions));
  TimeNs start;
  for (int64_t i = 0; i < options.sessions; ++i) {
    if (i > 0) start += NextInterarrival(options, rng);
    SyntheticSessions::Session session{.start = start, .stream = rng};
    const WekaConversation conversation = generator.Generate(i);
    AGENTKV_RETURN_IF_ERROR(CheckStreamedSession(i, conversation));
    session.requests = conversation.TotalRequests();
    sessions.push_back(session);
  }
  return std::shared_ptr<const ConversationSource>(
      std::make_shared<const SyntheticSessions>(options, std::move(sessions)));
}

}  // namespace agentkv::sim
