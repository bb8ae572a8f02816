#include "master/api/http_server.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "common/http/server.h"
#include "common/log.h"
#include "common/utf8.h"
#include "master/api/api_audit.h"
#include "master/api/rest_router.h"

namespace sf::master {
namespace v1 = steadfast::v1;
namespace beast = boost::beast;
namespace bhttp = beast::http;

// What the master's requests mean, handed to the shared transport (common/http/server.h).
struct HttpServer::Impl : http::Handler {
  Impl(ApiHandlers* h, MasterMetrics* m, HttpOptions o)
      : handlers(h), metrics(m), options(std::move(o)), router(handlers, metrics, options),
        server(this, TransportOptions(options)) {}

  static http::ServerOptions TransportOptions(const HttpOptions& o) {
    http::ServerOptions t;
    t.name = "http";
    t.bind_address = o.bind_address;
    t.port = o.port;
    t.threads = o.threads > 0 ? o.threads : std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
    t.max_connections = o.max_connections;
    t.max_body_bytes = std::max(o.max_body_bytes, o.max_experiment_body_bytes);
    t.read_timeout = o.read_timeout;
    t.tls = o.tls;
    return t;
  }

  // An experiment may carry a user trial's context: the larger limit for its POST alone. A
  // request to a task's service streams its body through the proxy, under the proxy's limit.
  size_t BodyLimit(const http::RequestHeader& header) override {
    std::string_view target(header.target().data(), header.target().size());
    if (StreamsBody(header)) return options.proxy->max_body_bytes();
    target = target.substr(0, target.find('?'));
    const bool experiment = header.method() == bhttp::verb::post && target == "/api/v1/experiments";
    return experiment ? options.max_experiment_body_bytes : options.max_body_bytes;
  }

  bool StreamsBody(const http::RequestHeader& header) override {
    return options.proxy && TaskProxy::Matches(std::string_view(header.target().data(), header.target().size()));
  }

  http::Response Refuse(Refusal why, const std::string& detail) override {
    http::Response res;
    switch (why) {
      case Refusal::kOverCapacity:
        res = Plain(503, ErrorBody(Unavailable(detail)));
        res.set(bhttp::field::retry_after, "1");
        metrics->ObserveRequest("over_capacity", 0, 503);
        break;
      case Refusal::kBodyTooLarge: res = Plain(413, ErrorBody(InvalidArgument(detail))); break;
      case Refusal::kMalformed: res = Plain(400, ErrorBody(InvalidArgument(detail))); break;
      case Refusal::kInternal: res = Plain(500, ErrorBody(Internal(detail))); break;
    }
    return res;
  }

  static http::Response Plain(int status, std::string body) {
    http::Response res{static_cast<bhttp::status>(status), 11};
    res.set(bhttp::field::content_type, "application/json");
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }

  void Handle(http::Request req, std::shared_ptr<http::Exchange> exchange) override {
    if (options.proxy && TaskProxy::Matches(std::string_view(req.target().data(), req.target().size()))) {
      return Proxy(std::move(req), std::move(exchange));
    }
    auto start = std::chrono::steady_clock::now();
    http::Response res;
    std::string route;
    std::optional<v1::GetTrialLogsRequest> follow;
    Principal principal;
    std::optional<RestMatch> match;
    std::unique_ptr<google::protobuf::Message> decoded;
    try {
      if (router.Gate(req, exchange->peer(), res, route, principal, match)) {
        router.Route(req, res, route, follow, principal, match, exchange->peer(), decoded);
      }
    } catch (const std::exception& e) {
      res = router.Error(Internal(std::string("internal error: ") + e.what()), req);
      follow.reset();
    }
    if (follow) return Follow(req, std::move(*follow), std::move(exchange));
    // An audited Api method's call goes on record before its answer goes out, whatever the
    // answer (master/api/api_audit.h; refused by the access policy too).
    if (match && match->rule && match->rule->api) {
      std::string path(req.target());
      RecordApiCall(options.audit, *match->rule->api, decoded.get(), nullptr, principal,
                    {std::string(bhttp::to_string(req.method())), path.substr(0, path.find('?')), exchange->peer(),
                     static_cast<int>(res.result_int())});
    }
    if (req.method() == bhttp::verb::head) res.body().clear();
    metrics->ObserveRequest(route, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                            res.result_int());
    exchange->Reply(std::move(res));
  }

  // A request to a task's service: its target parsed, the caller held to the task's access
  // rule, then the proxy's (which answers from a thread of its own).
  void Proxy(http::Request req, std::shared_ptr<http::Exchange> exchange) {
    constexpr const char* kRoute = "/proxy/{id}";
    Result<ProxyTarget> target = TaskProxy::Parse(std::string_view(req.target().data(), req.target().size()));
    http::Response refused;
    Principal principal;
    if (!target.ok()) {
      refused = router.Error(target.status(), req);
    } else if (router.GateProxy(req, exchange->peer(), target->task_id, refused, principal)) {
      metrics->ObserveRequest(kRoute, 0, 200);
      return options.proxy->Forward(std::move(req), std::move(*target), std::move(exchange));
    }
    metrics->ObserveRequest(kRoute, 0, refused.result_int());
    exchange->Reply(std::move(refused));
  }

  // A log follow gets a thread of its own (at most max_streams), writing the server-sent events
  // through the connection's stream, so over TLS too.
  void Follow(const http::Request& req, v1::GetTrialLogsRequest r, std::shared_ptr<http::Exchange> exchange) {
    if (!AddStream()) {
      http::Response res = router.Json(
          503, ErrorBody(Unavailable("too many log follows (" + std::to_string(options.max_streams) + ")")), req);
      res.set(bhttp::field::retry_after, "1");
      res.keep_alive(false);
      res.prepare_payload();
      return exchange->Reply(std::move(res));
    }
    metrics->ObserveRequest("/api/v1/trials/{id}/logs", 0, 200);
    exchange->OpenStream();
    std::thread([this, exchange = std::move(exchange), version = req.version(), r = std::move(r)]() mutable {
      router.FollowLogs([&exchange](const std::string& data) { return exchange->Write(data); }, version,
                        std::move(r), stopping);
      exchange->CloseStream();
      exchange.reset();
      EndStream();  // last: Stop() may destroy *this right after
    }).detach();
  }

  bool AddStream() {
    std::lock_guard<std::mutex> lock(streams_mu);
    if (streams >= options.max_streams) return false;
    ++streams;
    return true;
  }
  void EndStream() {
    std::lock_guard<std::mutex> lock(streams_mu);
    --streams;
    streams_done.notify_all();
  }

  ApiHandlers* handlers;
  MasterMetrics* metrics;
  HttpOptions options;
  RestRouter router;  // everything about a request but its bytes (rest_router.h)
  std::atomic<bool> stopping{false};
  std::mutex streams_mu;
  std::condition_variable streams_done;
  int streams = 0;  // running log follows
  http::Server server;  // last: stopped and destroyed first
};

HttpServer::HttpServer(ApiHandlers* handlers, MasterMetrics* metrics, HttpOptions options)
    : impl_(std::make_unique<Impl>(handlers, metrics, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  SF_RETURN_IF_ERROR(impl_->server.Start());
  port_ = impl_->server.port();
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  Impl& impl = *impl_;
  impl.server.Stop();
  // Log follows notice `stopping` within 300 ms, also while a write waits on a client (the io
  // that would finish it no longer runs).
  std::unique_lock<std::mutex> lock(impl.streams_mu);
  impl.streams_done.wait_for(lock, std::chrono::seconds(10), [&impl] { return impl.streams == 0; });
}

}  // namespace sf::master
