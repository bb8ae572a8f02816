// The cluster simulator (issue 45; bench/sim/run.sh drives it): a real master and PostgreSQL,
// and, in this one process, N simulated agents and the trainers of every task the master starts
// on them. No training happens; everything the master sees is real protocol:
//
// - each agent is the agent's own MasterLink and Outbox (agent/master_link.h): registration with
//   `slots_per_agent` CPU slots, heartbeats, STARTED and EXITED task events, delivery and acks;
// - each task the master starts gets a simulated trainer speaking TrialLink through the Core API
//   (core_api/steadfast_core.h): the searcher's operations, training metric rows every
//   `report_every` batches of `step_ms` each, a validation row, a checkpoint and the searcher
//   metric at the end of each operation, stop checks (a pause or preemption checkpoints and
//   exits, a kill exits), a rendezvous of the ranks for multi-slot trials, and failures at
//   `failure_rate` per operation (the process "exits 1" halfway through);
// - experiments are submitted over REST (POST /api/v1/experiments) at each kind's arrival
//   interval: grid, random or adaptive_asha searchers over a `dropout` hyperparameter, whose
//   value shapes the simulated loss (so ASHA has something to rank).
//
//   cluster_sim --scenario FILE.yaml --master-url http://127.0.0.1:8080 --master-grpc 127.0.0.1:8090
//               --join-token-file FILE --data-dir DIR [--token TOKEN]
//
// The scenario (bench/sim/scenarios/*.yaml):
//   agents: 64                # simulated agents
//   slots_per_agent: 4
//   max_seconds: 600          # the run ends then at the latest (the master keeps what it has)
//   trainer: {step_ms: 20, report_every: 10, failure_rate: 0.01}
//   experiments:              # kinds of experiment; each submitted `count` times
//     - {count: 20, every_seconds: 1, searcher: grid, trials: 8, batches: 200, slots_per_trial: 1,
//        priority: 42, weight: 1}
// The run ends when every experiment was submitted and no trainer has run for `idle_seconds`
// (5), or at max_seconds. Printed at the end, one `key=value` per line (run.sh adds the
// master's and PostgreSQL's side): experiments, trials started, trial starts per second, metric
// rows reported and per second, operations completed, failures injected, kills and stops
// received, ranks whose gang ended under them, and the time from a slot freeing (its task's
// EXITED) to the first metric report of the next trial on it, p50/p99/max, over the slots that
// had one. Exit status: 0; 1 when a simulated part met an error it should not have (first_error
// names it); 3 when max_seconds passed with trainers still running (still_running and where
// they wait are printed; they are left, not joined); 2 for a bad scenario or flag.
#include <grpcpp/grpcpp.h>
#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/master_link.h"
#include "agent/outbox.h"
#include "common/command_line.h"
#include "common/http/client.h"
#include "common/value.h"
#include "core_api/steadfast_core.h"
#include "common/sha256.h"
#include "steadfast/v1/common.pb.h"

namespace {
namespace v1 = steadfast::v1;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct ExperimentKind {
  int count = 1;
  double every_seconds = 0;
  std::string searcher = "grid";
  int trials = 4;
  int64_t batches = 100;
  int slots_per_trial = 1;
  int priority = 42;
  double weight = 1;
};

struct Scenario {
  std::string name;
  int agents = 4, slots_per_agent = 4;
  double max_seconds = 600, idle_seconds = 5;
  int step_ms = 20, report_every = 10;
  double failure_rate = 0;
  std::vector<ExperimentKind> experiments;
};

// The scenario in `path`; errors name the field.
sf::Result<Scenario> LoadScenario(const std::string& path) {
  Scenario s;
  try {
    YAML::Node root = YAML::LoadFile(path);
    auto get = [](const YAML::Node& node, const char* key, auto& out, const std::string& where) {
      if (!node[key]) return;
      try {
        out = node[key].as<std::remove_reference_t<decltype(out)>>();
      } catch (const YAML::Exception&) {
        throw std::runtime_error(where + key + ": not a valid value");
      }
    };
    s.name = fs::path(path).stem().string();
    get(root, "name", s.name, "");
    get(root, "agents", s.agents, "");
    get(root, "slots_per_agent", s.slots_per_agent, "");
    get(root, "max_seconds", s.max_seconds, "");
    get(root, "idle_seconds", s.idle_seconds, "");
    if (YAML::Node t = root["trainer"]) {
      get(t, "step_ms", s.step_ms, "trainer.");
      get(t, "report_every", s.report_every, "trainer.");
      get(t, "failure_rate", s.failure_rate, "trainer.");
    }
    if (!root["experiments"] || !root["experiments"].IsSequence()) {
      return sf::InvalidArgument(path + ": experiments: a list of experiment kinds is required");
    }
    for (size_t i = 0; i < root["experiments"].size(); ++i) {
      const YAML::Node e = root["experiments"][i];
      const std::string where = "experiments[" + std::to_string(i) + "].";
      ExperimentKind k;
      get(e, "count", k.count, where);
      get(e, "every_seconds", k.every_seconds, where);
      get(e, "searcher", k.searcher, where);
      get(e, "trials", k.trials, where);
      get(e, "batches", k.batches, where);
      get(e, "slots_per_trial", k.slots_per_trial, where);
      get(e, "priority", k.priority, where);
      get(e, "weight", k.weight, where);
      if (k.searcher != "grid" && k.searcher != "random" && k.searcher != "adaptive_asha") {
        return sf::InvalidArgument(path + ": " + where + "searcher: grid, random or adaptive_asha, not \"" +
                                   k.searcher + "\"");
      }
      if (k.count < 1 || k.trials < 1 || k.batches < 1 || k.slots_per_trial < 1) {
        return sf::InvalidArgument(path + ": " + where + "count, trials, batches and slots_per_trial must be >= 1");
      }
      s.experiments.push_back(k);
    }
  } catch (const std::exception& e) {
    return sf::InvalidArgument(path + ": " + e.what());
  }
  if (s.agents < 1 || s.slots_per_agent < 1 || s.step_ms < 0 || s.report_every < 1 || s.failure_rate < 0 ||
      s.failure_rate > 1) {
    return sf::InvalidArgument(path + ": agents and slots_per_agent >= 1, trainer.step_ms >= 0, "
                               "trainer.report_every >= 1, trainer.failure_rate in [0, 1]");
  }
  return s;
}

// What every simulated part counts.
struct Stats {
  std::atomic<int64_t> starts{0}, rows{0}, operations{0}, failures{0}, kills{0}, stops{0}, errors{0};
  std::atomic<int64_t> gang_ends{0};  // ranks whose rendezvous ended because their gang did
  std::atomic<int64_t> double_booked{0};  // StartTasks for a slot whose task had not exited
  // Trainers now waiting on the searcher or on a rendezvous (for a run that does not end).
  std::atomic<int> in_next{0}, in_gather{0};
  std::atomic<int> running{0};
  std::atomic<int64_t> last_running_ns{0};  // Clock time of the last moment a trainer ran
  std::mutex mu;
  std::vector<double> slot_gaps;  // seconds, under mu
  std::string first_error;        // under mu
  std::string first_gang_end;     // under mu: why the first rendezvous ended
  void Error(const std::string& what) {
    ++errors;
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.empty()) first_error = what;
  }
};

int64_t NowNs() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// gRPC channels to the master's TrialLink, each with its own connection, shared round-robin by
// the trainers (one per trainer would be thousands of connections; one for all, one HTTP/2
// connection's stream limit).
class Channels {
 public:
  Channels(const std::string& target, int n) {
    for (int i = 0; i < n; ++i) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("sf.sim.channel", i);  // distinct arguments: distinct connections
      channels_.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    }
  }
  std::shared_ptr<grpc::Channel> Next() { return channels_[next_++ % channels_.size()]; }

 private:
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::atomic<size_t> next_{0};
};

// The loss a trial with this dropout reaches after `batches`: lower for dropout near 0.1.
double SimulatedLoss(double dropout, int64_t batches) {
  return 2.0 + 4.0 * (dropout - 0.1) * (dropout - 0.1) + 6.0 / std::sqrt(1.0 + static_cast<double>(batches));
}

class SimAgent;

// One task's trainer, on a thread of its own.
class SimTrainer {
 public:
  // `killed` is set when the master sends KillTask (the process would get SIGTERM).
  SimTrainer(const Scenario& scenario, Stats* stats, v1::StartTask start, std::shared_ptr<grpc::Channel> channel,
             uint64_t seed, std::shared_ptr<std::atomic<bool>> killed)
      : scenario_(scenario), stats_(stats), start_(std::move(start)), channel_(std::move(channel)), rng_(seed),
        killed_(std::move(killed)) {}

  // The exit code.
  int Run(const std::function<void()>& on_first_report) {
    sf::core::Info info;
    info.master_address = start_.master_address();
    info.trial_id = start_.trial_id();
    info.experiment_id = start_.experiment_id();
    info.task_id = start_.task_id();
    info.restart = start_.restart();
    info.rank = start_.rank();
    info.world_size = start_.world_size();
    info.checkpoint_dir = start_.checkpoint_dir();
    info.restore_checkpoint = start_.restore_checkpoint();
    info.token = start_.task_token();
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(start_.hparams(), &json);
    auto hparams = sf::Value::FromJson(json.empty() ? "{}" : json);
    double dropout = 0.1;
    if (hparams.ok()) {
      if (const sf::Value* d = hparams->Find("dropout"); d && d->is_number()) dropout = d->as_double();
    }
    std::unique_ptr<sf::core::Context> ctx = sf::core::Context::Connect(info, channel_);
    int64_t batches = 0;
    if (!info.restore_checkpoint.empty()) {
      std::ifstream(info.restore_checkpoint + "/batches") >> batches;
    }
    const bool chief = info.rank == 0;
    if (info.world_size > 1) {  // the ranks meet first, as a data-parallel trainer's do
      if (!Gather(*ctx, "sim-start", std::to_string(info.rank)).ok()) return GangEnded();
    }
    std::bernoulli_distribution fails(scenario_.failure_rate);
    bool first = true;
    for (int round = 0;; ++round) {
      // The chief asks the searcher and passes the length on (a rank's own collective).
      int64_t length = 0;
      if (chief) {
        ++stats_->in_next;
        auto op = ctx->searcher().Next();
        --stats_->in_next;
        if (!op.ok()) return Fail("searcher: " + op.status().message());
        length = *op ? (*op)->length : 0;
      }
      if (info.world_size > 1) {
        auto got = Gather(*ctx, "sim-op-" + std::to_string(round), std::to_string(length));
        if (!got.ok()) return GangEnded();
        length = std::stoll((*got)[0]);
      }
      if (length == 0) return 0;  // nothing more for this trial now
      const bool fail_now = chief && fails(rng_);
      const int64_t fail_at = batches + (length - batches) / 2;
      while (batches < length) {
        const int64_t step = std::min<int64_t>(scenario_.report_every, length - batches);
        std::this_thread::sleep_for(std::chrono::milliseconds(scenario_.step_ms * step));
        if (*killed_) {
          ++stats_->kills;
          return 143;  // 128 + SIGTERM
        }
        batches += step;
        if (chief) {
          sf::Status st = ctx->train().ReportTraining(batches, {{"loss", SimulatedLoss(dropout, batches) + 0.5}});
          if (!st.ok()) return Fail("report: " + st.message());
          ++stats_->rows;
          if (first) {
            first = false;
            on_first_report();
          }
        }
        if (fail_now && batches >= fail_at) {
          ++stats_->failures;
          return 1;
        }
        auto action = ctx->preempt().ShouldStop(batches);
        if (!action.ok()) return Fail("should-stop: " + action.status().message());
        if (*action == sf::core::Preempt::Action::kStopNow) {
          ++stats_->kills;
          return 143;
        }
        if (*action == sf::core::Preempt::Action::kCheckpointAndStop) {
          ++stats_->stops;
          if (chief) {
            if (sf::Status st = Checkpoint(*ctx, batches, std::nullopt); !st.ok()) return Fail(st.message());
          }
          return 0;
        }
      }
      if (chief) {
        const double metric = SimulatedLoss(dropout, batches);
        sf::Status st = ctx->train().ReportValidation(batches, {{"validation_loss", metric}});
        if (st.ok()) st = Checkpoint(*ctx, batches, metric);
        if (st.ok()) st = ctx->searcher().Complete(sf::core::Operation{length, "batches"}, metric);
        if (!st.ok()) return Fail(st.message());
        ++stats_->rows;
        ++stats_->operations;
      }
    }
  }

 private:
  // A checkpoint as a trainer writes one: a directory with a file, registered with the master.
  sf::Status Checkpoint(sf::core::Context& ctx, int64_t batches, std::optional<double> metric) {
    std::uniform_int_distribution<uint64_t> any;
    char uuid[40];
    std::snprintf(uuid, sizeof uuid, "%016llx-sim-%08llx", static_cast<unsigned long long>(any(rng_)),
                  static_cast<unsigned long long>(batches));
    const fs::path dir = fs::path(ctx.info().checkpoint_dir) / uuid;
    std::error_code ec;
    fs::create_directories(dir, ec);
    const std::string content = std::to_string(batches);
    std::ofstream(dir / "batches") << content;
    v1::Checkpoint ck;
    ck.set_uuid(uuid);
    ck.set_trial_id(ctx.info().trial_id);
    ck.set_experiment_id(ctx.info().experiment_id);
    ck.set_batches(batches);
    ck.set_path(dir.string());
    ck.set_size(static_cast<int64_t>(content.size()));
    v1::CheckpointFile* f = ck.add_files();
    f->set_path("batches");
    f->set_size(static_cast<int64_t>(content.size()));
    f->set_sha256(sf::Sha256Hex(content));
    if (metric) ck.set_validation_metric(*metric);
    return ctx.checkpoint().Report(ck);
  }

  // A rendezvous of the gang's ranks. It fails when the gang's allocation closed (a rank failed,
  // the trial was killed): the master ends the others' part then, as it does real ranks'.
  sf::Result<std::vector<std::string>> Gather(sf::core::Context& ctx, const std::string& round,
                                              const std::string& payload) {
    // In short waits, so a KillTask (a real rank's SIGTERM) ends it: a rank waiting here for a
    // rank that failed holds its allocation open until it exits. The board keeps a round's
    // arrivals, so arriving again is the same wait.
    ++stats_->in_gather;
    sf::Result<std::vector<std::string>> got = std::vector<std::string>{};
    for (int waited = 0;; waited += 2) {
      got = ctx.distributed().Gather(round, payload, std::chrono::seconds(2));
      if (got.ok() || *killed_ || waited >= 120 || got.status().message().find("timed out") == std::string::npos) break;
    }
    --stats_->in_gather;
    if (!got.ok()) {
      std::lock_guard<std::mutex> lock(stats_->mu);
      if (stats_->first_gang_end.empty()) stats_->first_gang_end = round + ": " + got.status().message();
    }
    return got;
  }
  int GangEnded() {
    ++stats_->gang_ends;
    return 1;
  }

  int Fail(const std::string& why) {
    stats_->Error("trial " + std::to_string(start_.trial_id()) + " rank " + std::to_string(start_.rank()) + ": " +
                  why);
    return 1;
  }

  const Scenario& scenario_;
  Stats* stats_;
  v1::StartTask start_;
  std::shared_ptr<grpc::Channel> channel_;
  std::mt19937_64 rng_;
  std::shared_ptr<std::atomic<bool>> killed_;
};

// One simulated agent: the agent's own link and outbox, a trainer thread per task.
class SimAgent : public sf::agent::MasterLink::Handler {
 public:
  SimAgent(int index, const Scenario& scenario, Stats* stats, Channels* channels, const std::string& master,
           const std::string& join_token)
      : id_("sim-agent-" + std::to_string(index)), scenario_(scenario), stats_(stats), channels_(channels) {
    for (int s = 0; s < scenario.slots_per_agent; ++s) slots_["cpu" + std::to_string(s)] = {};
    sf::agent::MasterLink::Options o;
    o.target = master;
    o.join_token = join_token;
    link_ = std::make_unique<sf::agent::MasterLink>(o, this, &outbox_);
  }
  ~SimAgent() override { Stop(); }

  void Start() { link_->Start(); }
  void Stop() {
    std::vector<Trainer> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (Trainer& t : threads) t.thread.join();
    if (link_) link_->Stop();
  }
  bool connected() const { return link_->connected(); }

  v1::RegisterAgent MakeRegistration() override {
    v1::RegisterAgent r;
    r.set_agent_id(id_);
    r.set_hostname(id_);
    r.set_resource_pool("default");
    r.set_version("sim");
    r.set_incarnation(link_->incarnation());
    for (const auto& [id, slot] : slots_) {
      v1::Slot* s = r.add_slots();
      s->set_id(id);
      s->set_type(v1::SLOT_TYPE_CPU);
      s->set_device("CPU (simulated)");
      s->set_enabled(true);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [task, running] : running_) *r.add_running_tasks() = running;
    return r;
  }

  void OnMasterMessage(const v1::MasterMessage& message) override {
    if (message.has_start_task()) return StartTrainer(message.start_task());
    if (message.has_kill_task()) {  // the trainer sees it after its current step
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = killed_.find(message.kill_task().task_id()); it != killed_.end()) *it->second = true;
    }
  }

 private:
  struct SlotState {
    std::optional<Clock::time_point> freed;  // when its last task exited
    std::string task;                        // the task on it now; empty: free
  };

  void StartTrainer(const v1::StartTask& start) {
    ++stats_->starts;
    std::vector<std::optional<Clock::time_point>> freed;
    auto killed = std::make_shared<std::atomic<bool>>(false);
    {
      std::lock_guard<std::mutex> lock(mu_);
      killed_[start.task_id()] = killed;
      // Trainers that ended: their threads joined (each held a stack).
      for (auto it = threads_.begin(); it != threads_.end();) {
        if (*it->done) {
          it->thread.join();
          it = threads_.erase(it);
        } else {
          ++it;
        }
      }
      v1::RunningTask& running = running_[start.task_id()];
      running.set_task_id(start.task_id());
      running.set_trial_id(start.trial_id());
      running.set_rank(start.rank());
      running.set_pid(0);
      *running.mutable_slot_ids() = start.slot_ids();
      for (const std::string& slot : start.slot_ids()) {
        SlotState& state = slots_[slot];
        // The master must never give a slot that still runs a task to another.
        if (!state.task.empty()) {
          ++stats_->double_booked;
          stats_->Error(id_ + "/" + slot + " given to " + start.task_id() + " while " + state.task + " runs on it");
        }
        state.task = start.task_id();
        freed.push_back(state.freed);
        state.freed.reset();
      }
    }
    State(start, v1::TaskStateChange::STATE_STARTED, 0, "simulated");
    std::lock_guard<std::mutex> lock(mu_);
    auto done = std::make_shared<std::atomic<bool>>(false);
    ++stats_->running;
    // Each trainer its own random stream: from the task's id and the agent's count of starts.
    const uint64_t seed = std::hash<std::string>{}(start.task_id() + "/" + id_) ^ (seed_++ * 0x9E3779B97F4A7C15ull);
    std::thread thread([this, start, freed, seed, killed, done] {
      SimTrainer trainer(scenario_, stats_, start, channels_->Next(), seed, killed);
      const int code = trainer.Run([&] {
        const Clock::time_point now = Clock::now();
        std::lock_guard<std::mutex> stats_lock(stats_->mu);
        for (const auto& f : freed) {
          if (f) stats_->slot_gaps.push_back(std::chrono::duration<double>(now - *f).count());
        }
      });
      {
        std::lock_guard<std::mutex> agent_lock(mu_);
        running_.erase(start.task_id());
        killed_.erase(start.task_id());
        for (const std::string& slot : start.slot_ids()) {
          SlotState& state = slots_[slot];
          state.freed = Clock::now();
          if (state.task == start.task_id()) state.task.clear();
        }
      }
      State(start, v1::TaskStateChange::STATE_EXITED, code, code == 0 ? "" : "simulated exit " + std::to_string(code));
      stats_->last_running_ns = NowNs();
      --stats_->running;
      *done = true;
    });
    threads_.push_back({std::move(thread), std::move(done)});
  }

  void State(const v1::StartTask& start, v1::TaskStateChange::State state, int code, const std::string& message) {
    v1::TaskStateChange change;
    change.set_task_id(start.task_id());
    change.set_trial_id(start.trial_id());
    change.set_rank(start.rank());
    change.set_state(state);
    change.set_exit_code(code);
    change.set_message(message);
    outbox_.PushState(std::move(change));
  }

  const std::string id_;
  const Scenario& scenario_;
  Stats* stats_;
  Channels* channels_;
  sf::agent::Outbox outbox_;
  std::unique_ptr<sf::agent::MasterLink> link_;
  std::mutex mu_;
  std::map<std::string, SlotState> slots_;              // under mu_ (the ids fixed at start)
  std::map<std::string, v1::RunningTask> running_;      // under mu_
  struct Trainer {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Trainer> threads_;                        // under mu_
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> killed_;  // by task, under mu_
  uint64_t seed_ = 1;                                   // under mu_
};

// An experiment of `kind` as YAML (a native config: the master schedules it like any other).
std::string ExperimentYaml(const ExperimentKind& kind, const std::string& data_dir, int n) {
  std::ostringstream y;
  y << "name: sim-" << kind.searcher << "-" << n << "\n"
    << "data: {train: {src: " << data_dir << "/train.de, tgt: " << data_dir << "/train.en}}\n";
  if (kind.searcher == "grid") {
    y << "hyperparameters: {dropout: {type: categorical, vals: [";
    for (int i = 0; i < kind.trials; ++i) y << (i ? ", " : "") << 0.3 * i / std::max(1, kind.trials - 1);
    y << "]}}\n";
  } else {
    y << "hyperparameters: {dropout: {type: double, minval: 0.0, maxval: 0.3}}\n";
  }
  y << "resources: {slots_per_trial: " << kind.slots_per_trial << ", priority: " << kind.priority
    << ", weight: " << kind.weight << "}\n"
    << "searcher: {name: " << kind.searcher << ", metric: validation_loss, max_length: {batches: " << kind.batches
    << "}";
  if (kind.searcher != "grid") y << ", max_trials: " << kind.trials << ", seed: " << n;
  y << ", max_concurrent_trials: 0}\n";
  return y.str();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario_path, master_url, master_grpc, join_token_file, data_dir, token;
  CLI::App app("The cluster simulator: simulated agents and trainers against a real master (bench/sim/run.sh).",
               "cluster_sim");
  sf::cmdline::UseDefaults(app);
  app.add_option("--scenario", scenario_path, "the scenario YAML")->required();
  app.add_option("--master-url", master_url, "the master's REST URL")->required();
  app.add_option("--master-grpc", master_grpc, "the master's gRPC address (HOST:PORT)")->required();
  app.add_option("--join-token-file", join_token_file, "the cluster's join token, for the agents");
  app.add_option("--data-dir", data_dir, "a directory with train.de and train.en (the experiments' data)")
      ->required();
  app.add_option("--token", token, "an API token (empty: a master without users)");
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  auto loaded = LoadScenario(scenario_path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "cluster_sim: %s\n", loaded.status().message().c_str());
    return 2;
  }
  const Scenario scenario = std::move(loaded).value();
  std::string join_token;
  if (!join_token_file.empty()) {
    std::ifstream in(join_token_file);
    std::getline(in, join_token);
  }
  auto url = sf::http::Url::Parse(master_url, "--master-url");
  if (!url.ok()) {
    std::fprintf(stderr, "cluster_sim: %s\n", url.status().message().c_str());
    return 2;
  }

  Stats stats;
  Channels channels(master_grpc, 16);
  std::vector<std::unique_ptr<SimAgent>> agents;
  const Clock::time_point begin = Clock::now();
  for (int i = 0; i < scenario.agents; ++i) {
    agents.push_back(std::make_unique<SimAgent>(i, scenario, &stats, &channels, master_grpc, join_token));
    agents.back()->Start();
  }
  for (int i = 0; i < 600 && !std::all_of(agents.begin(), agents.end(), [](auto& a) { return a->connected(); });
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double connect_seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  std::printf("agents_connected_seconds=%.2f\n", connect_seconds);
  std::fflush(stdout);

  // The submissions, in time order over every kind.
  struct Due {
    double at;
    const ExperimentKind* kind;
  };
  std::vector<Due> due;
  for (const ExperimentKind& k : scenario.experiments) {
    for (int i = 0; i < k.count; ++i) due.push_back({i * k.every_seconds, &k});
  }
  std::stable_sort(due.begin(), due.end(), [](const Due& a, const Due& b) { return a.at < b.at; });
  const Clock::time_point start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(scenario.max_seconds);
  int submitted = 0, refused = 0;
  stats.last_running_ns = NowNs();
  // The experiments submitted so far, and a sampler that reads the trials of the newest few
  // every second: every QUEUED trial should say why it waits (its pending reason).
  std::mutex ids_mu;
  std::vector<std::string> experiment_ids;
  std::atomic<bool> sampling{true};
  std::atomic<int64_t> queued_seen{0}, queued_without_reason{0};
  std::thread sampler([&] {
    while (sampling) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::vector<std::string> newest;
      {
        std::lock_guard<std::mutex> lock(ids_mu);
        for (size_t i = experiment_ids.size() > 5 ? experiment_ids.size() - 5 : 0; i < experiment_ids.size(); ++i) {
          newest.push_back(experiment_ids[i]);
        }
      }
      for (const std::string& id : newest) {
        sf::http::ClientOptions o;
        o.timeout = std::chrono::seconds(10);
        sf::http::Client client(*url, o);
        boost::beast::http::request<boost::beast::http::string_body> req{
            boost::beast::http::verb::get, "/api/v1/experiments/" + id + "/trials?limit=1000", 11};
        if (!token.empty()) req.set(boost::beast::http::field::authorization, "Bearer " + token);
        auto r = client.Fetch(std::move(req));
        if (!r.ok() || r->status != 200) continue;
        auto body = sf::Value::FromJson(r->body);
        const sf::Value* trials = body.ok() ? body->Find("trials") : nullptr;
        if (!trials || !trials->is_list()) continue;
        for (const sf::Value& t : trials->as_list()) {
          const sf::Value* state = t.Find("state");
          if (!state || !state->is_string() || state->as_string().find("QUEUED") == std::string::npos) continue;
          ++queued_seen;
          const sf::Value* reason = t.Find("pendingReason");
          if (!reason || !reason->is_string() || reason->as_string().empty()) ++queued_without_reason;
        }
      }
    }
  });
  for (const Due& d : due) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(d.at)));
    if (Clock::now() > deadline) break;
    sf::http::ClientOptions o;
    o.timeout = std::chrono::seconds(30);
    sf::http::Client client(*url, o);
    boost::beast::http::request<boost::beast::http::string_body> req{boost::beast::http::verb::post,
                                                                      "/api/v1/experiments", 11};
    req.set(boost::beast::http::field::content_type, "application/json");
    if (!token.empty()) req.set(boost::beast::http::field::authorization, "Bearer " + token);
    req.body() = sf::Value(sf::Value::Map{{"configYaml", ExperimentYaml(*d.kind, data_dir, submitted + refused + 1)},
                                          {"activate", true}})
                     .ToJson();
    auto r = client.Fetch(std::move(req));
    if (r.ok() && r->status == 200) {
      ++submitted;
      auto body = sf::Value::FromJson(r->body);
      const sf::Value* e = body.ok() ? body->Find("experiment") : nullptr;
      const sf::Value* id = e ? e->Find("id") : nullptr;
      if (id) {
        std::lock_guard<std::mutex> lock(ids_mu);
        experiment_ids.push_back(id->is_string() ? id->as_string() : std::to_string(static_cast<int64_t>(id->as_double())));
      }
    } else {
      ++refused;
      stats.Error("submit: " + (r.ok() ? std::to_string(r->status) + " " + r->body : r.status().message()));
    }
  }
  const double submit_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // Until nothing has run for idle_seconds (the searchers have given every trial its last
  // operation), or the deadline.
  while (Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double idle = (NowNs() - stats.last_running_ns.load()) / 1e9;
    if (stats.running == 0 && idle >= scenario.idle_seconds) break;
  }
  const double run_seconds =
      std::chrono::duration<double>(Clock::now() - start).count() -
      (stats.running == 0 ? std::max(0.0, (NowNs() - stats.last_running_ns.load()) / 1e9) : 0.0);
  const int still_running = stats.running;
  sampling = false;
  sampler.join();
  if (still_running == 0) {
    for (auto& a : agents) a->Stop();
  }

  std::vector<double> gaps;
  {
    std::lock_guard<std::mutex> lock(stats.mu);
    gaps = stats.slot_gaps;
  }
  std::printf("scenario=%s\nagents=%d\nslots=%d\nexperiments_submitted=%d\nexperiments_refused=%d\n",
              scenario.name.c_str(), scenario.agents, scenario.agents * scenario.slots_per_agent, submitted, refused);
  std::printf("submit_seconds=%.1f\nrun_seconds=%.1f\ntrial_starts=%lld\ntrial_starts_per_second=%.2f\n", submit_seconds,
              run_seconds, static_cast<long long>(stats.starts.load()),
              run_seconds > 0 ? stats.starts.load() / run_seconds : 0.0);
  std::printf("metric_rows=%lld\nmetric_rows_per_second=%.1f\noperations_completed=%lld\n",
              static_cast<long long>(stats.rows.load()), run_seconds > 0 ? stats.rows.load() / run_seconds : 0.0,
              static_cast<long long>(stats.operations.load()));
  std::printf("failures_injected=%lld\nkills=%lld\nstops=%lld\nerrors=%lld\n",
              static_cast<long long>(stats.failures.load()), static_cast<long long>(stats.kills.load()),
              static_cast<long long>(stats.stops.load()), static_cast<long long>(stats.errors.load()));
  std::printf("slot_gaps=%zu\nslot_gap_p50_ms=%.1f\nslot_gap_p99_ms=%.1f\nslot_gap_max_ms=%.1f\n", gaps.size(),
              1000 * Percentile(gaps, 0.5), 1000 * Percentile(gaps, 0.99),
              gaps.empty() ? 0.0 : 1000 * *std::max_element(gaps.begin(), gaps.end()));
  std::printf("queued_trials_sampled=%lld\nqueued_without_reason=%lld\n", static_cast<long long>(queued_seen.load()),
              static_cast<long long>(queued_without_reason.load()));
  std::printf("gang_ends=%lld\ndouble_booked=%lld\n", static_cast<long long>(stats.gang_ends.load()),
              static_cast<long long>(stats.double_booked.load()));
  if (stats.gang_ends > 0) std::printf("first_gang_end=%s\n", stats.first_gang_end.c_str());
  if (stats.errors > 0) std::printf("first_error=%s\n", stats.first_error.c_str());
  if (still_running > 0) {
    // max_seconds passed with trainers still running: say where they wait, and leave them
    // (joining could wait out their calls' retries).
    std::printf("still_running=%d\nwaiting_on_searcher=%d\nwaiting_on_rendezvous=%d\n", still_running,
                stats.in_next.load(), stats.in_gather.load());
    std::fflush(stdout);
    std::_Exit(3);
  }
  return stats.errors > 0 ? 1 : 0;
}
