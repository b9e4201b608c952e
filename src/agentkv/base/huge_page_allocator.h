// HugePageAllocator: a std::allocator for large, long-lived arrays that are read at random
// (the KV cache's block arena and prefix index). Arrays of 2 MiB or more are aligned to 2 MiB
// and advised to the kernel as transparent-huge-page candidates (madvise MADV_HUGEPAGE, which
// Linux honours when transparent huge pages are set to "madvise" or "always"), so that random
// probes into millions of blocks miss the TLB far less. A placement hint only: contents,
// results and determinism are the same with or without it, and a kernel that refuses it costs
// nothing. Smaller arrays use the default allocator. Stateless; thread-safe.
#ifndef AGENTKV_BASE_HUGE_PAGE_ALLOCATOR_H_
#define AGENTKV_BASE_HUGE_PAGE_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace agentkv {

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() = default;
  template <typename U>
  explicit HugePageAllocator(const HugePageAllocator<U>& /*other*/) {}

  T* allocate(size_t n) {
    if (!Huge(n)) return std::allocator<T>().allocate(n);
    void* p = std::aligned_alloc(kHugePage, Rounded(n));
    if (p == nullptr) throw std::bad_alloc();
    ::madvise(p, Rounded(n), MADV_HUGEPAGE);  // A hint: its result changes nothing.
    return static_cast<T*>(p);
  }

  void deallocate(T* p, size_t n) {
    if (!Huge(n)) {
      std::allocator<T>().deallocate(p, n);
      return;
    }
    std::free(p);
  }

  friend bool operator==(const HugePageAllocator&, const HugePageAllocator&) { return true; }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static bool Huge(size_t n) { return n >= kHugePage / sizeof(T); }
  static size_t Rounded(size_t n) {
    return (n * sizeof(T) + kHugePage - 1) / kHugePage * kHugePage;
  }
};

}  // namespace agentkv

#endif  // AGENTKV_BASE_HUGE_PAGE_ALLOCATOR_H_
