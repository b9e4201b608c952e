// Invariants: every Parse* is total (a Status for any bytes, never an exception) and accepts
// what the matching Serialize* writes; messages start with the JSON path of the bad field.
#include "agentkv/service/admission/admission_wire.h"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/value.hpp>
#include <cmath>
#include <limits>

#include "agentkv/base/bounds.h"
#include "agentkv/protocol/json_util.h"

namespace agentkv::service {
namespace {

namespace json = boost::json;
using control::AdmissionAction;
using control::AdmissionReason;

// Admission bodies are tiny; anything large is a mistake or an attack.
constexpr protocol::JsonLimits kLimits{size_t{1} << 20, 16};

constexpr AdmissionReason kAllReasons[] = {
    AdmissionReason::kCapacityAvailable,
    AdmissionReason::kCapacityExhausted,
    AdmissionReason::kPressureGuard,
    AdmissionReason::kProtected,
    AdmissionReason::kAged,
    AdmissionReason::kDegraded,
    AdmissionReason::kCancelled,
    AdmissionReason::kOversized,
    AdmissionReason::kOverShare,
};

// Parses `body` as a JSON object into `arena`-backed storage.
StatusOr<json::value> ParseObject(std::string_view body, std::string_view what,
                                  json::storage_ptr storage) {
  return protocol::ParseJsonObject(body, kLimits, what, std::move(storage));
}

// Lease ids are "{epoch}:{ticket}": a ticket plus an int64 and a colon.
constexpr size_t kMaxLeaseIdBytes = control::kMaxTicketBytes + 21;

// Reads the required non-empty string `key`, or its `alias` when `key` is absent, of at most
// `max_bytes` bytes.
Status ReadRequiredString(const json::object& object, std::string_view key, std::string_view alias,
                          std::string* out, size_t max_bytes = control::kMaxTicketBytes) {
  std::string_view used = key;
  if (protocol::FindNonNull(object, key) == nullptr && !alias.empty() &&
      protocol::FindNonNull(object, alias) != nullptr) {
    used = alias;
  }
  if (protocol::FindNonNull(object, used) == nullptr)
    return protocol::FindRequired(object, key).status();
  AGENTKV_RETURN_IF_ERROR(protocol::ReadString(object, used, used, out));
  if (out->empty()) return InvalidArgumentError(std::string(used) + ": must not be empty");
  if (out->size() > max_bytes) {
    return InvalidArgumentError(std::string(used) + ": longer than " + std::to_string(max_bytes) +
                                " bytes");
  }
  return Status::Ok();
}

StatusOr<AdmissionAction> ParseAction(std::string_view text) {
  if (text == "admit") return AdmissionAction::kAdmit;
  if (text == "bypass") return AdmissionAction::kBypass;
  if (text == "refuse") return AdmissionAction::kRefuse;
  return InvalidArgumentError("action: expected \"admit\", \"bypass\" or \"refuse\", got \"" +
                              std::string(text) + "\"");
}

}  // namespace

StatusOr<AdmissionReason> ParseAdmissionReason(std::string_view text) {
  for (AdmissionReason reason : kAllReasons) {
    if (control::AdmissionReasonName(reason) == text) return reason;
  }
  return InvalidArgumentError("reason: unknown admission reason \"" + std::string(text) + "\"");
}

std::string SerializeAcquireRequest(const control::AcquireRequest& request,
                                    std::string_view instance) {
  protocol::JsonWriter w;
  w.BeginObject().Key("ticket").String(request.ticket);
  w.Key("reservation_tokens").Int(request.reservation_tokens);
  w.Key("protected").Bool(request.is_protected);
  // Admission v2's fields travel only when set, so a seed request's body is unchanged.
  if (request.engine.has_value()) w.Key("engine").String(*request.engine);
  if (request.continuing) w.Key("continuing").Bool(true);
  if (request.prefix_key.has_value()) {
    w.Key("prefix_key").String(*request.prefix_key);
    w.Key("prefix_tokens").Int(request.prefix_tokens);
  }
  // The fair-share holder, when named.
  if (request.holder.session.has_value()) w.Key("session").String(*request.holder.session);
  if (request.holder.client.has_value()) w.Key("client").String(*request.holder.client);
  if (!instance.empty()) w.Key("instance").String(instance);
  w.EndObject();
  return w.Take();
}

StatusOr<control::AcquireRequest> ParseAcquireRequest(std::string_view body,
                                                      std::string* instance) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseObject(body, "acquire request", json::storage_ptr(&arena)));
  const json::object& o = value.as_object();
  control::AcquireRequest request;
  AGENTKV_RETURN_IF_ERROR(ReadRequiredString(o, "ticket", "ticket_id", &request.ticket));
  AGENTKV_RETURN_IF_ERROR(protocol::FindRequired(o, "reservation_tokens").status());
  AGENTKV_RETURN_IF_ERROR(protocol::ReadInt64(o, "reservation_tokens", "reservation_tokens",
                                              &request.reservation_tokens));
  AGENTKV_RETURN_IF_ERROR(CheckTokens("reservation_tokens", request.reservation_tokens));
  AGENTKV_RETURN_IF_ERROR(protocol::ReadBool(o, "protected", "protected", &request.is_protected));
  for (auto [key, out] :
       {std::pair{"engine", &request.engine}, std::pair{"prefix_key", &request.prefix_key},
        std::pair{"session", &request.holder.session},
        std::pair{"client", &request.holder.client}}) {
    if (protocol::FindNonNull(o, key) == nullptr) continue;
    std::string text;
    AGENTKV_RETURN_IF_ERROR(ReadRequiredString(o, key, "", &text));
    *out = std::move(text);
  }
  AGENTKV_RETURN_IF_ERROR(protocol::ReadBool(o, "continuing", "continuing", &request.continuing));
  AGENTKV_RETURN_IF_ERROR(
      protocol::ReadInt64(o, "prefix_tokens", "prefix_tokens", &request.prefix_tokens));
  AGENTKV_RETURN_IF_ERROR(CheckTokens("prefix_tokens", request.prefix_tokens));
  std::string named;
  if (protocol::FindNonNull(o, "instance") != nullptr) {
    AGENTKV_RETURN_IF_ERROR(ReadRequiredString(o, "instance", "", &named));
  }
  if (instance != nullptr) *instance = std::move(named);
  return request;
}

std::string SerializeDecision(const control::AdmissionDecision& decision) {
  AGENTKV_CHECK(decision.action != AdmissionAction::kWait) << "a decision on the wire is final";
  protocol::JsonWriter w;
  w.BeginObject().Key("action").String(control::AdmissionActionName(decision.action));
  w.Key("reason").String(control::AdmissionReasonName(decision.reason));
  w.Key("ticket").String(decision.ticket);
  w.Key("reservation_tokens").Int(decision.reservation_tokens);
  w.Key("lease_id");
  if (decision.lease_id.has_value()) {
    w.String(*decision.lease_id);
  } else {
    w.Null();
  }
  w.Key("owner_epoch").Int(decision.owner_epoch);
  w.Key("wait_s").Double(decision.wait.seconds());
  if (decision.ceiling.has_value()) w.Key("ceiling").Int(*decision.ceiling);
  w.EndObject();
  return w.Take();
}

StatusOr<control::AdmissionDecision> ParseDecision(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseObject(body, "admission decision", json::storage_ptr(&arena)));
  const json::object& o = value.as_object();
  control::AdmissionDecision d;
  std::string action;
  AGENTKV_RETURN_IF_ERROR(ReadRequiredString(o, "action", "", &action));
  AGENTKV_ASSIGN_OR_RETURN(d.action, ParseAction(action));
  std::string reason;
  AGENTKV_RETURN_IF_ERROR(ReadRequiredString(o, "reason", "", &reason));
  AGENTKV_ASSIGN_OR_RETURN(d.reason, ParseAdmissionReason(reason));
  AGENTKV_RETURN_IF_ERROR(ReadRequiredString(o, "ticket", "ticket_id", &d.ticket));
  AGENTKV_RETURN_IF_ERROR(protocol::FindRequired(o, "reservation_tokens").status());
  AGENTKV_RETURN_IF_ERROR(
      protocol::ReadInt64(o, "reservation_tokens", "reservation_tokens", &d.reservation_tokens));
  AGENTKV_RETURN_IF_ERROR(CheckTokens("reservation_tokens", d.reservation_tokens));
  AGENTKV_RETURN_IF_ERROR(protocol::ReadOptionalString(o, "lease_id", "lease_id", &d.lease_id));
  if (d.lease_id.has_value() && d.lease_id->size() > kMaxLeaseIdBytes) {
    return InvalidArgumentError("lease_id: longer than " + std::to_string(kMaxLeaseIdBytes) +
                                " bytes");
  }
  if (d.action == AdmissionAction::kAdmit && (!d.lease_id.has_value() || d.lease_id->empty())) {
    return InvalidArgumentError("lease_id: required when action is \"admit\"");
  }
  AGENTKV_RETURN_IF_ERROR(protocol::ReadInt64(o, "owner_epoch", "owner_epoch", &d.owner_epoch));
  double wait_s = 0.0;
  AGENTKV_RETURN_IF_ERROR(protocol::ReadDouble(o, "wait_s", "wait_s", &wait_s));
  AGENTKV_ASSIGN_OR_RETURN(d.wait, TimeFromSeconds("wait_s", wait_s));
  AGENTKV_RETURN_IF_ERROR(protocol::ReadOptionalInt64(o, "ceiling", "ceiling", &d.ceiling));
  if (d.ceiling.has_value() && *d.ceiling < 0) {
    return InvalidArgumentError("ceiling: expected a non-negative integer");
  }
  if (d.action == AdmissionAction::kRefuse && d.reason != AdmissionReason::kOversized &&
      d.reason != AdmissionReason::kOverShare) {
    return InvalidArgumentError(
        "reason: \"refuse\" comes only with \"oversized\" or \"over_share\"");
  }
  return d;
}

std::string SerializeReleaseRequest(std::string_view lease_id) {
  protocol::JsonWriter w;
  w.BeginObject().Key("lease_id").String(lease_id).EndObject();
  return w.Take();
}

StatusOr<std::string> ParseReleaseRequest(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseObject(body, "release request", json::storage_ptr(&arena)));
  std::string lease_id;
  AGENTKV_RETURN_IF_ERROR(
      ReadRequiredString(value.as_object(), "lease_id", "", &lease_id, kMaxLeaseIdBytes));
  return lease_id;
}

std::string SerializeCancelRequest(std::string_view ticket) {
  protocol::JsonWriter w;
  w.BeginObject().Key("ticket").String(ticket).EndObject();
  return w.Take();
}

StatusOr<std::string> ParseCancelRequest(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseObject(body, "cancel request", json::storage_ptr(&arena)));
  std::string ticket;
  AGENTKV_RETURN_IF_ERROR(ReadRequiredString(value.as_object(), "ticket", "ticket_id", &ticket));
  return ticket;
}

std::string SerializeHeartbeatRequest(std::string_view instance) {
  protocol::JsonWriter w;
  w.BeginObject().Key("instance").String(instance).EndObject();
  return w.Take();
}

StatusOr<std::string> ParseHeartbeatRequest(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseObject(body, "heartbeat request", json::storage_ptr(&arena)));
  std::string instance;
  AGENTKV_RETURN_IF_ERROR(ReadRequiredString(value.as_object(), "instance", "", &instance));
  return instance;
}

std::string SerializeStepMetrics(const std::vector<std::pair<std::string, double>>& metrics) {
  protocol::JsonWriter w;
  w.BeginObject();
  for (const auto& [name, value] : metrics) w.Key(name).Double(value);
  w.EndObject();
  return w.Take();
}

StatusOr<std::vector<std::pair<std::string, double>>> ParseStepMetrics(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(json::value value,
                           ParseObject(body, "agentic_kv metrics", json::storage_ptr(&arena)));
  std::vector<std::pair<std::string, double>> metrics;
  for (const auto& member : value.as_object()) {
    const std::optional<double> number = protocol::AsDouble(member.value());
    // 1e400 reads as infinity, which JSON cannot write back.
    if (!number.has_value() || !std::isfinite(*number)) {
      return InvalidArgumentError(std::string(member.key()) + ": expected a finite number");
    }
    metrics.emplace_back(std::string(member.key()), *number);
  }
  return metrics;
}

}  // namespace agentkv::service
