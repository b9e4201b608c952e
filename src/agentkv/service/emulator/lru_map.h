// LruMap<Key, Value>: a hash map that remembers the order in which its keys were last
// touched, so that an owner can bound it by evicting the least recently used entries it no
// longer needs (the engine emulator's session ids and legacy open sessions).
//
// Lookups are O(1); EvictOldest walks from the least recently used entry and skips the ones
// its predicate keeps. Thread-compatible; the owner locks. Not copyable (the order list holds
// iterators into itself).
#ifndef AGENTKV_SERVICE_EMULATOR_LRU_MAP_H_
#define AGENTKV_SERVICE_EMULATOR_LRU_MAP_H_

#include <cstddef>
#include <list>
#include <optional>
#include <unordered_map>
#include <utility>

namespace agentkv::service {

template <typename Key, typename Value>
class LruMap {
 public:
  LruMap() = default;
  LruMap(const LruMap&) = delete;
  LruMap& operator=(const LruMap&) = delete;

  // The value of `key`, or nullptr; does not change the order.
  Value* Find(const Key& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &it->second->second;
  }

  // The value of `key`, inserted as `make()` when absent; either way `key` becomes the most
  // recently used. `inserted`, when given, says which.
  template <typename Make>
  Value& Touch(const Key& key, Make&& make, bool* inserted = nullptr) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.splice(order_.end(), order_, it->second);
      if (inserted != nullptr) *inserted = false;
      return it->second->second;
    }
    order_.emplace_back(key, make());
    index_.emplace(key, std::prev(order_.end()));
    if (inserted != nullptr) *inserted = true;
    return order_.back().second;
  }

  // Removes `key`; false when absent.
  bool Erase(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    order_.erase(it->second);
    index_.erase(it);
    return true;
  }

  // Removes and returns the least recently used entry for which `evictable(key, value)` is
  // true, or nullopt when there is none.
  template <typename Predicate>
  std::optional<std::pair<Key, Value>> EvictOldest(Predicate&& evictable) {
    for (auto it = order_.begin(); it != order_.end(); ++it) {
      if (!evictable(it->first, it->second)) continue;
      std::pair<Key, Value> entry = std::move(*it);
      index_.erase(entry.first);
      order_.erase(it);
      return entry;
    }
    return std::nullopt;
  }

  size_t size() const { return index_.size(); }

 private:
  // Least recently used first.
  std::list<std::pair<Key, Value>> order_;
  std::unordered_map<Key, typename std::list<std::pair<Key, Value>>::iterator> index_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_EMULATOR_LRU_MAP_H_
