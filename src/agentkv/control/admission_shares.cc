// Invariants: by_session_[s] (by_client_[c]) is the sum of the tokens of the leases charged to
// session s (client c), and holds no zero entries; a lease names at least one of the two.
#include "agentkv/control/admission_shares.h"

#include <cmath>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

namespace agentkv::control {
namespace {

int64_t Held(const std::map<std::string, int64_t, std::less<>>& sums, std::string_view key) {
  auto it = sums.find(key);
  return it == sums.end() ? 0 : it->second;
}

void Add(std::map<std::string, int64_t, std::less<>>& sums, const std::string& key,
         int64_t tokens) {
  int64_t& sum = sums[key];
  sum = SaturatingAdd(sum, tokens);
}

void Subtract(std::map<std::string, int64_t, std::less<>>& sums, const std::string& key,
              int64_t tokens) {
  auto it = sums.find(key);
  AGENTKV_CHECK(it != sums.end() && it->second >= tokens) << "share sum below a lease: " << key;
  it->second -= tokens;
  if (it->second == 0) sums.erase(it);
}

}  // namespace

int64_t AdmissionShares::Bound(ShareExcess excess, int64_t ceiling) const {
  const double share =
      excess == ShareExcess::kClient ? limits_.client_share : limits_.session_share;
  return static_cast<int64_t>(
      std::floor(share * static_cast<double>(std::max<int64_t>(0, ceiling))));
}

ShareExcess AdmissionShares::Check(const ShareHolder& holder, int64_t tokens,
                                   int64_t ceiling) const {
  if (ceiling <= 0) return ShareExcess::kNone;
  const auto over = [&](ShareExcess which, int64_t held) {
    return held > 0 && SaturatingAdd(held, tokens) > Bound(which, ceiling);
  };
  if (holder.session.has_value() &&
      over(ShareExcess::kSession, Held(by_session_, *holder.session))) {
    return ShareExcess::kSession;
  }
  if (holder.client.has_value() && over(ShareExcess::kClient, Held(by_client_, *holder.client))) {
    return ShareExcess::kClient;
  }
  return ShareExcess::kNone;
}

void AdmissionShares::Charge(const std::string& lease_id, const ShareHolder& holder,
                             int64_t tokens) {
  if (!holder.session.has_value() && !holder.client.has_value()) return;
  AGENTKV_CHECK(tokens >= 0) << "negative share charge";
  const bool inserted = leases_.emplace(lease_id, Entry{holder, tokens}).second;
  AGENTKV_CHECK(inserted) << "lease charged twice: " << lease_id;
  if (holder.session.has_value()) Add(by_session_, *holder.session, tokens);
  if (holder.client.has_value()) Add(by_client_, *holder.client, tokens);
}

void AdmissionShares::Release(std::string_view lease_id) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  const Entry& entry = it->second;
  if (entry.tokens > 0) {
    if (entry.holder.session.has_value())
      Subtract(by_session_, *entry.holder.session, entry.tokens);
    if (entry.holder.client.has_value()) Subtract(by_client_, *entry.holder.client, entry.tokens);
  }
  leases_.erase(it);
}

int64_t AdmissionShares::session_held(std::string_view session) const {
  return Held(by_session_, session);
}

int64_t AdmissionShares::client_held(std::string_view client) const {
  return Held(by_client_, client);
}

Status AdmissionShares::CheckInvariants() const {
  std::map<std::string, int64_t, std::less<>> sessions;
  std::map<std::string, int64_t, std::less<>> clients;
  for (const auto& [id, entry] : leases_) {
    if (!entry.holder.session.has_value() && !entry.holder.client.has_value()) {
      return InternalError("share lease " + id + " names no holder");
    }
    if (entry.tokens == 0) continue;
    if (entry.holder.session.has_value()) Add(sessions, *entry.holder.session, entry.tokens);
    if (entry.holder.client.has_value()) Add(clients, *entry.holder.client, entry.tokens);
  }
  if (sessions != by_session_) return InternalError("per-session share sums disagree");
  if (clients != by_client_) return InternalError("per-client share sums disagree");
  return Status::Ok();
}

}  // namespace agentkv::control
