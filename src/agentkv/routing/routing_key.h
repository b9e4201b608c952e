// The sticky routing key of a session, as Relax sends it in X-SMG-Routing-Key and the
// consistent_hashing policy hashes it.
//
// Pure functions: the same session gives the same key on every run and platform.
#ifndef AGENTKV_ROUTING_ROUTING_KEY_H_
#define AGENTKV_ROUTING_ROUTING_KEY_H_

#include <cstdint>
#include <string_view>

#include "agentkv/base/strong_id.h"

namespace agentkv::routing {

// The routing key of a session named by a string (a WEKA conversation id, an
// X-SMG-Routing-Key header): a seeded 64-bit hash of its bytes.
uint64_t SessionRoutingKey(std::string_view session);

// The routing key of a numbered session: the number itself.
inline uint64_t SessionRoutingKey(SessionId session) {
  return static_cast<uint64_t>(session.value());
}

}  // namespace agentkv::routing

#endif  // AGENTKV_ROUTING_ROUTING_KEY_H_
