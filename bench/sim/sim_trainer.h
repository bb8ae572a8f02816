// The cluster simulator's trainer: one task of a trial the master started on a simulated agent,
// speaking TrialLink through the Core API (bench/sim/cluster_sim.cc says what it does), on the
// thread its agent gives it. Run() returns the exit status a real trainer would have.
#pragma once

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/sim/scenario.h"
#include "bench/sim/sim_stats.h"
#include "common/sha256.h"
#include "common/value.h"
#include "core_api/steadfast_core.h"
#include "steadfast/v1/agent_link.pb.h"
#include "steadfast/v1/common.pb.h"

namespace sf::sim {
namespace v1 = steadfast::v1;
namespace fs = std::filesystem;

// The loss a trial with this dropout reaches after `batches`: lower for dropout near 0.1.
double SimulatedLoss(double dropout, int64_t batches) {
  return 2.0 + 4.0 * (dropout - 0.1) * (dropout - 0.1) +
         6.0 / std::sqrt(1.0 + static_cast<double>(batches));
}

// One task's trainer, on a thread of its own.
class SimTrainer {
 public:
  // `killed` is set when the master sends KillTask (the process would get SIGTERM).
  SimTrainer(const Scenario& scenario, Stats* stats, v1::StartTask start,
             std::shared_ptr<grpc::Channel> channel, uint64_t seed,
             std::shared_ptr<std::atomic<bool>> killed)
      : scenario_(scenario),
        stats_(stats),
        start_(std::move(start)),
        channel_(std::move(channel)),
        rng_(seed),
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
      if (const sf::Value* d = hparams->Find("dropout"); d && d->is_number())
        dropout = d->as_double();
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
          sf::Status st = ctx->train().ReportTraining(
              batches, {{"loss", SimulatedLoss(dropout, batches) + 0.5}});
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
            if (sf::Status st = Checkpoint(*ctx, batches, std::nullopt); !st.ok())
              return Fail(st.message());
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
    std::snprintf(uuid, sizeof uuid, "%016llx-sim-%08llx",
                  static_cast<unsigned long long>(any(rng_)),
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
      if (got.ok() || *killed_ || waited >= 120 ||
          got.status().message().find("timed out") == std::string::npos)
        break;
    }
    --stats_->in_gather;
    if (!got.ok()) {
      std::lock_guard<std::mutex> lock(stats_->mu);
      if (stats_->first_gang_end.empty())
        stats_->first_gang_end = round + ": " + got.status().message();
    }
    return got;
  }
  int GangEnded() {
    ++stats_->gang_ends;
    return 1;
  }

  int Fail(const std::string& why) {
    stats_->Error("trial " + std::to_string(start_.trial_id()) + " rank " +
                  std::to_string(start_.rank()) + ": " + why);
    return 1;
  }

  const Scenario& scenario_;
  Stats* stats_;
  v1::StartTask start_;
  std::shared_ptr<grpc::Channel> channel_;
  std::mt19937_64 rng_;
  std::shared_ptr<std::atomic<bool>> killed_;
};

}  // namespace sf::sim
