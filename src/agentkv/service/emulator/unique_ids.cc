#include "agentkv/service/emulator/unique_ids.h"

#include <cinttypes>
#include <cstdio>
#include <random>

namespace agentkv::service {

UniqueIds::UniqueIds() {
  std::random_device entropy;
  tag_ = (static_cast<uint64_t>(entropy()) << 32) ^ static_cast<uint64_t>(entropy());
}

std::string UniqueIds::Next() {
  char id[33];
  std::snprintf(id, sizeof(id), "%016" PRIx64 "%016" PRIx64, tag_,
                next_.fetch_add(1, std::memory_order_relaxed));
  return id;
}

}  // namespace agentkv::service
