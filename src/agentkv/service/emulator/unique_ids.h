// UniqueIds: request and response ids that no other engine, and no earlier run of this one,
// repeats, as SGLang's uuid4().hex rids: 32 hexadecimal digits, the first 16 a tag drawn from
// std::random_device when the source is made, the last 16 a counter. Two engines (or one
// engine restarted) share an id only if their 64-bit tags collide.
//
// Thread-safe.
#ifndef AGENTKV_SERVICE_EMULATOR_UNIQUE_IDS_H_
#define AGENTKV_SERVICE_EMULATOR_UNIQUE_IDS_H_

#include <atomic>
#include <cstdint>
#include <string>

namespace agentkv::service {

class UniqueIds {
 public:
  // Draws the tag.
  UniqueIds();
  // For tests: the given tag.
  explicit UniqueIds(uint64_t tag) : tag_(tag) {}

  // The next id: 32 lowercase hex digits.
  std::string Next();

 private:
  uint64_t tag_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_EMULATOR_UNIQUE_IDS_H_
