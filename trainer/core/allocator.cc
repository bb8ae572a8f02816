#include "trainer/core/allocator.h"

#include <bit>
#include <cstdlib>
#include <new>

namespace sf {

size_t CachingAllocator::SizeClass(size_t bytes) {
  if (bytes <= 4096) return (bytes + 63) / 64 * 64;
  // Four classes per power of two: waste at most 25%.
  const size_t p = std::bit_floor(bytes);
  const size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

CachingAllocator::~CachingAllocator() {
  ReleaseCached();
  for (auto& [ptr, size] : live_) std::free(ptr);
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
    ptr = std::aligned_alloc(64, cls);
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
    for (void* p : blocks) std::free(p);
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
