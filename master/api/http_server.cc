#include "master/api/http_server.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <openssl/ssl.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>
#include <vector>

#include "common/log.h"
#include "common/utf8.h"
#include "master/api/grpc_services.h"
#include "master/api/rest_router.h"

namespace sf::master {
namespace v1 = steadfast::v1;
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

using Request = http::request<http::string_body>;

using Response = http::response<http::string_body>;

// The server side of TLS with `tls`'s certificate and key: TLS 1.2 or newer only.
Result<std::unique_ptr<asio::ssl::context>> MakeTlsContext(const ServerCertificate& tls) {
  try {
    auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                         asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                         asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
    context->use_certificate_chain(asio::buffer(tls.cert_chain_pem));
    context->use_private_key(asio::buffer(tls.private_key_pem), asio::ssl::context::pem);
    return context;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("TLS: cannot use the certificate and key: ") + e.what());
  }
}

// One of the server's `max_connections`, given back when destroyed.
class ConnectionSlot {
 public:
  explicit ConnectionSlot(std::atomic<int>* open) : open_(open) {}
  ~ConnectionSlot() { open_->fetch_sub(1); }
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;

 private:
  std::atomic<int>* open_;
};

}  // namespace

struct HttpServer::Impl {
  Impl(ApiHandlers* h, MasterMetrics* m, HttpOptions o)
      : handlers(h), metrics(m), options(std::move(o)), router(handlers, metrics, options) {}

  ApiHandlers* handlers;
  MasterMetrics* metrics;
  HttpOptions options;
  RestRouter router;  // everything about a request but its bytes (rest_router.h)
  // HTTPS when set (options.tls). Declared before io: sessions destroyed with io use it.
  std::unique_ptr<asio::ssl::context> tls_context;
  // Declared before io: sessions destroyed with io's pending handlers still give back slots.
  std::atomic<bool> stopping{false};
  std::atomic<int> connections{0};
  std::mutex streams_mu;
  std::condition_variable streams_done;
  std::multiset<int> stream_fds;  // sockets of running log follows
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<std::thread> workers;

  void Accept();
  void OnAccept(tcp::socket socket);
  // Registers a log follow on `fd`; false when `max_streams` already run.
  bool AddStream(int fd) {
    std::lock_guard<std::mutex> lock(streams_mu);
    if (static_cast<int>(stream_fds.size()) >= options.max_streams) return false;
    stream_fds.insert(fd);
    return true;
  }
  // Called last by a follow thread (after letting go of its session): Stop() may destroy *this
  // right after.
  void EndStream(int fd) {
    std::lock_guard<std::mutex> lock(streams_mu);
    stream_fds.erase(stream_fds.find(fd));
    streams_done.notify_all();
  }

};

namespace {

// One connection, served asynchronously on the worker pool: (over TLS, the handshake first,
// within read_timeout), then read a request (within read_timeout), run its handler, write the
// response (within read_timeout), repeat while kept alive. A log follow leaves the pool for a
// thread of its own (see the header). kTls: the connection is a TLS stream over the TCP one.
template <bool kTls>
class Session : public std::enable_shared_from_this<Session<kTls>> {
 public:
  using Stream = std::conditional_t<kTls, beast::ssl_stream<beast::tcp_stream>, beast::tcp_stream>;

  // `slot` null: the connection is over the cap and only gets a 503.
  Session(HttpServer::Impl* impl, tcp::socket socket, std::unique_ptr<ConnectionSlot> slot)
    requires(!kTls)
      : impl_(impl), stream_(std::move(socket)), slot_(std::move(slot)) {}
  Session(HttpServer::Impl* impl, tcp::socket socket, asio::ssl::context& tls, std::unique_ptr<ConnectionSlot> slot)
    requires(kTls)
      : impl_(impl), stream_(std::move(socket), tls), slot_(std::move(slot)) {}

  void Run() {
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->tcp().expires_after(self->impl_->options.read_timeout);
        self->stream_.async_handshake(asio::ssl::stream_base::server, [self](beast::error_code ec) {
          // Plaintext HTTP, a client that refuses the certificate, or too slow: closed unanswered.
          if (ec) {
            log::Debug("http", {{"event", "tls_handshake_failed"}, {"error", ec.message()}});
            return self->Close(/*graceful=*/false);
          }
          self->Serve();
        });
      } else {
        self->Serve();
      }
    });
  }

 private:
  // The TCP layer (timeouts, the socket) under the stream.
  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream_); }

  void Serve() {
    if (slot_) return Read();
    auto res = std::make_shared<Response>(http::status::service_unavailable, 11);
    res->set(http::field::content_type, "application/json");
    res->set(http::field::retry_after, "1");
    res->body() = ErrorBody(
        Unavailable("too many connections (" + std::to_string(impl_->options.max_connections) + " open); retry later"));
    res->keep_alive(false);
    res->prepare_payload();
    impl_->metrics->ObserveRequest("over_capacity", 0, 503);
    Write(std::move(res), /*linger=*/true);
  }

  void Read() {
    if (impl_->stopping) return Close(/*graceful=*/false);
    parser_.emplace();
    // Beast checks Content-Length against the limit while it reads the header, before OnHeader
    // knows the route: the larger limit until then, the route's from OnHeader on.
    body_limit_ = std::max(impl_->options.max_body_bytes, impl_->options.max_experiment_body_bytes);
    parser_->body_limit(body_limit_);
    parser_->header_limit(64 * 1024);
    tcp().expires_after(impl_->options.read_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  // The header is in: the body's limit depends on the route (an experiment may carry a context).
  void OnHeader(beast::error_code ec) {
    if (ec) return OnRead(ec);
    const auto& header = parser_->get();
    std::string_view target(header.target().data(), header.target().size());
    target = target.substr(0, target.find('?'));
    const bool experiment = header.method() == http::verb::post && target == "/api/v1/experiments";
    body_limit_ = experiment ? impl_->options.max_experiment_body_bytes : impl_->options.max_body_bytes;
    if (auto length = parser_->content_length(); length && *length > body_limit_) {
      return OnRead(http::error::body_limit);
    }
    parser_->body_limit(body_limit_);  // also bounds a chunked body as it arrives
    if (parser_->is_done()) return OnRead({});
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec2, size_t) { self->OnRead(ec2); });
  }

  void OnRead(beast::error_code ec) {
    // Closed by the client (over TLS, with or without close_notify), idle or too slow (timeout:
    // tcp_stream has closed the socket).
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::ssl::error::stream_truncated) {
      return Close(/*graceful=*/false);
    }
    if (ec) {
      bool too_big = ec == http::error::body_limit;
      auto res = std::make_shared<Response>(too_big ? http::status::payload_too_large : http::status::bad_request, 11);
      res->set(http::field::content_type, "application/json");
      res->body() = ErrorBody(InvalidArgument(too_big ? "request body larger than " +
                                                            std::to_string(body_limit_) + " bytes"
                                                      : "malformed HTTP request: " + ec.message()));
      res->keep_alive(false);
      res->prepare_payload();
      return Write(std::move(res), /*linger=*/true);
    }
    Request req = parser_->release();
    auto start = std::chrono::steady_clock::now();
    auto res = std::make_shared<Response>();
    std::string route;
    std::optional<v1::GetTrialLogsRequest> follow;
    beast::error_code peer_ec;
    auto peer_endpoint = tcp().socket().remote_endpoint(peer_ec);
    const std::string peer = peer_ec ? "unknown" : peer_endpoint.address().to_string();
    principal_ = Principal();
    try {
      std::optional<RestMatch> match;
      if (impl_->router.Gate(req, peer, *res, route, principal_, match)) {
        impl_->router.Route(req, *res, route, follow, principal_, match, peer);
      }
    } catch (const std::exception& e) {
      *res = impl_->router.Error(Internal(std::string("internal error: ") + e.what()), req);
      follow.reset();
    }
    if (follow) return Follow(req, std::move(*follow));
    Audit(req, *res);
    if (req.method() == http::verb::head) res->body().clear();
    impl_->metrics->ObserveRequest(
        route, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), res->result_int());
    Write(std::move(res), /*linger=*/false);
  }

  // A mutation of the API goes on record before its answer goes out (master/auth/audit_log.h).
  void Audit(const Request& req, const Response& res) {
    if (!impl_->options.audit) return;
    const auto m = req.method();
    if (m != http::verb::post && m != http::verb::put && m != http::verb::patch && m != http::verb::delete_) return;
    std::string path(req.target());
    path = path.substr(0, path.find('?'));
    if (path.rfind("/api/v1/", 0) != 0) return;
    AuditEntry e;
    e.actor = principal_.username;
    if (e.actor.empty() && path == "/api/v1/auth/login") {
      // A login is on record under the name it tried (never with its password).
      auto body = Value::FromJson(req.body());
      const Value* name = body.ok() && body->is_map() ? body->Find("username") : nullptr;
      if (name && name->is_string() && Accounts::CheckUsername(name->as_string()).ok()) e.actor = name->as_string();
    }
    if (e.actor.empty() || !IsText(e.actor) || e.actor.size() > 200) e.actor = "anonymous";
    beast::error_code ec;
    auto peer = tcp().socket().remote_endpoint(ec);
    e.peer = ec ? "unknown" : peer.address().to_string();
    e.method = std::string(http::to_string(m));
    e.path = IsText(path) && path.size() <= 2000 ? path : "(unprintable path)";
    e.status = res.result_int();
    if (Status st = impl_->options.audit->Record(e); !st.ok()) {
      log::Error("audit", {{"event", "record_failed"}, {"method", e.method}, {"path", e.path}, {"error", st.message()}});
    }
  }

  void Write(std::shared_ptr<Response> res, bool linger) {
    tcp().expires_after(impl_->options.read_timeout);
    http::async_write(stream_, *res, [self = this->shared_from_this(), res, linger](beast::error_code ec, size_t) {
      if (ec) return self->Close(/*graceful=*/false);
      if (linger) return self->Linger(0);
      if (!res->keep_alive()) return self->Close(/*graceful=*/true);
      self->Read();
    });
  }

  // After an error response: read (and drop) what the client is still sending, so it sees the
  // response instead of a reset. Bounded in bytes (64 MiB) and time (5 s). Over TLS the bytes
  // dropped are TLS records, read from the TCP layer undecrypted.
  void Linger(size_t drained) {
    if (drained == 0) {
      beast::error_code ec;
      tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
      tcp().expires_after(std::chrono::seconds(5));
      sink_ = std::make_unique<std::array<char, 16384>>();
    }
    tcp().async_read_some(asio::buffer(*sink_),
                          [self = this->shared_from_this(), drained](beast::error_code ec, size_t n) {
                            if (ec || drained + n >= (64u << 20)) return;
                            self->Linger(drained + n);
                          });
  }

  // Hands the connection to a thread of its own for the server-sent events. The thread writes
  // through this session's stream (so over TLS too), one write at a time on the session's
  // strand, and waits for each: a write not taken within read_timeout fails as any other does.
  void Follow(const Request& req, v1::GetTrialLogsRequest r) {
    const int fd = tcp().socket().native_handle();
    if (!impl_->AddStream(fd)) {
      auto res = std::make_shared<Response>(impl_->router.Json(
          503, ErrorBody(Unavailable("too many log follows (" + std::to_string(impl_->options.max_streams) + ")")),
          req));
      res->set(http::field::retry_after, "1");
      res->keep_alive(false);
      res->prepare_payload();
      return Write(std::move(res), /*linger=*/false);
    }
    impl_->metrics->ObserveRequest("/api/v1/trials/{id}/logs", 0, 200);
    tcp().expires_never();  // until the first write
    std::thread([self = this->shared_from_this(), version = req.version(), r = std::move(r), fd]() mutable {
      HttpServer::Impl* impl = self->impl_;
      impl->router.FollowLogs([&self](const std::string& data) { return self->WriteFromThread(data); }, version,
                              std::move(r), impl->stopping);
      if (!impl->stopping) asio::post(self->stream_.get_executor(), [self] { self->Close(/*graceful=*/true); });
      self.reset();  // the posted close (or io's destruction) ends the session
      impl->EndStream(fd);
    }).detach();
  }

  // On a log-follow thread: writes `data` on the strand and waits for it. False when the write
  // failed or timed out, or the server is stopping (io no longer runs).
  bool WriteFromThread(const std::string& data) {
    auto done = std::make_shared<std::promise<beast::error_code>>();
    std::future<beast::error_code> written = done->get_future();
    auto bytes = std::make_shared<std::string>(data);
    asio::post(stream_.get_executor(), [self = this->shared_from_this(), bytes, done] {
      self->tcp().expires_after(self->impl_->options.read_timeout);
      asio::async_write(self->stream_, asio::buffer(*bytes),
                        [bytes, done](beast::error_code ec, size_t) { done->set_value(ec); });
    });
    while (written.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      if (impl_->stopping) return false;
    }
    return !written.get();
  }

  // Ends the connection. `graceful` over TLS: close_notify first (bounded by 5 s), so a client
  // reading to the end sees a clean end rather than a truncated stream.
  void Close(bool graceful) {
    if constexpr (kTls) {
      if (graceful) {
        tcp().expires_after(std::chrono::seconds(5));
        stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
          beast::error_code ec;
          self->tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
        });
        return;
      }
    }
    beast::error_code ec;
    tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  HttpServer::Impl* impl_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  size_t body_limit_ = 0;  // of the request being read
  std::unique_ptr<ConnectionSlot> slot_;
  std::unique_ptr<std::array<char, 16384>> sink_;
  Principal principal_;  // of the request being served (Gate)
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor->async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping || !acceptor->is_open()) return;
    if (!ec) {
      OnAccept(std::move(socket));
      return Accept();
    }
    // Out of descriptors and the like: try again shortly rather than spin.
    auto timer = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(50));
    timer->async_wait([this, timer](beast::error_code) {
      if (!stopping) Accept();
    });
  });
}

void HttpServer::Impl::OnAccept(tcp::socket socket) {
  std::unique_ptr<ConnectionSlot> slot;
  if (connections.fetch_add(1) < options.max_connections) {
    slot = std::make_unique<ConnectionSlot>(&connections);
  } else {
    connections.fetch_sub(1);
  }
  if (tls_context) {
    std::make_shared<Session<true>>(this, std::move(socket), *tls_context, std::move(slot))->Run();
  } else {
    std::make_shared<Session<false>>(this, std::move(socket), std::move(slot))->Run();
  }
}

HttpServer::HttpServer(ApiHandlers* handlers, MasterMetrics* metrics, HttpOptions options)
    : impl_(std::make_unique<Impl>(handlers, metrics, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  Impl& impl = *impl_;
  if (!impl.options.tls.cert_chain_pem.empty()) {
    Result<std::unique_ptr<asio::ssl::context>> context = MakeTlsContext(impl.options.tls);
    if (!context.ok()) return context.status();
    impl.tls_context = std::move(context).value();
  }
  try {
    auto address = asio::ip::make_address(impl.options.bind_address);
    impl.acceptor = std::make_unique<tcp::acceptor>(impl.io);
    tcp::endpoint endpoint(address, static_cast<uint16_t>(impl.options.port));
    impl.acceptor->open(endpoint.protocol());
    impl.acceptor->set_option(asio::socket_base::reuse_address(true));
    impl.acceptor->bind(endpoint);
    impl.acceptor->listen(asio::socket_base::max_listen_connections);
    port_ = impl.acceptor->local_endpoint().port();
  } catch (const std::exception& e) {
    return Unavailable("cannot listen on " + impl.options.bind_address + ":" + std::to_string(impl.options.port) +
                       ": " + e.what());
  }
  const int threads = impl.options.threads > 0
                          ? impl.options.threads
                          : std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
  impl.work.emplace(impl.io.get_executor());
  impl.Accept();
  for (int i = 0; i < threads; ++i) {
    impl.workers.emplace_back([&impl] {
      while (true) {
        try {
          impl.io.run();
          return;
        } catch (const std::exception& e) {
          log::Error("http", {{"event", "handler_exception"}, {"error", e.what()}});
        }
      }
    });
  }
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  Impl& impl = *impl_;
  impl.work.reset();
  impl.io.stop();
  for (std::thread& t : impl.workers) t.join();
  impl.workers.clear();
  if (impl.acceptor) {
    beast::error_code ec;
    impl.acceptor->close(ec);
  }
  // Log follows notice `stopping` within 300 ms, also while a write waits on a client (the io
  // that would finish it no longer runs).
  std::unique_lock<std::mutex> lock(impl.streams_mu);
  impl.streams_done.wait_for(lock, std::chrono::seconds(10), [&impl] { return impl.stream_fds.empty(); });
}

}  // namespace sf::master
