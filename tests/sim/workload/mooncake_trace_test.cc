// Tests of the Mooncake trace reader: valid lines parse into requests in file order, and each
// kind of bad input is one InvalidArgument/NotFound naming the file, the 1-based line and the
// field.
#include "agentkv/sim/workload/mooncake_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "agentkv/base/bounds.h"
#include "agentkv/sim/workload/trace_input.h"

namespace agentkv::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kLine1 =
    R"({"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]})";
constexpr const char* kLine2 =
    R"({"timestamp": 27, "input_length": 1024, "output_length": 3, "hash_ids": [0, 7]})";

// The error of parsing `text` as "t.jsonl"; fails the test if it parses.
Status ParseError(const std::string& text) {
  StatusOr<std::vector<MooncakeRequest>> r = ParseMooncakeTraceText(text, "t.jsonl");
  EXPECT_FALSE(r.ok()) << "parsed: " << text;
  return r.ok() ? Status() : r.status();
}

TEST(MooncakeTraceTest, ParsesLinesInFileOrder) {
  StatusOr<std::vector<MooncakeRequest>> r =
      ParseMooncakeTraceText(std::string(kLine1) + "\n" + kLine2 + "\n", "t.jsonl");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0], (MooncakeRequest{TimeNs(0), 6758, 500, {0, 1, 2}}));
  EXPECT_EQ((*r)[1], (MooncakeRequest{TimeNs::Millis(27), 1024, 3, {0, 7}}));
}

TEST(MooncakeTraceTest, SkipsBlankLinesAndIgnoresUnknownFields) {
  const std::string text = "\n   \n" + std::string(kLine1) + "\r\n\n" +
                           R"({"hash_ids": [], "extra": {"a": [1]}, "timestamp": 5,)" +
                           R"( "output_length": 0, "input_length": 0})" + "\n";
  StatusOr<std::vector<MooncakeRequest>> r = ParseMooncakeTraceText(text, "t.jsonl");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].hash_ids, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ((*r)[1], (MooncakeRequest{TimeNs::Millis(5), 0, 0, {}}));
}

TEST(MooncakeTraceTest, AcceptsHashIdsAboveInt64) {
  StatusOr<std::vector<MooncakeRequest>> r =
      ParseMooncakeTraceText(R"({"timestamp": 0, "input_length": 1, "output_length": 1,)"
                             R"( "hash_ids": [18446744073709551615]})",
                             "t.jsonl");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].hash_ids, (std::vector<uint64_t>{18446744073709551615ULL}));
}

TEST(MooncakeTraceTest, ATraceWithoutRequestsIsRefusedNamingIt) {
  for (const char* text : {"", "\n  \n\t\n"}) {
    StatusOr<std::vector<MooncakeRequest>> r = ParseMooncakeTraceText(text, "t.jsonl");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), "t.jsonl: no requests (an empty trace)");
  }
}

TEST(MooncakeTraceTest, MalformedJsonNamesFileAndLine) {
  const Status s = ParseError(std::string(kLine1) + "\n\n" + R"({"timestamp": 0, "input_)");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), StartsWith("t.jsonl:3: malformed JSON: "));
}

TEST(MooncakeTraceTest, NonObjectLineIsAnError) {
  const Status s = ParseError("[1, 2]\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "t.jsonl:1: expected a JSON object, got [1,2]");
}

TEST(MooncakeTraceTest, MissingHashIdsNamesTheField) {
  const Status s = ParseError(std::string(kLine1) + "\n" +
                              R"({"timestamp": 0, "input_length": 1, "output_length": 1})");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "t.jsonl:2: field \"hash_ids\": missing (expected an array of non-negative integers)");
}

TEST(MooncakeTraceTest, NegativeInputLengthNamesTheField) {
  const Status s =
      ParseError(R"({"timestamp": 0, "input_length": -5, "output_length": 1, "hash_ids": []})");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "t.jsonl:1: field \"input_length\": -5 is out of range [0, 1099511627776] tokens");
}

TEST(MooncakeTraceTest, EachLengthFieldIsRequiredAndIntegral) {
  EXPECT_THAT(ParseError(R"({"input_length": 1, "output_length": 1, "hash_ids": []})").message(),
              StartsWith("t.jsonl:1: field \"timestamp\": missing"));
  EXPECT_THAT(
      ParseError(R"({"timestamp": 1, "input_length": 1.5, "output_length": 1, "hash_ids": []})")
          .message(),
      StartsWith("t.jsonl:1: field \"input_length\": expected a non-negative integer, got 1.5"));
  EXPECT_THAT(
      ParseError(R"({"timestamp": 0, "input_length": 1, "output_length": "3", "hash_ids": []})")
          .message(),
      StartsWith("t.jsonl:1: field \"output_length\": expected a non-negative integer"));
  EXPECT_THAT(
      ParseError(R"({"timestamp": "0", "input_length": 1, "output_length": 1, "hash_ids": []})")
          .message(),
      StartsWith("t.jsonl:1: field \"timestamp\": expected a number of milliseconds, got \"0\""));
}

TEST(MooncakeTraceTest, TimestampIsMillisecondsRoundedToTheNanosecond) {
  StatusOr<std::vector<MooncakeRequest>> r = ParseMooncakeTraceText(
      R"({"timestamp": 1.5, "input_length": 1, "output_length": 1, "hash_ids": []})"
      "\n"
      R"({"timestamp": 31536000000, "input_length": 1, "output_length": 1, "hash_ids": []})",
      "t.jsonl");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].timestamp, TimeNs(1'500'000));
  EXPECT_EQ((*r)[1].timestamp, TimeNs(kMaxTimeNs));
}

// Every number is held to the bounds.h rule of its kind where it is read: lengths are tokens
// in [0, 2^40], the timestamp a time in [0, 365 days] (in ms).
TEST(MooncakeTraceTest, NumbersOutOfTheirRangeNameFileLineAndField) {
  const std::string good = std::string(kLine1) + "\n";
  auto error = [&](const std::string& line) { return ParseError(good + line + "\n").message(); };
  EXPECT_EQ(error(R"({"timestamp": 0, "input_length": 9223372036854775807, "output_length": 1,)"
                  R"( "hash_ids": []})"),
            "t.jsonl:2: field \"input_length\": 9223372036854775807 is out of range "
            "[0, 1099511627776] tokens");
  EXPECT_EQ(error(R"({"timestamp": 0, "input_length": 1, "output_length": 18446744073709551615,)"
                  R"( "hash_ids": []})"),
            "t.jsonl:2: field \"output_length\": 18446744073709551615 is out of range "
            "[0, 1099511627776] tokens");
  EXPECT_EQ(error(R"({"timestamp": 0, "input_length": 1099511627777, "output_length": 1,)"
                  R"( "hash_ids": []})"),
            "t.jsonl:2: field \"input_length\": 1099511627777 is out of range "
            "[0, 1099511627776] tokens");
  EXPECT_EQ(error(R"({"timestamp": 9300000000000, "input_length": 1, "output_length": 1,)"
                  R"( "hash_ids": []})"),
            "t.jsonl:2: field \"timestamp\": 9300000000000 is out of range [0, 31536000000] ms");
  EXPECT_EQ(error(R"({"timestamp": 9.3e12, "input_length": 1, "output_length": 1,)"
                  R"( "hash_ids": []})"),
            "t.jsonl:2: field \"timestamp\": 9300000000000 is out of range [0, 31536000000] ms");
  EXPECT_EQ(error(R"({"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": []})"),
            "t.jsonl:2: field \"timestamp\": -1 is out of range [0, 31536000000] ms");
  EXPECT_EQ(error(R"({"timestamp": 1e999, "input_length": 1, "output_length": 1,)"
                  R"( "hash_ids": []})"),
            "t.jsonl:2: field \"timestamp\": inf is out of range [0, 31536000000] ms");
  // JSON has no NaN: the literal is malformed JSON.
  EXPECT_THAT(error(R"({"timestamp": NaN, "input_length": 1, "output_length": 1,)"
                    R"( "hash_ids": []})"),
              StartsWith("t.jsonl:2: malformed JSON: "));
}

// One id per full or partial 512-token block: more ids than that would make the replayed
// prompt longer than the recorded one.
TEST(MooncakeTraceTest, MoreHashIdsThanPromptBlocksIsAnError) {
  EXPECT_TRUE(
      ParseMooncakeTraceText(
          R"({"timestamp": 0, "input_length": 513, "output_length": 1, "hash_ids": [1, 2]})",
          "t.jsonl")
          .ok());
  EXPECT_EQ(
      ParseError(R"({"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]})")
          .message(),
      "t.jsonl:1: field \"hash_ids\": 2 ids for input_length 512, more than ceil(512 / 512) = 1");
  EXPECT_EQ(
      ParseError(R"({"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": [7]})")
          .message(),
      "t.jsonl:1: field \"hash_ids\": 1 ids for input_length 0, more than ceil(0 / 512) = 0");
}

// A line is refused as soon as it passes the bound, without reading the rest of it.
TEST(MooncakeTraceTest, LineLongerThanTheBoundIsRefusedAtOnce) {
  const std::string long_line(kMaxTraceLineBytes + 1, ' ');
  const Status s = ParseError(std::string(kLine1) + "\n" + long_line + "\n" + kLine2 + "\n");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "t.jsonl:2: line longer than 67108864 bytes");
  // A line of exactly the bound is fine (here, blank).
  EXPECT_TRUE(
      ParseMooncakeTraceText(std::string(kMaxTraceLineBytes, ' ') + "\n" + kLine2, "t.jsonl").ok());
}

// Lines are parsed as they stream in 64 KiB chunks: a line split across chunks, with numbers
// and keys cut in the middle, parses as if it were read whole.
TEST(MooncakeTraceTest, LinesSpanningReadChunksParse) {
  for (const size_t pad : {65536 - 30, 65536 - 12, 65536 - 3, 65536, 3 * 65536 + 7}) {
    const std::string line = R"({"timestamp": 12345, )" + std::string(pad, ' ') +
                             R"("input_length": 1000, "output_length": 7, "hash_ids": [11, 22]})";
    StatusOr<std::vector<MooncakeRequest>> r =
        ParseMooncakeTraceText(std::string(pad % 5, '\n') + line + "\n" + kLine2, "t.jsonl");
    ASSERT_TRUE(r.ok()) << pad << ": " << r.status();
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[0], (MooncakeRequest{TimeNs::Millis(12345), 1000, 7, {11, 22}})) << pad;
  }
  // Text after a complete value on the same line is an error even when a chunk ends between
  // them.
  const std::string split = R"({"timestamp": 1, "input_length": 1, "output_length": 1,)"
                            R"( "hash_ids": []})";
  const std::string tail(65536 - split.size(), ' ');
  EXPECT_THAT(ParseError(split + tail + "x\n").message(),
              StartsWith("t.jsonl:1: malformed JSON: "));
}

TEST(MooncakeTraceTest, HashIdsWithAStringNamesTheField) {
  const Status s = ParseError(
      R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1, "x"]})");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), StartsWith("t.jsonl:1: field \"hash_ids\": expected an array of "
                                      "non-negative integers"));
  EXPECT_THAT(s.message(), HasSubstr("element 1 is \"x\""));
}

TEST(MooncakeTraceTest, HashIdsWithANegativeValueNamesTheField) {
  const Status s = ParseError(std::string(kLine1) + "\n" + kLine2 + "\n" +
                              R"({"timestamp": 0, "input_length": 1, "output_length": 1,)" +
                              R"( "hash_ids": [3, -1]})");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "t.jsonl:3: field \"hash_ids\": expected an array of non-negative integers, "
            "element 1 is -1");
}

TEST(MooncakeTraceTest, HashIdsNotAnArrayNamesTheField) {
  EXPECT_THAT(
      ParseError(R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": 4})")
          .message(),
      StartsWith("t.jsonl:1: field \"hash_ids\": expected an array of non-negative integers, "
                 "got 4"));
}

TEST(MooncakeTraceTest, MissingFileIsNotFound) {
  const std::string path = ::testing::TempDir() + "/agentkv_no_such_trace.jsonl";
  StatusOr<std::vector<MooncakeRequest>> r = ReadMooncakeTrace(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(),
            "cannot open trace file \"" + path + "\": No such file or directory");
}

TEST(MooncakeTraceTest, ReadsAFileAndNamesItInErrors) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / "agentkv_mooncake_trace_test.jsonl";
  {
    std::ofstream out(path);
    out << kLine1 << "\n" << kLine2 << "\n";
  }
  StatusOr<std::vector<MooncakeRequest>> ok = ReadMooncakeTrace(path.string());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 2u);

  {
    std::ofstream out(path, std::ios::app);
    out << "{\"timestamp\": 0, \"input_length\": -1, \"output_length\": 0, \"hash_ids\": []}\n";
  }
  StatusOr<std::vector<MooncakeRequest>> bad = ReadMooncakeTrace(path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              StartsWith(path.string() + ":3: field \"input_length\": -1 is out of range"));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace agentkv::sim
