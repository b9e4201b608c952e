#include "agentkv/protocol/sse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agentkv/protocol/generate_response.h"
#include "protocol_test_support.h"

namespace agentkv::protocol {
namespace {

using testing_support::ReadTestdata;

// Feeds `stream` in pieces of `chunk` bytes and collects the events.
std::vector<std::string> FeedInChunks(SseParser& parser, std::string_view stream, size_t chunk) {
  std::vector<std::string> events;
  for (size_t i = 0; i < stream.size(); i += chunk) {
    for (std::string& event : parser.Feed(stream.substr(i, chunk))) {
      events.push_back(std::move(event));
    }
  }
  return events;
}

TEST(SseTest, EventFramingMatchesSglang) {
  EXPECT_EQ(SseEvent(R"({"text":"a"})"), "data: {\"text\":\"a\"}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(SseTest, FixtureStreamSplitAtEveryByteBoundaryGivesTheSameEvents) {
  const std::string stream = ReadTestdata("stream.sse");
  SseParser whole;
  const std::vector<std::string> expected = whole.Feed(stream);
  ASSERT_EQ(expected.size(), 3u);
  EXPECT_TRUE(whole.done());
  EXPECT_TRUE(ParseGenerateResponse(expected[2])->meta_info.finish_reason.has_value());
  EXPECT_FALSE(ParseGenerateResponse(expected[0])->meta_info.finish_reason.has_value());

  for (size_t split = 0; split <= stream.size(); ++split) {
    SseParser parser;
    std::vector<std::string> events = parser.Feed(std::string_view(stream).substr(0, split));
    for (std::string& event : parser.Feed(std::string_view(stream).substr(split))) {
      events.push_back(std::move(event));
    }
    EXPECT_EQ(events, expected) << "split at " << split;
    EXPECT_TRUE(parser.done()) << "split at " << split;
  }
  for (size_t chunk = 1; chunk <= 7; ++chunk) {
    SseParser parser;
    EXPECT_EQ(FeedInChunks(parser, stream, chunk), expected) << "chunk " << chunk;
    EXPECT_TRUE(parser.done());
    EXPECT_EQ(parser.status(), Status::Ok());
  }
}

TEST(SseTest, CrLfLineEndsEvenWhenSplitBetweenCrAndLf) {
  const std::string stream = "data: a\r\n\r\ndata: b\r\r: comment\r\ndata: [DONE]\r\n\r\n";
  for (size_t chunk = 1; chunk <= stream.size(); ++chunk) {
    SseParser parser;
    EXPECT_EQ(FeedInChunks(parser, stream, chunk), (std::vector<std::string>{"a", "b"}))
        << "chunk " << chunk;
    EXPECT_TRUE(parser.done());
  }
}

TEST(SseTest, MultiLineDataCommentsAndOtherFields) {
  SseParser parser;
  const std::vector<std::string> events = parser.Feed(
      ": keep-alive\n\nevent: message\nid: 3\ndata: line1\ndata:line2\ndata\nretry: 10\n\n"
      "data:  two spaces\n\n");
  EXPECT_EQ(events, (std::vector<std::string>{"line1\nline2\n", " two spaces"}));
  EXPECT_FALSE(parser.done());
  EXPECT_EQ(parser.Feed("data: partial"), std::vector<std::string>{});
  EXPECT_EQ(parser.buffered_bytes(), 13u);
}

TEST(SseTest, NothingIsReturnedAfterDone) {
  SseParser parser;
  EXPECT_EQ(parser.Feed("data: x\n\ndata: [DONE]\n\ndata: late\n\n"),
            std::vector<std::string>{"x"});
  EXPECT_TRUE(parser.done());
  EXPECT_EQ(parser.Feed("data: later\n\n"), std::vector<std::string>{});
}

TEST(SseTest, ErrorEventsPassThrough) {
  SseParser parser;
  const std::vector<std::string> events = parser.Feed(
      SseEvent(R"({"error":{"message":"maximum context length"}})") + std::string(kSseDone));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(ParseErrorMessage(events[0]), "maximum context length");
  EXPECT_TRUE(parser.done());
}

TEST(SseTest, OversizedEventStopsTheParser) {
  SseParser parser(/*max_event_bytes=*/16);
  EXPECT_EQ(parser.Feed("data: 0123456789\n\n"), std::vector<std::string>{"0123456789"});
  EXPECT_EQ(parser.Feed("data: 0123456789abcdef"), std::vector<std::string>{});
  EXPECT_EQ(parser.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(parser.Feed("\n\ndata: x\n\n"), std::vector<std::string>{});
  // Many short data lines of one event also count.
  SseParser lines(/*max_event_bytes=*/16);
  for (int i = 0; i < 10; ++i) lines.Feed("data: ab\n");
  EXPECT_EQ(lines.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace agentkv::protocol
