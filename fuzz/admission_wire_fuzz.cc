// Fuzzes the coordinator's wire format (service/admission_wire.h, and the program-level
// bodies of service/working_set_wire.h), the bodies any client of `agentkv coordinator` can
// send and any coordinator can answer.
//
// Invariants: every parser is total (a Status, never a crash or an exception); failures are
// InvalidArgument or ResourceExhausted; what parses is in range (tickets 1 to kMaxTicketBytes
// bytes, reservations in [0, kMaxTokens], waits within a year, a refuse is `oversized`, an
// admit has a lease id); and whatever parses serializes and parses back to the same value (the
// wait within a microsecond).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agentkv/base/bounds.h"
#include "agentkv/service/admission/admission_wire.h"
#include "agentkv/service/admission/working_set_wire.h"
#include "fuzz_check.h"

namespace {

using agentkv::StatusCode;
using namespace agentkv::service;
namespace control = agentkv::control;

bool IsInputError(const agentkv::Status& status) {
  return status.code() == StatusCode::kInvalidArgument ||
         status.code() == StatusCode::kResourceExhausted;
}

void FuzzAcquire(std::string_view body) {
  std::string instance;
  const agentkv::StatusOr<control::AcquireRequest> request = ParseAcquireRequest(body, &instance);
  if (!request.ok()) {
    FUZZ_CHECK(IsInputError(request.status()));
    return;
  }
  FUZZ_CHECK(!request->ticket.empty() && request->ticket.size() <= control::kMaxTicketBytes);
  FUZZ_CHECK(request->reservation_tokens >= 0 &&
             request->reservation_tokens <= agentkv::kMaxTokens);
  FUZZ_CHECK(instance.size() <= control::kMaxTicketBytes);
  std::string instance_again;
  const agentkv::StatusOr<control::AcquireRequest> again =
      ParseAcquireRequest(SerializeAcquireRequest(*request, instance), &instance_again);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(instance_again == instance);
  FUZZ_CHECK(again->ticket == request->ticket);
  FUZZ_CHECK(again->reservation_tokens == request->reservation_tokens);
  FUZZ_CHECK(again->is_protected == request->is_protected);
}

void FuzzDecision(std::string_view body) {
  const agentkv::StatusOr<control::AdmissionDecision> decision = ParseDecision(body);
  if (!decision.ok()) {
    FUZZ_CHECK(IsInputError(decision.status()));
    return;
  }
  FUZZ_CHECK(decision->action != control::AdmissionAction::kWait);
  FUZZ_CHECK(decision->reservation_tokens >= 0 &&
             decision->reservation_tokens <= agentkv::kMaxTokens);
  FUZZ_CHECK(decision->wait.ns() >= 0 && decision->wait.ns() <= agentkv::kMaxTimeNs);
  if (decision->action == control::AdmissionAction::kAdmit) {
    FUZZ_CHECK(decision->lease_id.has_value() && !decision->lease_id->empty());
  }
  if (decision->action == control::AdmissionAction::kRefuse) {
    // The two refusals: a reservation no engine can hold, and a share held too long.
    FUZZ_CHECK(decision->reason == control::AdmissionReason::kOversized ||
               decision->reason == control::AdmissionReason::kOverShare);
  }
  const agentkv::StatusOr<control::AdmissionDecision> again =
      ParseDecision(SerializeDecision(*decision));
  FUZZ_CHECK(again.ok());
  // `wait_s` travels as a double of seconds: within a microsecond up to the year bound.
  const int64_t drift = again->wait.ns() - decision->wait.ns();
  FUZZ_CHECK(drift >= -1000 && drift <= 1000);
  control::AdmissionDecision same_wait = *again;
  same_wait.wait = decision->wait;
  FUZZ_CHECK(same_wait == *decision);
}

void FuzzSmallBodies(std::string_view body) {
  if (agentkv::StatusOr<std::string> lease = ParseReleaseRequest(body); lease.ok()) {
    FUZZ_CHECK(!lease->empty());
    const agentkv::StatusOr<std::string> again =
        ParseReleaseRequest(SerializeReleaseRequest(*lease));
    FUZZ_CHECK(again.ok() && *again == *lease);
  } else {
    FUZZ_CHECK(IsInputError(lease.status()));
  }
  if (agentkv::StatusOr<std::string> ticket = ParseCancelRequest(body); ticket.ok()) {
    FUZZ_CHECK(!ticket->empty() && ticket->size() <= control::kMaxTicketBytes);
    const agentkv::StatusOr<std::string> again =
        ParseCancelRequest(SerializeCancelRequest(*ticket));
    FUZZ_CHECK(again.ok() && *again == *ticket);
  } else {
    FUZZ_CHECK(IsInputError(ticket.status()));
  }
  if (agentkv::StatusOr<std::string> instance = ParseHeartbeatRequest(body); instance.ok()) {
    FUZZ_CHECK(!instance->empty() && instance->size() <= control::kMaxTicketBytes);
    const agentkv::StatusOr<std::string> again =
        ParseHeartbeatRequest(SerializeHeartbeatRequest(*instance));
    FUZZ_CHECK(again.ok() && *again == *instance);
  } else {
    FUZZ_CHECK(IsInputError(instance.status()));
  }
  if (auto metrics = ParseStepMetrics(body); metrics.ok()) {
    FUZZ_CHECK(ParseStepMetrics(SerializeStepMetrics(*metrics)).ok());
  } else {
    FUZZ_CHECK(IsInputError(metrics.status()));
  }
}

bool IsName(std::string_view name) { return !name.empty() && name.size() <= kMaxProgramFieldBytes; }

// The working set's bodies: in range when they parse, and the same after a round trip.
void FuzzProgram(std::string_view body) {
  if (auto acquire = ParseProgramAcquire(body); acquire.ok()) {
    FUZZ_CHECK(IsName(acquire->ticket) && IsName(acquire->program) && IsName(acquire->agent));
    FUZZ_CHECK(!acquire->engine.has_value() || IsName(*acquire->engine));
    FUZZ_CHECK(acquire->reservation_tokens >= 0 &&
               acquire->reservation_tokens <= agentkv::kMaxTokens);
    const auto again = ParseProgramAcquire(SerializeProgramAcquire(*acquire));
    FUZZ_CHECK(again.ok() && again->ticket == acquire->ticket &&
               again->program == acquire->program && again->agent == acquire->agent &&
               again->engine == acquire->engine &&
               again->reservation_tokens == acquire->reservation_tokens);
  } else {
    FUZZ_CHECK(IsInputError(acquire.status()));
  }
  if (auto finish = ParseProgramFinish(body); finish.ok()) {
    FUZZ_CHECK(IsName(finish->ticket));
    FUZZ_CHECK(finish->end.context_tokens >= 0 &&
               finish->end.context_tokens <= agentkv::kMaxTokens);
    FUZZ_CHECK(finish->end.tool.size() <= kMaxProgramFieldBytes);
    const auto again = ParseProgramFinish(SerializeProgramFinish(*finish));
    FUZZ_CHECK(again.ok() && again->ticket == finish->ticket &&
               again->end.context_tokens == finish->end.context_tokens &&
               again->end.next_pause == finish->end.next_pause &&
               again->end.tool == finish->end.tool);
  } else {
    FUZZ_CHECK(IsInputError(finish.status()));
  }
  if (auto decision = ParseProgramDecision(body); decision.ok()) {
    FUZZ_CHECK(IsName(decision->ticket));
    FUZZ_CHECK(ParseProgramDecision(SerializeProgramDecision(*decision)).ok());
  } else {
    FUZZ_CHECK(IsInputError(decision.status()));
  }
  for (auto parse : {ParseProgramCancel, ParseProgramEndAgent}) {
    if (auto name = parse(body); name.ok()) {
      FUZZ_CHECK(IsName(*name));
    } else {
      FUZZ_CHECK(IsInputError(name.status()));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  FuzzAcquire(body);
  FuzzDecision(body);
  FuzzSmallBodies(body);
  FuzzProgram(body);
  return 0;
}
