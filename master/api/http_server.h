// The master's HTTP side: the REST gateway (/api/v1/..., the Api service with protobuf's JSON
// mapping), /health, /metrics (Prometheus), /api/v1/openapi.json, and the web UI's built assets
// at / (index.html for client routes).
//
// One thread per connection (Boost.Beast, synchronous), capped at `max_connections`; request
// bodies over `max_body_bytes` get 413. Bad requests get a JSON error
// {"code": <grpc code>, "message": "...", "errors": [...]} with a proper HTTP status; nothing a
// client sends can stop the server. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "master/api/api_handlers.h"
#include "master/api/master_metrics.h"

namespace sf::master {

struct HttpOptions {
  std::string bind_address = "0.0.0.0";
  int port = 8080;                         // 0: pick one (see port())
  std::string webui_dir;                   // built assets (webui/dist); empty: no UI
  size_t max_body_bytes = 8u << 20;
  int max_connections = 512;
};

class HttpServer {
 public:
  HttpServer(ApiHandlers* handlers, MasterMetrics* metrics, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  Status Start();   // binds and starts accepting
  void Stop();      // stops accepting; open connections finish their current request
  int port() const { return port_; }

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

// The OpenAPI 3 document describing the REST routes.
std::string OpenApiDocument();

}  // namespace sf::master
