// Group commit: many threads hand in items and block until a single writer thread has written
// them; the writer takes everything queued at once and writes it in one transaction, so N
// concurrent callers cost one commit (one WAL flush) instead of N.
//
// Contract:
// - Thread-safe. Submit may be called from any number of threads; one background thread (owned
//   here) calls `flush`, never concurrently with itself, in submission order.
// - Submit returns only after the flush that carried its item has returned; it returns that
//   flush's status. SubmitAsync instead returns once the item is queued and later calls its
//   `done` with that status, on the writer thread, after the flush and outside the queue's lock
//   (so a gRPC callback handler answers from there and no thread waits per call). An error means none of the caller's items may be assumed written (a flush is
//   one transaction). When a group fails with kUnavailable (the database is unreachable) every
//   caller in it gets that error at once; any other error may come from one caller's data (a
//   value the database refuses), so each item of the group is then flushed alone and each caller
//   gets its own status: one bad report cannot fail everyone else's. Callers retry; the flush
//   must therefore be idempotent for the data it writes.
// - Bounded: at most `max_queued_units` units wait in the queue (an item larger than the bound is
//   admitted alone into an empty queue). Beyond that Submit blocks (backpressure), so memory stays
//   bounded however fast callers come.
// - A flush takes at most `max_units_per_flush` units (at least one item), so one transaction
//   stays a reasonable size.
// - Stop (or the destructor) writes what is queued, then ends the thread; Submit after Stop
//   returns kUnavailable without writing.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"

namespace sf::master {

// Counters of a group-commit queue (for tests and /metrics).
struct GroupCommitStats {
  int64_t submitted = 0;  // Submit calls accepted
  int64_t flushes = 0;    // flush calls (one transaction each), failed ones included
  int64_t failed_flushes = 0;
  int64_t queued = 0;  // items waiting now (not yet taken by the writer)
  int64_t largest_group = 0;
};

struct GroupCommitOptions {
  size_t max_queued_units = 100000;
  size_t max_units_per_flush = 20000;
};

template <typename Item>
class GroupCommitQueue {
 public:
  // Writes a group of items (one transaction); runs on the writer thread only.
  using Flush = std::function<Status(std::vector<Item>& items)>;
  // The size of an item in queue units (rows); at least 1 is counted.
  using Units = std::function<size_t(const Item&)>;

  GroupCommitQueue(Flush flush, Units units, GroupCommitOptions options)
      : flush_(std::move(flush)),
        units_(std::move(units)),
        options_(options),
        thread_([this] { Run(); }) {}
  ~GroupCommitQueue() { Stop(); }
  GroupCommitQueue(const GroupCommitQueue&) = delete;
  GroupCommitQueue& operator=(const GroupCommitQueue&) = delete;

  Status Submit(Item item) {
    auto ticket = std::make_shared<Ticket>();
    std::unique_lock<std::mutex> lock(mu_);
    if (!EnqueueLocked(lock, std::move(item), ticket)) return Unavailable("the writer is shutting down");
    ticket->done_cv.wait(lock, [&] { return ticket->done; });
    return ticket->status;
  }

  // Queues `item` (waiting for room like Submit) and returns; `done` gets the flush's status
  // later, on the writer thread. After Stop, `done` is called at once with kUnavailable.
  void SubmitAsync(Item item, std::function<void(Status)> done) {
    auto ticket = std::make_shared<Ticket>();
    ticket->on_done = std::move(done);
    std::unique_lock<std::mutex> lock(mu_);
    if (!EnqueueLocked(lock, std::move(item), ticket)) {
      lock.unlock();
      ticket->on_done(Unavailable("the writer is shutting down"));
    }
  }

  // Writes what is queued and stops the writer thread. Idempotent.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_.notify_all();
    space_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  GroupCommitStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    GroupCommitStats s = stats_;
    s.queued = static_cast<int64_t>(queue_.size());
    return s;
  }

 private:
  // One per Submit; its own condition variable, so a flush wakes exactly the callers it wrote.
  // A SubmitAsync ticket has `on_done` instead, called by the writer.
  struct Ticket {
    bool done = false;
    Status status;
    std::condition_variable done_cv;
    std::function<void(Status)> on_done;
  };

  // Waits for room, then queues; false (nothing queued) when stopping.
  bool EnqueueLocked(std::unique_lock<std::mutex>& lock, Item item, std::shared_ptr<Ticket> ticket) {
    size_t units = std::max<size_t>(1, units_(item));
    space_.wait(lock, [&] {
      return stopping_ || queued_units_ == 0 || queued_units_ + units <= options_.max_queued_units;
    });
    if (stopping_) return false;
    queue_.push_back(Entry{std::move(item), units, std::move(ticket)});
    queued_units_ += units;
    stats_.submitted++;
    work_.notify_one();
    return true;
  }
  struct Entry {
    Item item;
    size_t units;
    std::shared_ptr<Ticket> ticket;
  };

  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      work_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping, and everything is written
      std::vector<Item> items;
      std::vector<std::shared_ptr<Ticket>> tickets;
      size_t units = 0;
      while (!queue_.empty() &&
             (items.empty() || units + queue_.front().units <= options_.max_units_per_flush)) {
        units += queue_.front().units;
        items.push_back(std::move(queue_.front().item));
        tickets.push_back(std::move(queue_.front().ticket));
        queue_.pop_front();
      }
      queued_units_ -= units;
      space_.notify_all();
      lock.unlock();
      Status status = flush_(items);
      std::vector<Status> statuses(items.size(), status);
      int64_t flushes = 1, failed = status.ok() ? 0 : 1;
      if (!status.ok() && status.code() != StatusCode::kUnavailable && items.size() > 1) {
        // Find whose data the database refused. If the database goes away meanwhile (a failed
        // statement can be the first sign of a server stopping), the rest get that at once.
        Status unavailable;
        for (size_t i = 0; i < items.size(); ++i) {
          if (!unavailable.ok()) {
            statuses[i] = unavailable;
            continue;
          }
          std::vector<Item> one;
          one.push_back(std::move(items[i]));
          statuses[i] = flush_(one);
          flushes++;
          if (!statuses[i].ok()) failed++;
          if (statuses[i].code() == StatusCode::kUnavailable) unavailable = statuses[i];
        }
      }
      lock.lock();
      stats_.flushes += flushes;
      stats_.failed_flushes += failed;
      stats_.largest_group =
          std::max<int64_t>(stats_.largest_group, static_cast<int64_t>(tickets.size()));
      bool callbacks = false;
      for (size_t i = 0; i < tickets.size(); ++i) {
        tickets[i]->done = true;
        tickets[i]->status = statuses[i];
        if (tickets[i]->on_done) {
          callbacks = true;
        } else {
          tickets[i]->done_cv.notify_one();
        }
      }
      if (callbacks) {
        lock.unlock();
        for (size_t i = 0; i < tickets.size(); ++i) {
          if (tickets[i]->on_done) tickets[i]->on_done(statuses[i]);
        }
        lock.lock();
      }
    }
  }

  Flush flush_;
  Units units_;
  GroupCommitOptions options_;
  mutable std::mutex mu_;
  std::condition_variable work_;   // the writer: something queued, or stopping
  std::condition_variable space_;  // submitters: room in the queue
  std::deque<Entry> queue_;
  size_t queued_units_ = 0;
  bool stopping_ = false;
  GroupCommitStats stats_;
  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace sf::master
