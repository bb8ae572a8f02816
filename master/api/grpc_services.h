// gRPC front ends of the master: AgentLink (one bidirectional stream per agent, below) and what
// the others share (ToGrpc, CallObserver). The Api service is grpc_api_service.h (generated from
// the route table), TrialLink trial_link_service.h. gRPC runs them on its own thread pool, and
// they are thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>

#include "master/agentlink/delivery_ledger.h"
#include "master/api/api_handlers.h"
#include "master/auth/access_policy.h"
#include "master/auth/agent_revocations.h"
#include "master/auth/accounts.h"
#include "master/auth/audit_log.h"
#include "master/rm/agents/agent_manager.h"
#include "steadfast/v1/agent_link.grpc.pb.h"
#include "steadfast/v1/api.grpc.pb.h"
#include "steadfast/v1/trial_link.grpc.pb.h"

namespace sf::master {

grpc::Status ToGrpc(const Status& s);

// Observes each API call (route, seconds, ok) for the Prometheus metrics; may be empty.
using CallObserver = std::function<void(const std::string& route, double seconds, int code)>;

// AgentLink.Connect: an agent's connection, which ends in the agents' resource manager
// (master/rm/agents/agent_manager.h: registration, heartbeats, its tasks' exits); its task logs
// go to the coordinator's log ingestion, and its row to the store. Events (task state changes, log batches) are delivered at least once by
// the agent and applied once here through `ledger` (master/agentlink/delivery_ledger.h): each is
// acknowledged (MasterMessage.ack) after it was applied; one that failed ends the stream
// without an ack, so that the agent reconnects and re-sends it. One that fails the same way
// DeliveryLedger::kMaxAttempts times in a row (the database refuses it for good, e.g. a
// constraint; not merely unavailable) is logged, acknowledged and dropped, so that it cannot
// wedge the agent's queue. Events without a sequence (an agent without
// delivery tracking), or every event when `ledger` is null, are applied as they come.
// An agent joins only with the cluster's join token, when the master has one (docs/security.md):
// a missing or wrong token ends the stream with UNAUTHENTICATED, and an agent id held by another
// connected agent process with ALREADY_EXISTS; both are logged on the master and the agent.
class AgentLinkGrpcService final : public steadfast::v1::AgentLink::Service {
 public:
  // `join_token` empty: agents are not authenticated.
  AgentLinkGrpcService(rm::AgentManager* agents, Cluster* cluster, Store* store, DeliveryLedger* ledger,
                       std::string join_token = "")
      : agents_(agents), cluster_(cluster), store_(store), ledger_(ledger), join_token_(std::move(join_token)) {}
  grpc::Status Connect(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<steadfast::v1::MasterMessage, steadfast::v1::AgentMessage>* stream)
      override;
  // Revoked agents are refused, and a connected one is disconnected at its next heartbeat.
  void SetRevocations(const AgentRevocations* revocations) { revocations_ = revocations; }

 private:
  rm::AgentManager* agents_;
  Cluster* cluster_;
  Store* store_;
  DeliveryLedger* ledger_;
  std::string join_token_;
  const AgentRevocations* revocations_ = nullptr;
};

}  // namespace sf::master
