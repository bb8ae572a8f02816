#include "tests/agent/test_master.h"

#include <gtest/gtest.h>

namespace sf::agent::testing {

using steadfast::v1::AgentMessage;
using steadfast::v1::MasterMessage;

class TestMaster::Service final : public steadfast::v1::AgentLink::Service {
 public:
  Service(TestMaster* owner, int heartbeat_ms) : owner_(owner), heartbeat_ms_(heartbeat_ms) {}
  grpc::Status Connect(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<MasterMessage, AgentMessage>* stream) override {
    AgentMessage message;
    bool registered = false;
    std::string incarnation;
    while (stream->Read(&message)) {
      if (message.has_register_() && !registered) {
        registered = true;
        incarnation = message.register_().incarnation();
        MasterMessage ack;
        ack.mutable_register_ack()->set_master_id("test-master");
        ack.mutable_register_ack()->set_heartbeat_interval_ms(heartbeat_ms_);
        {
          std::lock_guard<std::mutex> lock(owner_->mu_);
          ack.mutable_register_ack()->set_applied_through(owner_->applied_[incarnation]);
        }
        {
          std::lock_guard<std::mutex> lock(owner_->write_mu_);
          stream->Write(ack);
        }
        {
          std::lock_guard<std::mutex> lock(owner_->mu_);
          owner_->stream_ = stream;
          owner_->context_ = context;
        }
      }
      if (message.sequence() > 0) {
        // An event: apply (record) it once per (incarnation, sequence), then acknowledge.
        bool ack_it;
        {
          std::lock_guard<std::mutex> lock(owner_->mu_);
          int64_t& applied = owner_->applied_[incarnation];
          if (owner_->mode_ == Mode::kLose) {
            ++owner_->lost_;
          } else if (message.sequence() <= applied) {
            ++owner_->duplicates_;
          } else {
            applied = message.sequence();
            owner_->messages_.push_back(message);
          }
          ack_it = owner_->mode_ == Mode::kApply;
        }
        owner_->cv_.notify_all();
        if (ack_it) {
          MasterMessage ack;
          ack.mutable_ack()->set_incarnation(incarnation);
          ack.mutable_ack()->set_applied_through(message.sequence());
          std::lock_guard<std::mutex> lock(owner_->write_mu_);
          stream->Write(ack);
        }
        continue;
      }
      owner_->Record(message);
    }
    {
      std::lock_guard<std::mutex> write_lock(owner_->write_mu_);
      std::lock_guard<std::mutex> lock(owner_->mu_);
      if (owner_->stream_ == stream) {
        owner_->stream_ = nullptr;
        owner_->context_ = nullptr;
      }
    }
    return grpc::Status::OK;
  }

 private:
  TestMaster* owner_;
  int heartbeat_ms_;
};

std::map<std::string, int64_t> TestMaster::Applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return applied_;
}

TestMaster::TestMaster(int port, int heartbeat_interval_ms, std::map<std::string, int64_t> applied)
    : service_(std::make_unique<Service>(this, heartbeat_interval_ms)), applied_(std::move(applied)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &port_);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    ADD_FAILURE() << "test master could not listen on 127.0.0.1:" << port;
  }
}

TestMaster::~TestMaster() { Stop(); }

void TestMaster::SetMode(Mode mode) {
  std::lock_guard<std::mutex> lock(mu_);
  mode_ = mode;
}

bool TestMaster::DropConnection() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!context_) return false;
  context_->TryCancel();
  return true;
}

int TestMaster::lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

int TestMaster::duplicates() const {
  std::lock_guard<std::mutex> lock(mu_);
  return duplicates_;
}

void TestMaster::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (server_) {
    // Deadline now: open streams are cancelled at once, as when a master process dies.
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}

bool TestMaster::Send(const MasterMessage& message) {
  std::lock_guard<std::mutex> write_lock(write_mu_);
  grpc::ServerReaderWriter<MasterMessage, AgentMessage>* stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream = stream_;
  }
  return stream && stream->Write(message);
}

void TestMaster::Record(const AgentMessage& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    messages_.push_back(message);
  }
  cv_.notify_all();
}

std::vector<AgentMessage> TestMaster::Messages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return messages_;
}

std::vector<steadfast::v1::RegisterAgent> TestMaster::Registrations() const {
  std::vector<steadfast::v1::RegisterAgent> out;
  for (const auto& m : Messages())
    if (m.has_register_()) out.push_back(m.register_());
  return out;
}

std::vector<steadfast::v1::TaskStateChange> TestMaster::StateChanges() const {
  std::vector<steadfast::v1::TaskStateChange> out;
  for (const auto& m : Messages())
    if (m.has_task_state()) out.push_back(m.task_state());
  return out;
}

std::vector<steadfast::v1::LogLine> TestMaster::LogLines() const {
  std::vector<steadfast::v1::LogLine> out;
  for (const auto& m : Messages())
    if (m.has_logs())
      for (const auto& line : m.logs().lines()) out.push_back(line);
  return out;
}

int TestMaster::heartbeats() const {
  int n = 0;
  for (const auto& m : Messages()) n += m.has_heartbeat() ? 1 : 0;
  return n;
}

bool TestMaster::WaitFor(const std::function<bool()>& predicate,
                         std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (predicate()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
}

bool TestMaster::WaitForRegistrations(size_t count, std::chrono::milliseconds timeout) {
  return WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu_);
        size_t n = 0;
        for (const auto& m : messages_) n += m.has_register_() ? 1 : 0;
        return n >= count && stream_ != nullptr;
      },
      timeout);
}

std::optional<steadfast::v1::TaskStateChange> TestMaster::WaitForState(
    const std::string& task_id, steadfast::v1::TaskStateChange::State state,
    std::chrono::milliseconds timeout) {
  std::optional<steadfast::v1::TaskStateChange> found;
  WaitFor(
      [&] {
        for (const auto& change : StateChanges()) {
          if (change.task_id() == task_id && change.state() == state) {
            found = change;
            return true;
          }
        }
        return false;
      },
      timeout);
  return found;
}

std::vector<std::string> TestMaster::Lines(int64_t trial_id, const std::string& stream) const {
  std::vector<std::string> out;
  for (const auto& line : LogLines()) {
    if (line.trial_id() != trial_id) continue;
    if (!stream.empty() && line.stream() != stream) continue;
    out.push_back(line.message());
  }
  return out;
}

}  // namespace sf::agent::testing
