#include "agentkv/service/emulator/openai_tools.h"

#include <algorithm>
#include <boost/json.hpp>
#include <limits>
#include <string_view>
#include <vector>

#include "agentkv/base/hash.h"

namespace agentkv::service {
namespace {

namespace json = boost::json;

// A stream of deterministic draws.
class Draws {
 public:
  explicit Draws(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return Mix64(state_ += 0x9e3779b97f4a7c15ULL); }

 private:
  uint64_t state_;
};

// The schema's type: its `type`, or the first non-"null" of a list of types; "object" for a
// schema with `properties` and no type.
std::string_view TypeOf(const json::object& schema) {
  const json::value* type = schema.if_contains("type");
  if (type != nullptr && type->is_string()) return type->as_string();
  if (type != nullptr && type->is_array()) {
    for (const json::value& t : type->as_array()) {
      if (t.is_string() && t.as_string() != "null") return t.as_string();
    }
    return "null";
  }
  return schema.contains("properties") ? "object" : "string";
}

json::value PseudoWord(Draws& draws) {
  return json::string("t" + std::to_string(draws.Next() % 100000));
}

int64_t IntegerWithin(const json::object& schema, Draws& draws) {
  const auto bound = [&schema](const char* key) -> std::optional<int64_t> {
    const json::value* v = schema.if_contains(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_int64()) return v->as_int64();
    if (v->is_double() && v->as_double() > -1e15 && v->as_double() < 1e15) {
      return static_cast<int64_t>(v->as_double());
    }
    return std::nullopt;
  };
  const int64_t low = bound("minimum").value_or(0);
  // A hundred values from the minimum, unless that passes the largest integer.
  const int64_t span_default = low > std::numeric_limits<int64_t>::max() - 99 ? low : low + 99;
  const int64_t high = std::max(low, bound("maximum").value_or(span_default));
  const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low) + 1;
  return span == 0 ? low : static_cast<int64_t>(static_cast<uint64_t>(low) + draws.Next() % span);
}

json::value ValueFor(const json::value& schema_value, Draws& draws, int depth) {
  const json::object* schema = schema_value.if_object();
  if (schema == nullptr) return PseudoWord(draws);
  if (const json::value* c = schema->if_contains("const")) return *c;
  if (const json::value* e = schema->if_contains("enum");
      e != nullptr && e->is_array() && !e->as_array().empty()) {
    return e->as_array()[draws.Next() % e->as_array().size()];
  }
  const std::string_view type = TypeOf(*schema);
  if (type == "object") {
    json::object out;
    const json::value* properties = schema->if_contains("properties");
    if (depth >= kMaxSchemaDepth || properties == nullptr || !properties->is_object()) return out;
    for (const auto& [name, property] : properties->as_object()) {
      out[name] = ValueFor(property, draws, depth + 1);
    }
    return out;
  }
  if (type == "array") {
    const json::value* items = schema->if_contains("items");
    if (depth >= kMaxSchemaDepth || items == nullptr) return json::array{};
    return json::array{ValueFor(*items, draws, depth + 1)};
  }
  if (type == "integer") return IntegerWithin(*schema, draws);
  if (type == "number") return static_cast<double>(draws.Next() % 10000) / 100.0;
  if (type == "boolean") return (draws.Next() & 1U) != 0;
  if (type == "null") return nullptr;
  return PseudoWord(draws);
}

// The tools' function names, in order; InvalidArgument naming the field when malformed.
StatusOr<std::vector<const json::object*>> Functions(const json::value* tools) {
  std::vector<const json::object*> functions;
  if (tools == nullptr || tools->is_null()) return functions;
  if (!tools->is_array()) return InvalidArgumentError("tools: expected an array of tools");
  for (const json::value& tool : tools->as_array()) {
    const json::object* t = tool.if_object();
    const json::value* type = t != nullptr ? t->if_contains("type") : nullptr;
    if (t == nullptr || (type != nullptr && type->is_string() && type->as_string() != "function")) {
      return InvalidArgumentError(R"(tools[]: expected {"type": "function", "function": {...}})");
    }
    const json::value* function = t->if_contains("function");
    const json::value* name = function != nullptr && function->is_object()
                                  ? function->as_object().if_contains("name")
                                  : nullptr;
    if (name == nullptr || !name->is_string() || name->as_string().empty()) {
      return InvalidArgumentError("tools[].function.name: expected a non-empty string");
    }
    functions.push_back(&function->as_object());
  }
  return functions;
}

// The last message's role is "tool": the answer to a tool's result.
bool AfterToolResult(const json::object& body) {
  const json::value* messages = body.if_contains("messages");
  if (messages == nullptr || !messages->is_array() || messages->as_array().empty()) return false;
  const json::value& last = messages->as_array().back();
  const json::value* role = last.is_object() ? last.as_object().if_contains("role") : nullptr;
  return role != nullptr && role->is_string() && role->as_string() == "tool";
}

}  // namespace

json::object ArgumentsFor(const json::value& parameters, uint64_t seed) {
  Draws draws(seed);
  json::value value = ValueFor(parameters, draws, 0);
  return value.is_object() ? std::move(value.as_object()) : json::object{};
}

StatusOr<std::optional<ToolCall>> PlanToolCall(const json::object& body, uint64_t seed,
                                               std::string call_id) {
  AGENTKV_ASSIGN_OR_RETURN(const std::vector<const json::object*> functions,
                           Functions(body.if_contains("tools")));
  const json::value* choice = body.if_contains("tool_choice");
  std::string_view mode = functions.empty() ? "none" : "auto";
  std::string_view named;
  if (choice != nullptr && choice->is_string()) {
    mode = choice->as_string();
    if (mode != "none" && mode != "auto" && mode != "required") {
      return InvalidArgumentError(
          R"(tool_choice: expected "none", "auto", "required" or {"type": "function", "function": {"name": ...}}, got )" +
          json::serialize(*choice));
    }
  } else if (choice != nullptr && !choice->is_null()) {
    const json::value* function =
        choice->is_object() ? choice->as_object().if_contains("function") : nullptr;
    const json::value* name = function != nullptr && function->is_object()
                                  ? function->as_object().if_contains("name")
                                  : nullptr;
    if (name == nullptr || !name->is_string()) {
      return InvalidArgumentError("tool_choice.function.name: expected a string, got " +
                                  json::serialize(*choice));
    }
    mode = "named";
    named = name->as_string();
  }
  if (functions.empty() && (mode == "required" || mode == "named")) {
    return InvalidArgumentError("tool_choice: " + std::string(mode) +
                                " needs tools, and the request has none");
  }
  if (mode == "none" || (mode == "auto" && AfterToolResult(body))) {
    return std::optional<ToolCall>();
  }
  Draws draws(seed);
  const json::object* function = functions[draws.Next() % functions.size()];
  if (mode == "named") {
    function = nullptr;
    for (const json::object* f : functions) {
      if (f->at("name").as_string() == named) function = f;
    }
    if (function == nullptr) {
      return InvalidArgumentError("tool_choice: Tool '" + std::string(named) +
                                  "' not found in tools list.");
    }
  }
  const json::value* parameters = function->if_contains("parameters");
  ToolCall call;
  call.id = std::move(call_id);
  call.name = std::string(function->at("name").as_string());
  call.arguments =
      json::serialize(ArgumentsFor(parameters != nullptr ? *parameters : json::value(), seed));
  return std::optional<ToolCall>(std::move(call));
}

}  // namespace agentkv::service
