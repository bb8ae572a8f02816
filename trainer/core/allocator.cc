#include "trainer/core/allocator.h"

#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace sf {

size_t CachingAllocator::SizeClass(size_t bytes) {
  if (bytes <= 4096) return (bytes + 63) / 64 * 64;
  // Four classes per power of two: waste at most 25%.
  const size_t p = std::bit_floor(bytes);
  const size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

// Blocks of 2 MiB and more (activations, weights, optimizer state) are 2 MiB-aligned and asked
// to be backed by transparent huge pages: with 4 KiB pages a GEMM streaming a 4096 x 2048 operand
// misses the TLB constantly, and first-touching a 3 GB working set costs ~900k page faults.
// Where THP is off (or not Linux) this is a plain aligned allocation.
namespace {
class HostHeap final : public MemoryResource {
 public:
  void* Allocate(size_t bytes) override {
    constexpr size_t kHuge = size_t{2} << 20;
    if (bytes < kHuge) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    const size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, size);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p != nullptr) madvise(p, size, MADV_HUGEPAGE);
#endif
    return p;
  }
  void Free(void* ptr) override { std::free(ptr); }
  void Zero(void* ptr, size_t bytes) override { std::memset(ptr, 0, bytes); }
  void CopyFromHost(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  bool host_accessible() const override { return true; }
};
}  // namespace

MemoryResource& HostMemory() {
  static HostHeap* heap = new HostHeap();  // never destroyed: outlives all tensors
  return *heap;
}

CachingAllocator::~CachingAllocator() {
  ReleaseCached();
  for (auto& [ptr, size] : live_) resource_->Free(ptr);
}

void* CachingAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  const size_t cls = SizeClass(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* ptr = nullptr;
  auto it = free_.find(cls);
  if (it != free_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= static_cast<int64_t>(cls);
    ++stats_.cache_hits;
  } else {
    ptr = resource_->Allocate(cls);
    if (ptr == nullptr) throw std::bad_alloc();
    ++stats_.system_allocations;
  }
  live_.emplace(ptr, cls);
  stats_.bytes_in_use += static_cast<int64_t>(cls);
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
  return ptr;
}

void CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) std::abort();  // not ours: a programming error
  const size_t cls = it->second;
  live_.erase(it);
  free_[cls].push_back(ptr);
  stats_.bytes_in_use -= static_cast<int64_t>(cls);
  stats_.bytes_cached += static_cast<int64_t>(cls);
}

void CachingAllocator::ReleaseCached() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [cls, blocks] : free_) {
    for (void* p : blocks) resource_->Free(p);
    stats_.bytes_cached -= static_cast<int64_t>(cls * blocks.size());
    blocks.clear();
  }
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

CachingAllocator& CachingAllocator::Cpu() {
  static CachingAllocator* a = new CachingAllocator();  // never destroyed: outlives all tensors
  return *a;
}

}  // namespace sf
