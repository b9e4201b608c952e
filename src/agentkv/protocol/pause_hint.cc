// The pause hint's parser and the pause-to-priority map (pause_hint.h).
#include "agentkv/protocol/pause_hint.h"

#include <charconv>
#include <string>
#include <system_error>

namespace agentkv::protocol {

StatusOr<PauseKind> ParsePauseHint(std::string_view field, std::string_view value) {
  if (value.empty()) return PauseKind::kUnknown;
  if (const std::optional<PauseKind> kind = ParsePauseKind(value); kind.has_value()) {
    return *kind;
  }
  return InvalidArgumentError(std::string(field) +
                              ": expected unknown, tool_call, subagent_wait, human_turn or "
                              "session_end, got \"" +
                              std::string(value) + "\"");
}

std::optional<int32_t> PausePriorities::For(PauseKind pause) const {
  switch (pause) {
    case PauseKind::kToolCall:
      return tool_call;
    case PauseKind::kSubagentWait:
      return subagent_wait;
    case PauseKind::kHumanTurn:
      return human_turn;
    case PauseKind::kSessionEnd:
      return session_end;
    case PauseKind::kUnknown:
      break;
  }
  return std::nullopt;
}

StatusOr<PausePriorities> ParsePausePriorities(std::string_view text) {
  PausePriorities out;
  const auto bad = [](std::string_view part, std::string_view why) {
    return InvalidArgumentError("--agentic-pause-priority: \"" + std::string(part) + "\" " +
                                std::string(why) +
                                " (expected KIND=P, KIND one of tool_call, subagent_wait, "
                                "human_turn, session_end, P an integer in [0, 1000000])");
  };
  if (text.empty()) return out;
  for (bool more = true; more;) {
    const size_t comma = text.find(',');
    more = comma != std::string_view::npos;
    const std::string_view part = text.substr(0, comma);
    if (more) text = text.substr(comma + 1);
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) return bad(part, "has no '='");
    const std::string_view kind = part.substr(0, eq);
    const std::string_view value = part.substr(eq + 1);
    int32_t p = -1;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), p);
    if (value.empty() || error != std::errc() || end != value.data() + value.size() || p < 0 ||
        p > 1'000'000) {
      return bad(part, "has a bad priority");
    }
    std::optional<int32_t>* slot = nullptr;
    if (kind == "tool_call") slot = &out.tool_call;
    if (kind == "subagent_wait") slot = &out.subagent_wait;
    if (kind == "human_turn") slot = &out.human_turn;
    if (kind == "session_end") slot = &out.session_end;
    if (slot == nullptr) return bad(part, "names an unknown pause");
    if (slot->has_value()) return bad(part, "names its pause twice");
    *slot = p;
  }
  return out;
}

}  // namespace agentkv::protocol
