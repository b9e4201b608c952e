// Chaos tests of the command line's file inputs (issue 12): each hostile trace or config file
// is given to the built `agentkv` binary, which must refuse it with exit code 2 and one
// `error:` line naming the file, the line and the field, within a few seconds and in bounded
// memory. Every run is capped by `ulimit -v` (kMemoryLimitKb of address space: an allocation
// past it fails, which would show as exit code 1) and `timeout`; the test also times it.
// Before the fixes, lengths of 2^63-1 made `replay` run for ever past 5 GB, a timestamp of
// 9.3e12 ms aborted the process (exit 134), a gigabyte without a newline took 30 s and 2 GB,
// and an unknown config key was ignored (exit 0).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_test_support.h"

namespace agentkv {
namespace {

using cli_testing::ReadFile;
using cli_testing::RunResult;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Address space for one run: the binary needs well under 100 MB for any of these inputs.
constexpr int64_t kMemoryLimitKb = 300 * 1024;
// What "quickly" means: every refusal here takes well under a second on an idle machine.
constexpr double kMaxSeconds = 5.0;

constexpr const char* kInt64Max = "9223372036854775807";

std::string MooncakeLine(const std::string& timestamp, const std::string& input,
                         const std::string& output) {
  return R"({"timestamp": )" + timestamp + R"(, "input_length": )" + input +
         R"(, "output_length": )" + output + R"(, "hash_ids": [1, 2]})";
}

std::string BailianLine(int chat, const std::string& timestamp, const std::string& input,
                        const std::string& output) {
  return R"({"chat_id": )" + std::to_string(chat) + R"(, "parent_chat_id": -1, "timestamp": )" +
         timestamp + R"(, "input_length": )" + input + R"(, "output_length": )" + output +
         R"(, "type": "text", "turn": 1, "hash_ids": [1, 2]})";
}

// A WEKA file whose second request has `t`, `in`, `out` and `think_time` as given, one
// request per line.
std::string WekaFile(const std::string& t, const std::string& in, const std::string& out,
                     const std::string& think_time = "0") {
  return "{\"id\": \"chaos\", \"block_size\": 64, \"requests\": [\n"
         R"(  {"t": 0, "in": 200, "out": 10, "hash_ids": [1, 2, 3]},)"
         "\n"
         R"(  {"t": )" +
         t + R"(, "in": )" + in + R"(, "out": )" + out + R"(, "hash_ids": [1], "think_time": )" +
         think_time + "}\n]}\n";
}

class TraceInputChaosTest : public cli_testing::CliTest {
 protected:
  struct Bounded {
    RunResult run;
    double seconds = 0;
  };

  // Runs `agentkv <args>` under the memory cap and a 20 s timeout, timing it.
  Bounded RunBounded(const std::string& args) const {
    const std::filesystem::path out = dir_ / "stdout.txt";
    const std::filesystem::path err = dir_ / "stderr.txt";
    const std::string command = "ulimit -v " + std::to_string(kMemoryLimitKb) + " && timeout 20 '" +
                                AGENTKV_BINARY + "' " + args + " >'" + out.string() + "' 2>'" +
                                err.string() + "'";
    const auto start = std::chrono::steady_clock::now();
    const int status = std::system(command.c_str());
    Bounded bounded;
    bounded.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bounded.run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    bounded.run.out = ReadFile(out);
    bounded.run.err = ReadFile(err);
    return bounded;
  }

  // `agentkv replay --workload <workload> --trace <trace>` with no report files.
  Bounded Replay(const std::string& workload, const std::string& trace,
                 const std::string& extra = "") const {
    return RunBounded("replay --workload " + workload + " --trace '" + trace + "' " + extra +
                      " --json '' --html ''");
  }

  // The refusal contract: exit code 2 quickly, one `<prefix>` error line holding `message`.
  static void ExpectRefused(const Bounded& b, const std::string& prefix,
                            const std::string& message) {
    cli_testing::ExpectOneErrorLine(b.run, prefix);
    EXPECT_THAT(b.run.err, HasSubstr(message));
    EXPECT_LT(b.seconds, kMaxSeconds) << b.run.err;
    EXPECT_EQ(b.run.out, "");
  }

  // Writes `bytes` bytes of `fill` and no newline as traces/<name>, quickly.
  std::string WriteWithoutNewline(const std::string& name, int64_t bytes, char fill) const {
    const std::filesystem::path path = dir_ / "traces" / name;
    std::ofstream out(path, std::ios::binary);
    const std::string block(size_t{1} << 20, fill);
    for (int64_t left = bytes; left > 0; left -= static_cast<int64_t>(block.size())) {
      out.write(block.data(),
                std::min<std::streamsize>(left, static_cast<std::streamsize>(block.size())));
    }
    return path.string();
  }
};

constexpr const char* kReplayError = "agentkv replay: error: ";

TEST_F(TraceInputChaosTest, MooncakeLengthsOfInt64MaxAreRefused) {
  const std::string trace =
      WriteTrace("m.jsonl", MooncakeLine("0", "1100", "10") + "\n" +
                                MooncakeLine("5", kInt64Max, kInt64Max) + "\n");
  ExpectRefused(Replay("mooncake", trace), kReplayError,
                trace +
                    ":2: field \"input_length\": 9223372036854775807 is out of range "
                    "[0, 1099511627776] tokens");
  const std::string output = WriteTrace("o.jsonl", MooncakeLine("0", "1100", kInt64Max) + "\n");
  ExpectRefused(RunBounded("cache-curve --trace '" + output + "'"), "agentkv cache-curve: error: ",
                output + ":1: field \"output_length\": 9223372036854775807 is out of range");
}

TEST_F(TraceInputChaosTest, BailianLengthsOfInt64MaxAreRefused) {
  const std::string trace =
      WriteTrace("b.jsonl", BailianLine(1, "0", "40", "8") + "\n" +
                                BailianLine(2, "1.5", "40", kInt64Max) + "\n");
  ExpectRefused(Replay("bailian", trace), kReplayError,
                trace +
                    ":2: field \"output_length\": 9223372036854775807 is out of range "
                    "[0, 1099511627776] tokens");
}

TEST_F(TraceInputChaosTest, WekaLengthsOfInt64MaxAreRefused) {
  const std::string trace = WriteTrace("w.json", WekaFile("1.5", kInt64Max, "10"));
  ExpectRefused(Replay("weka", trace), kReplayError,
                trace +
                    ":3: requests[1].in: 9223372036854775807 is out of range "
                    "[0, 1099511627776] tokens");
  const std::string out = WriteTrace("w2.json", WekaFile("1.5", "100", kInt64Max));
  ExpectRefused(RunBounded("agentic-curve --traces '" + out + "'"),
                "agentkv agentic-curve: error: ",
                out + ":3: requests[1].out: 9223372036854775807 is out of range");
}

// Tokens one past the bound, and the bound itself: a request of 2^40 tokens is in range but
// no engine can hold it, which every arm (infinite-cache included) refuses before simulating.
TEST_F(TraceInputChaosTest, TokensAtAndPastTheBound) {
  const std::string past = WriteTrace("p.jsonl", MooncakeLine("0", "1099511627777", "1") + "\n");
  ExpectRefused(Replay("mooncake", past), kReplayError,
                past + ":1: field \"input_length\": 1099511627777 is out of range");
  // At the bound the values are accepted; the request fits no engine, so every arm's engines
  // reject it at once (as SGLang answers 400), within the memory cap: the infinite-cache arm is
  // not sized for it.
  const std::string at =
      WriteTrace("a.jsonl", MooncakeLine("0", "1099511627776", "1099511627776") + "\n");
  for (const char* arms : {"baseline", "infinite-cache"}) {
    const Bounded b = Replay("mooncake", at, std::string("--arms ") + arms);
    EXPECT_EQ(b.run.exit_code, 0) << b.run.err;
    EXPECT_LT(b.seconds, kMaxSeconds);
    EXPECT_THAT(b.run.out, testing::MatchesRegex("(.|\n)*requests refused +1\n(.|\n)*"));
  }
}

TEST_F(TraceInputChaosTest, HugeTimesAreRefusedNotAborted) {
  const std::string mooncake =
      WriteTrace("m.jsonl", MooncakeLine("9300000000000", "1100", "10") + "\n");
  ExpectRefused(Replay("mooncake", mooncake), kReplayError,
                mooncake +
                    ":1: field \"timestamp\": 9300000000000 is out of range "
                    "[0, 31536000000] ms");
  const std::string as_float = WriteTrace("f.jsonl", MooncakeLine("9.3e12", "1100", "10") + "\n");
  ExpectRefused(Replay("mooncake", as_float), kReplayError,
                as_float + ":1: field \"timestamp\": 9300000000000 is out of range");
  const std::string bailian = WriteTrace("b.jsonl", BailianLine(1, "9.3e12", "40", "8") + "\n");
  ExpectRefused(Replay("bailian", bailian), kReplayError,
                bailian + ":1: field \"timestamp\": 9300000000000 is out of range [0, 31536000] s");
  const std::string weka = WriteTrace("w.json", WekaFile("9.3e12", "100", "10"));
  ExpectRefused(Replay("weka", weka), kReplayError,
                weka + ":3: requests[1].t: 9300000000000 is out of range [0, 31536000] s");
  const std::string think = WriteTrace("t.json", WekaFile("1", "100", "10", "9.3e12"));
  ExpectRefused(Replay("weka", think), kReplayError,
                think + ":3: requests[1].think_time: 9300000000000 is out of range");
}

TEST_F(TraceInputChaosTest, NegativeValuesAreRefused) {
  const std::string mooncake = WriteTrace("m.jsonl", MooncakeLine("-1", "1100", "10") + "\n");
  ExpectRefused(Replay("mooncake", mooncake), kReplayError,
                mooncake + ":1: field \"timestamp\": -1 is out of range");
  const std::string bailian = WriteTrace("b.jsonl", BailianLine(1, "0", "-1", "8") + "\n");
  ExpectRefused(Replay("bailian", bailian), kReplayError,
                bailian + ":1: field \"input_length\": -1 is out of range");
  const std::string weka = WriteTrace("w.json", WekaFile("-0.5", "100", "10"));
  ExpectRefused(Replay("weka", weka), kReplayError,
                weka + ":3: requests[1].t: -0.5 is out of range");
}

// JSON has no NaN or infinity literals (malformed JSON, located); a number past the double
// range parses as infinity and is out of range.
TEST_F(TraceInputChaosTest, NanAndInfinityAreRefused) {
  const std::string nan = WriteTrace("n.jsonl", MooncakeLine("NaN", "1100", "10") + "\n");
  ExpectRefused(Replay("mooncake", nan), kReplayError, nan + ":1: malformed JSON: ");
  const std::string inf = WriteTrace("i.jsonl", MooncakeLine("1e999", "1100", "10") + "\n");
  ExpectRefused(Replay("mooncake", inf), kReplayError,
                inf + ":1: field \"timestamp\": inf is out of range");
  const std::string bailian = WriteTrace("b.jsonl", BailianLine(1, "-1e999", "40", "8") + "\n");
  ExpectRefused(Replay("bailian", bailian), kReplayError,
                bailian + ":1: field \"timestamp\": -inf is out of range");
  const std::string weka = WriteTrace("w.json", WekaFile("Infinity", "100", "10"));
  ExpectRefused(Replay("weka", weka), kReplayError, weka + ":3: malformed JSON at column ");
  const std::string weka_inf = WriteTrace("x.json", WekaFile("1", "100", "10", "1e400"));
  ExpectRefused(Replay("weka", weka_inf), kReplayError,
                weka_inf + ":3: requests[1].think_time: inf is out of range");
}

// 100 MiB without a newline: refused at the line bound (64 MiB) without reading the rest,
// in bounded memory, whether the line is blanks or one endless number.
TEST_F(TraceInputChaosTest, AHundredMegabytesWithoutANewlineAreRefusedQuickly) {
  constexpr int64_t kBytes = (int64_t{100} << 20) + 1;
  const std::string blanks = WriteWithoutNewline("blanks.jsonl", kBytes, ' ');
  ExpectRefused(Replay("mooncake", blanks), kReplayError,
                blanks + ":1: line longer than 67108864 bytes");
  ExpectRefused(Replay("weka", blanks), kReplayError,
                blanks + ":1: line longer than 67108864 bytes");
  std::filesystem::remove(blanks);
  const std::string digits = WriteWithoutNewline("digits.jsonl", kBytes, '7');
  ExpectRefused(Replay("bailian", digits), kReplayError,
                digits + ":1: line longer than 67108864 bytes");
}

// A trace without a request is refused in every format and by every command that reads it,
// naming the file (an empty Mooncake trace used to replay to a table of zeros, exit 0).
TEST_F(TraceInputChaosTest, ATraceWithoutRequestsIsRefusedInEveryFormat) {
  const std::string empty = WriteTrace("empty.jsonl", "");
  const std::string blank = WriteTrace("blank.jsonl", "\n  \n\t\n");
  const std::string gzip = WriteTrace("empty.jsonl.gz", std::string("\x1f\x8b\x08\0\0\0\0\0\0\x03"
                                                                    "\x03\0\0\0\0\0\0\0\0\0",
                                                                    20));
  for (const std::string& trace : {empty, blank, gzip}) {
    const std::string message = trace + ": no requests (an empty trace)";
    ExpectRefused(Replay("mooncake", trace), kReplayError, message);
    ExpectRefused(Replay("bailian", trace), kReplayError, message);
    ExpectRefused(RunBounded("cache-curve --trace '" + trace + "'"),
                  "agentkv cache-curve: error: ", message);
  }
  const std::filesystem::path dir = dir_ / "traces" / "weka";
  std::filesystem::create_directories(dir);
  const std::string weka = (dir / "trace_0001.json").string();
  std::ofstream(weka) << R"({"id": "x", "block_size": 64, "requests": []})"
                      << "\n";
  const std::string message = weka + ": no requests (an empty trace)";
  ExpectRefused(Replay("weka", weka), kReplayError, message);
  ExpectRefused(Replay("weka", dir.string()), kReplayError, message);
  ExpectRefused(RunBounded("agentic-curve --traces '" + dir.string() + "'"),
                "agentkv agentic-curve: error: ", message);
  // An empty WEKA file is not JSON at all, and says so naming the file.
  ExpectRefused(Replay("weka", empty), kReplayError, empty + ":1: malformed JSON");
}

// Flags that scale what a command builds are refused before it builds anything, naming the
// flag, the value, the bound and the memory it would take: `capacity --sessions 100000` would
// build 23.7 GB of sessions (here, under the memory cap, it would fail to allocate: exit code
// 1). `replay` streams its synthetic sessions, so its bound is on ids, not memory.
TEST_F(TraceInputChaosTest, FlagsThatScaleWhatIsBuiltAreRefusedBeforeAnythingIsBuilt) {
  ExpectRefused(RunBounded("capacity --sessions 100000 --json '' --html ''"),
                "agentkv capacity: error: ",
                "--sessions must be in [1, 1000], got 100000: a replay drives at most 1000 "
                "conversations, and 100000 sessions would take about ");
  ExpectRefused(RunBounded("replay --sessions 1000001 --json '' --html ''"), kReplayError,
                "--sessions must be in [1, 1000000], got 1000001");
  ExpectRefused(RunBounded("replay --sessions 0"), kReplayError,
                "--sessions must be in [1, 1000000], got 0");
  ExpectRefused(RunBounded("replay --num-engines 1024 --max-total-tokens 1099511627776"),
                kReplayError, "more than 268435456: about ");
  ExpectRefused(RunBounded("replay --sessions 4 --tp 0"), kReplayError,
                "--tp must be in [1, 8], got 0");
  const std::string weka = WriteTrace("w.json", WekaFile("1", "10", "1"));
  ExpectRefused(RunBounded("agentic-curve --traces '" + weka +
                           "' --capacity-blocks 1073741824 --host-blocks 1073741824"),
                "agentkv agentic-curve: error: ",
                "--capacity-blocks 1073741824 + --host-blocks 1073741824 = 2147483648 KV blocks, "
                "more than 268435456: about 137.4 GB of memory");
  // One conversation per WEKA file: too many files are refused before any is read (these are
  // empty, which reading would refuse too).
  const std::filesystem::path many = dir_ / "traces" / "many";
  std::filesystem::create_directories(many);
  for (int i = 0; i < 1001; ++i) {
    std::ofstream(many / ("trace_" + std::to_string(10000 + i) + ".json"));
  }
  ExpectRefused(Replay("weka", many.string()), kReplayError,
                "--trace names 1001 WEKA files, more than the 1000 conversations a replay drives");
  ExpectRefused(RunBounded("agentic-curve --traces '" + many.string() + "'"),
                "agentkv agentic-curve: error: ",
                "--traces names 1001 WEKA files, more than the 999 conversations");
  ExpectRefused(RunBounded("emulate engine --port 0 --max-total-tokens 1099511627776"),
                "agentkv emulate engine: error: ", "KV blocks, more than 268435456");
  ExpectRefused(RunBounded("emulate fleet --port 0 --engines 256 --max-total-tokens 20000000"),
                "agentkv emulate fleet: error: ",
                "--engines 256 x 1250000 blocks per engine = 320000000 KV blocks");
}

TEST_F(TraceInputChaosTest, UnknownConfigKeyIsRefusedWithItsLine) {
  const std::string config =
      WriteTrace("run.toml", "# chaos\n[replay]\nsessions = 4\nsessionz = 8\n");
  ExpectRefused(RunBounded("replay --config '" + config + "' --context-scale 0.1"), kReplayError,
                "config file " + config + ":4: unknown option \"sessionz\" in [replay]");
  const std::string section =
      WriteTrace("s.toml", "[replay]\nsessions = 4\n\n[gatway]\nport = 1\n");
  ExpectRefused(RunBounded("replay --config '" + section + "' --context-scale 0.1"), kReplayError,
                "config file " + section + ":4: unknown section [gatway]");
}

// The same value is refused with the same message, naming the flag, from a file or a flag.
TEST_F(TraceInputChaosTest, OutOfRangeConfigValueIsTheFlagsError) {
  const std::string config = WriteTrace("run.toml", "[replay]\nnum-engines = 0\n");
  const Bounded file = RunBounded("replay --config '" + config + "' --sessions 4");
  const Bounded flag = RunBounded("replay --num-engines 0 --sessions 4");
  ExpectRefused(file, kReplayError, "--num-engines must be in [1, 1024], got 0");
  EXPECT_EQ(file.run.err, flag.run.err);
  const std::string huge =
      WriteTrace("huge.toml", std::string("[replay]\nsession-interarrival-s = 1e999\n"));
  ExpectRefused(RunBounded("replay --config '" + huge + "' --sessions 4"), kReplayError,
                "--session-interarrival-s must be in [0, 1000000], got inf");
}

}  // namespace
}  // namespace agentkv
