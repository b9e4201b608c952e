// Invariants: every Parse* is total (a Status for any bytes, never an exception), accepts what
// the matching Serialize* writes, and names the bad field (and its value) in its message.
#include "agentkv/service/admission/working_set_wire.h"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/value.hpp>
#include <initializer_list>

#include "agentkv/base/bounds.h"
#include "agentkv/protocol/json_util.h"
#include "agentkv/protocol/pause_hint.h"

namespace agentkv::service {
namespace {

namespace json = boost::json;

// Program bodies are tiny; anything large is a mistake or an attack.
constexpr protocol::JsonLimits kLimits{size_t{64} << 10, 8};

constexpr control::WorkingSetReason kAllReasons[] = {
    control::WorkingSetReason::kContinuing, control::WorkingSetReason::kFits,
    control::WorkingSetReason::kAged,       control::WorkingSetReason::kNoCapacity,
    control::WorkingSetReason::kFull,       control::WorkingSetReason::kCancelled,
};

// A member not in `known` is a mistake (a misspelt optional field would be silently ignored).
Status CheckMembers(const json::object& o, std::initializer_list<std::string_view> known) {
  for (const auto& member : o) {
    bool found = false;
    for (std::string_view key : known) found = found || member.key() == key;
    if (!found) {
      return InvalidArgumentError(std::string(member.key()) + ": unknown field; expected one of " +
                                  [&] {
                                    std::string list;
                                    for (std::string_view key : known) {
                                      if (!list.empty()) list += ", ";
                                      list += key;
                                    }
                                    return list;
                                  }());
    }
  }
  return Status::Ok();
}

// A non-empty string of at most kMaxProgramFieldBytes; required unless `optional`.
Status ReadName(const json::object& o, std::string_view key, std::string* out,
                bool optional = false) {
  if (protocol::FindNonNull(o, key) == nullptr) {
    return optional ? Status::Ok() : protocol::FindRequired(o, key).status();
  }
  AGENTKV_RETURN_IF_ERROR(protocol::ReadString(o, key, key, out));
  if (out->empty()) return InvalidArgumentError(std::string(key) + ": must not be empty");
  if (out->size() > kMaxProgramFieldBytes) {
    return InvalidArgumentError(std::string(key) + ": " + std::to_string(out->size()) +
                                " bytes, longer than " + std::to_string(kMaxProgramFieldBytes));
  }
  return Status::Ok();
}

Status ReadTokens(const json::object& o, std::string_view key, int64_t* out) {
  AGENTKV_RETURN_IF_ERROR(protocol::FindRequired(o, key).status());
  AGENTKV_RETURN_IF_ERROR(protocol::ReadInt64(o, key, key, out));
  return CheckTokens(key, *out);
}

StatusOr<json::value> ParseBody(std::string_view body, std::string_view what,
                                json::storage_ptr storage) {
  return protocol::ParseJsonObject(body, kLimits, what, std::move(storage));
}

}  // namespace

StatusOr<control::ProgramRequest> ParseProgramAcquire(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseBody(body, "program acquire request", json::storage_ptr(&arena)));
  const json::object& o = value.as_object();
  AGENTKV_RETURN_IF_ERROR(
      CheckMembers(o, {"ticket", "program", "agent", "reservation_tokens", "engine"}));
  control::ProgramRequest request;
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "ticket", &request.ticket));
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "program", &request.program));
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "agent", &request.agent));
  AGENTKV_RETURN_IF_ERROR(ReadTokens(o, "reservation_tokens", &request.reservation_tokens));
  std::string engine;
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "engine", &engine, /*optional=*/true));
  if (!engine.empty()) request.engine = std::move(engine);
  return request;
}

std::string SerializeProgramAcquire(const control::ProgramRequest& request) {
  protocol::JsonWriter w;
  w.BeginObject().Key("ticket").String(request.ticket);
  w.Key("program").String(request.program);
  w.Key("agent").String(request.agent);
  w.Key("reservation_tokens").Int(request.reservation_tokens);
  if (request.engine.has_value()) w.Key("engine").String(*request.engine);
  w.EndObject();
  return w.Take();
}

std::string SerializeProgramDecision(const control::WorkingSetDecision& decision) {
  protocol::JsonWriter w;
  w.BeginObject().Key("ticket").String(decision.ticket);
  w.Key("admitted").Bool(decision.admitted);
  w.Key("reason").String(control::WorkingSetReasonName(decision.reason));
  w.Key("wait_s").Double(decision.wait.seconds());
  w.EndObject();
  return w.Take();
}

StatusOr<control::WorkingSetDecision> ParseProgramDecision(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseBody(body, "program decision", json::storage_ptr(&arena)));
  const json::object& o = value.as_object();
  control::WorkingSetDecision decision;
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "ticket", &decision.ticket));
  AGENTKV_RETURN_IF_ERROR(protocol::FindRequired(o, "admitted").status());
  AGENTKV_RETURN_IF_ERROR(protocol::ReadBool(o, "admitted", "admitted", &decision.admitted));
  std::string reason;
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "reason", &reason));
  bool known = false;
  for (control::WorkingSetReason r : kAllReasons) {
    if (control::WorkingSetReasonName(r) == reason) {
      decision.reason = r;
      known = true;
    }
  }
  if (!known) return InvalidArgumentError("reason: unknown reason \"" + reason + "\"");
  double wait_s = 0;
  AGENTKV_RETURN_IF_ERROR(protocol::ReadDouble(o, "wait_s", "wait_s", &wait_s));
  decision.wait = TimeNs::Seconds(wait_s);
  return decision;
}

StatusOr<ProgramFinish> ParseProgramFinish(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseBody(body, "program finish request", json::storage_ptr(&arena)));
  const json::object& o = value.as_object();
  AGENTKV_RETURN_IF_ERROR(CheckMembers(o, {"ticket", "context_tokens", "next_pause", "tool"}));
  ProgramFinish finish;
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "ticket", &finish.ticket));
  AGENTKV_RETURN_IF_ERROR(ReadTokens(o, "context_tokens", &finish.end.context_tokens));
  std::string pause;
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "next_pause", &pause, /*optional=*/true));
  if (!pause.empty()) {
    AGENTKV_ASSIGN_OR_RETURN(finish.end.next_pause, protocol::ParsePauseHint("next_pause", pause));
  }
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "tool", &finish.end.tool, /*optional=*/true));
  return finish;
}

std::string SerializeProgramFinish(const ProgramFinish& finish) {
  protocol::JsonWriter w;
  w.BeginObject().Key("ticket").String(finish.ticket);
  w.Key("context_tokens").Int(finish.end.context_tokens);
  w.Key("next_pause").String(PauseKindName(finish.end.next_pause));
  if (!finish.end.tool.empty()) w.Key("tool").String(finish.end.tool);
  w.EndObject();
  return w.Take();
}

StatusOr<std::string> ParseProgramCancel(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseBody(body, "program cancel request", json::storage_ptr(&arena)));
  const json::object& o = value.as_object();
  AGENTKV_RETURN_IF_ERROR(CheckMembers(o, {"ticket"}));
  std::string ticket;
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "ticket", &ticket));
  return ticket;
}

StatusOr<std::string> ParseProgramEndAgent(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseBody(body, "end agent request", json::storage_ptr(&arena)));
  const json::object& o = value.as_object();
  AGENTKV_RETURN_IF_ERROR(CheckMembers(o, {"agent"}));
  std::string agent;
  AGENTKV_RETURN_IF_ERROR(ReadName(o, "agent", &agent));
  return agent;
}

}  // namespace agentkv::service
