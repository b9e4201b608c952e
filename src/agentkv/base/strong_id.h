// StrongId<Tag, Rep>: a distinct integer type per kind of identity.
//
// `BlockId`, `RequestId`, `SessionId`, ... are all integers underneath, but mixing them up is a
// compile error. They are ordered, hashable and printable, and cost nothing at run time.
// Thread-compatible value type.
#ifndef AGENTKV_BASE_STRONG_ID_H_
#define AGENTKV_BASE_STRONG_ID_H_

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>

namespace agentkv {

template <typename Tag, typename Rep = int64_t>
class StrongId {
 public:
  using ValueType = Rep;

  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}

  constexpr Rep value() const { return value_; }

  friend constexpr auto operator<=>(StrongId, StrongId) = default;
  friend std::ostream& operator<<(std::ostream& os, StrongId id) { return os << id.value_; }

 private:
  Rep value_{};
};

struct BlockIdTag {};
struct RequestIdTag {};
struct SessionIdTag {};
struct ConversationIdTag {};
struct EngineIdTag {};

// Index of a block in the KV cache manager's arena.
using BlockId = StrongId<BlockIdTag, int32_t>;
// A request (one backend attempt) as the engine knows it.
using RequestId = StrongId<RequestIdTag, int64_t>;
using SessionId = StrongId<SessionIdTag, int64_t>;
using ConversationId = StrongId<ConversationIdTag, int64_t>;
using EngineId = StrongId<EngineIdTag, int32_t>;

}  // namespace agentkv

template <typename Tag, typename Rep>
struct std::hash<agentkv::StrongId<Tag, Rep>> {
  size_t operator()(agentkv::StrongId<Tag, Rep> id) const noexcept {
    return std::hash<Rep>()(id.value());
  }
};

#endif  // AGENTKV_BASE_STRONG_ID_H_
