#include "agentkv/protocol/json_splice.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "protocol_test_support.h"

namespace agentkv::protocol {
namespace {

using testing_support::ExpectInputError;
using testing_support::ForEachMalformedVariant;
using testing_support::ReadTestdata;

std::string Set(std::string_view text, std::string_view key, std::string_view value) {
  StatusOr<std::string> out = SetTopLevelField(text, key, value);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::string();
}

std::string Remove(std::string_view text, std::string_view key) {
  StatusOr<std::string> out = RemoveTopLevelField(text, key);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::string();
}

TEST(JsonSpliceTest, ReplacesAnExistingValueKeepingEveryOtherByte) {
  const std::string body =
      "{ \"x_unknown\" : {\"rid\": \"inner\", \"s\": \"}{][\\\"\"},\n"
      "  \"rid\"  :   \"old\" ,\"temperature\": 1.0e0, \"n\": -0.50,"
      " \"u\": \"\\u00e9\\ud83d\\ude00\" }\n";
  EXPECT_EQ(Set(body, "rid", "\"req-1:0\""),
            "{ \"x_unknown\" : {\"rid\": \"inner\", \"s\": \"}{][\\\"\"},\n"
            "  \"rid\"  :   \"req-1:0\" ,\"temperature\": 1.0e0, \"n\": -0.50,"
            " \"u\": \"\\u00e9\\ud83d\\ude00\" }\n");
}

TEST(JsonSpliceTest, InsertsAfterTheLastMemberWhenAbsent) {
  EXPECT_EQ(Set("{\"a\": [1, {\"b\": 2}] }", "session_id", "\"s-1\""),
            "{\"a\": [1, {\"b\": 2}],\"session_id\":\"s-1\" }");
  EXPECT_EQ(Set("{}", "rid", "\"x\""), "{\"rid\":\"x\"}");
  EXPECT_EQ(Set(" {\n} ", "rid", "7"), " {\n\"rid\":7} ");
  // The key is escaped on insertion.
  EXPECT_EQ(Set("{}", "a\"b", "null"), "{\"a\\\"b\":null}");
}

TEST(JsonSpliceTest, ReplacesValuesOfEveryKindAndNestedContainers) {
  EXPECT_EQ(Set(R"({"rid":null})", "rid", R"("x")"), R"({"rid":"x"})");
  EXPECT_EQ(Set(R"({"rid":["a","b"],"z":1})", "rid", R"("x")"), R"({"rid":"x","z":1})");
  EXPECT_EQ(Set(R"({"rid":{"a":{"b":"}"}},"z":1})", "rid", R"("x")"), R"({"rid":"x","z":1})");
  EXPECT_EQ(Set(R"({"rid":true})", "rid", R"({"nested": [1]})"), R"({"rid":{"nested": [1]}})");
  EXPECT_EQ(Set(R"({"rid":-1.5e+3})", "rid", "0"), R"({"rid":0})");
}

TEST(JsonSpliceTest, MatchesKeysWrittenWithEscapes) {
  EXPECT_EQ(Set(R"({"\u0072id": "old", "r\"id": 1})", "rid", R"("new")"),
            R"({"\u0072id": "new", "r\"id": 1})");
}

TEST(JsonSpliceTest, ReplacesEveryDuplicateSoFirstAndLastWinReadersAgree) {
  EXPECT_EQ(Set(R"({"rid":"a","x":1,"rid":"b"})", "rid", R"("c")"),
            R"({"rid":"c","x":1,"rid":"c"})");
  EXPECT_EQ(Remove(R"({"rid":"a","x":1,"rid":"b"})", "rid"), R"({"x":1})");
}

TEST(JsonSpliceTest, RemovesTheMemberAndOneAdjacentComma) {
  EXPECT_EQ(Remove(R"({"rid": "a", "x": 1})", "rid"), R"({"x": 1})");
  EXPECT_EQ(Remove(R"({"x": 1, "rid": "a", "y": 2})", "rid"), R"({"x": 1, "y": 2})");
  EXPECT_EQ(Remove(R"({"x": 1, "rid": "a" })", "rid"), R"({"x": 1 })");
  EXPECT_EQ(Remove(R"({ "rid": "a" })", "rid"), R"({  })");
  EXPECT_EQ(Remove(R"({"x": 1})", "rid"), R"({"x": 1})");
}

TEST(JsonSpliceTest, ScanReportsMemberSpans) {
  const std::string text = R"( {"a" : 1, "b":{"c":[2]} } )";
  StatusOr<ObjectLayout> layout = ScanTopLevelMembers(text);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->members.size(), 2u);
  EXPECT_EQ(layout->open_brace, 1u);
  EXPECT_EQ(text[layout->close_brace], '}');
  EXPECT_EQ(layout->close_brace, text.size() - 2);
  const MemberSpan& a = layout->members[0];
  EXPECT_EQ(a.key, "a");
  EXPECT_EQ(text.substr(a.key_begin, a.key_end - a.key_begin), "\"a\"");
  EXPECT_EQ(text.substr(a.value_begin, a.value_end - a.value_begin), "1");
  const MemberSpan& b = layout->members[1];
  EXPECT_EQ(text.substr(b.value_begin, b.value_end - b.value_begin), R"({"c":[2]})");
}

TEST(JsonSpliceTest, RejectsInputThatIsNotOneObject) {
  for (const std::string_view bad :
       {"", "[1]", "\"s\"", "{\"a\":1} x", "{\"a\":1", "{\"a\" 1}", "{'a': 1}", "{\"a\":01}"}) {
    const StatusOr<std::string> out = SetTopLevelField(bad, "rid", "\"x\"");
    ASSERT_FALSE(out.ok()) << bad;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(SetTopLevelField("{}", "rid", "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetTopLevelField("{}", "rid", "1 2").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetTopLevelField("{}", "rid", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      SetTopLevelField("{\"a\":[[[1]]]}", "rid", "1", JsonLimits{.max_bytes = 64, .max_depth = 2})
          .status()
          .code(),
      StatusCode::kResourceExhausted);
}

TEST(JsonSpliceTest, RelaxBodyGetsANewRidAndOnlyThatChanges) {
  const std::string body = ReadTestdata("generate_relax.json");
  const std::string out = Set(body, "rid", "\"req-17:1\"");
  std::string expected = body;
  expected.replace(expected.find("\"req-17:0\""), 10, "\"req-17:1\"");
  EXPECT_EQ(out, expected);
  EXPECT_EQ(Remove(Set(body, "x", "1"), "x"), body);
}

// Every edit of a malformed or truncated body either fails with an input error or yields
// text in which the member has the new value and all other members are unchanged.
TEST(JsonSpliceTest, MalformedBodiesNeverCrash) {
  for (const std::string_view name : {"generate_relax.json", "server_info.json"}) {
    ForEachMalformedVariant(ReadTestdata(name), 7, [](const std::string& text) {
      const StatusOr<std::string> set = SetTopLevelField(text, "rid", "\"x\"");
      ExpectInputError(set.status());
      const StatusOr<std::string> removed = RemoveTopLevelField(text, "rid");
      EXPECT_EQ(set.ok(), removed.ok());
      if (!set.ok()) return;
      StatusOr<ObjectLayout> layout = ScanTopLevelMembers(*set);
      ASSERT_TRUE(layout.ok()) << layout.status();
      StatusOr<ObjectLayout> without = ScanTopLevelMembers(*removed);
      ASSERT_TRUE(without.ok()) << without.status();
      for (const MemberSpan& member : without->members) EXPECT_NE(member.key, "rid");
    });
  }
}

// SetTopLevelFields is one pass over the body; it must give byte for byte what one
// SetTopLevelField per edit gives, for every subset and order of edits, on bodies with and
// without the keys (duplicates, escapes, empty objects, nested values, whitespace).
TEST(JsonSpliceTest, SeveralFieldsAtOnceEqualOneEditAfterTheOther) {
  const std::vector<std::string> bodies = {
      "{}",
      " { } ",
      R"({"text":"hi"})",
      "{ \"rid\" : 1 ,\n \"x\": [1, {\"rid\": 2}] }",
      R"({"session_id":"a","rid":"b","session_id":"c"})",
      R"({"r\u0069d":null,"y":{"session_id":1}})",
      R"({"input_ids":[1,2,3],"sampling_params":{"max_new_tokens":8},"stream":true})",
      ReadTestdata("generate_relax.json"),
  };
  const std::vector<FieldEdit> all = {{"rid", R"("req:0")"},
                                      {"session_id", R"("s-1")"},
                                      {"agentkv_parent_session", R"("p")"},
                                      {"x", "[true, null]"}};
  for (const std::string& body : bodies) {
    // Every non-empty subset of `all`, in both orders.
    for (unsigned mask = 1; mask < (1u << all.size()); ++mask) {
      for (const bool reversed : {false, true}) {
        std::vector<FieldEdit> edits;
        for (size_t i = 0; i < all.size(); ++i) {
          if ((mask & (1u << i)) != 0) edits.push_back(all[i]);
        }
        if (reversed) std::reverse(edits.begin(), edits.end());
        std::string expected = body;
        for (const FieldEdit& edit : edits) expected = Set(expected, edit.key, edit.value_json);
        const StatusOr<std::string> at_once = SetTopLevelFields(body, edits);
        ASSERT_TRUE(at_once.ok()) << at_once.status() << " on " << body;
        EXPECT_EQ(*at_once, expected) << "body " << body << " mask " << mask;
        // The gateway's path for bodies it has parsed: the same bytes without revalidation.
        const StatusOr<std::string> trusted = SetTopLevelFieldsOfValidObject(body, edits);
        ASSERT_TRUE(trusted.ok()) << trusted.status() << " on " << body;
        EXPECT_EQ(*trusted, expected) << "body " << body << " mask " << mask;
      }
    }
  }
}

TEST(JsonSpliceTest, SeveralFieldsAtOnceRejectWhatOneAtATimeRejects) {
  EXPECT_EQ(SetTopLevelFields("[1]", {{"rid", "1"}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetTopLevelFields("{}", {{"rid", "not json"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(SetTopLevelFields("{}", {{"rid", "1"}, {"rid", "2"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(*SetTopLevelFields(R"({"a":1})", {}), R"({"a":1})");
}

// Without validation the scan still never reads past the text: a body that breaks the
// precondition gives InvalidArgument or text, never a crash, and a valid one what the checked
// function gives.
TEST(JsonSpliceTest, UncheckedEditsOfMalformedBodiesNeverCrash) {
  const std::vector<FieldEdit> edits = {{"rid", R"("x")"}, {"session_id", R"("s")"}};
  for (const std::string_view name : {"generate_relax.json", "server_info.json"}) {
    ForEachMalformedVariant(ReadTestdata(name), 13, [&edits](const std::string& text) {
      const StatusOr<std::string> trusted = SetTopLevelFieldsOfValidObject(text, edits);
      if (!trusted.ok()) {
        EXPECT_EQ(trusted.status().code(), StatusCode::kInvalidArgument);
      }
      const StatusOr<std::string> checked = SetTopLevelFields(text, edits);
      if (checked.ok()) {
        ASSERT_TRUE(trusted.ok()) << trusted.status();
        EXPECT_EQ(*trusted, *checked);
      }
    });
  }
  for (const std::string_view truncated : {"", "{", R"({"a")", R"({"a":[1,2)", R"({"a":"\)"}) {
    EXPECT_EQ(SetTopLevelFieldsOfValidObject(truncated, edits).status().code(),
              StatusCode::kInvalidArgument)
        << truncated;
  }
}

}  // namespace
}  // namespace agentkv::protocol
