// HugePageAllocator: a std::allocator for large, long-lived arrays that are read at random
// (the KV cache's block arena and prefix index). Arrays of 2 MiB or more get a fresh anonymous
// mapping, 2 MiB-aligned and advised to the kernel as transparent-huge-page candidates (madvise
// MADV_HUGEPAGE, honoured when transparent huge pages are set to "madvise" or "always"), so
// that random probes into millions of blocks miss the TLB far less. A fresh mapping, not the
// malloc heap: memory the heap has already touched keeps its small pages whatever it is
// advised. A placement hint only: contents, results and determinism are the same with or
// without it, and a kernel that refuses it costs nothing. Smaller arrays use the default
// allocator. Stateless; thread-safe.
#ifndef AGENTKV_BASE_HUGE_PAGE_ALLOCATOR_H_
#define AGENTKV_BASE_HUGE_PAGE_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
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
    if (n > std::allocator_traits<std::allocator<T>>::max_size(std::allocator<T>())) {
      throw std::bad_array_new_length();
    }
    const size_t bytes = Rounded(n);
    // One huge page more than needed, so that an aligned run of `bytes` lies inside it; the
    // unaligned ends are given back at once.
    void* map = ::mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) throw std::bad_alloc();
    char* const base = static_cast<char*>(map);
    const size_t lead = (kHugePage - reinterpret_cast<uintptr_t>(map) % kHugePage) % kHugePage;
    char* const aligned = base + lead;
    if (lead > 0) ::munmap(base, lead);
    ::munmap(aligned + bytes, kHugePage - lead);  // kHugePage - lead > 0: lead < kHugePage.
    ::madvise(aligned, bytes, MADV_HUGEPAGE);     // A hint; may be refused.
    return reinterpret_cast<T*>(aligned);
  }

  void deallocate(T* p, size_t n) {
    if (!Huge(n)) {
      std::allocator<T>().deallocate(p, n);
      return;
    }
    ::munmap(p, Rounded(n));
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
