// The agent's outgoing queue toward the master: task state changes and log lines, in the
// order they happened, kept while the master is unreachable and sent once it is back.
//
// Log lines are batched: a LogBatch goes out when 500 lines (or 1 MiB of text) are waiting,
// when the oldest waiting line is 200 ms old, or at once when a state change is queued behind
// them (so a task's last lines always reach the master before its EXITED). A batch never
// holds more than 500 lines or 1 MiB of text, well under gRPC's default 4 MiB message limit. State
// changes go out one per message, in order, and are never dropped.
//
// Bounded: at most `max_log_lines` lines (default 100k) and `max_log_bytes` of text (default
// 256 MiB) are held. Beyond that the oldest line is dropped; the next batch then starts, per task,
// with one line (stream "stderr") saying how many lines of that task were dropped, and the agent
// log gets a warning.
//
// Delivery (at least once; docs/cluster.md, "Message delivery"): every message Take() returns
// is an event with a sequence number (1, 2, 3, ... for the life of this Outbox, which is the
// agent process's: the link names it by its incarnation). Taken messages stay in the outbox,
// unacknowledged, until Ack(n) says the master applied everything up to n. Rewind() (a new
// connection) makes Take() return every unacknowledged message again, in order, with its
// original sequence and content, before anything new. At most `max_unacked` messages are out
// unacknowledged; past that Take() waits for an Ack (the log-line bound above then applies to
// what waits behind them).
//
// On disk (OpenJournal): with a journal, what the outbox holds survives the agent process. Every
// push, take (the message as sent, with its sequence), ack and drop is appended to the journal
// file as it happens (one write(2) each, so a killed process loses nothing the kernel has; a
// state change is also fdatasync'ed, for a machine that loses power). A new agent process
// opening the same journal gets back the incarnation, the sequence, every unacknowledged message
// as it was sent and every line not yet sent: it re-sends them under the old incarnation, and
// the master's delivery ledger applies each once. The file is rewritten from memory (written
// aside, then renamed) when the outbox drained and the file passed 1 MiB, or when it passed
// twice max_log_bytes. A torn last record (a crash mid-write) is ignored. Not kept: the
// "N lines were dropped" notices not yet sent. The journal is locked (flock): a second agent on
// the same work directory is refused.
//
// Thread-safe: any thread may push; one consumer (the link's writer) takes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <string>
#include <map>
#include <tuple>
#include <mutex>
#include <optional>
#include <utility>

#include "common/status.h"
#include "steadfast/v1/agent_link.pb.h"

namespace sf::agent {

class Outbox {
 public:
  struct Options {
    size_t max_log_lines = 100000;
    size_t max_log_bytes = 256u << 20;
    size_t max_batch_lines = 500;
    size_t max_batch_bytes = 1u << 20;
    std::chrono::milliseconds max_batch_delay{200};
    size_t max_unacked = 64;  // messages sent and not yet acknowledged
  };

  explicit Outbox(Options options);
  Outbox() : Outbox(Options{}) {}
  ~Outbox();
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  // Keeps the outbox in the journal at `path` (created when missing), first taking back what a
  // previous process left there. Call once, before anything is pushed or taken. Errors: the file
  // cannot be created, read or locked (another agent holds it).
  Status OpenJournal(const std::string& path);

  // The agent process's name toward the master (RegisterAgent.incarnation): new for a new outbox,
  // the previous process's when OpenJournal took its messages back.
  std::string incarnation() const;

  void PushLog(steadfast::v1::LogLine line);
  void PushState(steadfast::v1::TaskStateChange change);

  // The master applied every message up to and including `sequence`: forget them. Acks for
  // sequences already forgotten (or never sent) are ignored.
  void Ack(int64_t sequence);

  // A new connection: the next Take()s return every unacknowledged message again, oldest
  // first, before anything new.
  void Rewind();

  // The next message to send: an unacknowledged one not yet sent on this connection, else a
  // new one that is ready (see the batching rule) if fewer than max_unacked are out, waiting
  // for one until `deadline`. `flush` sends waiting log lines without waiting for their batch to
  // fill. Returns nullopt at the deadline, or early when Wake() is called.
  std::optional<steadfast::v1::AgentMessage> Take(std::chrono::steady_clock::time_point deadline,
                                                  bool flush = false);

  // Makes a waiting Take() return (nullopt if nothing is ready).
  void Wake();

  // Nothing waiting and nothing unacknowledged.
  bool empty() const;
  size_t log_lines() const;
  // Messages sent (taken) and not yet acknowledged.
  size_t unacked() const;
  // The sequence of the last message created (0 before the first).
  int64_t last_sequence() const;
  // Log lines dropped since the outbox was created.
  uint64_t dropped_lines() const;

 private:
  struct Entry {
    std::chrono::steady_clock::time_point queued;
    int64_t index = 0;  // its push's number in the journal (0, 1, ...)
    bool is_state = false;
    steadfast::v1::LogLine line;
    steadfast::v1::TaskStateChange state;
  };
  // `through`: the index of the last entry the message consumed (-1: none).
  std::optional<steadfast::v1::AgentMessage> TakeReadyLocked(
      std::chrono::steady_clock::time_point now, bool flush,
      std::chrono::steady_clock::time_point* ready_at, int64_t* through);
  void DropOldestLineLocked();
  // The journal (no-ops without one): appends one record; rewrites it from memory.
  void JournalLocked(char type, const std::string& payload, bool sync = false);
  void JournalInt(char type, int64_t value);
  void RewriteJournalLocked();
  void MaybeCompactLocked();

  Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> entries_;
  // Taken, not yet acknowledged, oldest first; the first `resend_from_` of them were sent on the
  // current connection.
  std::deque<steadfast::v1::AgentMessage> unacked_;
  size_t resend_from_ = 0;
  int64_t last_sequence_ = 0;
  size_t log_lines_ = 0;
  size_t log_bytes_ = 0;
  uint64_t dropped_total_ = 0;
  uint64_t wake_generation_ = 0;
  std::string incarnation_;
  std::string journal_path_;
  int journal_fd_ = -1;
  int lock_fd_ = -1;  // path.lock, flock'ed for the process's life
  uint64_t journal_bytes_ = 0;  // written to the file since it was last rewritten
  int64_t next_index_ = 0;      // the next push's index
  // Lines dropped and not yet announced, per (trial, rank).
  // Per task (trial, rank, task id: a task that is not a trial's has trial 0 and is named by its id).
  using TaskKey = std::tuple<int64_t, int32_t, std::string>;
  std::map<TaskKey, uint64_t> dropped_;
  std::map<TaskKey, std::string> dropped_agent_id_;
};

}  // namespace sf::agent
