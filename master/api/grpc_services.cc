#include "master/api/grpc_services.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <optional>
#include <thread>

#include "common/log.h"
#include "common/secret_file.h"

namespace sf::master {
namespace v1 = steadfast::v1;

grpc::Status ToGrpc(const Status& s) {
  using grpc::StatusCode;
  StatusCode code = StatusCode::UNKNOWN;
  switch (s.code()) {
    case sf::StatusCode::kOk: return grpc::Status::OK;
    case sf::StatusCode::kInvalidArgument: code = StatusCode::INVALID_ARGUMENT; break;
    case sf::StatusCode::kNotFound: code = StatusCode::NOT_FOUND; break;
    case sf::StatusCode::kAlreadyExists: code = StatusCode::ALREADY_EXISTS; break;
    case sf::StatusCode::kFailedPrecondition: code = StatusCode::FAILED_PRECONDITION; break;
    case sf::StatusCode::kDataLoss: code = StatusCode::DATA_LOSS; break;
    case sf::StatusCode::kUnavailable: code = StatusCode::UNAVAILABLE; break;
    case sf::StatusCode::kInternal: code = StatusCode::INTERNAL; break;
    case sf::StatusCode::kOutOfRange: code = StatusCode::OUT_OF_RANGE; break;
    case sf::StatusCode::kResourceExhausted: code = StatusCode::RESOURCE_EXHAUSTED; break;
    case sf::StatusCode::kCancelled: code = StatusCode::CANCELLED; break;
    case sf::StatusCode::kUnauthenticated: code = StatusCode::UNAUTHENTICATED; break;
    case sf::StatusCode::kPermissionDenied: code = StatusCode::PERMISSION_DENIED; break;
  }
  return grpc::Status(code, s.message());
}

// ------------------------------------------------------------------------------------------
// AgentLink

namespace {

// Messages to one agent, written by a thread of their own so the cluster never blocks.
class GrpcAgentConnection final : public AgentConnection {
 public:
  explicit GrpcAgentConnection(grpc::ServerReaderWriter<v1::MasterMessage, v1::AgentMessage>* stream)
      : stream_(stream), writer_([this] { WriteLoop(); }) {}
  ~GrpcAgentConnection() override { Close(); }

  void Send(const v1::MasterMessage& m) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return;
      outbox_.push_back(m);
    }
    cv_.notify_one();
  }

  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_one();
    if (writer_.joinable()) writer_.join();
  }

 private:
  void WriteLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return closed_ || !outbox_.empty(); });
      if (outbox_.empty() && closed_) return;
      v1::MasterMessage m = std::move(outbox_.front());
      outbox_.pop_front();
      lock.unlock();
      bool ok = stream_->Write(m);
      lock.lock();
      if (!ok) {
        closed_ = true;
        outbox_.clear();
        return;
      }
    }
  }

  grpc::ServerReaderWriter<v1::MasterMessage, v1::AgentMessage>* stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::MasterMessage> outbox_;
  bool closed_ = false;
  std::thread writer_;
};

}  // namespace

grpc::Status AgentLinkGrpcService::Connect(
    grpc::ServerContext* context, grpc::ServerReaderWriter<v1::MasterMessage, v1::AgentMessage>* stream) {
  v1::AgentMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (!first.has_register_() || first.register_().agent_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the first message must be RegisterAgent with an agent_id");
  }
  const std::string agent_id = first.register_().agent_id();
  const std::string incarnation = first.register_().incarnation();
  if (!join_token_.empty() && !SecretEquals(first.register_().join_token(), join_token_)) {
    const std::string why = first.register_().join_token().empty() ? "no join token" : "a wrong join token";
    log::Warn("agent", {{"event", "refused"}, {"id", agent_id}, {"peer", context->peer()}, {"reason", why}});
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "agent " + agent_id + " presented " + why + "; give it the cluster's (docs/security.md)");
  }
  auto revoked = [&] { return revocations_ && revocations_->IsRevoked(agent_id); };
  const std::string revoked_why = "agent " + agent_id + " is revoked; an admin restores it with `sf agent restore " +
                                  agent_id + "` (docs/security.md)";
  if (revoked()) {
    log::Warn("agent", {{"event", "refused"}, {"id", agent_id}, {"peer", context->peer()}, {"reason", "revoked"}});
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, revoked_why);
  }
  if (Status claim = agents_->CheckClaim(agent_id, incarnation); !claim.ok()) {
    log::Warn("agent", {{"event", "refused"}, {"id", agent_id}, {"peer", context->peer()}, {"reason", claim.message()}});
    return ToGrpc(claim);
  }
  const bool tracked = ledger_ != nullptr && !incarnation.empty();
  int64_t applied_through = 0;
  if (tracked) {
    auto applied = ledger_->Register(agent_id, incarnation);
    if (!applied.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, applied.status().message());
    applied_through = *applied;
  }
  auto conn = std::make_shared<GrpcAgentConnection>(stream);
  v1::MasterMessage ack;
  ack.mutable_register_ack()->set_master_id("steadfast-master");
  ack.mutable_register_ack()->set_heartbeat_interval_ms(1000);
  ack.mutable_register_ack()->set_applied_through(applied_through);
  conn->Send(ack);
  // Registers the agent: its row, then the manager (which re-adopts what it runs).
  auto registered = [&](const v1::RegisterAgent& reg) {
    v1::Agent row;
    row.set_id(reg.agent_id());
    row.set_hostname(reg.hostname());
    row.set_resource_pool(reg.resource_pool().empty() ? "default" : reg.resource_pool());
    row.set_version(reg.version());
    for (const auto& s : reg.slots()) {
      v1::Slot* slot = row.add_slots();
      *slot = s;
      slot->clear_usage();
    }
    if (store_) (void)store_->UpsertAgent(row);
    agents_->Connected(reg, conn);
  };
  registered(first.register_());
  // Applies one event (a task state change or a log batch). A task's exit has been acted on by
  // the coordinator when TaskStateChanged returns (the manager delivers what it caused).
  auto apply = [&](const v1::AgentMessage& m, std::optional<DeliveryStamp> stamp) -> Status {
    if (m.has_logs()) return cluster_->TaskLogs(m.logs(), std::move(stamp));
    agents_->TaskStateChanged(agent_id, m.task_state());
    return Status::Ok();
  };
  grpc::Status end = grpc::Status::OK;
  v1::AgentMessage msg;
  while (stream->Read(&msg)) {
    switch (msg.body_case()) {
      case v1::AgentMessage::kHeartbeat:
        if (revoked()) {
          log::Warn("agent", {{"event", "disconnected"}, {"id", agent_id}, {"reason", "revoked"}});
          end = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, revoked_why);
          break;
        }
        agents_->Heartbeat(agent_id, msg.heartbeat());
        break;
      case v1::AgentMessage::kTaskState:
      case v1::AgentMessage::kLogs: {
        if (!tracked || msg.sequence() <= 0) {
          (void)apply(msg, std::nullopt);
          break;
        }
        DeliveryStamp stamp{agent_id, incarnation, msg.sequence()};
        auto applied = ledger_->Apply(stamp, /*apply_records=*/msg.has_logs(),
                                      [&] { return apply(msg, stamp); });
        if (!applied.ok()) {
          if (!ledger_->GiveUp(stamp, applied.status())) {
            // Not acknowledged: the stream ends, the agent reconnects and re-sends it (a commit
            // whose outcome was unknown is then recognised by the ledger, not applied twice).
            log::Warn("agentlink", {{"event", "event_not_applied"}, {"agent", agent_id},
                                    {"sequence", std::to_string(msg.sequence())},
                                    {"error", applied.status().message()}});
            end = grpc::Status(grpc::StatusCode::UNAVAILABLE, applied.status().message());
            break;
          }
          log::Error("agentlink", {{"event", "event_refused_dropped"}, {"agent", agent_id},
                                   {"sequence", std::to_string(msg.sequence())},
                                   {"attempts", std::to_string(DeliveryLedger::kMaxAttempts)},
                                   {"error", applied.status().message()}});
        }
        v1::MasterMessage event_ack;
        event_ack.mutable_ack()->set_incarnation(incarnation);
        event_ack.mutable_ack()->set_applied_through(msg.sequence());
        conn->Send(event_ack);
        break;
      }
      case v1::AgentMessage::kRegister: registered(msg.register_()); break;
      default: break;
    }
    if (!end.ok()) break;
  }
  agents_->Disconnected(agent_id, conn.get());
  conn->Close();
  return end;
}

}  // namespace sf::master
