// A caching allocator for engine buffers.
//
// Blocks are rounded up to size classes (powers of two split into 4 steps above 4 KiB, 64-byte
// aligned); a freed block goes onto its class's free list and is handed out again for the next
// request of that class, so after the first training step of a batch shape no request reaches the
// system allocator. Memory is returned to the system only by ReleaseCached() or destruction.
//
// Thread safety: all methods are safe to call concurrently (one mutex; allocation is not on any
// hot path — layers plan their buffers once per batch shape).
// Errors: Allocate() returns nullptr only for size 0; system allocation failure throws
// std::bad_alloc (out of memory is not an expected failure for the engine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace sf {

struct AllocatorStats {
  int64_t bytes_in_use = 0;      // handed out, by size class
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_cached = 0;      // on free lists
  int64_t system_allocations = 0;
  int64_t cache_hits = 0;
};

class CachingAllocator {
 public:
  CachingAllocator() = default;
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A 64-byte aligned block of at least `bytes` bytes (contents undefined).
  void* Allocate(size_t bytes);
  // Returns a block obtained from Allocate() of this allocator; nullptr is ignored.
  void Free(void* ptr);
  // Frees every cached (unused) block back to the system.
  void ReleaseCached();
  AllocatorStats stats() const;

  // The process-wide CPU allocator.
  static CachingAllocator& Cpu();
  // The size class a request of `bytes` is served from.
  static size_t SizeClass(size_t bytes);

 private:
  static void* SystemAllocate(size_t bytes);

  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> cached blocks
  std::unordered_map<void*, size_t> live_;     // block -> size class
  AllocatorStats stats_;
};

}  // namespace sf
