// A read-through cache for query results that only commits on one Database can change: the
// experiment list's pages, read a thousand times a second by dashboards and CI, served from
// memory instead of PostgreSQL while nothing was written (docs/cluster.md "Reads under load").
//
// Contract:
// - Get(key, load) returns what load() returned for `key`, run now or earlier. An earlier
//   result is used only while BOTH hold: no transaction has committed on `writes` since load()
//   began (Database::commits() is read before load() runs, so a write that commits while it
//   runs makes its result stale at once), and it is younger than `max_age`. So a write through
//   the master is visible to the next read (read-your-writes); `max_age` bounds the staleness
//   of changes made past the master (an operator's psql), and only those.
// - What `writes` does not carry (metric and log ingestion, on their own Database) never
//   invalidates: cache only results that do not depend on it.
// - Errors are returned and not cached. Bounded: at most `max_entries` keys; a full cache is
//   emptied before the next insert (the keys are few: dashboards ask for the same pages).
// - Thread-safe; load() runs outside the lock, so concurrent misses of one key each run it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "master/db/database.h"

namespace sf::master {

struct SnapshotCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
};

template <typename V>
class SnapshotCache {
 public:
  using Clock = std::chrono::steady_clock;

  SnapshotCache(const Database* writes, std::chrono::milliseconds max_age, size_t max_entries = 256)
      : writes_(writes), max_age_(max_age), max_entries_(max_entries) {}

  Result<V> Get(const std::string& key, const std::function<Result<V>()>& load) {
    const uint64_t generation = writes_->commits();
    const Clock::time_point now = Clock::now();
    std::shared_ptr<const V> hit;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = entries_.find(key);
      if (it != entries_.end() && it->second.generation == generation && now - it->second.loaded < max_age_) {
        stats_.hits++;
        hit = it->second.value;
      } else {
        stats_.misses++;
      }
    }
    if (hit) return *hit;  // the copy is made outside the lock
    Result<V> fresh = load();
    if (!fresh.ok()) return fresh;
    auto value = std::make_shared<const V>(*fresh);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    // Keep the newer of two concurrent loads.
    if (it == entries_.end() || it->second.generation < generation ||
        (it->second.generation == generation && it->second.loaded < now)) {
      if (it == entries_.end() && entries_.size() >= max_entries_) entries_.clear();
      entries_[key] = Entry{std::move(value), generation, now};
    }
    return fresh;
  }

  SnapshotCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  struct Entry {
    std::shared_ptr<const V> value;  // shared with hits that are copying it
    uint64_t generation = 0;
    Clock::time_point loaded;
  };
  const Database* writes_;
  const std::chrono::milliseconds max_age_;
  const size_t max_entries_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  SnapshotCacheStats stats_;
};

}  // namespace sf::master
