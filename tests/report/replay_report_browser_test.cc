// The HTML report in a browser: headless Chromium lays out the page of a small replay with the
// default sixteen arms and a script added to a copy of the page measures it, at 1280 px (a
// laptop) and at 1400 px: nothing may be wider than the window (no page scroll, no scrolling
// table box), every table cell and chart must lie inside the window and every chart label
// inside its chart; the verdict must be on the first screen (its top within 900 px) and before
// the table; every mark of an arm (data-arm) must have that arm's one colour in every chart,
// and no two arms one colour; and no two text labels of one chart may overlap. Another test
// breaks a copy of the page in each of those ways and expects the script to say so. A last run
// takes a screenshot of the first 1280 x 900 px.
//
// The test needs the `agentkv` binary (AGENTKV_BINARY) and Chromium (`chromium` on PATH, or
// AGENTKV_CHROMIUM); without Chromium it fails, naming the package. Chromium runs with a private
// profile directory, host resolution mapped to nowhere and background networking off, so it opens
// no connection, and under `timeout`, so a hung browser fails the test instead of hanging the
// suite.
//
// AGENTKV_UPDATE_SCREENSHOT=1 writes the screenshot of the default replay's page (not the small
// one) to docs/report-1280.png, the picture in docs/REPLAY.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#ifndef AGENTKV_BINARY
#error "AGENTKV_BINARY must name the agentkv binary (see tests/report/CMakeLists.txt)"
#endif
#ifndef AGENTKV_SOURCE_DIR
#error "AGENTKV_SOURCE_DIR must name the source tree (see tests/report/CMakeLists.txt)"
#endif

namespace agentkv::report {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// Appended to a copy of the page: writes what it measured into <pre id="layout-check">, which
// --dump-dom prints. The first line is "viewport W columns C charts S problems N", then one
// line per problem. Colours are compared as painted (computed style): a line's stroke, any
// other mark's fill.
// Long: one script, so that every check reads the same laid-out page in one browser run.
constexpr const char* kLayoutCheck = R"(<script>(function () {
  const root = document.documentElement;
  const vw = root.clientWidth;
  const problems = [];
  if (root.scrollWidth > vw) problems.push('page is ' + root.scrollWidth + ' px wide');
  for (const box of document.querySelectorAll('.table-box')) {
    if (box.scrollWidth > box.clientWidth) {
      problems.push('table is ' + box.scrollWidth + ' px wide in ' + box.clientWidth + ' px');
    }
  }
  const name = (e) => e.tagName + ' "' + (e.textContent || '').trim().slice(0, 40) + '"';
  for (const e of document.querySelectorAll('th, td, svg')) {
    const r = e.getBoundingClientRect();
    if (r.left < -0.5 || r.right > vw + 0.5) {
      problems.push(name(e) + ' at x ' + r.left.toFixed(1) + '..' + r.right.toFixed(1));
    }
  }
  for (const t of document.querySelectorAll('svg text')) {
    const s = t.ownerSVGElement.getBoundingClientRect();
    const r = t.getBoundingClientRect();
    if (r.left < s.left - 0.5 || r.right > s.right + 0.5 || r.top < s.top - 0.5 ||
        r.bottom > s.bottom + 0.5) {
      problems.push(name(t) + ' outside its chart');
    }
  }
  // The verdict: on the first screen (its top within 900 px of the page's top), before the table.
  const verdict = document.getElementById('verdict');
  const table = document.querySelector('table.arms');
  if (!verdict || verdict.textContent.trim() === '') {
    problems.push('no verdict');
  } else {
    const top = verdict.getBoundingClientRect().top + window.scrollY;
    if (top > 900) problems.push('verdict starts at y ' + top.toFixed(0));
    if (table && !(verdict.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_FOLLOWING)) {
      problems.push('verdict after the table');
    }
  }
  // One colour per arm: every mark tagged data-arm paints its arm's colour, in every chart,
  // and no two arms share one.
  const colours = new Map();
  for (const e of document.querySelectorAll('svg [data-arm]')) {
    const style = getComputedStyle(e);
    const line = e.tagName === "line" || e.tagName === "polyline";
    const colour = line ? style.stroke : style.fill;
    if (!colours.has(e.dataset.arm)) colours.set(e.dataset.arm, new Set());
    colours.get(e.dataset.arm).add(colour);
  }
  const arms = document.querySelectorAll('table.arms thead th').length - 1;
  if (colours.size !== arms) problems.push(colours.size + ' arms coloured of ' + arms);
  const owner = new Map();
  for (const [arm, set] of colours) {
    if (set.size !== 1) problems.push('arm ' + arm + ' in ' + set.size + ' colours');
    for (const c of set) {
      if (owner.has(c) && owner.get(c) !== arm) {
        problems.push('arms ' + owner.get(c) + ' and ' + arm + ' share ' + c);
      }
      owner.set(c, arm);
    }
  }
  // No two labels of one chart overlap.
  for (const svg of document.querySelectorAll('svg')) {
    const boxes = [];
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (r.width > 0 && r.height > 0) boxes.push([t, r]);
    }
    for (let i = 0; i < boxes.length; ++i) {
      for (let j = i + 1; j < boxes.length; ++j) {
        const a = boxes[i][1], b = boxes[j][1];
        if (Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5 &&
            Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5) {
          problems.push('labels overlap in "' + svg.getAttribute('aria-label') + '": ' +
                        name(boxes[i][0]) + ' and ' + name(boxes[j][0]));
        }
      }
    }
  }
  const out = document.createElement('pre');
  out.id = 'layout-check';
  out.textContent = 'viewport ' + vw + ' columns ' +
      document.querySelectorAll('table.arms thead th').length + ' charts ' +
      document.querySelectorAll('svg').length + ' problems ' + problems.length + '\n' +
      problems.join('\n');
  document.body.appendChild(out);
})();</script>)";

// The default replay's sixteen arms, with few sessions: the page of a full run in 0.3 s. (The
// default run's own page, of wider numbers, fits too: it was checked once by pointing this at
// `replay --json ''`; the suite keeps the faster run.)
constexpr const char* kSmallReplay = "replay --sessions 6 --json ''";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The exit code of `command` run by the shell, -1 when it did not exit normally.
int Shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// AGENTKV_CHROMIUM, else the first executable `chromium` on PATH.
std::optional<fs::path> FindChromium() {
  if (const char* chosen = std::getenv("AGENTKV_CHROMIUM"); chosen != nullptr && *chosen != 0) {
    return fs::path(chosen);
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / "chromium";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

class ReplayReportBrowserTest : public ::testing::Test {
 protected:
  // The small replay's page, written once for the suite (it is the same for every test).
  static void SetUpTestSuite() {
    suite_dir_ = fs::path(::testing::TempDir()) / ("agentkv_browser_" + std::to_string(getpid()));
    fs::remove_all(suite_dir_);
    fs::create_directories(suite_dir_);
    small_report_ = WriteReport(kSmallReplay, suite_dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(suite_dir_); }

  // Writes the report of `agentkv <args>` into `dir` and returns its path.
  static fs::path WriteReport(const std::string& args, const fs::path& dir) {
    const fs::path html = dir / "report.html";
    const int code =
        Shell("timeout 120 '" + std::string(AGENTKV_BINARY) + "' " + args + " --quiet --html '" +
              html.string() + "' >'" + (dir / "replay.out").string() + "' 2>&1");
    EXPECT_EQ(code, 0) << ReadFile(dir / "replay.out");
    return html;
  }

  void SetUp() override {
    chromium_ = FindChromium();
    if (!chromium_) {
      // A missing browser is a broken setup, not a reason to pass: the layout is what this
      // checks.
      FAIL() << "chromium not found on PATH (Debian package chromium, installed by "
                "scripts/install-deps.sh; or set AGENTKV_CHROMIUM): the report's layout in a "
                "browser cannot be checked";
    }
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) / ("agentkv_browser_" + std::string(info->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Runs Chromium headless on `page` in a window of `width` x `height` with `action`
  // ("--dump-dom" or "--screenshot=FILE"); returns its stdout. Each run gets a fresh profile
  // (and HOME) inside the test directory, removed with it.
  std::string Chromium(const fs::path& page, int width, int height,
                       const std::string& action) const {
    const fs::path profile = dir_ / ("profile-" + std::to_string(runs_++));
    fs::create_directories(profile);
    const fs::path out = dir_ / "chromium.out";
    const fs::path err = dir_ / "chromium.err";
    const std::string command =
        "HOME='" + profile.string() + "' XDG_CONFIG_HOME='" + profile.string() +
        "' XDG_CACHE_HOME='" + profile.string() + "' timeout -k 5 60 '" + chromium_->string() +
        "' --headless=new --no-sandbox --disable-gpu --hide-scrollbars --no-first-run"
        " --no-default-browser-check --disable-extensions --disable-sync --disable-default-apps"
        " --disable-background-networking --disable-component-update --disable-breakpad"
        " --disable-dev-shm-usage --host-resolver-rules='MAP * ~NOTFOUND'"
        " --user-data-dir='" +
        profile.string() + "' --window-size=" + std::to_string(width) + "," +
        std::to_string(height) + " " + action + " 'file://" + page.string() + "' >'" +
        out.string() + "' 2>'" + err.string() + "'";
    const int code = Shell(command);
    EXPECT_EQ(code, 0) << "chromium failed (124: timed out): " << ReadFile(err);
    return ReadFile(out);
  }

  // What the layout script reported for the report at `width` px.
  std::string LayoutAt(const fs::path& report, int width) const {
    std::string page = ReadFile(report);
    const size_t body_end = page.rfind("</body>");
    EXPECT_NE(body_end, std::string::npos);
    if (body_end == std::string::npos) return "";
    page.insert(body_end, kLayoutCheck);
    const fs::path check = dir_ / "check.html";
    std::ofstream(check) << page;
    const std::string dom = Chromium(check, width, 900, "--dump-dom");
    const size_t begin = dom.find("<pre id=\"layout-check\">");
    const size_t end = dom.find("</pre>", begin);
    EXPECT_NE(begin, std::string::npos) << "the layout script did not run:\n" << dom.substr(0, 500);
    if (begin == std::string::npos || end == std::string::npos) return "";
    const size_t text = begin + std::string("<pre id=\"layout-check\">").size();
    return dom.substr(text, end - text);
  }

  static inline fs::path suite_dir_;
  static inline fs::path small_report_;
  std::optional<fs::path> chromium_;
  fs::path dir_;
  mutable int runs_ = 0;
};

// The default replay's page: 16 arm columns (and the metric column); 4 charts, 15 session-time
// panels (every arm but the baseline) and 16 KV panels.
constexpr const char* kFullPage = "columns 17 charts 35 problems 0\n";

TEST_F(ReplayReportBrowserTest, NothingOverflowsAt1280Px) {
  const std::string layout = LayoutAt(small_report_, 1280);
  EXPECT_EQ(layout, std::string("viewport 1280 ") + kFullPage);
}

TEST_F(ReplayReportBrowserTest, NothingOverflowsAt1400Px) {
  const std::string layout = LayoutAt(small_report_, 1400);
  EXPECT_EQ(layout, std::string("viewport 1400 ") + kFullPage);
}

TEST_F(ReplayReportBrowserTest, ChecksWouldSeeATableTooWideForTheWindow) {
  // At 1000 px the sixteen columns do not fit: the table scrolls in its box (the page itself
  // does not), and the check says so. Guards the check itself against passing vacuously.
  const std::string layout = LayoutAt(small_report_, 1000);
  EXPECT_THAT(layout, HasSubstr("viewport 1000 columns 17 charts 35 problems "));
  EXPECT_THAT(layout, Not(HasSubstr("problems 0\n")));
  EXPECT_THAT(layout, HasSubstr("\ntable is "));
  EXPECT_THAT(layout, Not(HasSubstr("page is")));
}

// `text` with the first `from` replaced by `to` (the test fails when there is none).
std::string ReplaceFirst(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST_F(ReplayReportBrowserTest, ChecksWouldSeeALateVerdictAColourClashAndOverlappingLabels) {
  // The page broken three ways: the verdict moved below the table (and a screen of text), one
  // mark of arm 1 painted in arm 0's colour, a label drawn twice at one place. Guards the
  // checks against passing vacuously.
  std::string page = ReadFile(small_report_);
  const size_t begin = page.find("<section class=\"verdict\"");
  const size_t end = page.find("</section>", begin);
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string verdict = page.substr(begin, end + 10 - begin);
  page.erase(begin, verdict.size());
  page = ReplaceFirst(page, "<h2 id=\"charts\">",
                      "<div style=\"height: 1000px\"></div>" + verdict + "<h2 id=\"charts\">");
  page = ReplaceFirst(page, "data-arm=\"1\" fill=\"#f28e2b\"", "data-arm=\"1\" fill=\"#4e79a7\"");
  page = ReplaceFirst(page, "</svg>",
                      "<text x=\"40\" y=\"40\" font-size=\"12\">twice</text>"
                      "<text x=\"44\" y=\"42\" font-size=\"12\">twice</text></svg>");
  const fs::path broken = dir_ / "broken.html";
  std::ofstream(broken) << page;
  const std::string layout = LayoutAt(broken, 1280);
  EXPECT_THAT(layout, HasSubstr("\nverdict starts at y "));
  EXPECT_THAT(layout, HasSubstr("\nverdict after the table"));
  EXPECT_THAT(layout, HasSubstr("\narm 1 in 2 colours"));
  EXPECT_THAT(layout, HasSubstr("\narms 0 and 1 share rgb(78, 121, 167)"));
  EXPECT_THAT(layout, ::testing::ContainsRegex("\nlabels overlap in \"[^\"]+\": text \"twice\" and "
                                               "text \"twice\""));
}

TEST_F(ReplayReportBrowserTest, ScreenshotOfTheFirstScreen) {
  const bool update = std::getenv("AGENTKV_UPDATE_SCREENSHOT") != nullptr &&
                      std::string(std::getenv("AGENTKV_UPDATE_SCREENSHOT")) == "1";
  // The docs show the default replay; the check runs on the small one.
  const fs::path report = update ? WriteReport("replay --json ''", dir_) : small_report_;
  const fs::path png = dir_ / "report-1280.png";
  Chromium(report, 1280, 900, "--screenshot='" + png.string() + "'");
  const std::string image = ReadFile(png);
  ASSERT_GE(image.size(), 24u) << "no screenshot";
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // IHDR: width and height, big-endian, at bytes 16 and 20.
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(image[at + i]);
    return v;
  };
  EXPECT_EQ(be32(16), 1280u);
  EXPECT_EQ(be32(20), 900u);
  EXPECT_LT(image.size(), 300'000u) << "the screenshot is committed: keep it small";
  if (update) {
    fs::copy_file(png, fs::path(AGENTKV_SOURCE_DIR) / "docs" / "report-1280.png",
                  fs::copy_options::overwrite_existing);
  }
}

}  // namespace
}  // namespace agentkv::report
