// steadfast_core: the Core API for C++ training code (docs/core-api.md) — what a process the
// agent started as one rank of a trial uses to talk to the master over TrialLink. The native
// trainer (`sf-trainer cluster`, trainer/run/cluster_mode.cc) is built on it; a user's own C++
// trainer uses it the same way. The concepts and names follow the Python package's
// (`steadfast.core`) and Determined's Core API:
//
//   auto ctx = sf::core::Context::FromEnvironment();         // the task's identity and link
//   ctx->info()                                              // trial, rank, hparams, checkpoint
//   ctx->searcher().Next() / Complete(op, metric)            // what length to train to
//   ctx->train().ReportTraining(steps, {{"loss", 0.5}})      // metrics into PostgreSQL
//   ctx->train().ReportMetrics("inference", steps, values)   // a group of the trial's own
//   ctx->checkpoint().Report(...)                            // a checkpoint written to disk
//   ctx->preempt().ShouldStop(steps)                         // pause, preemption, kill
//   ctx->distributed().Gather(round, payload)                // ranks meeting through the master
//   ctx->ReportEndpoint(url)                                 // a server's URL (sf serve start)
//
// Contract:
// - Every call except a metric report is one TrialLink RPC carrying the task's identity and
//   token (metadata `x-sf-task-token`), over TLS when SF_MASTER_CA_FILE names a CA. UNAVAILABLE,
//   DEADLINE_EXCEEDED, CANCELLED and ABORTED are retried with backoff (200 ms doubling to 5 s)
//   for up to five minutes, so a master restart is waited out; any other error is returned
//   at once as kUnavailable with the RPC's name and message.
// - Metric reports (Train) check their arguments, queue the row and return: a background thread
//   (core_api/metric_reporter.h) sends what is queued in one ReportMetrics call, so while the
//   master is slow the rows go in fewer, larger calls; with 10,000 rows queued a report blocks
//   until the sender takes more. Transient errors are retried (50 ms doubling to 2 s, for up to
//   five minutes); the master stores a row once, so a retry never duplicates one. A report the
//   master refused for good (or that outlasted the retries) is returned, with the master's code
//   and message, by the next report and by every call below that waits for the queue.
// - Order: Searcher::Next, Complete and ReportProgress and CheckpointStore::Report first wait
//   until every earlier report is stored (Train::Flush), so the master sees a searcher metric
//   or checkpoint after the rows it follows. ~Context sends what is still queued (waiting up to
//   30 s; what it cannot deliver is logged); a process that exits without destroying its
//   Context calls Train::Flush first.
// - The searcher, train (metrics) and progress calls speak for the trial: rank 0 (the chief)
//   makes them; on other ranks they do nothing and succeed. Checkpoint reports are the chief's
//   too. Stop checks and rendezvous are every rank's.
// - Errors are values; nothing here throws or exits. A Context is used by one thread at a time
//   (the training loop); it owns its gRPC channel and, on the chief, the metric sender thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/value.h"

namespace steadfast::v1 {
class Checkpoint;
}
namespace grpc {
class Channel;
}

namespace sf::core {

class MetricReporter;

// Who this task is and what it starts from: the environment the agent set (docs/core-api.md,
// "What a task gets").
struct Info {
  std::string master_address;  // SF_MASTER_ADDRESS
  std::string ca_file;         // SF_MASTER_CA_FILE; empty: plaintext
  int64_t trial_id = 0, experiment_id = 0;
  std::string task_id;
  int restart = 0;
  int rank = 0, world_size = 1, local_rank = 0, local_size = 1;
  Value hparams;                   // SF_HPARAMS, a map
  std::string checkpoint_dir;      // where this trial's checkpoints go
  std::string restore_checkpoint;  // the directory to resume from; empty on a fresh start
  std::string latest_checkpoint;   // its uuid
  // SF_RESTORE_FALLBACKS: the trial's other intact checkpoints, newest first, to resume from
  // when restore_checkpoint fails verification (CheckpointStore::ReportUnusable).
  struct Fallback {
    std::string uuid, dir;
  };
  std::vector<Fallback> restore_fallbacks;
  std::string config_file;         // the experiment's YAML
  std::string agent_id, slot_ids, task_dir;
  std::string token;               // SF_TASK_TOKEN: the task's TrialLink token; never logged
  bool chief() const { return rank == 0; }
};

// The Info in this process's environment. kInvalidArgument naming the variable that is
// missing or malformed (SF_MASTER_ADDRESS, SF_TRIAL_ID and SF_CHECKPOINT_DIR are required; the
// rank must lie in [0, SF_WORLD_SIZE); SF_HPARAMS must be a JSON object).
Result<Info> InfoFromEnvironment();

// "Train until the trial's total reaches `length` (in `unit`), then validate and Complete."
struct Operation {
  int64_t length = 0;
  std::string unit;  // batches | epochs
};

class Context;

// How long a call that waits for the metric queue waits by default: past the reporter's five
// minutes of retries and one call's deadline, so a lasting failure surfaces as its own error.
inline constexpr std::chrono::minutes kMetricFlushWait{7};

class Searcher {
 public:
  // The next operation; nullopt when the searcher has nothing more for this trial now (it is
  // done, or waits on other trials: exit, and the trial is queued again if it gets more).
  // Long-polls the master up to ~20 s. Non-chief ranks: kFailedPrecondition (the chief passes
  // operations on with its own collective, or Distributed below).
  Result<std::optional<Operation>> Next();
  // The operation's searcher metric, once validated.
  Status Complete(const Operation& op, double searcher_metric);
  // Steps done in the current operation (progress shown until the next metric report).
  Status ReportProgress(int64_t steps);

 private:
  friend class Context;
  explicit Searcher(Context* ctx) : ctx_(ctx) {}
  Context* ctx_;
};

class Train {
 public:
  using Values = std::vector<std::pair<std::string, double>>;
  // One report of the step's metrics, queued for the metric sender (returns before the master
  // has it; see the contract above). kInvalidArgument for a negative step or an empty name; the
  // error of an earlier report the master refused for good.
  Status ReportTraining(int64_t steps, const Values& values);
  Status ReportValidation(int64_t steps, const Values& values);
  // A group of the trial's own (Determined's report_metrics(group, ...)), queued like the two
  // above: `group` is lowercase letters, digits and '_', starting with a letter, at most 64
  // characters, and not "training" or "validation" (master/ingest/metric_groups.h); `values` is
  // a map of any JSON values — numbers, text, lists, maps — stored as given and read back by
  // GET /api/v1/trials/ID/metrics?kind=GROUP (the dashboard charts only the numbers). The native
  // trainer reports a speech trial's "validation_transcripts" this way. kInvalidArgument for a
  // negative step, a bad group or a `values` that is not a map.
  Status ReportMetrics(const std::string& group, int64_t steps, const Value& values);
  // Waits until every report so far is stored: OK; the error of a report the master refused
  // for good; kUnavailable if `timeout` passes first. (The calls named in the contract above
  // do this themselves.)
  Status Flush(std::chrono::steady_clock::duration timeout = kMetricFlushWait);

 private:
  friend class Context;
  explicit Train(Context* ctx) : ctx_(ctx) {}
  Status Report(const char* kind, int64_t steps, const Values& values);
  Context* ctx_;
};

class CheckpointStore {
 public:
  // Registers a checkpoint already written under info().checkpoint_dir (uuid, its absolute
  // directory, steps, files with size and sha256, metadata): retention and `sf checkpoint`
  // then know it. Chief only (others: no-op).
  Status Report(const steadfast::v1::Checkpoint& checkpoint);
  // The checkpoint `uuid`, which this trial was to resume from, failed verification (`reason`):
  // the master marks it CORRUPTED and records the event in the trial's logs. Answers the uuid
  // of the trial's latest intact checkpoint now (empty: none). Any rank may call it (the first
  // call marks it; later ones find it marked).
  Result<std::string> ReportUnusable(const std::string& uuid, const std::string& reason);

 private:
  friend class Context;
  explicit CheckpointStore(Context* ctx) : ctx_(ctx) {}
  Context* ctx_;
};

class Preempt {
 public:
  enum class Action { kContinue, kCheckpointAndStop, kStopNow };
  // What the master wants now: go on, checkpoint and stop (pause, preemption), or stop now
  // (kill). `steps` is how far the trial has trained. Waits first until every metric reported
  // before it is stored (Train::Flush), so the master decides on a position it has seen. When
  // the master does not answer within kStopCheckPatience (it is down, restarting or cut off):
  // kContinue — the trial trains on through the outage, its reports queue (MetricReporter:
  // bounded, in order) and a stop decided meanwhile is returned by the first check it answers.
  Result<Action> ShouldStop(int64_t steps);
  static constexpr std::chrono::seconds kStopCheckPatience{10};

 private:
  friend class Context;
  explicit Preempt(Context* ctx) : ctx_(ctx) {}
  Context* ctx_;
};

class Distributed {
 public:
  // Every rank of the allocation arrives in `round` with `payload`; each gets every rank's
  // payload, by rank, and (optionally) the agent each rank runs on. Waits up to `timeout` for
  // the others (the master answers FAILED_PRECONDITION naming the missing ranks).
  Result<std::vector<std::string>> Gather(const std::string& round, const std::string& payload,
                                          std::chrono::seconds timeout = std::chrono::seconds(300),
                                          std::vector<std::string>* agents = nullptr);

 private:
  friend class Context;
  explicit Distributed(Context* ctx) : ctx_(ctx) {}
  Context* ctx_;
};

class Context {
 public:
  // From the task's environment (InfoFromEnvironment), connected to its master; reads the CA
  // file when there is one (errors name it).
  static Result<std::unique_ptr<Context>> FromEnvironment();
  static Result<std::unique_ptr<Context>> Connect(Info info);
  // The same over `channel` to info.master_address, which the caller made and may share between
  // contexts (many simulated trainers in one process, bench/sim/).
  static std::unique_ptr<Context> Connect(Info info, std::shared_ptr<grpc::Channel> channel);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Info& info() const { return info_; }
  Searcher& searcher() { return searcher_; }
  Train& train() { return train_; }
  CheckpointStore& checkpoint() { return checkpoint_; }
  Preempt& preempt() { return preempt_; }
  Distributed& distributed() { return distributed_; }
  // A task that answers requests (sf-serve started by `sf serve start`) publishes where, once it
  // does: the master shows the URL as the server's until this allocation ends. Chief only
  // (others: no-op). kUnavailable with the master's message when it refuses (a trial that
  // carries no server, a URL that is not http(s)://).
  Status ReportEndpoint(const std::string& url);
  // Output lines of this task, where no agent captures them (sf-task, launcher/task_launcher.h):
  // one ReportLogs call (retried as every call is). The master stores a batch once per
  // (task, `incarnation`, `sequence`), so re-sending a batch with its sequence is safe. Every
  // rank's (each speaks for its own task).
  struct LogLine {
    std::string stream;  // stdout | stderr
    std::string text;
    std::chrono::system_clock::time_point time;
  };
  Status ReportLogs(const std::string& incarnation, int64_t sequence, const std::vector<LogLine>& lines);
  // How this task's program ended, where no agent watches it (sf-task under Slurm): its exit
  // status and the line that says why. Every rank's.
  Status ReportExit(int exit_code, const std::string& reason);

 private:
  friend class Searcher;
  friend class Train;
  friend class CheckpointStore;
  friend class Preempt;
  friend class Distributed;
  struct Link;
  Context(Info info, std::unique_ptr<Link> link);

  Info info_;
  std::unique_ptr<Link> link_;
  std::unique_ptr<MetricReporter> reporter_;  // the chief's; null on other ranks
  bool master_away_ = false;                 // the last stop check found the master away
  Searcher searcher_{this};
  Train train_{this};
  CheckpointStore checkpoint_{this};
  Preempt preempt_{this};
  Distributed distributed_{this};
};

}  // namespace sf::core
