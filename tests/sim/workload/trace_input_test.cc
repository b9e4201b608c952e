// Tests of the trace readers' shared input layer: bounded, streamed JSON lines (checked against
// a whole-line reference model on random traces), one streamed JSON document, locating a JSON
// path's line, the bounded field readers (null optional fields are absent ones), and trace
// files, plain or gzip (corrupt and truncated gzip named, a file read again from its start).
#include "agentkv/sim/workload/trace_input.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/base/rng.h"
#include "tests/sim/trace_files_for_tests.h"

namespace agentkv::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_support::Gzip;
using testing_support::WriteBytes;

// What ForEachJsonLine reported: the lines it visited, as (line, compact JSON), and its status.
struct Walk {
  std::vector<std::pair<int64_t, std::string>> lines;
  Status status;
};

Walk WalkLines(const std::string& text, int64_t max_line_bytes = kMaxTraceLineBytes) {
  std::istringstream in(text);
  Walk walk;
  walk.status = ForEachJsonLine(
      in, "t.jsonl",
      [&](const boost::json::value& value, int64_t line) {
        walk.lines.emplace_back(line, boost::json::serialize(value));
        return Status::Ok();
      },
      max_line_bytes);
  return walk;
}

// The reference: the whole text split at newlines, each non-blank line parsed whole.
Walk ReferenceWalk(const std::string& text, int64_t max_line_bytes) {
  Walk walk;
  std::istringstream in(text);
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (static_cast<int64_t>(line.size()) > max_line_bytes) {
      walk.status =
          InvalidArgumentError("t.jsonl:" + std::to_string(number) + ": line longer than " +
                               std::to_string(max_line_bytes) + " bytes");
      return walk;
    }
    if (line.find_first_not_of(" \t\r\n\f\v") == std::string::npos) continue;
    std::error_code ec;
    const boost::json::value value = boost::json::parse(line, ec);
    if (ec) {
      walk.status = InvalidArgumentError("t.jsonl:" + std::to_string(number) + ": malformed JSON");
      return walk;
    }
    walk.lines.emplace_back(number, boost::json::serialize(value));
  }
  return walk;
}

// A random line: a JSON object, blanks, padding that crosses 64 KiB read chunks, a malformed
// line, or (rarely) a valid object padded past `max_line_bytes`.
std::string RandomLine(Rng& rng, int64_t max_line_bytes) {
  const auto pad = [&](int64_t most) {
    return std::string(static_cast<size_t>(rng.Uniform(0, most)), ' ');
  };
  const std::string object = "{\"timestamp\":" + pad(3) +
                             std::to_string(rng.Uniform(0, 1'000'000)) + "," + pad(2) +
                             "\"hash_ids\": [" + std::to_string(rng.Uniform(0, 99)) + ", " +
                             std::to_string(rng.Next()) + "]}";
  switch (rng.Uniform(0, 10)) {
    case 0:
      return "";
    case 1:
      return pad(5) + (rng.Bernoulli(0.5) ? "\r" : "\f\v\t");
    case 2:
      return pad(70'000) + object + pad(70'000);
    case 3:
      return object.substr(
          0, static_cast<size_t>(rng.Uniform(1, static_cast<int64_t>(object.size()) - 1)));
    case 4:
      return object + pad(3) + "x";
    case 5:
      // Past the bound (small bounds only: the 64 MiB one is the readers' tests' business).
      if (max_line_bytes > 300'000) return object;
      return object + std::string(static_cast<size_t>(max_line_bytes), ' ');
    case 6: {
      // Exactly at the bound, or one byte either side of it (small bounds only).
      const int64_t length = std::min<int64_t>(max_line_bytes, 300'000) + rng.Uniform(-1, 1);
      return object + std::string(static_cast<size_t>(std::max<int64_t>(
                                      0, length - static_cast<int64_t>(object.size()))),
                                  ' ');
    }
    default:
      return pad(3) + object + pad(3) + (rng.Bernoulli(0.3) ? "\r" : "");
  }
}

// Model-based: on random traces, the streamed walk visits the same lines with the same values
// and stops at the same line with the same kind of error as the whole-line reference.
TEST(TraceInputTest, StreamedLinesMatchAWholeLineReference) {
  const char* env = std::getenv("AGENTKV_MODEL_SEED");
  const uint64_t first = env != nullptr ? std::strtoull(env, nullptr, 10) : 1;
  const uint64_t count = env != nullptr ? 1 : 60;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed) +
                 " (rerun: AGENTKV_MODEL_SEED=" + std::to_string(seed) + ")");
    Rng rng(seed);
    const int64_t max_line_bytes =
        rng.Bernoulli(0.5) ? kMaxTraceLineBytes : rng.Uniform(60, 300'000);
    std::string text;
    const int64_t lines = rng.Uniform(0, 12);
    for (int64_t i = 0; i < lines; ++i) {
      text += RandomLine(rng, max_line_bytes);
      if (i + 1 < lines || rng.Bernoulli(0.5)) text += '\n';
    }
    const Walk got = WalkLines(text, max_line_bytes);
    const Walk want = ReferenceWalk(text, max_line_bytes);
    EXPECT_EQ(got.lines, want.lines);
    EXPECT_EQ(got.status.code(), want.status.code());
    EXPECT_THAT(got.status.message(), StartsWith(want.status.message())) << got.status;
  }
}

TEST(TraceInputTest, LinesAreNumberedFromOneCountingBlankLines) {
  const Walk walk = WalkLines("\n  \n{\"a\": 1}\r\n\f\n[2]");
  ASSERT_TRUE(walk.status.ok()) << walk.status;
  EXPECT_THAT(walk.lines, ElementsAre(std::pair<int64_t, std::string>{3, "{\"a\":1}"},
                                      std::pair<int64_t, std::string>{5, "[2]"}));
}

TEST(TraceInputTest, VisitErrorsAreLocatedAndStopTheWalk) {
  std::istringstream in("1\n2\n3\n");
  int visited = 0;
  const Status s = ForEachJsonLine(in, "t.jsonl", [&](const boost::json::value& v, int64_t) {
    ++visited;
    return v.as_int64() == 2 ? InvalidArgumentError("field \"x\": bad") : Status::Ok();
  });
  EXPECT_EQ(s, InvalidArgumentError("t.jsonl:2: field \"x\": bad"));
  EXPECT_EQ(visited, 2);
}

// The bound is enforced as the line streams: the scan stops at the bound and never reads the
// rest of the input.
TEST(TraceInputTest, ALongLineStopsTheScanAtTheBound) {
  std::istringstream in("{\"a\": 1}\n" + std::string(1'000'000, '7') + "\n{}\n");
  const Status s = ForEachJsonLine(
      in, "t.jsonl", [](const boost::json::value&, int64_t) { return Status::Ok(); }, 1000);
  EXPECT_EQ(s, InvalidArgumentError("t.jsonl:2: line longer than 1000 bytes"));
  // Only the chunk that passed the bound was read.
  EXPECT_LT(in.tellg(), 70'000);
}

TEST(TraceInputTest, ADocumentMaySpanLinesAndIsBoundedPerLine) {
  std::istringstream in("{\"a\":\n [1,\n 2]}\n\n");
  StatusOr<boost::json::value> doc = ReadJsonDocument(in, "t.json");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ(boost::json::serialize(*doc), "{\"a\":[1,2]}");
  // A newline ends a number: "12\n34" is two values, not 1234.
  std::istringstream two("12\n34");
  EXPECT_EQ(ReadJsonDocument(two, "t.json").status(),
            InvalidArgumentError(
                "t.json:2: malformed JSON at column 1: extra data after the top-level value"));
  std::istringstream wide("[1,\n" + std::string(100, ' ') + "2]");
  EXPECT_EQ(ReadJsonDocument(wide, "t.json", 50).status(),
            InvalidArgumentError("t.json:2: line longer than 50 bytes"));
}

int64_t LineOf(const std::string& text, std::string_view path) {
  std::istringstream in(text);
  return FindJsonPathLine(in, path).value_or(-1);
}

TEST(TraceInputTest, FindsTheLineOfAJsonPath) {
  const std::string text =
      "{\"id\": \"x\",\n"
      " \"requests\": [\n"
      "  {\"t\": 0, \"in\": 1},\n"
      "  {\"t\": 1,\n"
      "   \"in\": 5, \"requests\": [{\"in\": 2}, \n"
      "{\"in\": 3}]}]}";
  EXPECT_EQ(LineOf(text, ""), 1);
  EXPECT_EQ(LineOf(text, "id"), 1);
  EXPECT_EQ(LineOf(text, "requests"), 2);
  EXPECT_EQ(LineOf(text, "requests[0].in"), 3);
  EXPECT_EQ(LineOf(text, "requests[1]"), 4);
  EXPECT_EQ(LineOf(text, "requests[1].in"), 5);
  EXPECT_EQ(LineOf(text, "requests[1].requests[1].in"), 6);
  // Missing values fall back to their longest existing prefix.
  EXPECT_EQ(LineOf(text, "requests[1].out"), 4);
  EXPECT_EQ(LineOf(text, "requests[7].in"), 2);
  EXPECT_EQ(LineOf(text, "requests[x"), -1);
  EXPECT_EQ(LineOf("", "requests"), -1);
  // A key cut by a read chunk is still matched.
  const std::string padded = "{\"p\": \"" + std::string(65536 - 10, 'p') + "\",\n\"requests\": 7}";
  EXPECT_EQ(LineOf(padded, "requests"), 2);
}

TEST(TraceInputTest, FieldReadersApplyTheRuleOfTheirKind) {
  const auto json = [](std::string_view text) { return boost::json::parse(text); };
  EXPECT_EQ(ReadTokens(json("1099511627776"), "in").value(), kMaxTokens);
  EXPECT_EQ(ReadTokens(json("9223372036854775807"), "in").status().message(),
            "in: 9223372036854775807 is out of range [0, 1099511627776] tokens");
  EXPECT_EQ(ReadTokens(json("-1"), "in").status().message(),
            "in: -1 is out of range [0, 1099511627776] tokens");
  EXPECT_EQ(ReadTokens(json("2.0"), "in").status().message(),
            "in: expected a non-negative integer, got 2E0");
  EXPECT_EQ(ReadCount(json("4294967296"), "turn", 1).value(), kMaxCount);
  EXPECT_EQ(ReadCount(json("0"), "turn", 1).status().message(),
            "turn: expected an integer >= 1, got 0");
  EXPECT_EQ(ReadCount(json("18446744073709551615"), "n").status().message(),
            "n: 18446744073709551615 is out of range [0, 4294967296]");
  EXPECT_EQ(ReadSeconds(json("1.25"), "t").value(), TimeNs(1'250'000'000));
  EXPECT_EQ(ReadSeconds(json("1e999"), "t").status().message(),
            "t: inf is out of range [0, 31536000] s");
  EXPECT_EQ(ReadSeconds(json("null"), "t").status().message(),
            "t: expected a number of seconds, got null");
  EXPECT_EQ(ReadMillis(json("18446744073709551615"), "ts").status().message(),
            "ts: 1.8446744073709552e+19 is out of range [0, 31536000000] ms");
  EXPECT_EQ(ReadHashIds(json("[0, 18446744073709551615]"), "ids").value(),
            (std::vector<uint64_t>{0, 18446744073709551615ULL}));
  EXPECT_EQ(ReadHashIds(json("[1, -1]"), "ids").status().message(),
            "ids: expected an array of non-negative integers, element 1 is -1");
  EXPECT_TRUE(CheckHashIdCount("ids", 3, "in", 129, 64).ok());
  EXPECT_EQ(CheckHashIdCount("ids", 3, "in", 128, 64).message(),
            "ids: 3 ids for in 128, more than ceil(128 / 64) = 2");
}

TEST(TraceInputTest, TraceFieldsNameFieldsAsTheirFormatLocatesThem) {
  const boost::json::object obj = boost::json::parse(R"({"in": 3, "t": 1.5})").as_object();
  const TraceFields record = TraceFields::OfRecord(obj);
  EXPECT_EQ(record.Name("in"), "field \"in\"");
  const TraceFields top = TraceFields::AtPath(obj, "");
  EXPECT_EQ(top.Name("in"), "in");
  const TraceFields nested = TraceFields::AtPath(obj, "requests[2]");
  EXPECT_EQ(nested.Name("in"), "requests[2].in");
  EXPECT_EQ(nested.Error("in", "too big").message(), "requests[2].in: too big");
  EXPECT_EQ(nested.Tokens("in").value(), 3);
  EXPECT_EQ(nested.Seconds("t").value(), TimeNs(1'500'000'000));
  EXPECT_EQ(nested.Find("out"), nullptr);
}

TEST(TraceInputTest, TraceFieldsDescribeAMissingFieldAsAMistypedOne) {
  const boost::json::object obj =
      boost::json::parse(R"({"s": 7, "a": {}, "id": -2, "t": "x"})").as_object();
  const TraceFields f = TraceFields::OfRecord(obj);
  EXPECT_EQ(f.Tokens("in").status().message(),
            "field \"in\": missing (expected a non-negative integer)");
  EXPECT_EQ(f.Count("turn", 1).status().message(),
            "field \"turn\": missing (expected an integer >= 1)");
  EXPECT_EQ(f.Millis("ts").status().message(),
            "field \"ts\": missing (expected a number of milliseconds)");
  EXPECT_EQ(f.Seconds("t").status().message(),
            "field \"t\": expected a number of seconds, got \"x\"");
  EXPECT_EQ(f.HashIds("ids").status().message(),
            "field \"ids\": missing (expected an array of non-negative integers)");
  EXPECT_EQ(f.String("s").status().message(), "field \"s\": expected a string, got 7");
  EXPECT_EQ(f.Array("a").status().message(), "field \"a\": expected an array, got {}");
  EXPECT_EQ(f.Id("id", -1, "expected -1 or more").status().message(),
            "field \"id\": expected -1 or more, got -2");
  EXPECT_EQ(f.Id("none", 0, "expected an id").status().message(),
            "field \"none\": missing (expected an id)");
  // Optional fields are zero or empty when absent, and checked when present.
  EXPECT_EQ(f.OptionalSeconds("think").value(), TimeNs());
  EXPECT_EQ(f.OptionalString("stop").value(), "");
  EXPECT_FALSE(f.OptionalString("s").ok());
}

TEST(TraceInputTest, NullOptionalFieldsAreAbsentAndNullRequiredOnesMistyped) {
  const boost::json::object obj =
      boost::json::parse(R"({"t": null, "ms": null, "s": null, "l": null, "x": 0})").as_object();
  const TraceFields f = TraceFields::OfRecord(obj);
  EXPECT_FALSE(f.Has("t"));
  EXPECT_FALSE(f.Has("absent"));
  EXPECT_TRUE(f.Has("x"));
  EXPECT_NE(f.Find("t"), nullptr);  // Present, as null.
  EXPECT_EQ(f.OptionalSeconds("t").value(), TimeNs());
  EXPECT_EQ(f.OptionalMillis("ms").value(), TimeNs());
  EXPECT_EQ(f.OptionalString("s").value(), "");
  EXPECT_TRUE(f.OptionalStrings("l").value().empty());
  // A required field that is null is a value of the wrong kind, not a missing one.
  EXPECT_EQ(f.Seconds("t").status().message(),
            "field \"t\": expected a number of seconds, got null");
  EXPECT_EQ(f.String("s").status().message(), "field \"s\": expected a string, got null");
  EXPECT_EQ(f.Array("l").status().message(), "field \"l\": expected an array, got null");
}

// ---- Trace files, plain and gzip ---------------------------------------------------------

class TraceFileTest : public testing_support::ScratchDirTest {
 protected:
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // The lines ForEachJsonLine visits in the file at `path`, or its error.
  Walk WalkFile(const std::string& path) {
    Walk walk;
    StatusOr<TraceFile> file = TraceFile::Open(path);
    if (!file.ok()) {
      walk.status = file.status();
      return walk;
    }
    walk.status =
        ForEachJsonLine(file->stream(), path, [&](const boost::json::value& value, int64_t line) {
          walk.lines.emplace_back(line, boost::json::serialize(value));
          return Status::Ok();
        });
    return walk;
  }
};

// Random JSON Lines traces read the same from a plain file, a gzip file under any name, and a
// file of several gzip members (what `cat a.gz b.gz` makes).
TEST_F(TraceFileTest, GzipFilesReadAsTheirPlainText) {
  Rng rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    std::string text;
    const int64_t lines = rng.Uniform(0, 60);
    for (int64_t i = 0; i < lines; ++i) {
      text += rng.Bernoulli(0.1) ? std::string("   ")
                                 : "{\"i\": " + std::to_string(i) + ", \"ids\": [" +
                                       std::to_string(rng.Uniform(0, 1 << 20)) + "]}";
      text += "\n";
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    WriteBytes(dir_ / "plain.jsonl", text);
    WriteBytes(dir_ / "named.jsonl.gz", Gzip(text));
    WriteBytes(dir_ / "unnamed.jsonl", Gzip(text));
    const size_t half = text.size() / 2;
    WriteBytes(dir_ / "members.gz", Gzip(text.substr(0, half)) + Gzip(text.substr(half)));
    const Walk plain = WalkFile(Path("plain.jsonl"));
    ASSERT_TRUE(plain.status.ok()) << plain.status;
    for (const char* name : {"named.jsonl.gz", "unnamed.jsonl", "members.gz"}) {
      const Walk gz = WalkFile(Path(name));
      ASSERT_TRUE(gz.status.ok()) << name << ": " << gz.status;
      EXPECT_EQ(gz.lines, plain.lines) << name;
    }
    StatusOr<TraceFile> file = TraceFile::Open(Path("unnamed.jsonl"));
    ASSERT_TRUE(file.ok());
    EXPECT_TRUE(file->compressed());
    EXPECT_FALSE(TraceFile::Open(Path("plain.jsonl"))->compressed());
  }
}

TEST_F(TraceFileTest, CorruptAndTruncatedGzipAreNamedErrors) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "{\"i\": " + std::to_string(i * 7919 % 10007) + "}\n";
  const std::string gz = Gzip(text);
  ASSERT_GT(gz.size(), 200u);

  WriteBytes(dir_ / "truncated.gz", gz.substr(0, gz.size() / 2));
  const Walk truncated = WalkFile(Path("truncated.gz"));
  EXPECT_EQ(truncated.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(truncated.status.message(), StartsWith(Path("truncated.gz") + ":"));
  EXPECT_THAT(truncated.status.message(), HasSubstr(": cannot decompress: truncated gzip data"));

  std::string corrupt = gz;
  for (size_t i = 100; i < 140; ++i) corrupt[i] = static_cast<char>(~corrupt[i]);
  WriteBytes(dir_ / "corrupt.gz", corrupt);
  const Walk bad = WalkFile(Path("corrupt.gz"));
  EXPECT_EQ(bad.status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status.message(), HasSubstr(": cannot decompress: "));

  // Only the two magic bytes: a gzip file without a header.
  WriteBytes(dir_ / "magic.gz", std::string("\x1f\x8b", 2));
  const Walk magic = WalkFile(Path("magic.gz"));
  EXPECT_EQ(magic.status.message(), Path("magic.gz") + ":1: cannot decompress: bad gzip header");

  // One byte, and no byte at all, are plain (empty or one-character) files.
  WriteBytes(dir_ / "one.jsonl", "\x1f");
  EXPECT_FALSE(TraceFile::Open(Path("one.jsonl"))->compressed());
  WriteBytes(dir_ / "empty.jsonl", "");
  const Walk empty = WalkFile(Path("empty.jsonl"));
  EXPECT_TRUE(empty.status.ok()) << empty.status;
  EXPECT_TRUE(empty.lines.empty());
}

TEST_F(TraceFileTest, RewindStartsTheFileOver) {
  for (const bool compressed : {false, true}) {
    SCOPED_TRACE(compressed ? "gzip" : "plain");
    const std::string text = "first line\nsecond line\n";
    WriteBytes(dir_ / "t", compressed ? Gzip(text) : text);
    StatusOr<TraceFile> file = TraceFile::Open(Path("t"));
    ASSERT_TRUE(file.ok()) << file.status();
    std::string line;
    for (int round = 0; round < 3; ++round) {
      std::getline(file->stream(), line);
      EXPECT_EQ(line, "first line");
      std::getline(file->stream(), line);
      EXPECT_EQ(line, "second line");
      EXPECT_FALSE(std::getline(file->stream(), line));
      ASSERT_TRUE(file->Rewind().ok());
    }
  }
}

TEST_F(TraceFileTest, MissingFilesAndDirectoriesAreNamed) {
  EXPECT_EQ(
      TraceFile::Open(Path("none")).status(),
      NotFoundError("cannot open trace file \"" + Path("none") + "\": No such file or directory"));
  EXPECT_EQ(
      TraceFile::Open(dir_.string()).status(),
      InvalidArgumentError("cannot read trace file \"" + dir_.string() + "\": Is a directory"));
}

// A gzip file that inflates far past the line bound is refused at the bound, after reading no
// more than the bound's worth of it: memory follows the line bound, not the inflated size.
TEST_F(TraceFileTest, AnInflatingFileStopsAtTheLineBound) {
  const std::string blanks(size_t{8} << 20, ' ');
  WriteBytes(dir_ / "bomb.gz", Gzip(blanks));
  StatusOr<TraceFile> file = TraceFile::Open(Path("bomb.gz"));
  ASSERT_TRUE(file.ok());
  const Status s = ForEachJsonLine(
      file->stream(), "bomb.gz", [](const boost::json::value&, int64_t) { return Status::Ok(); },
      /*max_line_bytes=*/1 << 20);
  EXPECT_EQ(s, InvalidArgumentError("bomb.gz:1: line longer than 1048576 bytes"));
}

}  // namespace
}  // namespace agentkv::sim
