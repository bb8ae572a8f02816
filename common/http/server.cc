#include "common/http/server.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <future>
#include <limits>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "common/http/tls_context.h"
#include "common/log.h"

namespace sf::http {
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct Server::Impl {
  Impl(Handler* h, ServerOptions o) : handler(h), options(std::move(o)) {}

  Handler* handler;
  ServerOptions options;
  // Declared before io: connections destroyed with io's pending handlers still use them.
  std::unique_ptr<asio::ssl::context> tls_context;
  std::atomic<bool> stopping{false};
  std::atomic<int> connections{0};
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<std::thread> workers;

  void Accept();
  void OnAccept(tcp::socket socket);
};

namespace {

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

// One connection on the worker pool: (over TLS, the handshake first), then request after request
// while kept alive. Every member is touched on the connection's strand only, except where a
// function says otherwise. kTls: a TLS stream over the TCP one.
template <bool kTls>
class Connection : public std::enable_shared_from_this<Connection<kTls>> {
 public:
  using Stream = std::conditional_t<kTls, beast::ssl_stream<beast::tcp_stream>, beast::tcp_stream>;

  // `slot` null: the connection is over the cap and only gets a refusal.
  template <typename... TlsContext>
  Connection(Server::Impl* server, tcp::socket socket, std::unique_ptr<ConnectionSlot> slot, TlsContext&... tls)
      : server_(server), stream_(std::move(socket), tls...), slot_(std::move(slot)) {
    beast::error_code ec;
    auto endpoint = Tcp().socket().remote_endpoint(ec);
    peer_ = ec ? "unknown" : endpoint.address().to_string();
  }

  void Begin() {
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->Tcp().expires_after(self->options().read_timeout);
        self->stream_.async_handshake(asio::ssl::stream_base::server, [self](beast::error_code ec) {
          // Plaintext HTTP, a client that refuses the certificate, or too slow: closed unanswered.
          if (ec) {
            log::Debug(self->options().name, {{"event", "tls_handshake_failed"}, {"error", ec.message()}});
            return self->Close(/*graceful=*/false);
          }
          self->Admit();
        });
      } else {
        self->Admit();
      }
    });
  }

  const std::string& peer() const { return peer_; }

  // Exchange::Reply, from any thread.
  void Reply(Response res, bool refusal) {
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this(), res = std::move(res), refusal]() mutable {
      self->Send(std::move(res), refusal);
    });
  }

  void OpenStream() {
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->Tcp().expires_never(); });
  }

  void OpenTunnel() {
    tunnel_ = true;  // before any Write: writes set no deadline (it would cut a quiet read short)
    OpenStream();
  }

  // Exchange::ReadSome, on the handler's own thread: what is buffered, else one read.
  bool ReadSome(std::string* bytes) {
    using Got = std::pair<beast::error_code, std::string>;
    auto done = std::make_shared<std::promise<Got>>();
    std::future<Got> got = done->get_future();
    asio::post(stream_.get_executor(), [self = this->shared_from_this(), done] {
      if (self->stream_closed_) return done->set_value({{}, std::string()});  // CloseStream ran first
      if (self->buffer_.size() > 0) {
        std::string early = beast::buffers_to_string(self->buffer_.data());
        self->buffer_.consume(self->buffer_.size());
        return done->set_value({{}, std::move(early)});
      }
      auto chunk = std::make_shared<std::array<char, 16384>>();
      self->stream_.async_read_some(asio::buffer(*chunk), [chunk, done](beast::error_code ec, size_t n) {
        done->set_value({ec, std::string(chunk->data(), n)});
      });
    });
    while (got.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      if (server_->stopping) return false;
    }
    Got result = got.get();
    if (result.second.empty()) return false;  // closed, or failed
    *bytes = std::move(result.second);
    return true;
  }

  // Exchange::Write, on the handler's own thread: writes on the strand and waits for it.
  bool Write(const std::string& data) {
    auto done = std::make_shared<std::promise<beast::error_code>>();
    std::future<beast::error_code> written = done->get_future();
    auto bytes = std::make_shared<std::string>(data);
    asio::post(stream_.get_executor(), [self = this->shared_from_this(), bytes, done] {
      if (!self->tunnel_) self->Tcp().expires_after(self->options().read_timeout);
      asio::async_write(self->stream_, asio::buffer(*bytes),
                        [bytes, done](beast::error_code ec, size_t) { done->set_value(ec); });
    });
    // The io that would finish the write no longer runs once the server stops.
    while (written.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      if (server_->stopping) return false;
    }
    return !written.get();
  }

  // Exchange::FinishStream: the next request on this connection when it may be kept, else the
  // end (CloseStream's).
  void FinishStream() {
    if (server_->stopping) return;  // io no longer runs; the socket ends with it
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      const bool keep = !self->tunnel_ && !self->stream_closed_ && self->keep_alive_ &&
                        !(self->streaming_ && !self->body_done_) && !self->body_failed_ &&
                        !self->server_->stopping;
      if (keep) return self->Read();
      self->stream_closed_ = true;
      self->Close(/*graceful=*/true);
    });
  }

  void CloseStream() {
    if (server_->stopping) return;  // io no longer runs; the socket ends with it
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      self->stream_closed_ = true;               // a later ReadSome returns at once,
      if (self->tunnel_) self->Tcp().cancel();  // and one waiting on the client returns
      self->Close(/*graceful=*/true);
    });
  }

 private:
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }
  const ServerOptions& options() const { return server_->options; }

  void Admit() {
    if (slot_) return Read();
    Refuse(Handler::Refusal::kOverCapacity,
           "too many connections (" + std::to_string(options().max_connections) + " open); retry later");
  }

  void Refuse(Handler::Refusal why, const std::string& detail) {
    Send(server_->handler->Refuse(why, detail), /*refusal=*/true);
  }

  void Read() {
    if (server_->stopping) return Close(/*graceful=*/false);
    parser_.emplace();
    // Beast would check Content-Length against its limit while it reads the header, before the
    // handler knows the route (and whether it streams the body): none until then, the route's
    // from OnHeader on, which checks Content-Length itself.
    body_limit_ = options().max_body_bytes;
    parser_->body_limit((std::numeric_limits<std::uint64_t>::max)());
    streaming_ = false;
    body_done_ = true;
    body_failed_ = false;
    parser_->header_limit(static_cast<std::uint32_t>(options().max_header_bytes));
    Tcp().expires_after(options().read_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnRead(ec);
    const RequestHeader& header = parser_->get().base();
    streaming_ = server_->handler->StreamsBody(header);
    body_limit_ = server_->handler->BodyLimit(header);
    if (!streaming_) body_limit_ = std::min(options().max_body_bytes, body_limit_);
    if (auto length = parser_->content_length(); length && *length > body_limit_) {
      return OnRead(bhttp::error::body_limit);
    }
    parser_->body_limit(body_limit_);  // also bounds a chunked body as it arrives
    if (parser_->is_done()) return OnRead({});
    if (streaming_) {  // the handler reads the body (ReadBody)
      body_done_ = false;
      auto expect = header.find(bhttp::field::expect);
      continue_ = expect != header.end() && beast::iequals(expect->value(), "100-continue");
      return Dispatch(Request(header));
    }
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](beast::error_code ec2, size_t) { self->OnRead(ec2); });
  }

  void OnRead(beast::error_code ec) {
    // Closed by the client (over TLS, with or without close_notify), idle or too slow (timeout:
    // tcp_stream has closed the socket).
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::ssl::error::stream_truncated) {
      return Close(/*graceful=*/false);
    }
    if (ec == bhttp::error::body_limit) {
      return Refuse(Handler::Refusal::kBodyTooLarge,
                    "request body larger than " + std::to_string(body_limit_) + " bytes");
    }
    if (ec) return Refuse(Handler::Refusal::kMalformed, "malformed HTTP request: " + ec.message());
    Dispatch(parser_->release());
  }

  void Dispatch(Request req) {
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    answered_ = std::make_shared<std::atomic<bool>>(false);
    auto exchange = std::make_shared<ExchangeOf>(this->shared_from_this(), answered_);
    try {
      server_->handler->Handle(std::move(req), exchange);
    } catch (const std::exception& e) {
      if (!exchange->answered->exchange(true)) {
        Refuse(Handler::Refusal::kInternal, std::string("internal error: ") + e.what());
      }
    }
  }

 public:
  // Exchange::ReadBody, on the handler's own thread: the next piece of a streamed body, read on
  // the strand (after "100 Continue" when the client waits for it).
  Exchange::BodyRead ReadBody(std::string* piece) {
    using Got = std::pair<Exchange::BodyRead, std::string>;
    auto done = std::make_shared<std::promise<Got>>();
    std::future<Got> got = done->get_future();
    asio::post(stream_.get_executor(), [self = this->shared_from_this(), done] { self->NextPiece(done); });
    while (got.wait_for(std::chrono::milliseconds(200)) != std::future_status::ready) {
      if (server_->stopping) return Exchange::BodyRead::kFailed;
    }
    Got result = got.get();
    *piece = std::move(result.second);
    return result.first;
  }

 private:
  using PieceDone = std::shared_ptr<std::promise<std::pair<Exchange::BodyRead, std::string>>>;

  void NextPiece(PieceDone done) {
    if (!streaming_ || body_done_) return done->set_value({Exchange::BodyRead::kEnd, {}});
    if (stream_closed_ || server_->stopping || body_failed_) return done->set_value({Exchange::BodyRead::kFailed, {}});
    Tcp().expires_after(options().read_timeout);
    if (continue_) {
      continue_ = false;
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(stream_, asio::buffer(kContinue),
                        [self = this->shared_from_this(), done](beast::error_code ec, size_t) {
                          if (ec) return self->BodyFailed(ec, done);
                          self->NextPiece(done);
                        });
      return;
    }
    bhttp::async_read_some(stream_, buffer_, *parser_,
                           [self = this->shared_from_this(), done](beast::error_code ec, size_t) {
                             if (ec) return self->BodyFailed(ec, done);
                             std::string& body = self->parser_->get().body();
                             std::string piece = std::move(body);
                             body.clear();  // the parser appends after what it holds
                             self->body_done_ = self->parser_->is_done();
                             if (!piece.empty()) return done->set_value({Exchange::BodyRead::kPiece, std::move(piece)});
                             if (self->body_done_) return done->set_value({Exchange::BodyRead::kEnd, {}});
                             self->NextPiece(done);  // only framing (a chunk's size line) so far
                           });
  }

  // A streamed body that will not arrive whole: refused when it is the client's fault (and the
  // handler has not answered), the connection closed when the client is gone.
  void BodyFailed(beast::error_code ec, const PieceDone& done) {
    body_failed_ = true;
    const bool clients_fault = ec.category() == beast::error_code(bhttp::error::body_limit).category() &&
                               ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
    const bool refuse = clients_fault && !answered_->exchange(true);  // before the handler hears of it
    done->set_value({Exchange::BodyRead::kFailed, {}});
    if (refuse) return OnRead(ec);  // 413 or 400
    Close(/*graceful=*/false);
  }

  void Send(Response res, bool refusal) {
    // A body still (partly) unread: dropped as after a refusal, so the client sees the answer.
    if (streaming_ && !body_done_) refusal = true;
    const bool keep = !refusal && keep_alive_ && res.keep_alive() && !server_->stopping;
    res.version(version_);
    res.keep_alive(keep);
    auto shared = std::make_shared<Response>(std::move(res));
    Tcp().expires_after(options().read_timeout);
    bhttp::async_write(stream_, *shared,
                       [self = this->shared_from_this(), shared, refusal, keep](beast::error_code ec, size_t) {
                         if (ec) return self->Close(/*graceful=*/false);
                         if (refusal) return self->Drain(0);
                         if (!keep) return self->Close(/*graceful=*/true);
                         self->Read();
                       });
  }

  // After a refusal: stop sending, then read (and drop) what the client is still sending, so it
  // sees the answer instead of a reset. Over TLS the bytes dropped are TLS records, read from the
  // TCP layer undecrypted.
  void Drain(size_t drained) {
    if (drained == 0) {
      beast::error_code ec;
      Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
      Tcp().expires_after(std::chrono::seconds(5));
      sink_ = std::make_unique<std::array<char, 16384>>();
    }
    Tcp().async_read_some(asio::buffer(*sink_),
                          [self = this->shared_from_this(), drained](beast::error_code ec, size_t n) {
                            if (ec || drained + n >= (64u << 20)) return;
                            self->Drain(drained + n);
                          });
  }

  // Ends the connection. `graceful` over TLS: close_notify first (bounded by 5 s).
  void Close(bool graceful) {
    if constexpr (kTls) {
      if (graceful) {
        Tcp().expires_after(std::chrono::seconds(5));
        stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
          beast::error_code ec;
          self->Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
        });
        return;
      }
    }
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  // What the handler holds for one request.
  struct ExchangeOf : Exchange {
    ExchangeOf(std::shared_ptr<Connection> c, std::shared_ptr<std::atomic<bool>> a)
        : connection(std::move(c)), answered(std::move(a)) {}
    void Reply(Response res, bool refusal) override {
      if (!answered->exchange(true)) connection->Reply(std::move(res), refusal);
    }
    void OpenStream() override {
      if (!answered->exchange(true)) connection->OpenStream();
    }
    bool Write(const std::string& bytes) override { return connection->Write(bytes); }
    void OpenTunnel() override {
      if (!answered->exchange(true)) connection->OpenTunnel();
    }
    bool ReadSome(std::string* bytes) override { return connection->ReadSome(bytes); }
    BodyRead ReadBody(std::string* piece) override { return connection->ReadBody(piece); }
    void CloseStream() override { connection->CloseStream(); }
    void FinishStream() override { connection->FinishStream(); }
    const std::string& peer() const override { return connection->peer(); }

    std::shared_ptr<Connection> connection;
    // The request's, shared with the connection (which answers a body it refuses).
    std::shared_ptr<std::atomic<bool>> answered;
  };

  Server::Impl* server_;
  Stream stream_;
  std::unique_ptr<ConnectionSlot> slot_;
  std::string peer_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  size_t body_limit_ = 0;  // of the request being read
  unsigned version_ = 11;
  bool keep_alive_ = false;
  std::unique_ptr<std::array<char, 16384>> sink_;
  std::atomic<bool> tunnel_{false};
  bool stream_closed_ = false;  // on the strand: CloseStream ran
  // The request's body (on the strand): read by the handler in pieces; all of it read; the read
  // failed; the client waits for "100 Continue".
  bool streaming_ = false;
  bool body_done_ = true;
  bool body_failed_ = false;
  bool continue_ = false;
  std::shared_ptr<std::atomic<bool>> answered_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace

void Server::Impl::Accept() {
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

void Server::Impl::OnAccept(tcp::socket socket) {
  std::unique_ptr<ConnectionSlot> slot;
  if (connections.fetch_add(1) < options.max_connections) {
    slot = std::make_unique<ConnectionSlot>(&connections);
  } else {
    connections.fetch_sub(1);
  }
  if (tls_context) {
    std::make_shared<Connection<true>>(this, std::move(socket), std::move(slot), *tls_context)->Begin();
  } else {
    std::make_shared<Connection<false>>(this, std::move(socket), std::move(slot))->Begin();
  }
}

Server::Server(Handler* handler, ServerOptions options)
    : impl_(std::make_unique<Impl>(handler, std::move(options))) {}

Server::~Server() { Stop(); }

const ServerOptions& Server::options() const { return impl_->options; }

bool Server::stopping() const { return impl_->stopping; }

Status Server::Start() {
  Impl& impl = *impl_;
  if (!impl.options.tls.cert_chain_pem.empty()) {
    SF_ASSIGN_OR_RETURN(impl.tls_context,
                        ServerTlsContext(impl.options.tls, impl.options.clients ? &*impl.options.clients : nullptr));
  }
  try {
    tcp::endpoint endpoint(asio::ip::make_address(impl.options.bind_address),
                           static_cast<uint16_t>(impl.options.port));
    impl.acceptor = std::make_unique<tcp::acceptor>(impl.io);
    impl.acceptor->open(endpoint.protocol());
    impl.acceptor->set_option(asio::socket_base::reuse_address(true));
    impl.acceptor->bind(endpoint);
    impl.acceptor->listen(asio::socket_base::max_listen_connections);
    port_ = impl.acceptor->local_endpoint().port();
  } catch (const std::exception& e) {
    return Unavailable("cannot listen on " + impl.options.bind_address + ":" + std::to_string(impl.options.port) +
                       ": " + e.what());
  }
  impl.work.emplace(impl.io.get_executor());
  impl.Accept();
  for (int i = 0; i < std::max(1, impl.options.threads); ++i) {
    impl.workers.emplace_back([&impl] {
      for (;;) {
        try {
          impl.io.run();
          return;
        } catch (const std::exception& e) {
          log::Error(impl.options.name, {{"event", "handler_exception"}, {"error", e.what()}});
        }
      }
    });
  }
  return Status::Ok();
}

void Server::Quiesce() { impl_->stopping = true; }

void Server::Stop() {
  if (!impl_ || (impl_->workers.empty() && !impl_->acceptor)) return;
  Impl& impl = *impl_;
  impl.stopping = true;
  impl.work.reset();
  impl.io.stop();
  for (std::thread& t : impl.workers) t.join();
  impl.workers.clear();
  if (impl.acceptor) {
    beast::error_code ec;
    impl.acceptor->close(ec);
    impl.acceptor.reset();
  }
}

}  // namespace sf::http
