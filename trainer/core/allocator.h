// A caching allocator for engine buffers, on the host or on a device.
//
// Where blocks come from is a MemoryResource: the host heap (HostMemory(), the default), a CUDA
// device (the CUDA backend's, cudaMalloc), or any other memory a Backend computes on. A resource
// also says whether the host may dereference its blocks and how to zero them; Tensor uses that
// to stay correct on every device.
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

// Raw memory of one device. Implementations must be thread-safe.
class MemoryResource {
 public:
  virtual ~MemoryResource() = default;
  // At least `bytes` bytes, 64-byte aligned (256 on devices); nullptr when out of memory.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  // Sets `bytes` bytes at ptr to zero (ordered before later work on the device's stream).
  virtual void Zero(void* ptr, size_t bytes) = 0;
  // Copies between host memory and blocks of this resource; complete (host side reusable, device
  // side visible to later work) when they return.
  virtual void CopyFromHost(void* dst, const void* src, size_t bytes) = 0;
  virtual void CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  // True when the host may read and write the blocks directly (the CPU heap).
  virtual bool host_accessible() const = 0;
};

// The host heap (aligned_alloc; 2 MiB-aligned, transparent-huge-page blocks from 2 MiB up).
MemoryResource& HostMemory();

struct AllocatorStats {
  int64_t bytes_in_use = 0;      // handed out, by size class
  int64_t peak_bytes_in_use = 0;
  int64_t bytes_cached = 0;      // on free lists
  int64_t system_allocations = 0;
  int64_t cache_hits = 0;
};

class CachingAllocator {
 public:
  // Serves blocks of `resource` (which must outlive the allocator); the host heap by default.
  explicit CachingAllocator(MemoryResource* resource = &HostMemory()) : resource_(resource) {}
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
  MemoryResource& resource() const { return *resource_; }
  bool host_accessible() const { return resource_->host_accessible(); }

  // The process-wide CPU allocator.
  static CachingAllocator& Cpu();
  // The size class a request of `bytes` is served from.
  static size_t SizeClass(size_t bytes);

 private:
  MemoryResource* resource_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> cached blocks
  std::unordered_map<void*, size_t> live_;     // block -> size class
  AllocatorStats stats_;
};

}  // namespace sf
