#include "agentkv/protocol/json_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace agentkv::protocol {
namespace {

namespace json = boost::json;

std::string Shortest(double value) {
  std::string out;
  AppendShortestDouble(out, value);
  return out;
}

TEST(JsonUtilTest, DoublesPrintLikePythonRepr) {
  EXPECT_EQ(Shortest(1.0), "1.0");
  EXPECT_EQ(Shortest(262144.0), "262144.0");
  EXPECT_EQ(Shortest(100000.0), "100000.0");
  EXPECT_EQ(Shortest(0.915), "0.915");
  EXPECT_EQ(Shortest(-2.5), "-2.5");
  EXPECT_EQ(Shortest(0.0001), "0.0001");
  EXPECT_EQ(Shortest(0.00001), "1e-05");
  EXPECT_EQ(Shortest(1.5e-7), "1.5e-07");
  EXPECT_EQ(Shortest(1e16), "1e+16");
  EXPECT_EQ(Shortest(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(Shortest(9999999999999998.0), "9999999999999998.0");
  EXPECT_EQ(Shortest(0.0), "0.0");
  EXPECT_EQ(Shortest(-0.0), "-0.0");
  EXPECT_EQ(Shortest(5e-324), "5e-324");
  EXPECT_EQ(Shortest(1.7976931348623157e308), "1.7976931348623157e+308");
}

TEST(JsonUtilTest, ShortestDoublesReadBackExactly) {
  for (const double value : {0.1, 1.0 / 3.0, 2.0 / 3.0, 1e-300, 6.02214076e23, 0.915, 1e21, 123.456,
                             4.35, 1e-5, 9007199254740993.0}) {
    const std::string text = Shortest(value);
    EXPECT_EQ(std::stod(text), value) << text;
  }
}

TEST(JsonUtilTest, NonFiniteDoublesBecomeNull) {
  std::string out;
  AppendJsonDouble(out, std::numeric_limits<double>::quiet_NaN());
  AppendJsonDouble(out, std::numeric_limits<double>::infinity());
  EXPECT_EQ(out, "nullnull");
}

TEST(JsonUtilTest, StringsEscapeQuotesBackslashesAndControls) {
  std::string out;
  AppendJsonString(out, std::string("a\"b\\c\nd\te\x01\x1f\xc3\xa9/", 14));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\te\\u0001\\u001f\xc3\xa9/\"");
}

TEST(JsonUtilTest, WriterPlacesCommasAndKeys) {
  JsonWriter w;
  w.BeginObject().Key("a").Int(1).Key("b").BeginArray().Bool(true).Null().Double(0.5);
  w.BeginObject().EndObject().EndArray().Key("c").String("x").Key("d").Raw("[1, 2]");
  w.EndObject();
  EXPECT_EQ(w.text(), R"({"a":1,"b":[true,null,0.5,{}],"c":"x","d":[1, 2]})");
}

TEST(JsonUtilTest, WriterWritesBoostValues) {
  StatusOr<json::value> value =
      ParseJson(R"({"x": [1, -2, 18446744073709551615, 2.5, "s", null, {"y": false}]})",
                JsonLimits{}, "test");
  ASSERT_TRUE(value.ok()) << value.status();
  JsonWriter w;
  w.Value(*value);
  EXPECT_EQ(w.text(), R"({"x":[1,-2,18446744073709551615,2.5,"s",null,{"y":false}]})");
}

TEST(JsonUtilTest, ParseJsonReportsInvalidInputWithOffset) {
  const StatusOr<json::value> bad = ParseJson(R"({"a": tru})", JsonLimits{}, "body");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("body: invalid JSON at byte"), std::string::npos)
      << bad.status();
  EXPECT_FALSE(ParseJson("{} {}", JsonLimits{}, "body").ok());
  EXPECT_FALSE(ParseJson("", JsonLimits{}, "body").ok());
  EXPECT_FALSE(ParseJson("\"\xff\"", JsonLimits{}, "body").ok());  // Invalid UTF-8.
  EXPECT_TRUE(ParseJson(" {\"a\": 1} \n", JsonLimits{}, "body").ok());
}

TEST(JsonUtilTest, ParseAndValidateEnforceSizeAndDepth) {
  const JsonLimits limits{.max_bytes = 16, .max_depth = 3};
  for (const auto& check :
       {+[](std::string_view t, const JsonLimits&l) { return ParseJson(t, l, "doc").status(); },
        +[](std::string_view t, const JsonLimits&l) { return ValidateJson(t, l, "doc"); }}) {
    EXPECT_EQ(check("[[[1]]]", limits).code(), StatusCode::kOk);
    EXPECT_EQ(check("[[[[1]]]]", limits).code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(check("\"0123456789abcdef\"", limits).code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(check("[1,]", limits).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(check("1 2", limits).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(check(" 1 ", limits).code(), StatusCode::kOk);
  }
}

// Boost.JSON's parser recurses once per nesting level, so the depth limit is clamped to
// kMaxJsonDepth whatever the caller asks for.
TEST(JsonUtilTest, DepthIsClampedSoDeepNestingCannotOverflowTheStack) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const JsonLimits huge{.max_bytes = 1 << 20, .max_depth = 1 << 30};
  EXPECT_EQ(ValidateJson(deep, huge, "doc").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ParseJson(deep, huge, "doc").status().code(), StatusCode::kResourceExhausted);
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(ValidateJson(ok, huge, "doc"), Status::Ok());
  EXPECT_TRUE(ParseJson(ok, huge, "doc").ok());
}

TEST(JsonUtilTest, ReadersNameThePathAndKeepDefaultsForNull) {
  StatusOr<json::value> value = ParseJson(
      R"({"s": "x", "n": null, "i": 7, "neg": -1, "big": 18446744073709551615, "f": 1.0,
          "b": true})",
      JsonLimits{}, "test");
  ASSERT_TRUE(value.ok());
  const json::object& o = value->get_object();

  std::string s = "default";
  EXPECT_EQ(ReadString(o, "n", "p.n", &s), Status::Ok());
  EXPECT_EQ(s, "default");
  EXPECT_EQ(ReadString(o, "s", "p.s", &s), Status::Ok());
  EXPECT_EQ(s, "x");
  EXPECT_EQ(ReadString(o, "i", "p.i", &s), InvalidArgumentError("p.i: expected a string"));
  std::optional<std::string> os;
  EXPECT_EQ(ReadOptionalString(o, "s", "s", &os), Status::Ok());
  EXPECT_EQ(os, "x");
  EXPECT_EQ(ReadOptionalString(o, "b", "b", &os), InvalidArgumentError("b: expected a string"));
  EXPECT_EQ(os, "x");

  int64_t i = 0;
  EXPECT_EQ(ReadInt64(o, "i", "i", &i), Status::Ok());
  EXPECT_EQ(i, 7);
  EXPECT_EQ(ReadInt64(o, "f", "f", &i), InvalidArgumentError("f: expected an integer"));
  EXPECT_EQ(ReadInt64(o, "big", "big", &i), InvalidArgumentError("big: expected an integer"));
  EXPECT_EQ(ReadNonNegativeInt64(o, "neg", "neg", &i),
            InvalidArgumentError("neg: expected a non-negative integer"));
  EXPECT_EQ(i, 7);
  EXPECT_EQ(ReadNonNegativeInt64(o, "i", "i", &i), Status::Ok());
  EXPECT_EQ(i, 7);
  std::optional<int64_t> oi;
  EXPECT_EQ(ReadOptionalInt64(o, "missing", "missing", &oi), Status::Ok());
  EXPECT_FALSE(oi.has_value());
  EXPECT_EQ(ReadOptionalInt64(o, "neg", "neg", &oi), Status::Ok());
  EXPECT_EQ(oi, -1);

  double d = 0;
  EXPECT_EQ(ReadDouble(o, "i", "i", &d), Status::Ok());
  EXPECT_EQ(d, 7.0);
  EXPECT_EQ(ReadDouble(o, "s", "s", &d), InvalidArgumentError("s: expected a number"));
  std::optional<double> od;
  EXPECT_EQ(ReadOptionalDouble(o, "f", "f", &od), Status::Ok());
  EXPECT_EQ(od, 1.0);

  bool b = false;
  EXPECT_EQ(ReadBool(o, "b", "b", &b), Status::Ok());
  EXPECT_TRUE(b);
  EXPECT_EQ(ReadBool(o, "i", "x.i", &b), InvalidArgumentError("x.i: expected a boolean"));
  std::optional<bool> ob;
  EXPECT_EQ(ReadOptionalBool(o, "n", "n", &ob), Status::Ok());
  EXPECT_FALSE(ob.has_value());

  EXPECT_EQ(ExpectObject(value.value(), "doc").value(), &o);
  EXPECT_EQ(ExpectObject(o.at("i"), "doc.i").status(),
            InvalidArgumentError("doc.i: expected an object"));
  EXPECT_EQ(FindRequired(o, "i").value(), FindNonNull(o, "i"));
  EXPECT_EQ(FindRequired(o, "n").status(), InvalidArgumentError("n: required"));
  EXPECT_EQ(FindRequired(o, "missing").status(), InvalidArgumentError("missing: required"));

  EXPECT_EQ(JoinPath("", "a"), "a");
  EXPECT_EQ(JoinPath("a", "b"), "a.b");
  EXPECT_EQ(IndexPath("a.b", 3), "a.b[3]");
}

TEST(ParseJsonObjectTest, AcceptsOnlyAnObjectAndNamesTheDocumentOtherwise) {
  StatusOr<boost::json::value> object = ParseJsonObject(R"({"a": 1})", JsonLimits{}, "thing");
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->as_object().at("a").as_int64(), 1);
  for (const char* text : {"[1]", "1", "\"x\"", "null"}) {
    const Status status = ParseJsonObject(text, JsonLimits{}, "thing").status();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(status.message(), "thing: expected a JSON object") << text;
  }
  EXPECT_EQ(ParseJsonObject("{", JsonLimits{}, "thing").status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace agentkv::protocol
