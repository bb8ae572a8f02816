#include "cli/http_client.h"

#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <pwd.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <stdexcept>

#include "common/tls_files.h"

#include "cli/session_store.h"

namespace sf::cli {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

namespace {

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Where to connect and how.
struct Target {
  const std::string& host;
  const std::string& port;
  bool https;
  const std::string& ca_file;
};

// Why the TLS handshake with `host` failed, for a person: the certificate problem OpenSSL found
// (and what to check), or the handshake's own error.
std::string TlsFailure(SSL* tls, bool host_mismatch, const Target& t, const beast::system_error& e) {
  const std::string check = t.ca_file.empty()
                                ? " (no CA file given, so the system's CAs were used: give the cluster's CA "
                                  "with --ca-file or $SF_CA_FILE)"
                                : " (is " + t.ca_file + " the CA that signed the master's certificate?)";
  if (host_mismatch) {
    return "certificate verify failed: the master's certificate is not for " + t.host +
           " (its subject alternative names must include the host of the URL)";
  }
  const long verify = SSL_get_verify_result(tls);
  if (verify != X509_V_OK) {
    return std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify) + check;
  }
  return "TLS handshake failed: " + e.code().message() + " (is it an https:// master?)";
}

// Connects to the master and calls use(stream) with a beast::tcp_stream (http) or a
// beast::ssl_stream over one (https) whose handshake verified the master's certificate chain
// against the CA and its host name (SNI is sent for names, not addresses). Throws on failure,
// with a message that names the cause.
template <class Use>
auto Connected(const Target& t, Use&& use) -> decltype(use(std::declval<beast::tcp_stream&>())) {
  asio::io_context io;
  tcp::resolver resolver(io);
  if (!t.https) {
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(60));
    stream.connect(resolver.resolve(t.host, t.port));
    return use(stream);
  }
  ssl::context context(ssl::context::tls_client);
  context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                      ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
  if (t.ca_file.empty()) {
    context.set_default_verify_paths();
  } else {
    Result<std::string> ca = LoadCaCertificates(t.ca_file, "CA file");
    if (!ca.ok()) throw std::runtime_error(ca.status().message());
    context.add_certificate_authority(asio::buffer(*ca));
  }
  context.set_verify_mode(ssl::verify_peer);
  beast::ssl_stream<beast::tcp_stream> stream(io, context);
  if (!IsIpAddress(t.host) && !SSL_set_tlsext_host_name(stream.native_handle(), t.host.c_str())) {
    throw std::runtime_error("cannot set the TLS server name " + t.host);
  }
  bool host_mismatch = false;
  stream.set_verify_callback([&](bool preverified, ssl::verify_context& verify) {
    const bool ok = ssl::host_name_verification(t.host)(preverified, verify);
    if (preverified && !ok) host_mismatch = true;
    return ok;
  });
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(60));
  beast::get_lowest_layer(stream).connect(resolver.resolve(t.host, t.port));
  try {
    stream.handshake(ssl::stream_base::client);
  } catch (const beast::system_error& e) {
    throw std::runtime_error(TlsFailure(stream.native_handle(), host_mismatch, t, e));
  }
  return use(stream);
}

// The end of a stream the master closed (or reset) without a word: what a plain request to an
// HTTPS-only master gets.
bool ClosedUnanswered(const beast::system_error& e) {
  return e.code() == http::error::end_of_stream || e.code() == asio::error::eof ||
         e.code() == asio::error::connection_reset;
}

}  // namespace

Result<HttpClient> HttpClient::Create(const std::string& base_url, const std::string& ca_file) {
  std::string rest = base_url;
  HttpClient c;
  if (rest.rfind("https://", 0) == 0) {
    rest = rest.substr(8);
    c.https_ = true;
  } else if (rest.rfind("http://", 0) == 0) {
    rest = rest.substr(7);
  } else if (rest.find("://") != std::string::npos) {
    return InvalidArgument("master URL \"" + base_url + "\": only http:// and https:// are supported");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty()) return InvalidArgument("master URL \"" + base_url + "\" has no host");
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos) {
    c.host_ = rest;
    c.port_ = c.https_ ? "443" : "80";
  } else {
    c.host_ = rest.substr(0, colon);
    c.port_ = rest.substr(colon + 1);
  }
  c.base_url_ = (c.https_ ? "https://" : "http://") + rest;
  c.ca_file_ = ca_file;
  c.token_ = TokenFor(c.base_url_);
  return c;
}

Result<HttpResponse> HttpClient::Request(const std::string& method, const std::string& path,
                                         const std::string& body) {
  try {
    http::request<http::string_body> req{http::string_to_verb(method), path, 11};
    req.set(http::field::host, host_);
    req.set(http::field::user_agent, "sf-cli");
    // Who submits: $USER, else the account name (cron and CI often have no USER).
    const char* user = std::getenv("USER");
    if (!user || !*user) {
      struct passwd* pw = getpwuid(geteuid());
      user = pw ? pw->pw_name : nullptr;
    }
    if (user) req.set("X-SF-User", user);
    if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
    if (!body.empty()) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
    }
    req.prepare_payload();
    return Connected(Target{host_, port_, https_, ca_file_}, [&](auto& stream) {
      http::write(stream, req);
      beast::flat_buffer buffer;
      http::response_parser<http::string_body> parser;
      parser.body_limit(512u << 20);
      http::read(stream, buffer, parser);
      beast::error_code ec;
      beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ec);
      return HttpResponse{static_cast<int>(parser.get().result_int()), parser.get().body()};
    });
  } catch (const beast::system_error& e) {
    return Unavailable("cannot reach the master at " + base_url_ + ": " + e.what() +
                       (!https_ && ClosedUnanswered(e) ? " (if the master serves HTTPS, use an https:// URL)" : ""));
  } catch (const std::exception& e) {
    return Unavailable("cannot reach the master at " + base_url_ + ": " + e.what());
  }
}

Result<HttpResponse> HttpClient::Get(const std::string& path) { return Request("GET", path, ""); }
Result<HttpResponse> HttpClient::Delete(const std::string& path) { return Request("DELETE", path, ""); }
Result<HttpResponse> HttpClient::Put(const std::string& path, const std::string& body) {
  return Request("PUT", path, body.empty() ? "{}" : body);
}
Result<HttpResponse> HttpClient::Post(const std::string& path, const std::string& body) {
  return Request("POST", path, body.empty() ? "{}" : body);
}

Status HttpClient::Stream(const std::string& path,
                          const std::function<bool(const std::string&, const std::string&)>& on_data) {
  try {
    std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host_ +
                      "\r\nAccept: text/event-stream\r\nConnection: close\r\n" +
                      (token_.empty() ? "" : "Authorization: Bearer " + token_ + "\r\n") + "\r\n";
    return Connected(Target{host_, port_, https_, ca_file_}, [&](auto& socket) -> Status {
      asio::write(socket, asio::buffer(req));
      asio::streambuf buf;
      asio::read_until(socket, buf, "\r\n\r\n");
      std::istream in(&buf);
      std::string status_line;
      std::getline(in, status_line);
      int status = 0;
      if (status_line.size() > 12) status = std::atoi(status_line.c_str() + 9);
      for (std::string h; std::getline(in, h) && h != "\r";) {
      }
      if (status != 200) {
        std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        beast::error_code ec;
        asio::read(socket, buf, ec);
        rest += std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        return Unavailable("HTTP " + std::to_string(status) + ": " + rest);
      }
      std::string event, data;
      while (true) {
        // Whole lines only: std::getline also returns the start of a line whose end has not
        // arrived yet, and the event split that way was lost. read_until returns at once when
        // the buffer already holds a line.
        beast::error_code ec;
        asio::read_until(socket, buf, "\n", ec);
        if (ec) return Status::Ok();
        std::string line;
        std::getline(in, line);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) {
          if (!data.empty() || !event.empty()) {
            if (!on_data(event, data)) return Status::Ok();
          }
          event.clear();
          data.clear();
        } else if (line.rfind("data: ", 0) == 0) {
          data += line.substr(6);
        } else if (line.rfind("event: ", 0) == 0) {
          event = line.substr(7);
        }
      }
    });
  } catch (const std::exception& e) {
    return Unavailable("cannot reach the master at " + base_url_ + ": " + e.what());
  }
}

}  // namespace sf::cli
