#include "tools/agentkv/progress_line.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace agentkv::tools {
namespace {

using namespace std::chrono_literals;
using Mode = ProgressLine::Mode;

// A clock the test advances and a sink that keeps every piece printed.
struct Harness {
  std::chrono::steady_clock::time_point now{};
  std::vector<std::string> printed;

  ProgressLine Make(Mode mode) {
    return ProgressLine(
        mode, [this] { return now; },
        [this](std::string_view text) { printed.emplace_back(text); });
  }
};

TEST(ProgressLineTest, ARunShorterThanTwoSecondsPrintsNothing) {
  Harness h;
  {
    ProgressLine line = h.Make(Mode::kLines);
    for (int i = 0; i < 19; ++i) {
      h.now += 100ms;
      line.Update(0, 8, "baseline", i / 19.0);
    }
  }
  EXPECT_TRUE(h.printed.empty());
}

TEST(ProgressLineTest, WithoutATerminalPrintsAPlainLineEveryFiveSeconds) {
  Harness h;
  ProgressLine line = h.Make(Mode::kLines);
  // 30 s of updates every 100 ms: lines at 2 s, 7 s, 12 s, ... 27 s.
  for (int i = 1; i <= 300; ++i) {
    h.now += 100ms;
    line.Update(static_cast<size_t>(i / 40), 8, "+admission", (i % 40) / 40.0);
  }
  ASSERT_EQ(h.printed.size(), 6u);
  EXPECT_EQ(h.printed[0], "agentkv replay: arm 1/8 +admission            50.0%  2 s\n");
  for (const std::string& text : h.printed) {
    EXPECT_EQ(text.back(), '\n');
    EXPECT_EQ(text.find('\r'), std::string::npos) << "no terminal control in a log";
  }
  line.Clear();
  EXPECT_EQ(h.printed.size(), 6u) << "plain lines are never erased";
}

TEST(ProgressLineTest, OnATerminalRedrawsInPlaceAndErasesAtTheEnd) {
  Harness h;
  {
    ProgressLine line = h.Make(Mode::kTerminal);
    for (int i = 1; i <= 30; ++i) {
      h.now += 100ms;
      line.Update(2, 8, "all", i / 30.0);
    }
    // 2.0 s to 3.0 s, one redraw every 200 ms.
    ASSERT_EQ(h.printed.size(), 6u);
    EXPECT_EQ(h.printed[0].rfind("\r\033[Kagentkv replay: arm 3/8 all", 0), 0u) << h.printed[0];
  }
  EXPECT_EQ(h.printed.back(), "\r\033[K") << "the destructor erases the line";
}

TEST(ProgressLineTest, QuietPrintsNothing) {
  Harness h;
  ProgressLine line = h.Make(Mode::kOff);
  for (int i = 0; i < 100; ++i) {
    h.now += 1s;
    line.Update(0, 1, "baseline", 0.5);
  }
  line.Clear();
  EXPECT_TRUE(h.printed.empty());
  EXPECT_EQ(ProgressLine::ModeForStderr(false), Mode::kOff);
}

}  // namespace
}  // namespace agentkv::tools
