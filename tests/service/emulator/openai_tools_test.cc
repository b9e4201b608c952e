#include "agentkv/service/emulator/openai_tools.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <limits>
#include <string>

#include "agentkv/base/rng.h"

namespace agentkv::service {
namespace {

namespace json = boost::json;
using ::testing::HasSubstr;

json::object Body(const std::string& text) { return json::parse(text).as_object(); }

constexpr const char* kTwoTools =
    R"("tools": [{"type": "function", "function": {"name": "a", "parameters": {"type": "object",)"
    R"( "properties": {"x": {"type": "integer"}}}}}, {"type": "function", "function": {"name": "b"}}])";

// A random JSON schema of depth at most `depth`.
json::value RandomSchema(Rng& rng, int depth) {
  switch (rng.Uniform(0, depth > 0 ? 7 : 4)) {
    case 0:
      return json::object{{"type", "string"}};
    case 1: {
      const int64_t low = rng.Uniform(-50, 50);
      return json::object{
          {"type", "integer"}, {"minimum", low}, {"maximum", low + rng.Uniform(0, 9)}};
    }
    case 2:
      return json::object{{"type", "number"}};
    case 3:
      return json::object{{"type", "boolean"}};
    case 4:
      return json::object{{"enum", json::array{"red", "green", 3}}};
    case 5:
      return json::object{{"type", "array"}, {"items", RandomSchema(rng, depth - 1)}};
    default: {
      json::object properties;
      for (int i = 0, n = static_cast<int>(rng.Uniform(0, 4)); i < n; ++i) {
        properties["p" + std::to_string(i)] = RandomSchema(rng, depth - 1);
      }
      return json::object{{"type", "object"}, {"properties", std::move(properties)}};
    }
  }
}

// Whether `value` is of `schema` (the subset RandomSchema makes).
bool Conforms(const json::value& value, const json::value& schema) {
  const json::object& s = schema.as_object();
  if (const json::value* e = s.if_contains("enum")) {
    for (const json::value& option : e->as_array()) {
      if (option == value) return true;
    }
    return false;
  }
  const json::string& type = s.at("type").as_string();
  if (type == "string") return value.is_string();
  if (type == "integer") {
    return value.is_int64() && value.as_int64() >= s.at("minimum").as_int64() &&
           value.as_int64() <= s.at("maximum").as_int64();
  }
  if (type == "number") return value.is_double() || value.is_int64();
  if (type == "boolean") return value.is_bool();
  if (type == "array") {
    return value.is_array() && value.as_array().size() == 1 &&
           Conforms(value.as_array().front(), s.at("items"));
  }
  const json::object& properties = s.at("properties").as_object();
  if (!value.is_object() || value.as_object().size() != properties.size()) return false;
  for (const auto& [name, property] : properties) {
    const json::value* v = value.as_object().if_contains(name);
    if (v == nullptr || !Conforms(*v, property)) return false;
  }
  return true;
}

TEST(OpenAiToolsTest, ArgumentsConformToRandomSchemasAndDependOnlyOnTheSeed) {
  Rng rng(20261206);
  for (int i = 0; i < 300; ++i) {
    json::object schema{{"type", "object"}, {"properties", json::object{}}};
    for (int p = 0, n = static_cast<int>(rng.Uniform(1, 5)); p < n; ++p) {
      schema["properties"].as_object()["f" + std::to_string(p)] = RandomSchema(rng, 3);
    }
    const uint64_t seed = rng.Next();
    const json::object arguments = ArgumentsFor(schema, seed);
    EXPECT_TRUE(Conforms(arguments, schema)) << json::serialize(schema) << "\n"
                                             << json::serialize(arguments);
    EXPECT_EQ(arguments, ArgumentsFor(schema, seed));
  }
}

TEST(OpenAiToolsTest, IntegerBoundsAtTheEdgesOfInt64StayWithinThem) {
  const json::value schema = json::parse(
      R"({"type": "object", "properties": {"top": {"type": "integer", "minimum": 9223372036854775807},)"
      R"( "all": {"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807},)"
      R"( "low": {"type": "integer", "minimum": -9223372036854775808, "maximum": -9223372036854775808}}})");
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const json::object arguments = ArgumentsFor(schema, seed);
    EXPECT_EQ(arguments.at("top").as_int64(), std::numeric_limits<int64_t>::max());
    EXPECT_TRUE(arguments.at("all").is_int64());
    EXPECT_EQ(arguments.at("low").as_int64(), std::numeric_limits<int64_t>::min());
  }
}

TEST(OpenAiToolsTest, ASchemaDeeperThanTheBoundGetsEmptyValuesPastIt) {
  json::value schema = json::object{{"type", "string"}};
  for (int i = 0; i < 50; ++i) {
    schema = json::object{{"type", "object"}, {"properties", json::object{{"n", schema}}}};
  }
  json::value at = ArgumentsFor(schema, 1);
  int depth = 0;
  while (at.is_object() && at.as_object().contains("n")) {
    at = at.at("n");
    ++depth;
  }
  EXPECT_EQ(depth, kMaxSchemaDepth);
  EXPECT_TRUE(at.is_object() && at.as_object().empty());
  EXPECT_TRUE(ArgumentsFor(json::value("not a schema"), 1).empty());
}

TEST(OpenAiToolsTest, TheChoiceDecidesBetweenACallAndText) {
  const auto plan = [](const std::string& rest) {
    std::string body = "{";
    body += kTwoTools;
    body += rest;
    body += "}";
    return PlanToolCall(Body(body), 5, "call_x");
  };
  const auto user = std::string(R"(, "messages": [{"role": "user", "content": "q"}])");
  const auto after_tool = std::string(
      R"(, "messages": [{"role": "user", "content": "q"}, {"role": "tool", "content": "r"}])");
  ASSERT_TRUE(plan(user).ok());
  ASSERT_TRUE(plan(user)->has_value());
  EXPECT_EQ((*plan(user))->id, "call_x");
  EXPECT_FALSE(plan(after_tool)->has_value()) << "auto answers a tool's result with text";
  EXPECT_TRUE(plan(after_tool + R"(, "tool_choice": "required")")->has_value());
  EXPECT_FALSE(plan(user + R"(, "tool_choice": "none")")->has_value());
  const auto named =
      plan(after_tool + R"(, "tool_choice": {"type": "function", "function": {"name": "b"}})");
  ASSERT_TRUE(named.ok() && named->has_value());
  EXPECT_EQ((*named)->name, "b");
  EXPECT_EQ((*named)->arguments, "{}");
  // No tools: text, unless a call is demanded.
  EXPECT_FALSE(PlanToolCall(Body(R"({"messages": []})"), 1, "c")->has_value());
  EXPECT_THAT(PlanToolCall(Body(R"({"tool_choice": "required"})"), 1, "c").status().message(),
              HasSubstr("needs tools"));
  EXPECT_THAT(plan(user + R"(, "tool_choice": {"type": "function", "function": {"name": "z"}})")
                  .status()
                  .message(),
              HasSubstr("Tool 'z' not found in tools list."));
  EXPECT_THAT(
      PlanToolCall(Body(R"({"tools": [{"type": "retrieval"}]})"), 1, "c").status().message(),
      HasSubstr("tools[]"));
  EXPECT_THAT(PlanToolCall(Body(R"({"tools": {}})"), 1, "c").status().message(),
              HasSubstr("tools: expected an array"));
}

}  // namespace
}  // namespace agentkv::service
