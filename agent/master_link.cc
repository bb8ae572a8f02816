#include "agent/master_link.h"

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <random>

#include "agent/logger.h"

namespace sf::agent {

using steadfast::v1::AgentMessage;
using steadfast::v1::MasterMessage;


MasterLink::MasterLink(Options options, Handler* handler, Outbox* outbox)
    : options_(std::move(options)),
      handler_(handler),
      outbox_(outbox) {}

MasterLink::~MasterLink() { Stop(); }

void MasterLink::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stop_) {
    return;
  }
  thread_ = std::thread([this] { Run(); });
}

void MasterLink::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  outbox_->Wake();
  if (!thread_.joinable()) {
    return;
  }
  {
    // A write blocked by flow control (a master that stopped reading) would hold the link
    // thread: past the drain time, cancel the stream.
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, options_.drain_timeout + std::chrono::seconds(1),
                      [&] { return run_finished_; })) {
      if (active_context_) {
        active_context_->TryCancel();
      }
    }
  }
  thread_.join();
}

bool MasterLink::SleepUnlessStopped(std::chrono::milliseconds duration) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, duration, [&] { return stop_; });
}

void MasterLink::Run() {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  auto backoff = options_.initial_backoff;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        break;
      }
    }
    int before = connections_.load();
    RunConnection();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        break;
      }
    }
    if (connections_.load() != before) {
      backoff = options_.initial_backoff;
    }
    auto wait = std::chrono::milliseconds(
        static_cast<int64_t>(static_cast<double>(backoff.count()) * jitter(rng)));
    LogEvent(LogLevel::kInfo, "link", "reconnect_wait",
             {{"master", options_.target}, {"wait_ms", std::to_string(wait.count())}});
    if (!SleepUnlessStopped(wait)) {
      break;
    }
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  std::lock_guard<std::mutex> lock(mu_);
  run_finished_ = true;
  cv_.notify_all();
}

void MasterLink::RunConnection() {
  // A fresh channel per attempt: gRPC's own channel backoff (up to 2 minutes) must not
  // delay a reconnect after the master comes back; ours is capped at max_backoff.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.max_backoff.count()));
  args.SetMaxReceiveMessageSize(64 << 20);  // a StartTask carries the experiment YAML
  // A network cut leaves the TCP connection silently open: HTTP/2 pings every 5 s, with 5 s
  // to answer, turn it into a broken stream (and a redial) within ~10 s instead of the
  // kernel's retransmission timeout (minutes). The master allows pings this often.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options_.ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.ca_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateCustomChannel(options_.target, credentials, args);
  auto stub = steadfast::v1::AgentLink::NewStub(channel);
  grpc::ClientContext context;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      return;
    }
    active_context_ = &context;
  }
  heartbeat_ms_.store(0);  // until this master's RegisterAck says otherwise
  auto stream = stub->Connect(&context);

  AgentMessage hello;
  *hello.mutable_register_() = handler_->MakeRegistration();
  // The outbox's: a restarted agent that took its journal back re-sends under the old name.
  const std::string incarnation = outbox_->incarnation();
  hello.mutable_register_()->set_incarnation(incarnation);
  if (!options_.join_token.empty()) hello.mutable_register_()->set_join_token(options_.join_token);
  // Everything the master has not acknowledged goes again on this connection, in order.
  outbox_->Rewind();
  const int running = hello.register_().running_tasks_size();
  if (!stream->Write(hello)) {
    grpc::Status status = stream->Finish();
    LogEvent(LogLevel::kWarn, "link", "connect_failed",
             {{"master", options_.target}, {"error", status.error_message()}});
    std::lock_guard<std::mutex> lock(mu_);
    active_context_ = nullptr;
    return;
  }

  // Reader: acks and commands. It ends when the stream breaks or is cancelled.
  std::atomic<bool> broken{false};
  std::thread reader([&] {
    // Wakes the writer waiting for the RegisterAck; taking mu_ first means no lost wake-up.
    auto wake_writer = [this] {
      { std::lock_guard<std::mutex> lock(mu_); }
      cv_.notify_all();
    };
    MasterMessage message;
    while (stream->Read(&message)) {
      if (message.has_register_ack()) {
        int interval = message.register_ack().heartbeat_interval_ms();
        heartbeat_ms_.store(interval > 0 ? interval : 0);
        outbox_->Ack(message.register_ack().applied_through());
        outbox_->Wake();  // the writer recomputes its next heartbeat
        if (!connected_.exchange(true)) {
          connections_.fetch_add(1);
          LogEvent(LogLevel::kInfo, "link", "registered",
                   {{"master", options_.target},
                    {"master_id", message.register_ack().master_id()},
                    {"running_tasks", std::to_string(running)},
                    {"heartbeat_ms", std::to_string(interval)}});
        }
        wake_writer();
        continue;
      }
      if (message.has_ack()) {
        if (message.ack().incarnation() == incarnation) {
          outbox_->Ack(message.ack().applied_through());
          outbox_->Wake();  // a draining writer rechecks whether everything is acknowledged
        }
        continue;
      }
      handler_->OnMasterMessage(message);
    }
    broken.store(true);
    outbox_->Wake();
    wake_writer();
  });

  // Writer: heartbeats and the outbox, until the stream breaks or Stop().
  int64_t sequence = 0;
  auto last_heartbeat = std::chrono::steady_clock::now();
  auto next_heartbeat = last_heartbeat;
  bool stopping = false;
  std::chrono::steady_clock::time_point drain_deadline;
  while (!broken.load()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ && !stopping) {
        stopping = true;
        drain_deadline = std::chrono::steady_clock::now() + options_.drain_timeout;
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (stopping && (outbox_->empty() || now >= drain_deadline || !connected_.load())) {
      break;
    }
    // The interval can change under us (RegisterAck arrives after the first beat).
    int interval_ms = heartbeat_ms_.load();
    next_heartbeat = last_heartbeat + (interval_ms > 0 ? std::chrono::milliseconds(interval_ms)
                                                       : options_.default_heartbeat);
    if (sequence == 0 || now >= next_heartbeat) {
      AgentMessage beat;
      beat.mutable_heartbeat()->set_sequence(++sequence);
      handler_->FillHeartbeat(beat.mutable_heartbeat());
      if (!stream->Write(beat)) {
        break;
      }
      last_heartbeat = now;
      continue;
    }
    auto wait_until = stopping ? std::min(next_heartbeat, drain_deadline) : next_heartbeat;
    if (!connected_.load()) {
      // No events before the RegisterAck: it says which of them the master already applied.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, wait_until, [&] { return connected_.load() || broken.load() || stop_; });
      continue;
    }
    std::optional<AgentMessage> message = outbox_->Take(wait_until, /*flush=*/stopping);
    if (!message) {
      continue;
    }
    if (!stream->Write(*message)) {
      break;  // it stays unacknowledged and goes again on the next connection
    }
  }

  connected_.store(false);
  if (stopping && !broken.load()) {
    // Half-close and let the master finish the stream, so what was written reaches it before
    // the cancel below (a cancel may drop data still in transport buffers).
    stream->WritesDone();
    auto close_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!broken.load() && std::chrono::steady_clock::now() < close_deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    // When the master ended the stream (the reader saw it), Finish() below returns the master's
    // status (e.g. why it refused us); a cancel now would replace it with CANCELLED.
    if (!broken.load()) context.TryCancel();
    active_context_ = nullptr;
  }
  reader.join();
  grpc::Status status = stream->Finish();
  bool stopped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped = stop_;
  }
  if (stopped) {
    LogEvent(LogLevel::kInfo, "link", "closed", {{"master", options_.target}});
  } else if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
             status.error_code() == grpc::StatusCode::ALREADY_EXISTS) {
    // The master will not take this agent (wrong or missing join token, or its id is held by
    // another connected agent); it keeps asking, in case the operator fixes that.
    LogEvent(LogLevel::kError, "link", "refused", {{"master", options_.target}, {"reason", status.error_message()}});
  } else {
    LogEvent(LogLevel::kWarn, "link", "disconnected",
             {{"master", options_.target},
              {"error", status.error_message()},
              {"code", std::to_string(static_cast<int>(status.error_code()))}});
  }
}

}  // namespace sf::agent
