// A test-side AgentLink server: the agent's real peer in tests, speaking the real protocol
// over real gRPC on 127.0.0.1. It acknowledges every RegisterAgent, records everything agents
// send, and lets the test send StartTask/KillTask to the connected agent. Like the master, it
// records an event (a message with a sequence) once per (incarnation, sequence), acknowledges
// it, and says in RegisterAck how far it has applied; SetMode() makes it misbehave the ways a
// dying master does.
//
// Thread-safe. Wait* helpers poll the recorded messages until a predicate holds or a timeout.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "steadfast/v1/agent_link.grpc.pb.h"

namespace sf::agent::testing {

class TestMaster {
 public:
  // Listens on 127.0.0.1:`port` (0: an ephemeral port). `applied` is what a predecessor had
  // applied (its Applied()), as the real master remembers it across restarts in its ledger.
  explicit TestMaster(int port = 0, int heartbeat_interval_ms = 200,
                      std::map<std::string, int64_t> applied = {});
  ~TestMaster();  // Stop()s
  TestMaster(const TestMaster&) = delete;
  TestMaster& operator=(const TestMaster&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Shuts the server down, breaking open streams at once (like a master that dies).
  void Stop();

  // Sends to the currently connected agent; false when none is connected.
  bool Send(const steadfast::v1::MasterMessage& message);

  // Copies of what agents sent, in arrival order (all connections).
  std::vector<steadfast::v1::AgentMessage> Messages() const;
  std::vector<steadfast::v1::RegisterAgent> Registrations() const;
  std::vector<steadfast::v1::TaskStateChange> StateChanges() const;
  std::vector<steadfast::v1::LogLine> LogLines() const;
  int heartbeats() const;
  enum class Mode {
    kApply,            // record each event once, then acknowledge it (the default)
    kApplyWithoutAck,  // record, never acknowledge: a master that dies after applying
    kLose,             // neither: a master that dies before applying what it read
  };
  void SetMode(Mode mode);
  // Cancels the current agent stream (the server keeps running, with what it recorded); the
  // agent reconnects. False when none is connected.
  bool DropConnection();
  // Events received again after they were recorded (re-sent by the agent), not recorded again.
  int duplicates() const;
  // Events read in Mode::kLose.
  int lost() const;
  // Incarnation -> highest sequence recorded: hand it to a successor on the same port.
  std::map<std::string, int64_t> Applied() const;

  // Waits until `predicate` holds over the recorded messages; false at the timeout.
  bool WaitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout);
  // Waits for a connected agent that has registered (count: registrations so far >= count).
  bool WaitForRegistrations(size_t count, std::chrono::milliseconds timeout);
  // The first state change of `task_id` in `state`.
  std::optional<steadfast::v1::TaskStateChange> WaitForState(
      const std::string& task_id, steadfast::v1::TaskStateChange::State state,
      std::chrono::milliseconds timeout);
  // Log lines of `trial_id`, `stream` ("" for both), in arrival order, as text.
  std::vector<std::string> Lines(int64_t trial_id, const std::string& stream = "") const;

 private:
  class Service;
  friend class Service;
  void Record(const steadfast::v1::AgentMessage& message);

  int port_ = 0;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<steadfast::v1::AgentMessage> messages_;
  std::map<std::string, int64_t> applied_;  // incarnation -> highest sequence recorded
  Mode mode_ = Mode::kApply;
  int duplicates_ = 0;
  int lost_ = 0;
  grpc::ServerContext* context_ = nullptr;  // of stream_
  grpc::ServerReaderWriter<steadfast::v1::MasterMessage, steadfast::v1::AgentMessage>* stream_ =
      nullptr;
  std::mutex write_mu_;
  bool stopped_ = false;
};

}  // namespace sf::agent::testing
