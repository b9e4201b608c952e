#include "tools/agentkv/progress_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace agentkv::tools {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
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

TEST(ProgressLineTest, NamesTheCommandAndItsUnitOfWork) {
  Harness h;
  ProgressLine line(
      Mode::kLines, [&h] { return h.now; },
      [&h](std::string_view text) { h.printed.emplace_back(text); }, "capacity", "search");
  h.now += 3s;
  line.Update(1, 4, "agentkv seed 2 probe 3 at 120/h", 0.5);
  ASSERT_EQ(h.printed.size(), 1U);
  EXPECT_EQ(h.printed[0],
            "agentkv capacity: search 2/4 agentkv seed 2 probe 3 at 120/h  started  3 s\n");
}

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

// Runs `arms` arms one after the other, each `seconds` long, reporting every 100 ms as the
// replay does: 0 at the start, then the fraction done, 1 at the end.
void RunSequentially(Harness& h, ProgressLine& line, size_t arms, int seconds) {
  const char* names[] = {"baseline", "+admission", "all"};
  for (size_t arm = 0; arm < arms; ++arm) {
    line.Update(arm, arms, names[arm % 3], 0.0);
    for (int tick = 1; tick <= seconds * 10; ++tick) {
      h.now += 100ms;
      line.Update(arm, arms, names[arm % 3], tick / (seconds * 10.0));
    }
  }
}

TEST(ProgressLineTest, WithoutATerminalPrintsArmStartsAndFinishesAndALineEveryFiveSeconds) {
  Harness h;
  ProgressLine line = h.Make(Mode::kLines);
  RunSequentially(h, line, 3, 8);
  // Silent for 2 s (the first arm's start too); then a line at most every 5 s between the
  // lines of each start and finish.
  EXPECT_THAT(h.printed,
              ElementsAre("agentkv replay: arm 1/3 baseline                25.0%  2 s\n",
                          "agentkv replay: arm 1/3 baseline                87.5%  7 s\n",
                          "agentkv replay: arm 1/3 baseline             finished  8 s\n",
                          "agentkv replay: arm 2/3 +admission            started  8 s\n",
                          "agentkv replay: arm 2/3 +admission              62.5%  13 s\n",
                          "agentkv replay: arm 2/3 +admission           finished  16 s\n",
                          "agentkv replay: arm 3/3 all                   started  16 s\n",
                          "agentkv replay: arm 3/3 all                     62.5%  21 s\n",
                          "agentkv replay: arm 3/3 all                  finished  24 s\n"));
  for (const std::string& text : h.printed) {
    EXPECT_EQ(text.find('\r'), std::string::npos) << "no terminal control in a log";
  }
  line.Clear();
  EXPECT_EQ(h.printed.size(), 9u) << "plain lines are never erased";
}

TEST(ProgressLineTest, WithArmsInParallelShowsTheFirstArmStillRunning) {
  Harness h;
  ProgressLine line = h.Make(Mode::kLines);
  h.now += 3s;
  line.Update(0, 2, "baseline", 0.0);
  line.Update(1, 2, "all", 0.0);
  line.Update(1, 2, "all", 1.0);  // The second arm is done first.
  h.now += 6s;
  line.Update(0, 2, "baseline", 0.5);
  line.Update(1, 2, "all", 1.0);  // A repeated finish prints nothing.
  h.now += 6s;
  line.Update(0, 2, "baseline", 1.0);
  EXPECT_THAT(h.printed,
              ElementsAre("agentkv replay: arm 1/2 baseline              started  3 s\n",
                          "agentkv replay: arm 2/2 all                   started  3 s\n",
                          "agentkv replay: arm 2/2 all                  finished  3 s\n",
                          "agentkv replay: arm 1/2 baseline                50.0%  9 s\n",
                          "agentkv replay: arm 1/2 baseline             finished  15 s\n"));
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
    // Starts and finishes redraw the line like any report; nothing scrolls.
    h.now += 1s;
    line.Update(3, 8, "oracle", 0.0);
    for (const std::string& text : h.printed) EXPECT_EQ(text.find('\n'), std::string::npos);
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
