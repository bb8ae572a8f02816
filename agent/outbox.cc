#include "agent/outbox.h"

#include <google/protobuf/util/time_util.h>

#include "agent/logger.h"

namespace sf::agent {

using steadfast::v1::AgentMessage;

Outbox::Outbox(Options options) : options_(options) {
  if (options_.max_log_lines == 0) {
    options_.max_log_lines = 1;
  }
  if (options_.max_batch_lines == 0) {
    options_.max_batch_lines = 1;
  }
  if (options_.max_unacked == 0) {
    options_.max_unacked = 1;
  }
}

void Outbox::DropOldestLineLocked() {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->is_state) {
      continue;
    }
    TaskKey key{it->line.trial_id(), it->line.rank(), it->line.task_id()};
    if (dropped_[key]++ == 0) {
      dropped_agent_id_[key] = it->line.agent_id();
      LogEvent(LogLevel::kWarn, "outbox", "log_buffer_full_dropping_oldest",
               {{"trial", std::to_string(std::get<0>(key))},
                {"rank", std::to_string(std::get<1>(key))},
                {"task", std::get<2>(key)},
                {"max_lines", std::to_string(options_.max_log_lines)}});
    }
    ++dropped_total_;
    log_bytes_ -= it->line.message().size();
    entries_.erase(it);
    --log_lines_;
    return;
  }
}

void Outbox::PushLog(steadfast::v1::LogLine line) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry e;
    e.queued = std::chrono::steady_clock::now();
    e.line = std::move(line);
    log_bytes_ += e.line.message().size();
    entries_.push_back(std::move(e));
    ++log_lines_;
    while (log_lines_ > options_.max_log_lines || log_bytes_ > options_.max_log_bytes) {
      DropOldestLineLocked();
    }
  }
  cv_.notify_all();
}

void Outbox::PushState(steadfast::v1::TaskStateChange change) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry e;
    e.queued = std::chrono::steady_clock::now();
    e.is_state = true;
    e.state = std::move(change);
    entries_.push_back(std::move(e));
  }
  cv_.notify_all();
}

void Outbox::Ack(int64_t sequence) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!unacked_.empty() && unacked_.front().sequence() <= sequence) {
      unacked_.pop_front();
      if (resend_from_ > 0) {
        --resend_from_;
      }
    }
  }
  cv_.notify_all();
}

void Outbox::Rewind() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    resend_from_ = 0;
  }
  cv_.notify_all();
}

std::optional<AgentMessage> Outbox::TakeReadyLocked(
    std::chrono::steady_clock::time_point now, bool flush,
    std::chrono::steady_clock::time_point* ready_at) {
  *ready_at = std::chrono::steady_clock::time_point::max();
  if (entries_.empty() && dropped_.empty()) {
    return std::nullopt;
  }
  AgentMessage message;
  if (!entries_.empty() && entries_.front().is_state) {
    *message.mutable_task_state() = std::move(entries_.front().state);
    entries_.pop_front();
    return message;
  }
  // A run of log lines at the front: is it ready?
  size_t run = 0;
  size_t run_bytes = 0;
  bool state_behind = false;
  bool full = false;
  for (const Entry& e : entries_) {
    if (e.is_state) {
      state_behind = true;
      break;
    }
    size_t bytes = e.line.message().size() + 64;  // + the other fields, roughly
    if (run > 0 && run_bytes + bytes > options_.max_batch_bytes) {
      full = true;
      break;
    }
    run_bytes += bytes;
    if (++run >= options_.max_batch_lines) {
      full = true;
      break;
    }
  }
  auto oldest = entries_.empty() ? now : entries_.front().queued;
  bool ready = flush || state_behind || full || now >= oldest + options_.max_batch_delay ||
               (run == 0 && !dropped_.empty());
  if (!ready) {
    *ready_at = oldest + options_.max_batch_delay;
    return std::nullopt;
  }
  auto* batch = message.mutable_logs();
  // Announce drops first, so the reader sees the gap where it is.
  for (const auto& [key, count] : dropped_) {
    auto* line = batch->add_lines();
    line->set_trial_id(std::get<0>(key));
    line->set_rank(std::get<1>(key));
    line->set_task_id(std::get<2>(key));
    line->set_stream("stderr");
    line->set_agent_id(dropped_agent_id_[key]);
    line->set_message("[sf-agent] " + std::to_string(count) +
                      " earlier log lines of this task were dropped: the agent's buffer was "
                      "full while the master was unreachable");
    *line->mutable_time() = google::protobuf::util::TimeUtil::GetCurrentTime();
    LogEvent(LogLevel::kWarn, "outbox", "dropped_log_lines",
             {{"trial", std::to_string(std::get<0>(key))},
              {"rank", std::to_string(std::get<1>(key))},
              {"task", std::get<2>(key)},
              {"count", std::to_string(count)}});
  }
  dropped_.clear();
  dropped_agent_id_.clear();
  for (size_t i = 0; i < run; ++i) {
    log_bytes_ -= entries_.front().line.message().size();
    *batch->add_lines() = std::move(entries_.front().line);
    entries_.pop_front();
    --log_lines_;
  }
  return message;
}

std::optional<AgentMessage> Outbox::Take(std::chrono::steady_clock::time_point deadline,
                                         bool flush) {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t generation = wake_generation_;
  while (true) {
    auto now = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point ready_at;
    if (resend_from_ < unacked_.size()) {
      return unacked_[resend_from_++];
    }
    if (unacked_.size() < options_.max_unacked) {
      if (auto message = TakeReadyLocked(now, flush, &ready_at)) {
        message->set_sequence(++last_sequence_);
        unacked_.push_back(*message);
        resend_from_ = unacked_.size();
        return message;
      }
    } else {
      ready_at = std::chrono::steady_clock::time_point::max();  // until an Ack
    }
    if (now >= deadline || wake_generation_ != generation) {
      return std::nullopt;
    }
    cv_.wait_until(lock, std::min(deadline, ready_at));
  }
}

void Outbox::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++wake_generation_;
  }
  cv_.notify_all();
}

bool Outbox::empty() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.empty() && dropped_.empty() && unacked_.empty();
}

size_t Outbox::unacked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unacked_.size();
}

int64_t Outbox::last_sequence() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_sequence_;
}

size_t Outbox::log_lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_lines_;
}

uint64_t Outbox::dropped_lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_total_;
}

}  // namespace sf::agent
