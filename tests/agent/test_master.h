// A test-side AgentLink server: the agent's real peer in tests, speaking the real protocol
// over real gRPC on 127.0.0.1. It acknowledges every RegisterAgent, records everything agents
// send, and lets the test send StartTask/KillTask to the connected agent.
//
// Thread-safe. Wait* helpers poll the recorded messages until a predicate holds or a timeout.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "steadfast/v1/agent_link.grpc.pb.h"

namespace sf::agent::testing {

class TestMaster {
 public:
  // Listens on 127.0.0.1:`port` (0: an ephemeral port).
  explicit TestMaster(int port = 0, int heartbeat_interval_ms = 200);
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
  grpc::ServerReaderWriter<steadfast::v1::MasterMessage, steadfast::v1::AgentMessage>* stream_ =
      nullptr;
  std::mutex write_mu_;
  bool stopped_ = false;
};

}  // namespace sf::agent::testing
