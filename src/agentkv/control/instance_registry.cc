// Invariants: every ticket in owner_ is in its owner's ticket set and in no other set; every
// ticket in a set has owner_ naming that set's instance.
#include "agentkv/control/instance_registry.h"

#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::control {

InstanceRegistry::InstanceRegistry(TimeNs timeout) : timeout_(timeout) {
  AGENTKV_CHECK(timeout > TimeNs()) << "instance timeout must be > 0";
}

void InstanceRegistry::Touch(std::string_view instance, TimeNs now) {
  AGENTKV_CHECK(!instance.empty()) << "an instance id is never empty";
  auto it = instances_.find(instance);
  if (it == instances_.end()) it = instances_.emplace(std::string(instance), Instance{}).first;
  it->second.last_seen = now;
}

void InstanceRegistry::Own(std::string_view instance, std::string_view ticket, TimeNs now) {
  AGENTKV_CHECK(!ticket.empty()) << "a ticket is never empty";
  Touch(instance, now);
  auto owner = owner_.find(ticket);
  if (owner != owner_.end()) {
    if (owner->second == instance) return;
    if (auto previous = instances_.find(owner->second); previous != instances_.end()) {
      previous->second.tickets.erase(owner->first);
    }
    owner->second = std::string(instance);
  } else {
    owner_.emplace(std::string(ticket), std::string(instance));
  }
  instances_.find(instance)->second.tickets.emplace(ticket);
}

void InstanceRegistry::Forget(std::string_view ticket) {
  auto owner = owner_.find(ticket);
  if (owner == owner_.end()) return;
  if (auto it = instances_.find(owner->second); it != instances_.end()) {
    it->second.tickets.erase(owner->first);
  }
  owner_.erase(owner);
}

std::vector<SilentInstance> InstanceRegistry::TakeSilent(TimeNs now) {
  std::vector<SilentInstance> silent;
  const bool stalled = last_sweep_.has_value() && now - *last_sweep_ > TimeNs(timeout_.ns() / 2);
  last_sweep_ = now;
  if (stalled) {
    // Nobody could be heard while the caller stalled: a fresh timeout for everyone.
    for (auto& [id, instance] : instances_) instance.last_seen = now;
    return silent;
  }
  for (auto it = instances_.begin(); it != instances_.end();) {
    if (now - it->second.last_seen <= timeout_) {
      ++it;
      continue;
    }
    SilentInstance gone{it->first, it->second.last_seen, {}};
    gone.tickets.reserve(it->second.tickets.size());
    for (const std::string& ticket : it->second.tickets) {
      owner_.erase(ticket);
      gone.tickets.push_back(ticket);
    }
    silent.push_back(std::move(gone));
    it = instances_.erase(it);
  }
  return silent;
}

void InstanceRegistry::PruneTickets(const std::function<bool(const std::string& ticket)>& live) {
  for (auto it = owner_.begin(); it != owner_.end();) {
    if (live(it->first)) {
      ++it;
      continue;
    }
    if (auto instance = instances_.find(it->second); instance != instances_.end()) {
      instance->second.tickets.erase(it->first);
    }
    it = owner_.erase(it);
  }
}

std::optional<std::string> InstanceRegistry::OwnerOf(std::string_view ticket) const {
  auto it = owner_.find(ticket);
  if (it == owner_.end()) return std::nullopt;
  return it->second;
}

Status InstanceRegistry::CheckInvariants() const {
  size_t owned = 0;
  for (const auto& [id, instance] : instances_) {
    owned += instance.tickets.size();
    for (const std::string& ticket : instance.tickets) {
      auto owner = owner_.find(ticket);
      if (owner == owner_.end() || owner->second != id) {
        std::string message = "ticket ";
        message += ticket;
        message += " of instance ";
        message += id;
        message += " is not recorded as owned by it";
        return InternalError(std::move(message));
      }
    }
  }
  if (owned != owner_.size()) {
    return InternalError(std::to_string(owner_.size()) + " owned tickets, but the instances list " +
                         std::to_string(owned));
  }
  return Status::Ok();
}

}  // namespace agentkv::control
