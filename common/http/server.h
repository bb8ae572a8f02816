// The one HTTP/1.1 server transport (Boost.Beast) of every daemon that serves HTTP: the master's
// REST gateway (master/api/http_server.h) and sf-serve (serve/translation_server.h). It owns the
// bytes — sockets, TLS, limits, timeouts, threads — and hands each parsed request to a Handler,
// which owns what the request means.
//
// Threads: a fixed pool of `threads` workers runs one io_context (asynchronous reads and
// writes). A connection holds no thread while it waits for or sends bytes; a worker is busy only
// while Handler::Handle runs. A handler may answer later, from any thread (sf-serve answers when
// its batch is done), or keep the connection for a stream written from a thread of its own (the
// master's log follows).
//
// Limits: at most `max_connections` connections are open at a time; one beyond the cap is
// answered with Handler::Refuse(kOverCapacity) and closed. Each request (headers and body,
// including the wait for it on a kept-alive connection) must arrive within `read_timeout`, and
// each response must be taken by the client within it; otherwise the connection is closed.
// Headers over `max_header_bytes` are malformed (400); a body over Handler::BodyLimit for its
// header gets Refuse(kBodyTooLarge) (413), checked against Content-Length before the body is read
// and as a chunked body arrives.
//
// Bodies: the server reads a request's body whole before Handle, up to `max_body_bytes` — unless
// Handler::StreamsBody says the handler takes it in pieces (the master's proxy to tasks): then
// Handle gets the request as soon as its header is in (the body empty) and pulls the body with
// Exchange::ReadBody, piece by piece, at its own pace; nothing is held but the piece, and the
// route's BodyLimit may exceed `max_body_bytes`. A client that sent `Expect: 100-continue` gets
// its "100 Continue" when the handler first asks for the body (never, when it answers at once).
// A streamed body the handler did not read to its end is dropped as after a refusal, and the
// connection ends with the answer. After a refusal the server stops sending and reads (and drops)
// what the client still sends — at most 64 MiB, 5 s — so the client sees the answer, not a reset.
//
// TLS: with `tls` set (a certificate chain and key, common/tls_files.h) the server speaks HTTPS
// only, TLS 1.2 or newer: each connection must finish its handshake within `read_timeout`, and
// one that does not (plaintext HTTP, a client that does not trust the certificate) is closed
// without an answer. A connection the server ends after a complete answer gets close_notify
// first (bounded by 5 s), so a client reading to the end sees a clean end. With `clients` too, a
// client must present a certificate proving that identity (a task's service, which only the
// master's proxy may reach), else its handshake fails.
//
// Nothing a client sends stops the server; an exception from a handler becomes
// Refuse(kInternal). Thread-safe.
#pragma once

#include <boost/beast/http.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "common/http/tls_context.h"
#include "common/status.h"
#include "common/tls_files.h"

namespace sf::http {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using RequestHeader = boost::beast::http::request_header<>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;

struct ServerOptions {
  std::string name = "http";  // the log component
  std::string bind_address = "127.0.0.1";
  int port = 0;  // 0: pick a free one (Server::port())
  int threads = 4;
  int max_connections = 512;
  // The largest body any request may have; Handler::BodyLimit narrows it per route.
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 64u << 10;
  std::chrono::milliseconds read_timeout{30000};
  ServerCertificate tls;  // empty: plain HTTP
  // With tls: only clients proving this identity connect (common/http/tls_context.h); none: any.
  std::optional<PeerIdentity> clients;
};

// One request in flight on a connection, as the handler sees it. Held by shared_ptr: the
// connection lives while the handler holds it.
class Exchange {
 public:
  virtual ~Exchange() = default;
  // Sends `res` as given (the handler calls prepare_payload; a HEAD answer keeps the GET's
  // Content-Length), from any thread, once. The connection then reads the next request when
  // both sides keep it alive, or ends. `refusal`: an error answer after which the server drains
  // what the client still sends, as for its own refusals.
  virtual void Reply(Response res, bool refusal = false) = 0;
  // For a stream the handler writes from a thread of its own (server-sent events): call
  // OpenStream() instead of Reply (the connection no longer times out while the handler has
  // nothing to send), then Write() the bytes — the status line and headers first — one call at
  // a time; each blocks until the client took the bytes. Write is false when the write failed,
  // was not taken within read_timeout, or the server is stopping. CloseStream() ends the
  // connection (with close_notify over TLS).
  virtual void OpenStream() = 0;
  virtual bool Write(const std::string& bytes) = 0;
  virtual void CloseStream() = 0;
  // Instead of CloseStream, for a stream whose bytes were one whole answer that frames its own
  // end (a Content-Length, a chunked body's last chunk, or none: HEAD, 1xx, 204, 304) and did
  // not say `Connection: close`: the connection reads the client's next request, as after a
  // Reply, when both sides keep it alive (HTTP/1.1 or keep-alive, a streamed request body read
  // to its end, the server not stopping); otherwise it ends, as CloseStream. The master's proxy
  // ends its answers so, so a browser loading a page through it reuses its connections instead
  // of opening (and over TLS, handshaking) one per request.
  virtual void FinishStream() = 0;
  // For a protocol switch (a WebSocket through the master's proxy): OpenTunnel() instead of
  // OpenStream, then the connection carries raw bytes both ways and never times out (either side
  // may stay quiet for as long as it likes): Write() sends (the 101 answer's head first),
  // ReadSome() returns what the client sent since its request (bytes it sent early first),
  // blocking until some arrive; false once the client closed, the read failed or the server is
  // stopping. One ReadSome at a time; it may run while a Write does, from another thread.
  // CloseStream() ends the tunnel.
  virtual void OpenTunnel() = 0;
  virtual bool ReadSome(std::string* bytes) = 0;
  // A streamed request's body (Handler::StreamsBody), from the handler's own thread, before it
  // answers: kPiece with the next piece (not empty), kEnd once the whole body was read (at once
  // for a request without one, and for one that was not streamed), kFailed when it never will
  // be — too large for the route or malformed (the server has answered the client: 413, 400),
  // the client closed or sent nothing for `read_timeout`, or the server is stopping. After
  // kFailed the body must be treated as incomplete and the request abandoned (a later answer is
  // dropped). One call at a time.
  enum class BodyRead { kPiece, kEnd, kFailed };
  virtual BodyRead ReadBody(std::string* piece) = 0;
  // The client's address ("unknown" when the socket no longer has one).
  virtual const std::string& peer() const = 0;
};

class Handler {
 public:
  enum class Refusal { kOverCapacity, kBodyTooLarge, kMalformed, kInternal };

  virtual ~Handler() = default;
  // The largest body a request with this header may carry; at most ServerOptions::max_body_bytes
  // unless the body is streamed.
  virtual size_t BodyLimit(const RequestHeader& header) = 0;
  // Whether the handler reads this request's body itself, in pieces (Exchange::ReadBody), instead
  // of getting it whole.
  virtual bool StreamsBody(const RequestHeader& /*header*/) { return false; }
  // A whole request (a streamed one: its header): answer it through `exchange`, now or later.
  // Runs on a worker; must not block on the network.
  virtual void Handle(Request req, std::shared_ptr<Exchange> exchange) = 0;
  // The answer to a connection the server refuses (`detail` says why, in one line: "too many
  // connections (512 open); retry later", "request body larger than 1048576 bytes", "malformed
  // HTTP request: ...", "internal error: ..."). The server closes the connection after it.
  virtual Response Refuse(Refusal why, const std::string& detail) = 0;
};

class Server {
 public:
  // `handler` must outlive the server.
  Server(Handler* handler, ServerOptions options);
  ~Server();  // Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, starts the workers and accepts. Fails (naming the cause) when the address is taken or
  // the TLS certificate or key cannot be used.
  Status Start();
  // From now on a connection reads no further request and every answer closes its connection;
  // the workers still run (answers still pending go out). Stop() does it first.
  void Quiesce();
  // Stops accepting, ends every connection (handlers already running finish first) and joins
  // the workers. Streams see Write fail. Idempotent.
  void Stop();
  bool stopping() const;
  int port() const { return port_; }
  const ServerOptions& options() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace sf::http
