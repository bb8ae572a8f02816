// What the cluster simulator's parts share: the counters every simulated agent and trainer
// adds to (printed at the end), and the gRPC channels the trainers share.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/sim/share_meter.h"

namespace sf::sim {
using Clock = std::chrono::steady_clock;

// What every simulated part counts.
struct Stats {
  std::atomic<int64_t> starts{0}, rows{0}, operations{0}, failures{0}, kills{0}, stops{0},
      errors{0};
  std::atomic<int64_t> gang_ends{0};      // ranks whose rendezvous ended because their gang did
  std::atomic<int64_t> double_booked{0};  // StartTasks for a slot whose task had not exited
  // Trainers now waiting on the searcher or on a rendezvous (for a run that does not end).
  std::atomic<int> in_next{0}, in_gather{0};
  std::atomic<int> running{0};
  std::atomic<int64_t> last_running_ns{0};  // Clock time of the last moment a trainer ran
  std::mutex mu;
  std::vector<double> slot_gaps;  // seconds, under mu
  std::string first_error;        // under mu
  std::string first_gang_end;     // under mu: why the first rendezvous ended
  ShareMeter* shares = nullptr;   // each task's start and exit, for the fair-share pools
  void Error(const std::string& what) {
    ++errors;
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.empty()) first_error = what;
  }
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

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
      channels_.push_back(
          grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
    }
  }
  std::shared_ptr<grpc::Channel> Next() { return channels_[next_++ % channels_.size()]; }

 private:
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::atomic<size_t> next_{0};
};

}  // namespace sf::sim
