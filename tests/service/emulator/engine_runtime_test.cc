// Tests of EngineRuntime: the threaded core of the engine emulator, unpaced (steps do not
// wait) unless a test measures pacing. Requests are awaited through their callbacks.
#include "agentkv/service/emulator/engine_runtime.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <limits>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace agentkv::service {
namespace {

using namespace std::chrono_literals;

EngineRuntimeOptions Unpaced(int64_t max_total_tokens = 4096) {
  EngineRuntimeOptions options;
  options.paced = false;
  options.engine.kv_pool.tokens_per_block = 16;
  options.engine.kv_pool.max_total_tokens = max_total_tokens;
  options.enable_session_radix_cache = true;
  return options;
}

std::vector<int64_t> Tokens(int64_t first, int64_t n) {
  std::vector<int64_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

// Submits and waits for the result; collects streamed tokens too.
struct Outcome {
  GenerateResult result;
  std::vector<int64_t> streamed;
};

Outcome Generate(EngineRuntime& runtime, GenerateInput input) {
  auto streamed = std::make_shared<std::vector<int64_t>>();
  std::promise<GenerateResult> promise;
  std::future<GenerateResult> future = promise.get_future();
  GenerateCallbacks callbacks;
  callbacks.on_tokens = [streamed](std::span<const int64_t> tokens) {
    streamed->insert(streamed->end(), tokens.begin(), tokens.end());
  };
  callbacks.on_finish = [&promise](const GenerateResult& result) { promise.set_value(result); };
  Status status = runtime.Submit(std::move(input), std::move(callbacks));
  EXPECT_TRUE(status.ok()) << status;
  if (!status.ok()) return {};
  EXPECT_EQ(future.wait_for(10s), std::future_status::ready);
  return Outcome{future.get(), *streamed};
}

GenerateInput Input(std::string rid, std::vector<int64_t> ids, int64_t max_new_tokens,
                    std::optional<std::string> session = std::nullopt) {
  GenerateInput input;
  input.rid = std::move(rid);
  input.input_ids = std::move(ids);
  input.max_new_tokens = max_new_tokens;
  input.session_id = std::move(session);
  return input;
}

TEST(EngineRuntimeTest, GeneratesDeterministicTokensAndStreamsThemInOrder) {
  auto runtime = EngineRuntime::Start(Unpaced()).value();
  const Outcome a = Generate(*runtime, Input("r1", Tokens(1, 40), 12));
  EXPECT_FALSE(a.result.aborted);
  EXPECT_EQ(a.result.output_ids.size(), 12u);
  EXPECT_EQ(a.streamed, a.result.output_ids);
  EXPECT_EQ(a.result.prompt_tokens, 40);
  // Same rid, same tokens; another rid, other tokens.
  const Outcome b = Generate(*runtime, Input("r1", Tokens(1, 40), 12));
  EXPECT_EQ(b.result.output_ids, a.result.output_ids);
  const Outcome c = Generate(*runtime, Input("r2", Tokens(1, 40), 12));
  EXPECT_NE(c.result.output_ids, a.result.output_ids);
  const RuntimeSnapshot s = runtime->Snapshot();
  EXPECT_EQ(s.num_requests_total, 3);
  EXPECT_EQ(s.generation_tokens_total, 36);
  EXPECT_EQ(s.prompt_tokens_total, 120);
}

TEST(EngineRuntimeTest, CachedTokensGrowTurnByTurn) {
  auto runtime = EngineRuntime::Start(Unpaced()).value();
  std::vector<int64_t> context = Tokens(1, 100);
  int64_t previous_cached = -1;
  for (int turn = 0; turn < 4; ++turn) {
    const Outcome out =
        Generate(*runtime, Input("turn-" + std::to_string(turn), context, 8, "session-a"));
    EXPECT_GT(out.result.cached_tokens, previous_cached) << "turn " << turn;
    // Every full page of the previous turn's prompt (less its last token) is reused.
    if (turn > 0) {
      EXPECT_GE(out.result.cached_tokens,
                (static_cast<int64_t>(context.size()) - 60 - 1) / 16 * 16);
    }
    previous_cached = out.result.cached_tokens;
    context.insert(context.end(), out.result.output_ids.begin(), out.result.output_ids.end());
    const std::vector<int64_t> more = Tokens(10'000 + turn * 100, 52);
    context.insert(context.end(), more.begin(), more.end());
  }
}

TEST(EngineRuntimeTest, StallOffloadMovesAPausedSessionToTheHostAndItsNextTurnFindsIt) {
  EngineRuntimeOptions options = Unpaced(/*max_total_tokens=*/1024);
  options.engine.kv_pool.hicache_tokens = 4096;
  options.engine.stall_offload = engine::StallOffloadOptions{};
  // Any use of the pool is pressure, and a pause with no history is predicted to last a day
  // (the prior), so a hinted turn's KV goes to the host as soon as it ends.
  options.engine.stall_offload->pressure_threshold = 0.01;
  options.engine.stall_offload->pauses.prior_pause = TimeNs::Seconds(86400);
  auto runtime = EngineRuntime::Start(options).value();
  GenerateInput first = Input("turn-0", Tokens(1, 200), 8, "session-a");
  first.pause = PauseKind::kHumanTurn;
  const Outcome out = Generate(*runtime, std::move(first));
  ASSERT_FALSE(out.result.aborted);
  const RuntimeSnapshot after_pause = runtime->Snapshot();
  EXPECT_GT(after_pause.cache.stall_offloaded_blocks, 0);
  EXPECT_GT(after_pause.cache.host.cached, 0);
  // The session's next turn finds its prompt on the host and onboards it.
  std::vector<int64_t> context = Tokens(1, 200);
  context.insert(context.end(), out.result.output_ids.begin(), out.result.output_ids.end());
  const Outcome next = Generate(*runtime, Input("turn-1", context, 8, "session-a"));
  EXPECT_GE(next.result.cached_host_tokens, 192);
  // Without a hint nothing moves.
  const Outcome plain = Generate(*runtime, Input("other", Tokens(5000, 200), 8, "session-b"));
  ASSERT_FALSE(plain.result.aborted);
  EXPECT_EQ(runtime->Snapshot().cache.stall_offloaded_blocks,
            after_pause.cache.stall_offloaded_blocks);
}

TEST(EngineRuntimeTest, NextTurnReusesThePreviousTurnsOutputPages) {
  auto runtime = EngineRuntime::Start(Unpaced()).value();
  // 64 prompt tokens and 40 output tokens: the KV of 64 + 40 - 1 = 103 tokens fills 6 pages,
  // all cached when the request finishes (SGLang's cache_finished_req).
  const Outcome first = Generate(*runtime, Input("t0", Tokens(1, 64), 40));
  ASSERT_EQ(first.result.output_ids.size(), 40u);
  std::vector<int64_t> context = Tokens(1, 64);
  context.insert(context.end(), first.result.output_ids.begin(), first.result.output_ids.end());
  const std::vector<int64_t> more = Tokens(5'000, 20);
  context.insert(context.end(), more.begin(), more.end());
  // The next turn re-sends prompt + answer: the 6 pages are reused, the answer's included.
  const Outcome second = Generate(*runtime, Input("t1", context, 1));
  EXPECT_EQ(second.result.cached_tokens, 96);
}

TEST(EngineRuntimeTest, CloseSessionInReleaseModeFreesTheSessionsUniqueBlocksOnce) {
  auto runtime = EngineRuntime::Start(Unpaced()).value();
  Generate(*runtime, Input("s1", Tokens(1, 160), 4, "sess"));
  const RuntimeSnapshot before = runtime->Snapshot();
  const int64_t freed = runtime->CloseSession("sess");
  EXPECT_GT(freed, 0);
  const RuntimeSnapshot after = runtime->Snapshot();
  EXPECT_EQ(after.gauges.available_tokens, before.gauges.available_tokens + freed);
  EXPECT_EQ(after.gauges.evictable_tokens, before.gauges.evictable_tokens - freed);
  // Idempotent, and an unknown session is a no-op.
  EXPECT_EQ(runtime->CloseSession("sess"), 0);
  EXPECT_EQ(runtime->CloseSession("never-seen"), 0);
  EXPECT_EQ(runtime->Snapshot().gauges.available_tokens, after.gauges.available_tokens);
}

// A session's request with a parent_session registers it as that session's sub-agent; the
// parent's return, delivered by /demote_finished_subagents, demotes it. Without the
// per_conversation policy nothing is registered.
TEST(EngineRuntimeTest, ADeliveredParentReturnDemotesTheFinishedSubagentsOfThatParent) {
  for (const bool demotion : {false, true}) {
    SCOPED_TRACE(demotion ? "demotion on" : "demotion off");
    EngineRuntimeOptions options = Unpaced();
    if (demotion) {
      options.engine.cache.block_reuse_policy = kv::BlockReusePolicy::kPerConversation;
      options.engine.cache.finished_subagent_priority = 1;
      options.engine.cache.finished_subagent_min_idle_s = 0.0;
    }
    auto runtime = EngineRuntime::Start(options).value();
    GenerateInput child = Input("c1", Tokens(500, 64), 4, "child-1");
    child.parent_session = "parent-0";
    EXPECT_FALSE(Generate(*runtime, std::move(child)).result.aborted);
    EXPECT_EQ(runtime->DemoteFinishedSubagents("someone-else"), 0);
    EXPECT_EQ(runtime->DemoteFinishedSubagents("parent-0"), demotion ? 1 : 0);
    EXPECT_EQ(runtime->DemoteFinishedSubagents("parent-0"), 0);  // once
    const RuntimeSnapshot s = runtime->Snapshot();
    EXPECT_EQ(s.cache.demoted_children, demotion ? 1 : 0);
    EXPECT_EQ(s.cache.demoted_blocks > 0, demotion);
  }
}

TEST(EngineRuntimeTest, AbortEndsARunningRequestWithItsPartialTokens) {
  EngineRuntimeOptions options = Unpaced();
  options.paced = true;
  options.speed = 1.0;  // About 7 ms per decode step for the 8B model on an H100.
  auto runtime = EngineRuntime::Start(options).value();
  std::promise<GenerateResult> promise;
  auto future = promise.get_future();
  auto first_token = std::make_shared<std::promise<void>>();
  auto seen = std::make_shared<bool>(false);
  GenerateCallbacks callbacks;
  callbacks.on_tokens = [first_token, seen](std::span<const int64_t>) {
    if (!*seen) {
      *seen = true;
      first_token->set_value();
    }
  };
  callbacks.on_finish = [&promise](const GenerateResult& r) { promise.set_value(r); };
  ASSERT_TRUE(
      runtime->Submit(Input("long", Tokens(1, 64), 100'000 / 64), std::move(callbacks)).ok());
  ASSERT_EQ(first_token->get_future().wait_for(5s), std::future_status::ready);
  runtime->Abort("long");
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  const GenerateResult result = future.get();
  EXPECT_TRUE(result.aborted);
  EXPECT_GE(result.output_ids.size(), 1u);
  EXPECT_LT(result.output_ids.size(), 100'000u / 64);
  runtime->Abort("long");        // Already finished: ignored.
  runtime->Abort("never-sent");  // Unknown: ignored.
  EXPECT_EQ(runtime->Snapshot().num_aborted_requests_total, 1);
}

TEST(EngineRuntimeTest, RefusesWhatCanNeverRunAndDuplicateRids) {
  auto runtime = EngineRuntime::Start(Unpaced(1024)).value();
  GenerateCallbacks none;
  Status too_long = runtime->Submit(Input("big", Tokens(1, 1000), 100), none);
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("Requested token count exceeds"), std::string::npos);
  EXPECT_EQ(runtime->Submit(Input("empty", {}, 1), none).code(), StatusCode::kInvalidArgument);
  // A second submit of an active rid is refused while the first runs.
  std::promise<void> done;
  GenerateCallbacks callbacks;
  callbacks.on_finish = [&done](const GenerateResult&) { done.set_value(); };
  ASSERT_TRUE(runtime->Submit(Input("dup", Tokens(1, 10), 1), std::move(callbacks)).ok());
  const Status second = runtime->Submit(Input("dup", Tokens(1, 10), 1), none);
  // Either still active (refused) or already finished (accepted): never a crash or a mix-up.
  EXPECT_TRUE(second.ok() || second.code() == StatusCode::kAlreadyExists) << second;
  done.get_future().wait();
}

// SGLang's length rules: 2^63-1 output tokens is the tokenizer's 400 (it used to be accepted,
// overflow the capacity check and be retracted forever); an input within the context but over
// max_req_input_len is the scheduler's 400 abort; with a context longer than the pool, a large
// max_new_tokens is clamped so that the request fits and finishes.
TEST(EngineRuntimeTest, FollowsSglangsLengthRulesWithoutOverflow) {
  EngineRuntimeOptions options = Unpaced(1024);
  auto runtime = EngineRuntime::Start(options).value();
  GenerateCallbacks none;
  const Status huge =
      runtime->Submit(Input("huge", Tokens(1, 10), std::numeric_limits<int64_t>::max()), none);
  EXPECT_EQ(huge.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge.message().find("You requested a total of 9223372036854775817 tokens"),
            std::string::npos)
      << huge.message();
  const Outcome edge = Generate(*runtime, Input("edge", Tokens(1, 1018), 0));
  EXPECT_TRUE(edge.result.aborted);
  EXPECT_EQ(edge.result.abort_status_code, 400);
  EXPECT_NE(edge.result.abort_message.find("exceeds the maximum allowed length (1018 tokens)"),
            std::string::npos)
      << edge.result.abort_message;
  EXPECT_EQ(runtime->Snapshot().max_req_input_len, 1018);

  options.context_length = 1 << 20;
  auto long_context = EngineRuntime::Start(options).value();
  const Outcome clamped = Generate(*long_context, Input("clamped", Tokens(1, 100), 100'000));
  EXPECT_FALSE(clamped.result.aborted);
  // max_req_len - input - 1 = 1023 - 100 - 1.
  EXPECT_EQ(clamped.result.output_ids.size(), 922u);
}

// Per-request state is dropped once a request ends, and session ids are bounded: past
// max_sessions the least recently used idle session is closed (its KV released) and counted.
TEST(EngineRuntimeTest, ForgetsFinishedRequestsAndBoundsSessions) {
  EngineRuntimeOptions options = Unpaced(1 << 16);
  options.max_sessions = 4;
  auto runtime = EngineRuntime::Start(options).value();
  for (int i = 0; i < 20; ++i) {
    Generate(*runtime, Input("r" + std::to_string(i), Tokens(i * 1000, 48), 2,
                             "session-" + std::to_string(i)));
  }
  const RuntimeSnapshot s = runtime->Snapshot();
  EXPECT_EQ(s.sessions, 4);
  EXPECT_EQ(s.sessions_evicted_total, 16);
  EXPECT_EQ(s.gauges.num_running_reqs + s.gauges.num_queue_reqs, 0);
  EXPECT_EQ(s.cache.open_sessions, 4);
  // The most recent session is still open: its close frees its KV.
  EXPECT_GT(runtime->CloseSession("session-19"), 0);
  // An evicted one was closed already (released in release mode).
  EXPECT_EQ(runtime->CloseSession("session-0"), 0);
}

TEST(EngineRuntimeTest, FlushEmptiesTheCacheOnlyWhenIdle) {
  auto runtime = EngineRuntime::Start(Unpaced()).value();
  Generate(*runtime, Input("a", Tokens(1, 64), 2));
  EXPECT_GT(runtime->Snapshot().gauges.evictable_tokens, 0);
  EXPECT_TRUE(runtime->FlushCache());
  EXPECT_EQ(runtime->Snapshot().gauges.evictable_tokens, 0);
  EXPECT_EQ(Generate(*runtime, Input("b", Tokens(1, 64), 2)).result.cached_tokens, 0);
}

TEST(EngineRuntimeTest, NamespacesKeepEqualPromptsApart) {
  auto runtime = EngineRuntime::Start(Unpaced()).value();
  auto with_namespace = [](std::string rid, std::string ns) {
    GenerateInput input = Input(std::move(rid), Tokens(1, 64), 1);
    input.cache_namespace = std::move(ns);
    return input;
  };
  Generate(*runtime, with_namespace("a", "tenant-a"));
  EXPECT_GT(Generate(*runtime, with_namespace("b", "tenant-a")).result.cached_tokens, 0);
  EXPECT_EQ(Generate(*runtime, with_namespace("c", "tenant-b")).result.cached_tokens, 0);
  EXPECT_EQ(Generate(*runtime, with_namespace("d", "")).result.cached_tokens, 0);
}

// Submits `inputs` while generation is paused, then continues it and returns the rids in the
// order they finished (one request runs at a time, so the order they were admitted in).
std::vector<std::string> FinishOrder(EngineRuntime& runtime, std::vector<GenerateInput> inputs) {
  runtime.PauseGeneration(GenerationPauseMode::kInPlace);
  auto order = std::make_shared<std::vector<std::string>>();
  std::vector<std::future<void>> done;
  for (GenerateInput& input : inputs) {
    auto promise = std::make_shared<std::promise<void>>();
    done.push_back(promise->get_future());
    GenerateCallbacks callbacks;
    // on_finish runs on the runtime thread, one request at a time.
    callbacks.on_finish = [order, promise](const GenerateResult& result) {
      order->push_back(result.rid);
      promise->set_value();
    };
    EXPECT_TRUE(runtime.Submit(std::move(input), std::move(callbacks)).ok());
  }
  runtime.ContinueGeneration();
  for (std::future<void>& f : done) EXPECT_EQ(f.wait_for(10s), std::future_status::ready);
  return *order;
}

// --schedule-policy program-fcfs: a continuing program's next turn (and its sub-agent's) is
// served before a newer program's request that arrived first; a closed session's next request
// is a new program. With fcfs the queue is FIFO.
TEST(EngineRuntimeTest, ProgramFcfsServesAContinuingProgramBeforeANewerOne) {
  for (const bool program_fcfs : {false, true}) {
    SCOPED_TRACE(SchedulePolicyName(program_fcfs));
    EngineRuntimeOptions options = Unpaced(1 << 16);
    options.engine.scheduler.max_running_requests = 1;
    options.engine.scheduler.program_fcfs = program_fcfs;
    auto runtime = EngineRuntime::Start(options).value();
    Generate(*runtime, Input("a1", Tokens(1, 32), 2, "a"));  // Program a arrives first.
    GenerateInput sub = Input("c1", Tokens(300, 32), 2, "c");
    sub.parent_session = "a";  // a's sub-agent: program a.
    const std::vector<std::string> order = FinishOrder(
        *runtime,
        {Input("b1", Tokens(100, 32), 2, "b"), Input("a2", Tokens(1, 48), 2, "a"), std::move(sub)});
    if (program_fcfs) {
      EXPECT_EQ(order, (std::vector<std::string>{"a2", "c1", "b1"}));
    } else {
      EXPECT_EQ(order, (std::vector<std::string>{"b1", "a2", "c1"}));
    }
    // Closing a ends its program: its next request is newer than b's program.
    runtime->CloseSession("a");
    EXPECT_EQ(FinishOrder(*runtime, {Input("a3", Tokens(1, 64), 2, "a"),
                                     Input("b2", Tokens(100, 48), 2, "b")}),
              (std::vector<std::string>{program_fcfs ? "b2" : "a3", program_fcfs ? "a3" : "b2"}));
  }
}

TEST(EngineRuntimeTest, SchedulePolicyNamesFcfsAndProgramFcfsOnly) {
  EXPECT_EQ(ParseSchedulePolicy("fcfs").value(), false);
  EXPECT_EQ(ParseSchedulePolicy("program-fcfs").value(), true);
  const Status lpm = ParseSchedulePolicy("lpm").status();
  EXPECT_EQ(lpm.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(lpm.message().find("--schedule-policy"), std::string::npos);
  EXPECT_NE(lpm.message().find("not modelled"), std::string::npos);
}

TEST(EngineRuntimeTest, PausedGenerationTakesNoStepUntilContinued) {
  auto runtime = EngineRuntime::Start(Unpaced()).value();
  runtime->PauseGeneration(GenerationPauseMode::kInPlace);
  std::promise<GenerateResult> done;
  GenerateCallbacks callbacks;
  callbacks.on_finish = [&done](const GenerateResult& result) { done.set_value(result); };
  ASSERT_TRUE(runtime->Submit(Input("held", Tokens(1, 32), 2), std::move(callbacks)).ok());
  auto future = done.get_future();
  EXPECT_EQ(future.wait_for(200ms), std::future_status::timeout);
  EXPECT_EQ(runtime->Snapshot().steps, 0);
  EXPECT_TRUE(runtime->Snapshot().generation_paused);
  // Requests are active and generation is paused: the update keeps their KV.
  StatusOr<bool> kept = runtime->ApplyWeightUpdate(/*abort_all_requests=*/false,
                                                   /*flush_cache=*/true);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(*kept);
  runtime->ContinueGeneration();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  const GenerateResult result = future.get();
  EXPECT_FALSE(result.aborted);
  EXPECT_EQ(result.output_ids.size(), 2u);
}

TEST(EngineRuntimeTest, PauseWithAbortEndsEveryActiveRequest) {
  auto runtime = EngineRuntime::Start(Unpaced()).value();
  runtime->PauseGeneration(GenerationPauseMode::kInPlace);
  std::promise<GenerateResult> done;
  GenerateCallbacks callbacks;
  callbacks.on_finish = [&done](const GenerateResult& result) { done.set_value(result); };
  ASSERT_TRUE(runtime->Submit(Input("r", Tokens(1, 32), 2), std::move(callbacks)).ok());
  runtime->PauseGeneration(GenerationPauseMode::kAbort);
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(future.get().aborted);
  runtime->ContinueGeneration();
  EXPECT_FALSE(runtime->Snapshot().generation_paused);
}

TEST(EngineRuntimeTest, ReleasedMemoryDropsTheCacheAndHoldsRequestsUntilResumed) {
  auto runtime = EngineRuntime::Start(Unpaced()).value();
  Generate(*runtime, Input("a", Tokens(1, 64), 2));
  ASSERT_TRUE(runtime->ReleaseMemoryOccupation().ok());
  EXPECT_TRUE(runtime->ReleaseMemoryOccupation().ok()) << "idempotent";
  EXPECT_EQ(runtime->Snapshot().gauges.evictable_tokens, 0);
  std::promise<GenerateResult> done;
  GenerateCallbacks callbacks;
  callbacks.on_finish = [&done](const GenerateResult& result) { done.set_value(result); };
  ASSERT_TRUE(runtime->Submit(Input("b", Tokens(1, 64), 2), std::move(callbacks)).ok());
  auto future = done.get_future();
  EXPECT_EQ(future.wait_for(200ms), std::future_status::timeout);
  runtime->ResumeMemoryOccupation();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(future.get().cached_tokens, 0);
}

TEST(EngineRuntimeTest, ReleaseAndWeightUpdatesRefuseRunningRequests) {
  auto runtime = EngineRuntime::Start(Unpaced()).value();
  Generate(*runtime, Input("a", Tokens(1, 64), 2));
  runtime->PauseGeneration(GenerationPauseMode::kInPlace);
  GenerateCallbacks callbacks;
  callbacks.on_finish = [](const GenerateResult&) {};
  ASSERT_TRUE(runtime->Submit(Input("b", Tokens(100, 32), 2), std::move(callbacks)).ok());
  EXPECT_EQ(runtime->ReleaseMemoryOccupation().code(), StatusCode::kFailedPrecondition);
  runtime->ContinueGeneration();
  // Unpaused with a request in flight is refused only while it is active; abort_all ends it.
  StatusOr<bool> update = runtime->ApplyWeightUpdate(/*abort_all_requests=*/true,
                                                     /*flush_cache=*/true);
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_TRUE(*update);
  EXPECT_EQ(Generate(*runtime, Input("c", Tokens(1, 64), 2)).result.cached_tokens, 0);
}

TEST(EngineRuntimeTest, ShutdownAbortsEveryActiveRequestOnce) {
  EngineRuntimeOptions options = Unpaced(1 << 16);
  options.paced = true;
  auto runtime = EngineRuntime::Start(options).value();
  std::atomic<int> finished{0};
  std::atomic<int> aborted{0};
  for (int i = 0; i < 8; ++i) {
    GenerateCallbacks callbacks;
    callbacks.on_finish = [&](const GenerateResult& r) {
      ++finished;
      if (r.aborted) ++aborted;
    };
    ASSERT_TRUE(runtime
                    ->Submit(Input("r" + std::to_string(i), Tokens(i * 100, 30), 5000),
                             std::move(callbacks))
                    .ok());
  }
  runtime->Shutdown();
  EXPECT_EQ(finished.load(), 8);
  EXPECT_EQ(aborted.load(), 8);
  EXPECT_EQ(runtime->Submit(Input("late", Tokens(1, 10), 1), {}).code(), StatusCode::kUnavailable);
  runtime->Shutdown();  // Idempotent.
}

TEST(EngineRuntimeTest, ManyThreadsSubmitConcurrently) {
  auto runtime = EngineRuntime::Start(Unpaced(1 << 16)).value();
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        GenerateCallbacks callbacks;
        callbacks.on_finish = [&](const GenerateResult&) { ++finished; };
        ASSERT_TRUE(
            runtime
                ->Submit(Input("t" + std::to_string(t) + "-" + std::to_string(i), Tokens(i, 48), 3),
                         std::move(callbacks))
                .ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 500 && finished.load() < 200; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(finished.load(), 200);
  const RuntimeSnapshot s = runtime->Snapshot();
  EXPECT_EQ(s.num_requests_total, 200);
  EXPECT_EQ(s.gauges.num_running_reqs + s.gauges.num_queue_reqs, 0);
  EXPECT_GT(s.cached_tokens_device_total, 0);
}

TEST(EngineRuntimeTest, PacedStepsTakeTheModelledTimeDividedBySpeed) {
  EngineRuntimeOptions options = Unpaced();
  options.paced = true;
  options.speed = 1.0;
  auto runtime = EngineRuntime::Start(options).value();
  const auto start = std::chrono::steady_clock::now();
  Generate(*runtime, Input("timed", Tokens(1, 32), 40));
  const double slow =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  options.speed = 10.0;
  auto fast_runtime = EngineRuntime::Start(options).value();
  const auto fast_start = std::chrono::steady_clock::now();
  Generate(*fast_runtime, Input("timed", Tokens(1, 32), 40));
  const double fast =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - fast_start).count();
  // 40 steps of at least ~6 ms (weights read once per step: 16 GB / 2.68 TB/s).
  EXPECT_GT(slow, 40 * 0.005);
  EXPECT_LT(fast, slow / 3);
}

}  // namespace
}  // namespace agentkv::service
