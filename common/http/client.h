// The one HTTP/1.1 client (Boost.Beast) of Steadfast, over plain TCP or TLS: `sf` and sf-serve
// call the master's REST API with it, the master's webhook sender delivers with it.
//
// Contract:
// - One request per connection (`Connection: close`), blocking the calling thread; each call
//   has its own I/O context, so calls on different threads are independent.
// - Everything up to the end of the answer's header (resolve, connect, TLS handshake, the
//   request, the status line and headers) — and for Fetch the body too — must finish within
//   `timeout`; past it the connection is closed and the call fails with "timed out after N s
//   (<step>)". A stream's body has no deadline (it lasts as long as the server sends). A request
//   body sent in pieces (Relay with a BodySource) restarts the deadline for each piece and again
//   for the answer: waiting on the source counts against none.
// - `cancel` (optional), once true, ends the call within about 100 ms with kCancelled
//   ("<cancel_reason> (<step>)").
// - https:// verifies the server's certificate chain against the CA certificates in `ca_file`
//   (PEM; the system's trusted CAs when empty) and its host name (common/http/tls_context.h);
//   with `peer`, against that CA and identity instead, presenting `client_certificate` (the
//   master's proxy to a task's service, master/auth/task_certificates.h).
// - With `plain_http_loopback_only`, an http:// URL connects only to loopback addresses, whatever
//   its host resolves to (the webhook rule: secrets never travel in clear beyond the machine).
// - Errors are one line naming the step: "resolve example.org: Host not found",
//   "connect: Connection refused", "certificate verify failed: <OpenSSL's reason>",
//   "TLS handshake: <error>", "send: ...", "read the answer: ...". Failure() tells the kinds a
//   caller words differently for a person apart.
#pragma once

#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "common/http/tls_context.h"
#include "common/status.h"
#include "common/tls_files.h"

namespace sf::http {

// Where to connect: "http[s]://host[:port]" (a trailing "/" is dropped; no scheme: http).
struct Url {
  bool https = false;
  std::string host;
  std::string port;  // "80" / "443" when the URL names none
  std::string base;  // "https://host:port" as given, normalised

  // InvalidArgument naming `what` ("master URL") for another scheme or no host.
  static Result<Url> Parse(const std::string& url, const std::string& what);
  // The Host header: the host (bracketed when IPv6), with the port unless it is the default.
  std::string HostHeader() const;
};

struct ClientOptions {
  std::chrono::milliseconds timeout{300000};
  const std::atomic<bool>* cancel = nullptr;
  std::string cancel_reason = "canceled";
  std::string ca_file;                 // https: the CA to verify by; empty: the system's
  std::string ca_what = "CA file";     // names ca_file in errors
  std::string whose_certificate = "the certificate";  // in host-name mismatch errors
  bool plain_http_loopback_only = false;
  size_t max_body_bytes = size_t{512} << 20;
  std::optional<PeerIdentity> peer;    // https: the identity the server must prove
  ServerCertificate client_certificate;  // https: presented when not empty
};

using ResponseHeader = boost::beast::http::response_header<>;

struct ClientResponse {
  int status = 0;
  std::string body;
  // The answer arrived to the end its framing names (Content-Length, the last chunk, none for
  // HEAD, 204 and 304); false when the server closed before it, or a callback stopped the call.
  // A relay passes an answer's end on only when it is true.
  bool complete = false;
};

// A request body handed over in pieces (a proxy's client still sending it): each call gives the
// next piece (true), says the body ended (false), or fails, which ends the call with its error
// and leaves the body unfinished where the server sees it (the connection closes).
using BodySource = std::function<Result<bool>(std::string* piece)>;

// Why the last call of a Client failed, for callers that explain it to a person.
enum class Failure {
  kNone,
  kSetup,             // a bad CA file, a name SNI cannot carry
  kNetwork,           // resolve, connect, send or read failed
  kClosedUnanswered,  // the server closed (or reset) without a word: a plain request to HTTPS
  kTlsHandshake,      // the handshake failed for another reason than the certificate
  kCertificate,       // the server's certificate did not verify (chain or host name)
  kHostName,          // ... because it is not for the URL's host
  kTimedOut,
  kCanceled,
  kRequestBody,  // the BodySource failed
};

// A raw byte pipe over a connection that switched protocols (Client::Upgrade). ReadSome blocks
// until the server sends (false once it closed); Write sends; one ReadSome and one Write may run
// at the same time on two threads; Close ends both directions (a blocked ReadSome returns).
class Pipe {
 public:
  virtual ~Pipe() = default;
  virtual bool ReadSome(std::string* bytes) = 0;
  virtual bool Write(const std::string& bytes) = 0;
  virtual void Close() = 0;
};

class Client {
 public:
  Client(Url url, ClientOptions options) : url_(std::move(url)), options_(std::move(options)) {}

  // Sends `req` (its Host header and Connection: close are set here) and reads the whole
  // answer (the body up to max_body_bytes; with `header_only`, only the status).
  Result<ClientResponse> Fetch(boost::beast::http::request<boost::beast::http::string_body> req,
                               bool header_only = false);
  // Sends `req` and, when the answer is 200, calls on_bytes with the body as it arrives until
  // the server ends it or on_bytes returns false. Another status is returned (with the body
  // read whole) without calling on_bytes.
  Result<ClientResponse> Stream(boost::beast::http::request<boost::beast::http::string_body> req,
                                const std::function<bool(const std::string& bytes)>& on_bytes);

  // For a proxy: sends `req`, gives the answer's status line and headers, whatever the status,
  // to on_header, then its body as it arrives to on_bytes (none for HEAD, 204, 304), until the
  // server ends it or a callback returns false. The returned status is the answer's; its body
  // is empty (everything went to on_bytes); `complete` says whether the body arrived whole.
  Result<ClientResponse> Relay(boost::beast::http::request<boost::beast::http::string_body> req,
                               const std::function<bool(const ResponseHeader&)>& on_header,
                               const std::function<bool(const std::string& bytes)>& on_bytes);
  // The same with the request's body from `body` as it comes (req's own body is not sent): with
  // the Content-Length req names (the pieces must add up to it), else chunked.
  Result<ClientResponse> Relay(boost::beast::http::request<boost::beast::http::string_body> req,
                               const BodySource& body,
                               const std::function<bool(const ResponseHeader&)>& on_header,
                               const std::function<bool(const std::string& bytes)>& on_bytes);

  // For a protocol switch through a proxy (a WebSocket, over http:// or https://): sends `req` with its
  // Upgrade header (Connection: Upgrade), gives the answer's header to on_header; when the answer
  // is 101, on_tunnel gets the connection as a Pipe (bytes the server sent early first), and
  // Upgrade returns once on_tunnel does. Another answer's body goes to on_bytes, as Relay's.
  Result<ClientResponse> Upgrade(boost::beast::http::request<boost::beast::http::string_body> req,
                                 const std::function<bool(const ResponseHeader&)>& on_header,
                                 const std::function<bool(const std::string& bytes)>& on_bytes,
                                 const std::function<void(Pipe&)>& on_tunnel);

  Failure failure() const { return failure_; }
  const Url& url() const { return url_; }
  const ClientOptions& options() const { return options_; }

 private:
  Url url_;
  ClientOptions options_;
  Failure failure_ = Failure::kNone;
};

}  // namespace sf::http
