// The tool calls the engine emulator answers a chat with, so that an agent framework's tool
// branch runs against it: a request's `tools` (OpenAI function tools) and `tool_choice` decide,
// deterministically, whether the answer is a text or one call of one of the tools.
//
// The decision: tool_choice "none" (or no tools): text. A named function
// ({"type": "function", "function": {"name": N}}): a call of N. "required": a call of the tool
// the seed picks. "auto" (the default with tools): a call of the tool the seed picks, unless the
// last message is a tool's result (role "tool"): then text, so that a loop of call, result,
// answer ends as an agent loop does. The call's `arguments` are a JSON object built from the
// function's `parameters` schema (ArgumentsFor).
//
// The seed is the request's `seed` when it has one, else the caller's hash of the prompt: the
// same request always gets the same answer.
#ifndef AGENTKV_SERVICE_EMULATOR_OPENAI_TOOLS_H_
#define AGENTKV_SERVICE_EMULATOR_OPENAI_TOOLS_H_

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "agentkv/base/status.h"

namespace agentkv::service {

struct ToolCall {
  // "call_" and 32 hex digits (the caller's unique id).
  std::string id;
  std::string name;
  // A JSON object, serialized (OpenAI's `function.arguments` is a string).
  std::string arguments;
};

// What the chat `body` is answered with: std::nullopt for a text answer, else the call, with
// `call_id` as its id. InvalidArgument naming the field for malformed `tools` or `tool_choice`
// (not an array of function tools with string names; a choice other than "none", "auto",
// "required" or a named function; a named function the tools do not hold; "required" or a
// named function without tools).
StatusOr<std::optional<ToolCall>> PlanToolCall(const boost::json::object& body, uint64_t seed,
                                               std::string call_id);

// The arguments of a call to a function with `parameters` (a JSON schema): for an object
// schema, every property in `properties`, each valued by its schema: `const`, else one of its
// `enum`, else by `type`: a pseudo word for a string, an integer within `minimum` and `maximum`,
// a number, a boolean, null, an array of one item, an object likewise (nested at most
// kMaxSchemaDepth deep, an empty value past it). Anything else is an empty object.
// Deterministic in (`parameters`, `seed`).
inline constexpr int kMaxSchemaDepth = 8;
boost::json::object ArgumentsFor(const boost::json::value& parameters, uint64_t seed);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_EMULATOR_OPENAI_TOOLS_H_
