#include "common/http/client.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>

#include <array>
#include <future>
#include <thread>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <type_traits>
#include <vector>

#include "common/http/tls_context.h"

namespace sf::http {
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

Result<Url> Url::Parse(const std::string& url, const std::string& what) {
  std::string rest = url;
  Url u;
  if (rest.rfind("https://", 0) == 0) {
    rest = rest.substr(8);
    u.https = true;
  } else if (rest.rfind("http://", 0) == 0) {
    rest = rest.substr(7);
  } else if (rest.find("://") != std::string::npos) {
    return InvalidArgument(what + " \"" + url + "\": only http:// and https:// are supported");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty()) return InvalidArgument(what + " \"" + url + "\" has no host");
  const size_t bracket = rest.rfind(']');
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || (bracket != std::string::npos && colon < bracket)) {
    u.host = rest;
    u.port = u.https ? "443" : "80";
  } else {
    u.host = rest.substr(0, colon);
    u.port = rest.substr(colon + 1);
  }
  if (u.host.size() > 2 && u.host.front() == '[' && u.host.back() == ']') u.host = u.host.substr(1, u.host.size() - 2);
  if (u.host.empty()) return InvalidArgument(what + " \"" + url + "\" has no host");
  u.base = (u.https ? "https://" : "http://") + rest;
  return u;
}

std::string Url::HostHeader() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  const bool default_port = port == (https ? "443" : "80");
  return (ipv6 ? "[" + host + "]" : host) + (default_port ? "" : ":" + port);
}

namespace {

// What a call reads after the answer's header (Client::Fetch, Stream, Relay).
struct Reading {
  bool header_only = false;
  const std::function<bool(const std::string&)>* on_bytes = nullptr;
  const std::function<bool(const ResponseHeader&)>* on_header = nullptr;
  const std::function<void(Pipe&)>* on_tunnel = nullptr;
  const BodySource* body = nullptr;  // the request's body in pieces
};

// An upgraded plain connection as a Pipe: blocking reads and writes on the socket, which may
// run at the same time on two threads (one reading, one writing).
class SocketPipe : public Pipe {
 public:
  SocketPipe(tcp::socket& socket, std::string early) : socket_(socket), early_(std::move(early)) {}
  bool ReadSome(std::string* bytes) override {
    if (!early_.empty()) {
      *bytes = std::move(early_);
      early_.clear();
      return true;
    }
    std::array<char, 16384> chunk;
    beast::error_code ec;
    const size_t n = socket_.read_some(asio::buffer(chunk), ec);
    if (n == 0) return false;
    bytes->assign(chunk.data(), n);
    return true;
  }
  bool Write(const std::string& bytes) override {
    beast::error_code ec;
    asio::write(socket_, asio::buffer(bytes), ec);
    return !ec;
  }
  void Close() override {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
  }

 private:
  tcp::socket& socket_;
  std::string early_;
};

// An upgraded TLS connection as a Pipe. OpenSSL allows one operation at a time on a connection,
// so reads and writes (from the two threads of a tunnel) and Close are all run on one thread of
// the pipe's own, which runs the call's I/O context for as long as the pipe lives; the callers
// wait for their operation's end.
class TlsPipe : public Pipe {
 public:
  TlsPipe(ssl::stream<tcp::socket&>& tls, tcp::socket& socket, asio::io_context& io, std::string early)
      : tls_(tls), socket_(socket), io_(io), work_(asio::make_work_guard(io)), early_(std::move(early)) {
    io_.restart();
    runner_ = std::thread([this] { io_.run(); });
  }
  ~TlsPipe() override {
    work_.reset();
    io_.stop();
    runner_.join();
  }
  bool ReadSome(std::string* bytes) override {
    if (!early_.empty()) {
      *bytes = std::move(early_);
      early_.clear();
      return true;
    }
    std::array<char, 16384> chunk;
    std::promise<size_t> read;
    asio::post(io_, [&] {
      tls_.async_read_some(asio::buffer(chunk), [&](beast::error_code ec, size_t n) { read.set_value(ec ? 0 : n); });
    });
    const size_t n = read.get_future().get();
    if (n == 0) return false;
    bytes->assign(chunk.data(), n);
    return true;
  }
  bool Write(const std::string& bytes) override {
    std::promise<bool> wrote;
    asio::post(io_, [&] {
      asio::async_write(tls_, asio::buffer(bytes), [&](beast::error_code ec, size_t) { wrote.set_value(!ec); });
    });
    return wrote.get_future().get();
  }
  void Close() override {
    asio::post(io_, [this] {
      beast::error_code ec;
      socket_.shutdown(tcp::socket::shutdown_both, ec);
    });
  }

 private:
  ssl::stream<tcp::socket&>& tls_;
  tcp::socket& socket_;
  asio::io_context& io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::string early_;
  std::thread runner_;
};

using Request = bhttp::request<bhttp::string_body>;

// One connection's life, every step an asynchronous operation run to its end on the call's own
// io_context: the deadline's timer closes the socket when it fires, which ends the operation
// with an error; so does a cancel (looked at every 100 ms).
class Call {
 public:
  Call(const Url& url, const ClientOptions& options)
      : url_(url), options_(options), resolver_(io_), socket_(io_), deadline_(io_) {
    Arm();
  }

  Failure failure() const { return failure_; }

  // Resolve, connect and (https) the handshake.
  Status Open() {
    if (url_.https) {  // a CA file that cannot be used is named before anything goes on the network
      Result<std::unique_ptr<ssl::context>> context =
          options_.peer ? ClientTlsContextFor(*options_.peer, options_.client_certificate)
                        : ClientTlsContext(options_.ca_file, options_.ca_what);
      if (!context.ok()) return Setup(context.status());
      tls_context_ = std::move(context).value();
    }
    tcp::resolver::results_type endpoints;
    beast::error_code ec = Await([&](auto handler) {
      resolver_.async_resolve(url_.host, url_.port,
                              [&, handler](beast::error_code e, tcp::resolver::results_type r) mutable {
                                endpoints = std::move(r);
                                handler(e);
                              });
    });
    if (ec) return Failed("resolve " + url_.host, ec);
    std::vector<tcp::endpoint> allowed;
    for (const auto& entry : endpoints) {
      if (url_.https || !options_.plain_http_loopback_only || entry.endpoint().address().is_loopback()) {
        allowed.push_back(entry.endpoint());
      }
    }
    if (allowed.empty()) {
      return Setup(Unavailable("resolve " + url_.host + ": no loopback address (http:// goes to loopback only)"));
    }
    ec = Await([&](auto handler) { asio::async_connect(socket_, allowed, handler); });
    if (ec) return Failed("connect", ec);
    if (!url_.https) return Status::Ok();

    tls_.emplace(socket_, *tls_context_);
    bool host_mismatch = false;
    if (options_.peer) {
      VerifyIdentity(*tls_, options_.peer->uri, &host_mismatch);
    } else if (!VerifyHost(*tls_, url_.host, &host_mismatch)) {
      return Setup(InvalidArgument("cannot set the TLS server name " + url_.host));
    }
    ec = Await([&](auto handler) { tls_->async_handshake(ssl::stream_base::client, handler); });
    if (ec) {
      if (timed_out_ || canceled_) return Failed("TLS handshake", ec);
      std::string why = ClientTlsFailure(tls_->native_handle(), host_mismatch,
                                         options_.peer ? options_.peer->uri : url_.host, options_.whose_certificate);
      if (!why.empty()) {
        failure_ = host_mismatch ? Failure::kHostName : Failure::kCertificate;
        return Unavailable(why);
      }
      failure_ = Failure::kTlsHandshake;
      return Unavailable("TLS handshake: " + ec.message());
    }
    return Status::Ok();
  }

  // Sends `req`, reads the answer's header and then: the whole body, nothing (`header_only`),
  // for a 200 the body as it arrives into on_bytes, or, with on_header, the header to it and
  // then the body of any status as it arrives.
  Result<ClientResponse> Exchange(const Request& req, const Reading& how) {
    if (tls_) return Talk(*tls_, req, how);
    return Talk(socket_, req, how);
  }

  void Close() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  // (Re)starts the deadline: `timeout` from now. A wait that fired before it was restarted finds
  // the expiry in the future and does nothing.
  void Arm() {
    deadline_.expires_after(options_.timeout);
    deadline_.async_wait([this](beast::error_code ec) {
      if (ec || deadline_.expiry() > asio::steady_timer::clock_type::now()) return;
      timed_out_ = true;
      Abort();
    });
  }

  // The request's header, then its body piece by piece from the source (chunked unless the
  // header names a Content-Length), each write within its own deadline.
  template <class Stream>
  Status SendPieces(Stream& stream, const Request& req, const BodySource& source) {
    bhttp::request_serializer<bhttp::string_body> header(req);
    beast::error_code ec = Await([&](auto handler) { bhttp::async_write_header(stream, header, handler); });
    if (ec) return Failed("send", ec);
    const bool chunked = req.chunked();
    for (std::string piece;;) {
      piece.clear();
      Result<bool> more = source(&piece);
      if (!more.ok()) {
        failure_ = Failure::kRequestBody;
        return more.status();
      }
      Arm();
      if (!*more) {
        if (chunked) ec = Await([&](auto handler) { asio::async_write(stream, bhttp::make_chunk_last(), handler); });
        return ec ? Failed("send", ec) : Status::Ok();
      }
      if (piece.empty()) continue;
      ec = chunked ? Await([&](auto handler) {
        asio::async_write(stream, bhttp::make_chunk(asio::buffer(piece)), handler);
      })
                   : Await([&](auto handler) { asio::async_write(stream, asio::buffer(piece), handler); });
      if (ec) return Failed("send", ec);
    }
  }

  template <class Stream>
  Result<ClientResponse> Talk(Stream& stream, const Request& req, const Reading& how) {
    if (how.body) {
      SF_RETURN_IF_ERROR(SendPieces(stream, req, *how.body));
    } else {
      beast::error_code ec = Await([&](auto handler) { bhttp::async_write(stream, req, handler); });
      if (ec) return Failed("send", ec);
    }
    beast::error_code ec;
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.header_limit(64 * 1024);
    parser.body_limit(options_.max_body_bytes);
    if (req.method() == bhttp::verb::head) parser.skip(true);  // its Content-Length has no body
    ec = Await([&](auto handler) { bhttp::async_read_header(stream, buffer, parser, handler); });
    if (ec) return Failed("read the answer", ec);
    ClientResponse out;
    out.status = static_cast<int>(parser.get().result_int());
    if (how.header_only) return out;
    if (how.on_header && !(*how.on_header)(parser.get().base())) return out;
    if (how.on_tunnel && out.status == 101) {
      deadline_.cancel();  // a tunnel lasts as long as both sides like
      if constexpr (std::is_same_v<Stream, tcp::socket>) {
        SocketPipe pipe(stream, beast::buffers_to_string(buffer.data()));
        (*how.on_tunnel)(pipe);
      } else {
        TlsPipe pipe(stream, socket_, io_, beast::buffers_to_string(buffer.data()));
        (*how.on_tunnel)(pipe);
      }
      return out;
    }
    const std::function<bool(const std::string&)>* on_bytes = how.on_bytes;
    if (on_bytes && (out.status == 200 || how.on_header)) {
      deadline_.cancel();  // a stream lasts as long as the server sends, and as long as it likes
      parser.body_limit((std::numeric_limits<std::uint64_t>::max)());
      while (!parser.is_done()) {
        ec = Await([&](auto handler) { bhttp::async_read_some(stream, buffer, parser, handler); });
        std::string& body = parser.get().body();
        if (!body.empty()) {
          if (!(*on_bytes)(body)) return out;
          body.clear();  // the parser appends after what it holds: nothing handed on is kept
        }
        if (ec == bhttp::error::end_of_stream || ec == asio::error::eof) break;
        if (ec) {
          if (canceled_) return Failed("read the answer", ec);
          break;  // the server went away: the stream ends
        }
      }
      out.complete = parser.is_done();
      return out;
    }
    ec = Await([&](auto handler) { bhttp::async_read(stream, buffer, parser, handler); });
    if (ec && ec != bhttp::error::end_of_stream) return Failed("read the answer", ec);
    out.body = std::move(parser.get().body());
    out.complete = parser.is_done();
    return out;
  }

  Status Setup(Status s) {
    failure_ = Failure::kSetup;
    return s;
  }

  Status Failed(const std::string& what, const beast::error_code& ec) {
    if (canceled_) {
      failure_ = Failure::kCanceled;
      return Status(StatusCode::kCancelled, options_.cancel_reason + " (" + what + ")");
    }
    if (timed_out_) {
      failure_ = Failure::kTimedOut;
      std::ostringstream seconds;
      seconds << options_.timeout.count() / 1000.0;
      return Unavailable("timed out after " + seconds.str() + " s (" + what + ")");
    }
    failure_ = ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
                       ec == ssl::error::stream_truncated
                   ? Failure::kClosedUnanswered
                   : Failure::kNetwork;
    return Unavailable(what + ": " + ec.message());
  }

  void Abort() {
    resolver_.cancel();
    beast::error_code ignored;
    socket_.close(ignored);
  }

  // Starts one operation and runs the context until it ends.
  template <class Start>
  beast::error_code Await(Start&& start) {
    bool done = false;
    beast::error_code result;
    start([&](beast::error_code ec, auto&&...) {
      result = ec;
      done = true;
    });
    while (!done) {
      // A context whose work ran out (the deadline canceled for a stream) stops itself.
      if (io_.stopped()) io_.restart();
      io_.run_one_for(std::chrono::milliseconds(100));
      if (!done && !canceled_ && options_.cancel && options_.cancel->load()) {
        canceled_ = true;
        Abort();
      }
    }
    return result;
  }

  const Url& url_;
  const ClientOptions& options_;
  asio::io_context io_;
  tcp::resolver resolver_;
  tcp::socket socket_;
  asio::steady_timer deadline_;
  std::unique_ptr<ssl::context> tls_context_;
  std::optional<ssl::stream<tcp::socket&>> tls_;
  bool timed_out_ = false;
  bool canceled_ = false;
  Failure failure_ = Failure::kNone;
};

Result<ClientResponse> Run(const Url& url, const ClientOptions& options, Request req, const Reading& how,
                           Failure* failure) {
  *failure = Failure::kNone;
  try {
    req.set(bhttp::field::host, url.HostHeader());
    req.set(bhttp::field::connection, req.count(bhttp::field::upgrade) ? "Upgrade" : "close");
    if (!how.body) {
      req.prepare_payload();
    } else if (!req.has_content_length()) {
      req.chunked(true);
    }
    Call call(url, options);
    Status opened = call.Open();
    Result<ClientResponse> out = opened.ok() ? call.Exchange(req, how) : Result<ClientResponse>(opened);
    *failure = call.failure();
    call.Close();
    return out;
  } catch (const std::exception& e) {
    *failure = Failure::kNetwork;
    return Unavailable(std::string("send: ") + e.what());
  }
}

}  // namespace

Result<ClientResponse> Client::Fetch(Request req, bool header_only) {
  return Run(url_, options_, std::move(req), Reading{header_only, nullptr, nullptr}, &failure_);
}

Result<ClientResponse> Client::Stream(Request req, const std::function<bool(const std::string&)>& on_bytes) {
  return Run(url_, options_, std::move(req), Reading{false, &on_bytes, nullptr}, &failure_);
}

Result<ClientResponse> Client::Upgrade(Request req, const std::function<bool(const ResponseHeader&)>& on_header,
                                       const std::function<bool(const std::string&)>& on_bytes,
                                       const std::function<void(Pipe&)>& on_tunnel) {
  return Run(url_, options_, std::move(req), Reading{false, &on_bytes, &on_header, &on_tunnel}, &failure_);
}

Result<ClientResponse> Client::Relay(Request req, const std::function<bool(const ResponseHeader&)>& on_header,
                                     const std::function<bool(const std::string&)>& on_bytes) {
  return Run(url_, options_, std::move(req), Reading{false, &on_bytes, &on_header}, &failure_);
}

Result<ClientResponse> Client::Relay(Request req, const BodySource& body,
                                     const std::function<bool(const ResponseHeader&)>& on_header,
                                     const std::function<bool(const std::string&)>& on_bytes) {
  return Run(url_, options_, std::move(req), Reading{false, &on_bytes, &on_header, nullptr, &body}, &failure_);
}

}  // namespace sf::http
