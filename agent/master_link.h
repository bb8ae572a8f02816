// The agent's end of AgentLink.Connect: one bidirectional gRPC stream to the master, kept up
// for the life of the agent.
//
// A link thread dials the master, sends RegisterAgent (from Handler::MakeRegistration) as the
// first message of every connection, then sends heartbeats (at RegisterAck's interval; 1 s
// until an ack says otherwise; each filled by Handler::FillHeartbeat) and whatever the Outbox has ready. A reader thread per
// connection hands every MasterMessage to Handler::OnMasterMessage. When the stream breaks
// (master restart, network), the link redials with exponential backoff (initial 100 ms,
// doubling, capped at 5 s, each wait jittered by ±20 %); the backoff resets once a connection
// gets its RegisterAck. Messages queued meanwhile stay in the Outbox.
//
// Delivery is at least once (docs/cluster.md, "Message delivery"): the registration names this
// outbox's incarnation (random per outbox; a restarted agent that took its outbox journal back
// keeps the previous process's, agent/outbox.h);
// every event the Outbox hands out carries its sequence; the master's Ack and RegisterAck say
// how far it has applied them, and the link passes that to Outbox::Ack. Each new connection
// Rewind()s the Outbox, so every event the master has not acknowledged is sent again, in order,
// with its original sequence; the master applies each (incarnation, sequence) once. Stop()
// drains until everything is acknowledged (or drain_timeout).
//
// Thread-safe: Start/Stop from one owner thread; connected() from any. Handler callbacks run
// on the link's threads: MakeRegistration on the link thread, OnMasterMessage on the reader
// thread, one message at a time, in order; FillHeartbeat on the link thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/outbox.h"
#include "steadfast/v1/agent_link.grpc.pb.h"

namespace sf::agent {

class MasterLink {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // The RegisterAgent for a new connection (current slots and running tasks).
    virtual steadfast::v1::RegisterAgent MakeRegistration() = 0;
    // A message from the master. Must not block for long (the stream isn't read meanwhile).
    virtual void OnMasterMessage(const steadfast::v1::MasterMessage& message) = 0;
    // Adds what a heartbeat reports besides its sequence (the GPUs' latest usage). Called on
    // the link thread before each heartbeat; must not block (heartbeats wait for it).
    virtual void FillHeartbeat(steadfast::v1::Heartbeat* heartbeat) {}
  };

  struct Options {
    std::string target;  // HOST:PORT
    std::string join_token;  // sent in every RegisterAgent when not empty; never logged
    // PEM CA certificate(s): when set, the link dials over TLS and verifies the master's
    // certificate (chain and host name) against them; empty: plaintext.
    std::string ca_pem;
    std::chrono::milliseconds initial_backoff{100};
    std::chrono::milliseconds max_backoff{5000};
    std::chrono::milliseconds default_heartbeat{1000};
    // On Stop(): how long to keep sending what the outbox holds before closing.
    std::chrono::milliseconds drain_timeout{2000};
  };

  MasterLink(Options options, Handler* handler, Outbox* outbox);
  ~MasterLink();  // Stop()s
  MasterLink(const MasterLink&) = delete;
  MasterLink& operator=(const MasterLink&) = delete;

  void Start();
  // Sends what is queued (up to drain_timeout, if connected), closes the stream and joins the
  // threads. Idempotent.
  void Stop();

  // True while a stream is up and has been acknowledged by RegisterAck.
  bool connected() const { return connected_.load(); }
  // Connections that got their RegisterAck so far.
  int connections() const { return connections_.load(); }
  // This link's incarnation (RegisterAgent.incarnation).
  std::string incarnation() const { return outbox_->incarnation(); }

 private:
  void Run();
  // One connection's life; returns when it breaks or Stop() is called.
  void RunConnection();
  bool SleepUnlessStopped(std::chrono::milliseconds duration);

  Options options_;
  Handler* handler_;
  Outbox* outbox_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool run_finished_ = false;
  grpc::ClientContext* active_context_ = nullptr;  // guarded by mu_
  std::atomic<bool> connected_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> heartbeat_ms_{0};
};

}  // namespace sf::agent
