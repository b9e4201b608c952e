// WorkingSetAdmission: program-level admission that bounds the live working set of a fleet
// (agentkv's `+working-set`).
//
// Request-level admission (AdmissionCoordinator) reserves a request's tokens while it runs and
// frees them when it ends, so an agent paused on a tool call holds nothing: a new program is
// admitted into its space and the paused agent's context is evicted before it returns. This
// class admits *programs*. A program is a main agent with every sub-agent it started (the
// caller names each request's program and agent). Each live agent has a footprint: while a
// request of it runs, that request's reservation (prompt + expected decode); once it ends, the
// context the agent's next request needs resident (prompt + output), *held* for as long as the
// pause that follows is predicted to last (the pause's kind and tool learned online,
// kv::PauseEstimator; a kind with too few samples holds `default_hold`). A hold ends when
// the agent returns, when the caller ends the agent (its session closed), or when the pause
// outlives its prediction: the footprint is released and a program left with no footprint is
// treated as new on its return.
//
// A request of a live program (one with any agent running or held) is always admitted at once
// (`continuing`): new programs never block continuing ones. The first request of a new program
// is admitted when the footprints on its target (the engine it will land on, named by the
// caller; the whole fleet when placement is unknowable) plus its reservation fit under the
// target's capacity: device KV x headroom, plus the host tier where one exists (paused contexts
// wait there). Waiting programs are admitted per target in the order the programs first
// arrived (a program whose hold expired, returning, goes before programs that never started:
// programs are finished before new ones start), and any waiter is admitted `aged` once it has
// waited max_wait, so none starves. Until some engine has
// reported its capacity (Reconcile) nothing waits (`no_capacity`).
//
// Pure: no I/O, clocks or threads; time is passed in. Deterministic (ordered containers
// everywhere order matters). Thread-compatible: const methods may run concurrently; mutation
// needs external synchronization. The simulator's gateway, the served gateway and the
// coordinator drive this one implementation.
#ifndef AGENTKV_CONTROL_WORKING_SET_H_
#define AGENTKV_CONTROL_WORKING_SET_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/control/engine_gauges.h"
#include "agentkv/kv/pause_estimator.h"

namespace agentkv::control {

struct WorkingSetOptions {
  // Multiple of each engine's device KV (max_total_num_tokens) the working set may fill;
  // above 1 it overcommits (a held context that does not fit is recomputed when its program
  // returns: cheaper, on the replayed traces, than making new programs wait for room).
  // Default: 2.0 (chosen on the first half of the WEKA traces, docs/RESULTS.md). Range: (0, 8].
  double headroom = 2.0;
  // The host (cold) KV tier per engine as a multiple of its device KV (SGLang --hicache-ratio);
  // it counts in full toward the capacity, as paused contexts wait there. Default: 0 (none).
  // Range: [0, 100].
  double host_tier_ratio = 0.0;
  // The quantile of a pause kind's learned distribution a hold lasts. Default: 0.9.
  // Range: (0, 1).
  double hold_quantile = 0.9;
  // The hold after a pause whose kind has fewer than kMinPauseSamples observations.
  // Default: 30 s. Range: [0, max_hold].
  TimeNs default_hold = TimeNs::Seconds(30);
  // The longest hold, whatever the prediction (a human's turn can last days). Default: 30 s
  // (chosen on the first half of the WEKA traces: longer holds keep new programs waiting
  // for contexts that mostly do not come back in time). Range: [0, 1 day].
  TimeNs max_hold = TimeNs::Seconds(30);
  // The longest a new program waits before it is admitted anyway (`aged`). Default: 300 s.
  // Range: [0, 1 day].
  TimeNs max_wait = TimeNs::Seconds(300);
  // A started program whose holds all expired waits like a new one on its return (true), or
  // goes at once, as continuing (false). Default: true.
  bool returning_waits = true;
  // A new program is admitted only when the footprint it is expected to reach fits: the
  // median peak footprint of the last kPeakHistory programs that ended (once kMinPauseSamples
  // have), or its first reservation when larger. false: its first reservation. Default: false.
  bool reserve_expected_peak = false;

  // InvalidArgument naming the first field out of range and its value.
  Status Validate() const;
};

// Observations of a pause kind (or tool) before its learned hold replaces default_hold.
inline constexpr int64_t kMinPauseSamples = 4;
// Ended programs whose peak footprints the expected peak is taken over.
inline constexpr size_t kPeakHistory = 64;

// Why a program's request was admitted, or why it waits.
enum class WorkingSetReason : uint8_t {
  // Its program is live: admitted at once.
  kContinuing,
  // A new program that fits under its target's capacity.
  kFits,
  // A new program admitted after waiting max_wait.
  kAged,
  // No engine has reported a capacity yet: nothing is bounded.
  kNoCapacity,
  // A new program waiting: its target is full, or an older new program waits before it.
  kFull,
  // Its wait was cancelled (Cancel, or its agent ended): do not dispatch it.
  kCancelled,
};

// "continuing", "fits", "aged", "no_capacity", "full", "cancelled".
std::string_view WorkingSetReasonName(WorkingSetReason reason);

// One request asking to run.
struct ProgramRequest {
  // Unique among live tickets (an attempt's rid). Not empty; at most 1024 bytes.
  std::string ticket;
  // The program (a main agent's session) and the agent (the session sending the request: the
  // program's own for the main agent, a sub-agent's otherwise). Not empty; at most 1024 bytes
  // each. An agent belongs to one program for as long as it is known.
  std::string program;
  std::string agent;
  // The request's reservation: prompt + expected decode. Range: [0, kMaxTokens].
  int64_t reservation_tokens = 0;
  // The engine it will land on (an EngineSnapshot::engine_id), when the router makes it
  // knowable; unset: the fleet.
  std::optional<std::string> engine = std::nullopt;
};

struct WorkingSetDecision {
  std::string ticket;
  // Dispatch it (kContinuing, kFits, kAged, kNoCapacity), wait (kFull: the final decision
  // comes from TakeResolved), or drop it (kCancelled).
  bool admitted = false;
  WorkingSetReason reason = WorkingSetReason::kNoCapacity;
  // Time spent waiting.
  TimeNs wait = {};

  friend bool operator==(const WorkingSetDecision&, const WorkingSetDecision&) = default;
};

// How a request ended, for the hold that follows it.
struct RequestEnd {
  // The context the agent's next request needs resident: this request's prompt + output.
  // Range: [0, kMaxTokens].
  int64_t context_tokens = 0;
  // The pause that follows (kSessionEnd or kUnknown with no tool: see Finish), and the tool
  // called, when known.
  PauseKind next_pause = PauseKind::kUnknown;
  std::string tool = {};
};

// The working set now, for metrics (Prometheus gauges) and reports.
struct WorkingSetGauges {
  // Tokens reserved by running requests, and held by paused agents.
  int64_t active_tokens = 0;
  int64_t held_tokens = 0;
  // Live programs (any agent running or held), and new programs waiting.
  int64_t live_programs = 0;
  int64_t waiting_programs = 0;
  // The fleet's capacity (device x headroom + host tier), 0 before any report.
  int64_t capacity_tokens = 0;

  friend bool operator==(const WorkingSetGauges&, const WorkingSetGauges&) = default;
};

// Counters since construction.
struct WorkingSetCounters {
  // Admissions by reason.
  int64_t continuing = 0;
  int64_t fits = 0;
  int64_t aged = 0;
  int64_t no_capacity = 0;
  // Requests that had to wait, and cancelled waits.
  int64_t waited = 0;
  int64_t cancelled = 0;
  // Holds that ended by the agent's return, by the pause outliving its prediction, and by the
  // agent ending.
  int64_t holds_returned = 0;
  int64_t holds_expired = 0;
  int64_t holds_ended = 0;

  friend bool operator==(const WorkingSetCounters&, const WorkingSetCounters&) = default;
};

class WorkingSetAdmission {
 public:
  // Precondition (CHECKed): options.Validate() is OK.
  explicit WorkingSetAdmission(const WorkingSetOptions& options);
  WorkingSetAdmission(const WorkingSetAdmission&) = delete;
  WorkingSetAdmission& operator=(const WorkingSetAdmission&) = delete;

  const WorkingSetOptions& options() const { return options_; }

  // Decides for `request` at `now`: admitted (continuing, fits, aged, no capacity) with its
  // reservation counted on its target until Finish, or waiting (kFull; the decision comes from
  // TakeResolved). An agent returning from a pause ends its hold (its pause length is learned).
  // InvalidArgument, nothing changed, for a bad field or an agent named with another program;
  // AlreadyExists for a live ticket.
  [[nodiscard]] StatusOr<WorkingSetDecision> Acquire(const ProgramRequest& request, TimeNs now);

  // The admitted request `ticket` ended: its reservation is released and, when its agent has no
  // other request running, the agent holds `end.context_tokens` for the predicted pause
  // (nothing for kSessionEnd, or when the prediction is 0). A waiting ticket is cancelled
  // (Cancel). An unknown ticket is a no-op.
  void Finish(std::string_view ticket, const RequestEnd& end, TimeNs now);

  // Cancels a waiting ticket (resolved, not admitted, kCancelled). An admitted or unknown
  // ticket is a no-op: finish it instead.
  void Cancel(std::string_view ticket, TimeNs now);

  // The agent ended (its session closed): its hold is released, its waiting tickets are
  // cancelled, and it is forgotten once its running requests finish. Unknown: a no-op.
  void EndAgent(std::string_view agent, TimeNs now);

  // Takes the engines' capacities (healthy snapshots with a capacity; an engine missing from
  // `snapshots` keeps its last one) and drains the queues.
  void Reconcile(std::span<const EngineSnapshot> snapshots, TimeNs now);

  // Releases holds whose pause outlived its prediction and admits waiters that fit or aged.
  void Tick(TimeNs now);

  // The earliest time Tick would act (a hold's end, a waiter's aging); nullopt when none.
  std::optional<TimeNs> NextDeadline() const;

  // Decisions of waiters resolved since the last call, in resolution order.
  [[nodiscard]] std::vector<WorkingSetDecision> TakeResolved();

  WorkingSetGauges Gauges() const;
  const WorkingSetCounters& counters() const { return counters_; }
  // The footprint on `target` ("" = agents whose placement was unknowable).
  int64_t FootprintOn(std::string_view target) const;
  // Until when `agent` holds its context; nullopt when it holds none (or is unknown).
  std::optional<TimeNs> HoldUntil(std::string_view agent) const;
  // Agents known (running, held, released but not ended).
  int64_t agents() const { return static_cast<int64_t>(agents_.size()); }
  // The hold the next pause of `kind` (and `tool`) would get now.
  TimeNs PredictedHold(PauseKind kind, std::string_view tool) const;

  // Internal when the bookkeeping disagrees with itself (for tests).
  Status CheckInvariants() const;

 private:
  struct Agent {
    std::string program;
    // Where its footprint counts ("" = unknown placement: the fleet).
    std::string target = {};
    // Admitted tickets running, and their summed reservation; tickets waiting.
    std::set<std::string, std::less<>> running = {};
    int64_t running_tokens = 0;
    std::set<std::string, std::less<>> waiting = {};
    // Held context and until when (held_tokens > 0 only while held).
    int64_t held_tokens = 0;
    TimeNs hold_until = {};
    // The pause in progress (set from the end of its last request to its return).
    std::optional<TimeNs> paused_since = {};
    PauseKind pause_kind = PauseKind::kUnknown;
    std::string pause_tool = {};
    bool ended = false;
  };
  struct Ticket {
    std::string agent;
    int64_t tokens = 0;
    bool waiting = false;
    // Waiting only: the request, its queue and place in it.
    std::string target = {};
    TimeNs enqueued_at = {};
    // Its program's arrival, then its own: its place in its queue.
    uint64_t program_seq = 0;
    uint64_t seq = 0;
  };
  struct Program {
    // When the program was first seen (order of arrival among programs).
    uint64_t seq = 0;
    // Some request of it was admitted.
    bool started = false;
    std::set<std::string, std::less<>> agents;
    // Agents with a footprint (running or held): the program is live while > 0.
    int64_t live_agents = 0;
    // The program's footprint now, and the largest it has had.
    int64_t footprint = 0;
    int64_t peak = 0;
  };
  // CheckInvariants' parts: `agent`'s running and waiting tickets are its own, and its running
  // tokens their sum; every queue entry is a waiting ticket, and every waiting ticket is queued
  // once and listed by its agent.
  Status CheckAgentTickets(const std::string& name, const Agent& agent) const;
  Status CheckQueues() const;

  int64_t CapacityOf(std::string_view target) const;
  // What a new program with a first reservation of `tokens` needs to fit.
  int64_t NewProgramTokens(int64_t tokens) const;
  bool Fits(std::string_view target, int64_t tokens) const;
  void AddFootprint(const std::string& target, int64_t tokens);
  // Sets the agent's footprint from its running tickets and hold, keeping the program's live
  // count and the targets' sums.
  void Refresh(Agent& agent, int64_t before);
  int64_t FootprintOf(const Agent& agent) const { return agent.running_tokens + agent.held_tokens; }
  // Admits `ticket` of `agent` (counted by `reason`): its reservation counts on `target`,
  // where the agent's footprint moves, and its program has started.
  void Start(Agent& agent, const std::string& ticket, int64_t tokens, const std::string& target,
             WorkingSetReason reason);
  void ReleaseHold(const std::string& name, Agent& agent);
  void ForgetIfDone(const std::string& name);
  void Drain(TimeNs now);
  void Resolve(const std::string& ticket, Ticket& t, WorkingSetReason reason, TimeNs now);

  const WorkingSetOptions options_;
  kv::PauseEstimator pauses_;
  std::map<std::string, Agent, std::less<>> agents_;
  std::map<std::string, Program, std::less<>> programs_;
  std::map<std::string, Ticket, std::less<>> tickets_;
  // Footprint per target ("" = unknown placement).
  std::map<std::string, int64_t, std::less<>> footprint_;
  int64_t total_footprint_ = 0;
  int64_t held_total_ = 0;
  // Capacity per engine (device x headroom + host), and their sum.
  std::map<std::string, int64_t, std::less<>> capacity_;
  int64_t fleet_capacity_ = 0;
  // Waiting programs per target queue in program arrival order: (program seq, seq, ticket).
  using QueueKey = std::tuple<uint64_t, uint64_t, std::string>;
  std::map<std::string, std::set<QueueKey>, std::less<>> queues_;
  // Every waiter by when it started waiting: (enqueued_at, ticket), for aging.
  std::set<std::pair<TimeNs, std::string>> by_wait_;
  uint64_t next_seq_ = 0;
  uint64_t next_program_seq_ = 0;
  // Holds by end time: (hold_until, agent).
  std::set<std::pair<TimeNs, std::string>> holds_;
  std::vector<WorkingSetDecision> resolved_;
  // Peak footprints of the last kPeakHistory programs that ended, oldest first.
  std::deque<int64_t> peaks_;
  WorkingSetCounters counters_;
};

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_WORKING_SET_H_
