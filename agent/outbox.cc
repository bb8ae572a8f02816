#include "agent/outbox.h"

#include <fcntl.h>
#include <google/protobuf/util/time_util.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "agent/logger.h"

namespace sf::agent {

using steadfast::v1::AgentMessage;

namespace {

// 128 random bits in hex, with the start time first so a log reader can order incarnations.
std::string NewIncarnation() {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device());
  char buf[64];
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  std::snprintf(buf, sizeof(buf), "%llx-%016llx%016llx", static_cast<unsigned long long>(now),
                static_cast<unsigned long long>(rng()), static_cast<unsigned long long>(rng()));
  return buf;
}

// Journal records: u32 length (of what follows), a type byte, the payload.
constexpr char kIncarnation = 'I';  // the incarnation's name
constexpr char kSequence = 'Q';     // i64: the last sequence created
constexpr char kLog = 'L';          // a pushed LogLine
constexpr char kState = 'S';        // a pushed TaskStateChange
constexpr char kTake = 'T';         // i64: the last push it consumed (-1: none), then the AgentMessage
constexpr char kAck = 'A';          // i64: everything up to this sequence was applied
constexpr char kDrop = 'D';         // i64: the push dropped (the buffer was full)
constexpr uint64_t kCompactBytes = 1u << 20;

std::string Int64Bytes(int64_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof v); }
int64_t ReadInt64(const std::string& s, size_t at) {
  int64_t v = 0;
  if (s.size() >= at + sizeof v) std::memcpy(&v, s.data() + at, sizeof v);
  return v;
}
std::string Record(char type, const std::string& payload) {
  const uint32_t length = static_cast<uint32_t>(payload.size() + 1);
  std::string r(reinterpret_cast<const char*>(&length), sizeof length);
  r += type;
  r += payload;
  return r;
}
bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Outbox::~Outbox() {
  if (journal_fd_ >= 0) ::close(journal_fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::string Outbox::incarnation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return incarnation_;
}

Outbox::Outbox(Options options) : options_(options), incarnation_(NewIncarnation()) {
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
    JournalInt(kDrop, it->index);
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
    e.index = next_index_++;
    e.line = std::move(line);
    if (journal_fd_ >= 0) JournalLocked(kLog, e.line.SerializeAsString());
    log_bytes_ += e.line.message().size();
    entries_.push_back(std::move(e));
    ++log_lines_;
    while (log_lines_ > options_.max_log_lines || log_bytes_ > options_.max_log_bytes) {
      DropOldestLineLocked();
    }
    MaybeCompactLocked();
  }
  cv_.notify_all();
}

void Outbox::PushState(steadfast::v1::TaskStateChange change) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry e;
    e.queued = std::chrono::steady_clock::now();
    e.index = next_index_++;
    e.is_state = true;
    e.state = std::move(change);
    if (journal_fd_ >= 0) JournalLocked(kState, e.state.SerializeAsString(), /*sync=*/true);
    entries_.push_back(std::move(e));
  }
  cv_.notify_all();
}

void Outbox::Ack(int64_t sequence) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool forgot = false;
    while (!unacked_.empty() && unacked_.front().sequence() <= sequence) {
      unacked_.pop_front();
      forgot = true;
      if (resend_from_ > 0) {
        --resend_from_;
      }
    }
    if (forgot) {
      JournalInt(kAck, sequence);
      MaybeCompactLocked();
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
    std::chrono::steady_clock::time_point* ready_at, int64_t* through) {
  *ready_at = std::chrono::steady_clock::time_point::max();
  *through = -1;
  if (entries_.empty() && dropped_.empty()) {
    return std::nullopt;
  }
  AgentMessage message;
  if (!entries_.empty() && entries_.front().is_state) {
    *message.mutable_task_state() = std::move(entries_.front().state);
    *through = entries_.front().index;
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
    *through = entries_.front().index;
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
      int64_t through = -1;
      if (auto message = TakeReadyLocked(now, flush, &ready_at, &through)) {
        message->set_sequence(++last_sequence_);
        if (journal_fd_ >= 0) JournalLocked(kTake, Int64Bytes(through) + message->SerializeAsString());
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

void Outbox::JournalLocked(char type, const std::string& payload, bool sync) {
  if (journal_fd_ < 0) return;
  const std::string record = Record(type, payload);
  if (!WriteAll(journal_fd_, record) || (sync && ::fdatasync(journal_fd_) != 0)) {
    LogEvent(LogLevel::kError, "outbox", "journal_write_failed",
             {{"journal", journal_path_}, {"error", std::strerror(errno)},
              {"effect", "the outbox is kept in memory only from now on"}});
    ::close(journal_fd_);
    journal_fd_ = -1;
    return;
  }
  journal_bytes_ += record.size();
}

void Outbox::JournalInt(char type, int64_t value) { JournalLocked(type, Int64Bytes(value)); }

void Outbox::MaybeCompactLocked() {
  if (journal_fd_ < 0) return;
  const bool drained = entries_.empty() && unacked_.empty();
  if ((drained && journal_bytes_ > kCompactBytes) || journal_bytes_ > 2 * options_.max_log_bytes + kCompactBytes) {
    RewriteJournalLocked();
  }
}

void Outbox::RewriteJournalLocked() {
  // What the outbox holds now: its name and sequence, the unacknowledged messages (they consumed
  // pushes of the old file: -1 here), then the waiting entries, numbered afresh.
  std::string data = Record(kIncarnation, incarnation_) + Record(kSequence, Int64Bytes(last_sequence_));
  for (const AgentMessage& m : unacked_) data += Record(kTake, Int64Bytes(-1) + m.SerializeAsString());
  next_index_ = 0;
  for (Entry& e : entries_) {
    e.index = next_index_++;
    data += e.is_state ? Record(kState, e.state.SerializeAsString()) : Record(kLog, e.line.SerializeAsString());
  }
  const std::string aside = journal_path_ + ".new";
  int fd = ::open(aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && WriteAll(fd, data) && ::fdatasync(fd) == 0;
  if (fd >= 0) ::close(fd);
  ok = ok && ::rename(aside.c_str(), journal_path_.c_str()) == 0;
  if (ok) fd = ::open(journal_path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (!ok || fd < 0) {
    LogEvent(LogLevel::kError, "outbox", "journal_rewrite_failed",
             {{"journal", journal_path_}, {"error", std::strerror(errno)},
              {"effect", "the outbox is kept in memory only from now on"}});
    if (journal_fd_ >= 0) ::close(journal_fd_);
    journal_fd_ = -1;
    return;
  }
  if (journal_fd_ >= 0) ::close(journal_fd_);
  journal_fd_ = fd;
  journal_bytes_ = data.size();
}

Status Outbox::OpenJournal(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (journal_fd_ >= 0 || lock_fd_ >= 0) return FailedPrecondition("the outbox journal is already open");
  const std::string lock_path = path + ".lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) return Internal("cannot create " + lock_path + ": " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    return FailedPrecondition(path + " is held by another sf-agent process using the same work directory");
  }
  // What a previous process left: read every whole record (a torn last one is ignored).
  std::string data;
  if (int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    char buf[1 << 16];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const std::string error = std::strerror(errno);
        ::close(fd);
        return Internal("cannot read " + path + ": " + error);
      }
      data.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
  } else if (errno != ENOENT) {
    return Internal("cannot open " + path + ": " + std::strerror(errno));
  }
  std::string incarnation;
  int64_t last_sequence = 0, acked = 0, through = -1;
  std::vector<AgentMessage> taken;
  std::vector<Entry> pushed;
  std::set<int64_t> dropped;
  size_t at = 0, records = 0;
  bool torn = false;
  while (at < data.size()) {
    uint32_t length = 0;
    if (data.size() - at < sizeof length + 1) {
      torn = true;
      break;
    }
    std::memcpy(&length, data.data() + at, sizeof length);
    if (length == 0 || data.size() - at - sizeof length < length) {
      torn = true;
      break;
    }
    const char type = data[at + sizeof length];
    const std::string payload = data.substr(at + sizeof length + 1, length - 1);
    at += sizeof length + length;
    ++records;
    bool ok = true;
    switch (type) {
      case kIncarnation: incarnation = payload; break;
      case kSequence: last_sequence = std::max(last_sequence, ReadInt64(payload, 0)); break;
      case kAck: acked = std::max(acked, ReadInt64(payload, 0)); break;
      case kDrop: dropped.insert(ReadInt64(payload, 0)); break;
      case kTake: {
        AgentMessage m;
        ok = payload.size() >= 8 && m.ParseFromString(payload.substr(8));
        if (ok) {
          through = std::max(through, ReadInt64(payload, 0));
          last_sequence = std::max(last_sequence, m.sequence());
          taken.push_back(std::move(m));
        }
        break;
      }
      case kLog:
      case kState: {
        Entry e;
        e.index = static_cast<int64_t>(pushed.size());
        e.is_state = type == kState;
        ok = e.is_state ? e.state.ParseFromString(payload) : e.line.ParseFromString(payload);
        pushed.push_back(std::move(e));
        break;
      }
      default: ok = false;
    }
    if (!ok) {
      torn = true;
      break;
    }
  }
  if (torn) {
    LogEvent(LogLevel::kWarn, "outbox", "journal_tail_ignored",
             {{"journal", path}, {"records_read", std::to_string(records)},
              {"bytes_ignored", std::to_string(data.size() - at)}});
  }
  journal_path_ = path;
  if (!incarnation.empty()) {
    incarnation_ = incarnation;
    last_sequence_ = last_sequence;
    const auto now = std::chrono::steady_clock::now();
    for (AgentMessage& m : taken) {
      if (m.sequence() > acked) unacked_.push_back(std::move(m));
    }
    for (Entry& e : pushed) {
      if (e.index <= through || dropped.count(e.index)) continue;
      e.queued = now;
      if (!e.is_state) {
        ++log_lines_;
        log_bytes_ += e.line.message().size();
      }
      entries_.push_back(std::move(e));
    }
    LogEvent(LogLevel::kInfo, "outbox", "journal_recovered",
             {{"journal", path}, {"incarnation", incarnation_}, {"last_sequence", std::to_string(last_sequence_)},
              {"unacknowledged_messages", std::to_string(unacked_.size())},
              {"waiting_entries", std::to_string(entries_.size())}});
  }
  // Start the file afresh from what was recovered (also dropping a torn tail).
  RewriteJournalLocked();
  if (journal_fd_ < 0) return Internal("cannot write the outbox journal " + path);
  return Status::Ok();
}

}  // namespace sf::agent
