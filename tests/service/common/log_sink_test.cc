// Tests of the services' log lines (log_sink.h): nginx-style escaping of every value, quoting
// of values with spaces, and the line a forged rid produces.
#include "agentkv/service/common/log_sink.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentkv::service {
namespace {

TEST(LogEscapeTest, EscapesControlBytesHighBytesQuoteAndBackslashAsNginxDoes) {
  EXPECT_EQ(LogEscape("plain-value_1.2:3/4?a=b"), "plain-value_1.2:3/4?a=b");
  EXPECT_EQ(LogEscape("a\nb\rc\td"), "a\\x0Ab\\x0Dc\\x09d");
  EXPECT_EQ(LogEscape(std::string_view("\0\x1f\x7f", 3)), "\\x00\\x1F\\x7F");
  EXPECT_EQ(LogEscape("\xc3\xa9\xff"), "\\xC3\\xA9\\xFF");
  EXPECT_EQ(LogEscape("say \"hi\" \\o/"), "say \\x22hi\\x22 \\x5Co/");
}

TEST(LogValueTest, QuotesOnlyValuesWithASpaceUnlessAsked) {
  EXPECT_EQ(LogValue("abc"), "abc");
  EXPECT_EQ(LogValue("two words"), "\"two words\"");
  EXPECT_EQ(LogValue("a\"b"), "a\\x22b");
  EXPECT_EQ(LogValue(""), "");
  EXPECT_EQ(LogValue("abc", /*always_quote=*/true), "\"abc\"");
  EXPECT_EQ(LogValue("", /*always_quote=*/true), "\"\"");
}

TEST(LogLineTest, WritesEventThenFieldsInOrder) {
  const LogLine line = LogLine("session_closed")
                           .Add("session", "agent-1")
                           .Add("ok", true)
                           .Add("aborted", 3)
                           .Add("tokens", int64_t{1} << 40)
                           .Add("literal", "on")
                           .Add("owned", std::string("x y"))
                           .Quoted("error", "HTTP 500");
  EXPECT_EQ(line.text(),
            "event=session_closed session=agent-1 ok=true aborted=3 tokens=1099511627776 "
            "literal=on owned=\"x y\" error=\"HTTP 500\"");
}

// A client's rid of "r1\nevent=forged ..." is one line: the newline is \x0A, and the value is
// quoted, so "event=forged" can start neither a line nor a field of its own.
TEST(LogLineTest, AForgedRidStaysOneEscapedValueOnOneLine) {
  const std::string rid = "r1\nevent=forged level=error user=\"admin\"";
  std::vector<std::string> lines;
  const LogSink sink = [&lines](LogLevel, std::string_view line) { lines.emplace_back(line); };
  sink(LogLevel::kWarn, LogLine("upstream_failed").Add("rid", rid).Quoted("error", "refused"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "event=upstream_failed rid=\"r1\\x0Aevent=forged level=error user=\\x22admin\\x22\" "
            "error=\"refused\"");
  EXPECT_EQ(lines[0].find('\n'), std::string::npos);
  // Without a space the value is bare, and still one field on one line.
  sink(LogLevel::kWarn, LogLine("upstream_failed").Add("rid", "r2\r\nevent=forged"));
  EXPECT_EQ(lines[1], "event=upstream_failed rid=r2\\x0D\\x0Aevent=forged");
}

TEST(LogSinkTest, AnEmptySinkIsFalseAndDropsLines) {
  const LogSink empty;
  EXPECT_FALSE(empty);
  empty(LogLevel::kInfo, LogLine("ignored"));
  const LogSink stderr_sink = StderrLogSink;
  EXPECT_TRUE(stderr_sink);
  EXPECT_FALSE(empty.Enabled(LogLevel::kError));
}

TEST(LogSinkTest, LinesBelowTheMinimumLevelAreDroppedAndReportedDisabled) {
  std::vector<std::pair<LogLevel, std::string>> lines;
  const LogSink every(
      [&](LogLevel level, std::string_view line) { lines.emplace_back(level, std::string(line)); });
  EXPECT_TRUE(every.Enabled(LogLevel::kDebug));  // The default minimum is kDebug.
  const LogSink warn_up(
      [&](LogLevel level, std::string_view line) { lines.emplace_back(level, std::string(line)); },
      LogLevel::kWarn);
  EXPECT_FALSE(warn_up.Enabled(LogLevel::kDebug));
  EXPECT_FALSE(warn_up.Enabled(LogLevel::kInfo));
  EXPECT_TRUE(warn_up.Enabled(LogLevel::kWarn));
  EXPECT_TRUE(warn_up.Enabled(LogLevel::kError));
  warn_up(LogLevel::kInfo, LogLine("dropped"));
  warn_up(LogLevel::kError, LogLine("kept"));
  every(LogLevel::kDebug, LogLine("also_kept"));
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[0], std::make_pair(LogLevel::kError, std::string("event=kept")));
  EXPECT_EQ(lines[1], std::make_pair(LogLevel::kDebug, std::string("event=also_kept")));
}

}  // namespace
}  // namespace agentkv::service
