#include "agentkv/routing/routing_key.h"

#include "agentkv/base/hash.h"

namespace agentkv::routing {
namespace {

// Seed of SessionRoutingKey's hash; fixed so that keys are stable across runs.
constexpr uint64_t kRoutingKeySeed = 0x6167'656e'746b'7631ULL;

}  // namespace

uint64_t SessionRoutingKey(std::string_view session) { return Hash64(session, kRoutingKeySeed); }

}  // namespace agentkv::routing
