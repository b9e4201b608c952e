// Fuzzes the admission arithmetic (control::AdmissionCoordinator over control::BudgetLedger)
// with operation sequences whose every number is adversarial: reservations anywhere in int64,
// engine capacities and usages anywhere in int64 and double, times that jump.
//
// Input: a sequence of 10-byte operations (kind, ticket, then 8 bytes of value). Invariants
// after every operation: CheckInvariants holds; out-of-range reservations are InvalidArgument
// and change nothing; the ledger's reserved tokens equal the sum of the live leases a model
// tracks, never exceed the ceiling a grant saw, and are never negative; a grant is within
// [0, kMaxTokens]; a refusal is `oversized` and exceeds the ceiling; shutdown leaves nothing.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "agentkv/base/bounds.h"
#include "agentkv/control/admission_coordinator.h"
#include "agentkv/control/reservation.h"
#include "fuzz_check.h"

namespace {

using namespace agentkv::control;
using agentkv::TimeNs;

int64_t ReadInt64(const uint8_t* bytes) {
  uint64_t raw = 0;
  std::memcpy(&raw, bytes, sizeof(raw));
  return static_cast<int64_t>(raw);
}

double ReadDouble(const uint8_t* bytes) {
  double value = 0;
  std::memcpy(&value, bytes, sizeof(value));
  return value;
}

// ticket -> (lease, tokens): the leases the fuzzer's model tracks.
using Leases = std::map<std::string, std::pair<std::string, int64_t>>;

// Checks decision `d` and books its lease.
void Absorb(const AdmissionDecision& d, Leases& leases) {
  if (d.action == AdmissionAction::kAdmit) {
    FUZZ_CHECK(d.lease_id.has_value());
    FUZZ_CHECK(d.reservation_tokens >= 0 && d.reservation_tokens <= agentkv::kMaxTokens);
    leases[d.ticket] = {*d.lease_id, d.reservation_tokens};
  }
  if (d.action == AdmissionAction::kRefuse) {
    FUZZ_CHECK(d.reason == AdmissionReason::kOversized);
    FUZZ_CHECK(d.ceiling.has_value() && d.reservation_tokens > *d.ceiling);
  }
}

// A poll whose gauges are anything an engine could send (`bytes`: the operation's value).
void Poll(AdmissionCoordinator& coordinator, const uint8_t* bytes, uint8_t shift, TimeNs now,
          Leases& leases) {
  const int64_t value = ReadInt64(bytes);
  std::vector<EngineSnapshot> fleet;
  fleet.push_back(EngineSnapshot{"e0", value, ReadDouble(bytes), 0, true});
  fleet.push_back(EngineSnapshot{"e1", value >> (shift % 64), 0.1, value, true});
  coordinator.Reconcile(fleet, now);
  // The TTL may have reclaimed leases: drop those the ledger no longer holds.
  for (auto it = leases.begin(); it != leases.end();) {
    it = coordinator.ledger().LeaseForTicket(it->first) == nullptr ? leases.erase(it)
                                                                   : std::next(it);
  }
}

// The ledger holds exactly the model's leases, and never a negative count.
void CheckLedger(const AdmissionCoordinator& coordinator, const Leases& leases) {
  FUZZ_CHECK(coordinator.CheckInvariants().ok());
  int64_t sum = 0;
  for (const auto& [t, lease] : leases) sum += lease.second;
  FUZZ_CHECK(coordinator.ledger().reserved() == sum);
  FUZZ_CHECK(coordinator.ledger().reserved() >= 0);
  FUZZ_CHECK(coordinator.ledger().ceiling() >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CoordinatorParams params;
  params.ledger.headroom = 0.9;
  params.max_wait = TimeNs::Seconds(30);
  AdmissionCoordinator coordinator(params);
  Leases leases;
  int64_t now_ns = 0;
  for (size_t at = 0; at + 10 <= size; at += 10) {
    const uint8_t kind = data[at] % 6;
    const std::string ticket = "t" + std::to_string(data[at + 1] % 16);
    const int64_t value = ReadInt64(data + at + 2);
    now_ns = agentkv::SaturatingAdd(now_ns, static_cast<int64_t>(data[at + 1]) * 100'000'000);
    const TimeNs now(now_ns);
    switch (kind) {
      case 0: {  // Acquire with any int64 reservation, or one computed from any shape.
        const int64_t tokens =
            (data[at + 1] & 0x80) != 0
                ? ReservationTokens(AttemptShape{value, value >> 3, ~value, std::nullopt})
                : value;
        agentkv::StatusOr<AdmissionDecision> d =
            coordinator.Acquire(AcquireRequest{ticket, tokens, false}, now);
        if (tokens < 0 || tokens > agentkv::kMaxTokens) {
          FUZZ_CHECK(!d.ok() && d.status().code() == agentkv::StatusCode::kInvalidArgument);
        } else if (d.ok()) {
          Absorb(*d, leases);
        }
        break;
      }
      case 1: {  // Release a lease (or a made-up id).
        if (!leases.empty()) {
          auto it = leases.begin();
          std::advance(it, static_cast<long>(static_cast<uint64_t>(value) % leases.size()));
          coordinator.Release(it->second.first, now);
          leases.erase(it);
        } else {
          coordinator.Release(std::to_string(value) + ":" + ticket, now);
        }
        break;
      }
      case 2: {
        coordinator.Cancel(ticket, now);
        leases.erase(ticket);
        break;
      }
      case 3:
        Poll(coordinator, data + at + 2, data[at + 1], now, leases);
        break;
      case 4:
        coordinator.Tick(now);
        break;
      default:
        now_ns = agentkv::SaturatingAdd(now_ns, value & 0xffffffffff);
        coordinator.Tick(TimeNs(now_ns));
        break;
    }
    for (const AdmissionDecision& d : coordinator.TakeResolved()) Absorb(d, leases);
    CheckLedger(coordinator, leases);
  }
  coordinator.Shutdown();
  (void)coordinator.TakeResolved();
  FUZZ_CHECK(coordinator.waiting() == 0 && coordinator.ledger().reserved() == 0);
  return 0;
}
