// The master's HTTP side (the transport: sockets, TLS, limits, threads; what a request means is
// rest_router.h's): the REST gateway (/api/v1/..., the Api service with protobuf's JSON
// mapping), /health, /metrics (Prometheus), /api/v1/openapi.json, and the web UI's built assets
// at / (index.html for client routes).
//
// Threads: a fixed pool of `threads` workers runs one io_context (Boost.Beast, asynchronous
// reads and writes). A connection holds no thread while it waits for or sends bytes; a worker is
// busy only while it runs a handler (a few database queries). So N idle or slow clients cost N
// sockets, not N threads, and at most `threads` handlers run at once.
//
// Limits: at most `max_connections` connections are open at a time; one beyond the cap gets
// 503 {"code": 14, "message": "..."} with `Retry-After: 1` and is closed. Each request (headers
// and body, including the wait for it on a kept-alive connection) must arrive within
// `read_timeout`, and each response must be taken by the client within it; otherwise the
// connection is closed. Request bodies over `max_body_bytes` (`max_experiment_body_bytes` for
// POST /api/v1/experiments) get 413.
//
// Requests to a task's service (/proxy/TASK_ID/..., master/proxy/task_proxy.h) are held to the
// access policy here, then forwarded by the proxy on a thread of its own (bounded there), so a
// slow service never holds a worker.
//
// Log follows (GET /api/v1/trials/{id}/logs?follow=true, server-sent events) live for as long as
// the trial runs, so they do not run on the pool: each gets a thread of its own, at most
// `max_streams` at a time (one more gets 503), and still counts as one of `max_connections`.
// Their writes time out like any other (`read_timeout`).
//
// TLS: with `tls` set (a certificate chain and key), the server speaks HTTPS only: each
// connection must finish a TLS handshake (TLS 1.2 or newer) within `read_timeout` before its
// first request, and one that does not (plaintext HTTP, a client that does not trust the
// certificate) is closed without an answer. Everything above holds unchanged over TLS; log
// follows write through the connection's TLS stream.
//
// Bad requests get a JSON error {"code": <grpc code>, "message": "...", "errors": [...]} with a
// proper HTTP status; nothing a client sends can stop the server. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/tls_files.h"
#include "master/api/api_handlers.h"
#include "master/api/master_metrics.h"
#include "master/auth/access_policy.h"
#include "master/auth/accounts.h"
#include "master/auth/agent_revocations.h"
#include "master/auth/audit_log.h"
#include "master/auth/login_limiter.h"
#include "master/proxy/task_proxy.h"
#include "master/webhooks/webhooks.h"

namespace sf::master {

struct HttpOptions {
  std::string bind_address = "0.0.0.0";
  int port = 8080;                         // 0: pick one (see port())
  std::string webui_dir;                   // built assets (webui/dist); empty: no UI
  size_t max_body_bytes = 8u << 20;
  // POST /api/v1/experiments alone may be larger: it may carry a user trial's context
  // (96 MiB of files, compressed, base64 in JSON; docs/core-api.md).
  size_t max_experiment_body_bytes = size_t{140} << 20;
  int max_connections = 512;               // open connections, log follows included
  int threads = 0;                         // worker threads; 0: max(4, 2 x hardware threads)
  std::chrono::milliseconds read_timeout{30000};  // per request read and per response write
  int max_streams = 64;                    // concurrent log follows, one thread each
  // Where mutations are recorded (master/auth/audit_log.h) and GET /api/v1/audit reads; none
  // when null.
  AuditLog* audit = nullptr;
  // Authentication (docs/security.md): with `accounts` set, every request is held to the access
  // policy (master/auth/access_policy.h) before it runs: credentials from `Authorization:
  // Bearer TOKEN` or the dashboard's session cookie, 401/403 with a one-line reason. Null: no
  // authentication (the caller is whoever X-SF-User names, with every right) — tests of the
  // server alone, and masters started with --disable-auth on loopback.
  Accounts* accounts = nullptr;
  Authorizer* authorizer = nullptr;     // required with accounts
  LoginLimiter* login_limiter = nullptr;  // required with accounts
  AgentRevocations* revocations = nullptr;  // POST /api/v1/agents/{id}/revoke|restore; none: 404
  webhooks::Webhooks* webhooks = nullptr;   // the /api/v1/webhooks methods; none: 404
  bool metrics_public = true;           // /metrics without credentials
  bool secure_cookies = false;          // the session cookie only over TLS
  // HTTPS with this certificate and key (PEM; common/tls_files.h); empty: plain HTTP.
  ServerCertificate tls;
  // /proxy/TASK_ID/... goes to the task's service through it (master/proxy/task_proxy.h), after
  // the access policy (RestRouter::GateProxy); null: /proxy/ is 404.
  TaskProxy* proxy = nullptr;
};

class HttpServer {
 public:
  HttpServer(ApiHandlers* handlers, MasterMetrics* metrics, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, starts the worker threads and accepts. Fails (naming the cause) when the address is
  // taken or the TLS certificate or key cannot be used.
  Status Start();
  // Stops accepting, ends every connection (handlers already running finish first) and joins
  // the workers and log-follow threads. Idempotent; the destructor calls it.
  void Stop();
  int port() const { return port_; }

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// The OpenAPI 3 document describing the REST routes.
std::string OpenApiDocument();

}  // namespace sf::master
