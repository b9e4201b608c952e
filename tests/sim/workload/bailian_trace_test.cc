// Tests of the Bailian trace reader: valid lines parse in file order, parent links group
// requests into conversations, and each kind of bad input is one InvalidArgument naming the
// file, the 1-based line and the field.
#include "agentkv/sim/workload/bailian_trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "agentkv/base/bounds.h"
#include "agentkv/sim/workload/trace_input.h"

namespace agentkv::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kRoot =
    R"({"chat_id": 0, "parent_chat_id": -1, "timestamp": 1.5, "input_length": 40,)"
    R"( "output_length": 7, "type": "text", "turn": 1, "hash_ids": [0, 1, 2]})";
constexpr const char* kOther =
    R"({"chat_id": 3, "parent_chat_id": -1, "timestamp": 2.0, "input_length": 16,)"
    R"( "output_length": 1, "type": "search", "turn": 1, "hash_ids": [9]})";
constexpr const char* kChild =
    R"({"chat_id": 5, "parent_chat_id": 0, "timestamp": 61.114, "input_length": 60,)"
    R"( "output_length": 2, "type": "text", "turn": 2, "hash_ids": [0, 1, 3, 4], "x": 1})";

Status ParseError(const std::string& text) {
  StatusOr<std::vector<BailianRequest>> r = ParseBailianTraceText(text, "t.jsonl");
  EXPECT_FALSE(r.ok()) << "parsed: " << text;
  return r.ok() ? Status() : r.status();
}

// kRoot with `field`'s value text replaced by `value`.
std::string RootWith(const std::string& field, const std::string& value) {
  std::string line = kRoot;
  const std::string key = "\"" + field + "\": ";
  const size_t begin = line.find(key) + key.size();
  size_t end = begin;
  if (line[begin] == '[') {
    end = line.find(']', begin) + 1;
  } else {
    end = line.find_first_of(",}", begin);
  }
  return line.substr(0, begin) + value + line.substr(end);
}

TEST(BailianTraceTest, ParsesValidLinesInFileOrder) {
  const std::string text = std::string(kRoot) + "\n\n" + kOther + "\n" + kChild + "\n";
  StatusOr<std::vector<BailianRequest>> r = ParseBailianTraceText(text, "t.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  const BailianRequest& child = (*r)[2];
  EXPECT_EQ(child.chat_id, 5);
  EXPECT_EQ(child.parent_chat_id, 0);
  EXPECT_EQ(child.timestamp, TimeNs(61'114'000'000));
  EXPECT_EQ(child.input_length, 60);
  EXPECT_EQ(child.output_length, 2);
  EXPECT_EQ(child.type, "text");
  EXPECT_EQ(child.turn, 2);
  EXPECT_THAT(child.hash_ids, ElementsAre(0, 1, 3, 4));
  EXPECT_EQ((*r)[1].type, "search");
}

TEST(BailianTraceTest, ATraceWithoutRequestsIsRefusedNamingIt) {
  for (const char* text : {"", "\n \n"}) {
    EXPECT_EQ(ParseError(text), InvalidArgumentError("t.jsonl: no requests (an empty trace)"));
  }
}

TEST(BailianTraceTest, GroupsConversationsByParentLinks) {
  const std::string text = std::string(kRoot) + "\n" + kOther + "\n" + kChild + "\n";
  StatusOr<std::vector<BailianRequest>> r = ParseBailianTraceText(text, "t.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const AgenticWorkload w = GroupBailianConversations(*r);
  ASSERT_EQ(w.conversations.size(), 2u);
  EXPECT_THAT(w.starts, ElementsAre(TimeNs::Millis(1500), TimeNs::Millis(2000)));
  const WekaConversation& first = w.conversations[0];
  EXPECT_EQ(first.id, "0");
  EXPECT_EQ(first.block_size, 16);
  ASSERT_EQ(first.requests.size(), 2u);
  EXPECT_EQ(first.requests[0].t, TimeNs());
  EXPECT_EQ(first.requests[1].t, TimeNs(59'614'000'000));
  EXPECT_EQ(first.requests[1].think_time, TimeNs(59'614'000'000));
  EXPECT_THAT(first.requests[1].hash_ids, ElementsAre(0, 1, 3, 4));
  EXPECT_EQ(w.conversations[1].id, "3");
  EXPECT_EQ(w.conversations[1].requests.size(), 1u);
  // Folding the starts puts the child at its file timestamp.
  EXPECT_EQ(FoldConversationStarts(w)[0].requests[1].t, TimeNs(61'114'000'000));
}

TEST(BailianTraceTest, EachFieldErrorNamesLineAndField) {
  struct Case {
    std::string field;
    std::string value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"chat_id", "-2", R"(field "chat_id": expected a non-negative integer, got -2)"},
      {"parent_chat_id", "-3", R"(field "parent_chat_id": expected -1 or a non-negative)"},
      {"timestamp", "\"x\"", R"(field "timestamp": expected a number of seconds)"},
      {"input_length", "1.5", R"(field "input_length": expected a non-negative integer)"},
      {"output_length", "-1",
       R"(field "output_length": -1 is out of range [0, 1099511627776] tokens)"},
      {"type", "4", R"(field "type": expected a string, got 4)"},
      {"turn", "0", R"(field "turn": expected an integer >= 1, got 0)"},
      {"hash_ids", "[1, -1]", R"(field "hash_ids": expected an array of non-negative)"},
  };
  for (const Case& c : cases) {
    const Status s = ParseError(std::string(kOther) + "\n" + RootWith(c.field, c.value));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(s.message(), StartsWith("t.jsonl:2: " + c.expected)) << s.message();
  }
}

// Every number is held to the bounds.h rule of its kind where it is read: lengths are tokens
// in [0, 2^40], the timestamp a time in [0, 365 days] (in s), the turn a count in [1, 2^32].
TEST(BailianTraceTest, NumbersOutOfTheirRangeNameLineAndField) {
  struct Case {
    std::string field;
    std::string value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"input_length", "9223372036854775807",
       R"(field "input_length": 9223372036854775807 is out of range [0, 1099511627776] tokens)"},
      {"output_length", "1099511627777",
       R"(field "output_length": 1099511627777 is out of range [0, 1099511627776] tokens)"},
      {"input_length", "18446744073709551615",
       R"(field "input_length": 18446744073709551615 is out of range [0, 1099511627776] tokens)"},
      {"timestamp", "9.3e12",
       R"(field "timestamp": 9300000000000 is out of range [0, 31536000] s)"},
      {"timestamp", "31536000.5",
       R"(field "timestamp": 31536000.5 is out of range [0, 31536000] s)"},
      {"timestamp", "-0.5", R"(field "timestamp": -0.5 is out of range [0, 31536000] s)"},
      {"timestamp", "1e309", R"(field "timestamp": inf is out of range [0, 31536000] s)"},
      {"timestamp", "-1e400", R"(field "timestamp": -inf is out of range [0, 31536000] s)"},
      {"turn", "4294967297", R"(field "turn": 4294967297 is out of range [0, 4294967296])"},
      {"turn", "9223372036854775808",
       R"(field "turn": 9223372036854775808 is out of range [0, 4294967296])"},
      {"chat_id", "9223372036854775808",
       R"(field "chat_id": expected a non-negative integer, got 9223372036854775808)"},
  };
  for (const Case& c : cases) {
    const Status s = ParseError(std::string(kOther) + "\n" + RootWith(c.field, c.value));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(s.message(), "t.jsonl:2: " + c.expected);
  }
  StatusOr<std::vector<BailianRequest>> edge =
      ParseBailianTraceText(RootWith("timestamp", "31536000"), "t.jsonl");
  ASSERT_TRUE(edge.ok()) << edge.status();
  EXPECT_EQ(edge->front().timestamp, TimeNs(kMaxTimeNs));
}

// One id per full or partial 16-token block: at most ceil(input_length / 16).
TEST(BailianTraceTest, MoreHashIdsThanPromptBlocksIsAnError) {
  EXPECT_EQ(
      ParseError(RootWith("input_length", "32")).message(),
      R"(t.jsonl:1: field "hash_ids": 3 ids for input_length 32, more than ceil(32 / 16) = 2)");
  EXPECT_TRUE(ParseBailianTraceText(RootWith("input_length", "33"), "t.jsonl").ok());
}

TEST(BailianTraceTest, LineLongerThanTheBoundIsRefused) {
  EXPECT_EQ(
      ParseError(std::string(kRoot) + "\n" + std::string(kMaxTraceLineBytes + 1, '7')).message(),
      "t.jsonl:2: line longer than 67108864 bytes");
}

TEST(BailianTraceTest, MissingFieldNamesIt) {
  const Status s = ParseError(R"({"chat_id": 1, "parent_chat_id": -1})");
  EXPECT_THAT(s.message(), StartsWith(R"(t.jsonl:1: field "timestamp": missing)"));
}

TEST(BailianTraceTest, MalformedJsonAndNonObjectNameTheLine) {
  EXPECT_THAT(ParseError(std::string(kRoot) + "\n{oops").message(),
              StartsWith("t.jsonl:2: malformed JSON: "));
  EXPECT_THAT(ParseError("[1]").message(), StartsWith("t.jsonl:1: expected a JSON object"));
}

TEST(BailianTraceTest, DuplicateChatIdAndUnknownParentAreErrors) {
  EXPECT_THAT(ParseError(std::string(kRoot) + "\n" + kRoot).message(),
              HasSubstr(R"(t.jsonl:2: field "chat_id": duplicate id 0, first on line 1)"));
  EXPECT_THAT(ParseError(kChild).message(),
              HasSubstr(R"(t.jsonl:1: field "parent_chat_id": no earlier request has chat_id 0)"));
}

TEST(BailianTraceTest, ReadsAFileAndReportsMissingFiles) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / "bailian_trace_test.jsonl";
  {
    std::ofstream out(path);
    out << kRoot << "\n" << kChild << "\n";
  }
  StatusOr<std::vector<BailianRequest>> r = ReadBailianTrace(path.string());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 2u);
  std::filesystem::remove(path);
  EXPECT_EQ(ReadBailianTrace(path.string()).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace agentkv::sim
