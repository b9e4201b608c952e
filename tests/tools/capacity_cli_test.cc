// End-to-end tests of `agentkv capacity`: a search on a tiny synthetic workload (12 sessions at
// a quarter of the recorded sizes, one engine with little KV, two arms, two seeds, a coarse
// tolerance) checked through its JSON (fields, probes sorted by rate, every capacity inside its
// bracket, infinite-cache at least the baseline), its HTML (one curve per arm and seed) and its
// table led by the verdict; a probe equals the replay at the same interarrival and seed; the output
// does not depend on --jobs; bad flags and unsupported workloads are refused, before any work, with
// one error line. Each run takes about a second.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <functional>
#include <sstream>
#include <string>

#include "cli_test_support.h"

namespace agentkv {
namespace {

using cli_testing::ReadFile;
using cli_testing::RunResult;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The workload and fleet: baseline crosses a 0.3 s TTFT p95 between 1 and 4 sessions/h,
// infinite-cache never does (the search starts at 3600 / 15 s = 240 sessions/h/engine).
constexpr const char* kSmall =
    "--sessions 12 --context-scale 0.25 --num-engines 1 --max-total-tokens 32768 --slo-s 0.3 "
    "--tolerance 0.25 --max-rate 960";

class CapacityCliTest : public cli_testing::CliTest {
 protected:
  std::string Path(const std::string& name) const { return "'" + (dir_ / name).string() + "'"; }

  RunResult Capacity(const std::string& args, const std::string& json = "capacity.json") const {
    return Run("capacity " + args + " --json " + Path(json) + " --html " + Path("capacity.html"));
  }

  boost::json::value Json(const std::string& name = "capacity.json") const {
    return boost::json::parse(ReadFile(dir_ / name));
  }
};

// One search's probes: every field, rising rates at their interarrival, and the bracket (met
// at or below the capacity, missed at or above the lowest miss).
void ExpectABracket(const boost::json::value& run, const boost::json::object& options) {
  const double capacity = run.at("capacity").as_double();
  const boost::json::array& probes = run.at("probes").as_array();
  ASSERT_GE(probes.size(), 2U);
  EXPECT_LE(static_cast<int64_t>(probes.size()), options.at("max_probes").as_int64());
  for (size_t i = 0; i < probes.size(); ++i) {
    const boost::json::object& p = probes[i].as_object();
    for (const char* field : {"interarrival_s", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s",
                              "server_time_mean_s", "value", "order"}) {
      EXPECT_TRUE(p.contains(field)) << field;
    }
    const double rate = p.at("rate").as_double();
    EXPECT_DOUBLE_EQ(p.at("interarrival_s").as_double(), 3600 / rate);
    if (i > 0) {
      EXPECT_LT(probes[i - 1].at("rate").as_double(), rate);
    }
    // The bracket: met at or below the capacity, missed at or above the lowest miss.
    if (p.at("met").as_bool()) {
      EXPECT_LE(rate, capacity);
      EXPECT_LE(p.at("ttft_p95_s").as_double(), 0.3);
    } else {
      EXPECT_GE(rate, run.at("lowest_missed").as_double());
    }
  }
}

TEST_F(CapacityCliTest, SearchesEveryArmAndSeedAndReportsConsistentBrackets) {
  const RunResult r = Capacity(std::string(kSmall) +
                               " --arms baseline,infinite-cache --seeds 1,2 --jobs 2 --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("SLO: ttft-p95 <= 0.300 s"));
  EXPECT_THAT(r.out, HasSubstr(">= 960"));
  // The verdict leads, ahead of the table; the bound, however far ahead, is never the arm to
  // turn on.
  const size_t verdict = r.out.find("\nverdict (each arm against baseline");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(verdict, r.out.find("\narm "));
  EXPECT_THAT(r.out, HasSubstr("\n  keep   baseline ("));
  EXPECT_THAT(r.out, HasSubstr("\n  bound  infinite-cache ("));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("turn on")));

  const boost::json::value doc = Json();
  const boost::json::object& options = doc.at("options").as_object();
  EXPECT_EQ(options.at("metric").as_string(), "ttft-p95");
  EXPECT_EQ(options.at("slo_s").as_double(), 0.3);
  EXPECT_EQ(options.at("start_rate").as_double(), 240.0);
  EXPECT_EQ(options.at("tolerance").as_double(), 0.25);
  EXPECT_EQ(doc.at("seeds").as_array().size(), 2U);
  EXPECT_EQ(doc.at("num_engines").as_int64(), 1);
  EXPECT_EQ(doc.at("baseline").as_string(), "baseline");
  EXPECT_TRUE(doc.at("verdict").at("turn_on").is_null());
  const boost::json::array& arms = doc.at("arms").as_array();
  ASSERT_EQ(arms.size(), 2U);
  EXPECT_EQ(arms[0].at("arm").as_string(), "baseline");
  EXPECT_EQ(arms[1].at("arm").as_string(), "infinite-cache");
  for (const boost::json::value& arm : arms) {
    const boost::json::array& runs = arm.at("runs").as_array();
    ASSERT_EQ(runs.size(), 2U);
    for (const boost::json::value& run : runs) {
      ExpectABracket(run, options);
      if (!run.at("lowest_missed").is_null()) {
        EXPECT_LT(run.at("capacity").as_double(), run.at("lowest_missed").as_double());
      }
    }
  }
  EXPECT_EQ(arms[0].at("runs").as_array()[0].at("outcome").as_string(), "found");
  EXPECT_EQ(arms[1].at("runs").as_array()[0].at("outcome").as_string(), "at-least-max");
  EXPECT_GE(arms[1].at("capacity").at("median").as_double(),
            arms[0].at("capacity").at("median").as_double());
  EXPECT_GE(arms[1].at("vs_baseline").at("min").as_double(), 1.0);

  const std::string html = ReadFile(dir_ / "capacity.html");
  std::istringstream in(html.substr(html.find("<html")));
  boost::property_tree::ptree tree;
  ASSERT_NO_THROW(boost::property_tree::read_xml(in, tree));
  int svgs = 0;
  int curves = 0;
  const std::function<void(const boost::property_tree::ptree&)> walk =
      [&](const boost::property_tree::ptree& node) {
        for (const auto& [name, child] : node) {
          svgs += name == "svg" ? 1 : 0;
          if (name == "polyline" && child.get_optional<std::string>("<xmlattr>.data-arm")) {
            ++curves;
          }
          walk(child);
        }
      };
  walk(tree);
  EXPECT_EQ(svgs, 1);
  EXPECT_EQ(curves, 2 * 2);  // One per arm and seed.

  // The output does not depend on how many searches run at once.
  const RunResult one =
      Capacity(std::string(kSmall) + " --arms baseline,infinite-cache --seeds 1,2 --jobs 1 --quiet",
               "jobs1.json");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, r.out);
  EXPECT_EQ(ReadFile(dir_ / "jobs1.json"), ReadFile(dir_ / "capacity.json"));
}

TEST_F(CapacityCliTest, AProbeIsTheReplayAtItsInterarrival) {
  // One engine at 240 sessions/h: sessions start 15 s apart, the replay's default.
  const RunResult c = Capacity(std::string(kSmall) + " --arms baseline --seed 2 --quiet");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const RunResult r =
      Run("replay --sessions 12 --context-scale 0.25 --num-engines 1 --max-total-tokens 32768 "
          "--arms baseline --seed 2 --session-interarrival-s 15 --quiet --html '' --json " +
          Path("replay.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const boost::json::value replay = Json("replay.json");
  const boost::json::object& ttft = replay.at("arms").as_array()[0].at("ttft").as_object();
  const boost::json::value capacity = Json();
  bool found = false;
  for (const boost::json::value& p :
       capacity.at("arms").as_array()[0].at("runs").as_array()[0].at("probes").as_array()) {
    if (p.at("rate").as_double() != 240.0) continue;
    found = true;
    EXPECT_EQ(p.at("ttft_p95_s").as_double(), ttft.at("p95_s").as_double());
    EXPECT_EQ(p.at("ttft_p99_s").as_double(), ttft.at("p99_s").as_double());
    EXPECT_EQ(p.at("server_time_mean_s").as_double(),
              replay.at("arms").as_array()[0].at("server_time").at("mean_s").as_double());
  }
  EXPECT_TRUE(found);
}

TEST_F(CapacityCliTest, BadFlagsAndUnsupportedWorkloadsAreRefusedBeforeAnyWork) {
  const std::string prefix = "agentkv capacity: error: ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--workload rollout", "--workload rollout has no session arrival rate"},
      // Refused before the (missing) trace is read.
      {"--workload mooncake --trace no-such-file.jsonl",
       "--workload mooncake has no session arrival rate"},
      {"--workload bailian --trace no-such-file.jsonl",
       "capacity supports --workload synthetic and weka"},
      {"--tolerance 0", "--tolerance must be in [0.001, 1], got 0"},
      {"--slo-s -1", "--slo-s must be in (0, 1000000], got -1"},
      {"--min-rate 0", "--min-rate must be in (0, 1000000000], got 0"},
      {"--min-rate 10 --max-rate 5", "--max-rate must be in [--min-rate 10, 1000000000], got 5"},
      {"--start-rate -3", "--start-rate must be in (0, 1000000000], got -3"},
      {"--seed 1 --seeds 1,2", "--seed and --seeds: give one"},
      {"--seeds 3,4,3", "--seeds lists 3 twice"},
      {"--slo-metric p95", "--slo-metric"},
      {"--sessions 0", "--sessions must be in"},
      {"--arms baseline,nonsense", "nonsense"},
      {"--jobs 999", "--jobs must be in [0, 256], got 999"},
  };
  for (const auto& [args, message] : cases) {
    const RunResult r = Capacity(args);
    cli_testing::ExpectOneErrorLine(r, prefix);
    EXPECT_THAT(r.err, HasSubstr(message)) << args;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "capacity.json")) << args;
  }
}

TEST_F(CapacityCliTest, HelpExplainsTheMethod) {
  const RunResult r = Run("capacity --help");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("3600 / (r x --num-engines)"));
  EXPECT_THAT(r.out, HasSubstr("--slo-metric"));
  EXPECT_THAT(r.out, HasSubstr("--seeds"));
  EXPECT_THAT(r.out, HasSubstr("--session-interarrival-s"));
  EXPECT_THAT(r.out, HasSubstr("agentkv-capacity.json"));
}

}  // namespace
}  // namespace agentkv
