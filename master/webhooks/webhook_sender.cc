#include "master/webhooks/webhook_sender.h"

#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <exception>
#include <functional>
#include <sstream>

#include "common/tls_files.h"

namespace sf::master::webhooks {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// One asynchronous operation, run to its end on `io`: the deadline's timer runs on the same
// context and closes the socket when it fires, which ends the operation with an error; so does
// `on_cancel`, called once `cancel` is set (looked at every 100 ms).
template <class Start>
beast::error_code Step(asio::io_context& io, const std::atomic<bool>* cancel, const std::function<void()>& on_cancel,
                       Start&& start) {
  bool done = false;
  beast::error_code result;
  start([&](beast::error_code ec, auto&&...) {
    result = ec;
    done = true;
  });
  bool canceled = false;
  while (!done && !io.stopped()) {
    io.run_one_for(std::chrono::milliseconds(100));
    if (!done && !canceled && cancel && cancel->load()) {
      canceled = true;
      on_cancel();
    }
  }
  return result;
}

class Exchange {
 public:
  Exchange(const WebhookTarget& target, std::chrono::milliseconds timeout, const std::atomic<bool>* cancel)
      : target_(target), timeout_(timeout), cancel_(cancel), resolver_(io_), socket_(io_), deadline_(io_, timeout) {
    deadline_.async_wait([this](beast::error_code ec) {
      if (ec) return;
      timed_out_ = true;
      resolver_.cancel();
      beast::error_code ignored;
      socket_.close(ignored);
    });
  }

  SendOutcome Send(const http::request<http::string_body>& request, const std::string& ca_file) {
    tcp::resolver::results_type endpoints;
    beast::error_code ec = Await([&](auto handler) {
      resolver_.async_resolve(target_.host, target_.port,
                              [&, handler](beast::error_code e, tcp::resolver::results_type r) mutable {
                                endpoints = std::move(r);
                                handler(e);
                              });
    });
    if (ec) return Failed("resolve " + target_.host, ec);
    std::vector<tcp::endpoint> allowed;
    for (const auto& entry : endpoints) {
      if (target_.https || entry.endpoint().address().is_loopback()) allowed.push_back(entry.endpoint());
    }
    if (allowed.empty()) {
      return {0, "resolve " + target_.host + ": no loopback address (http:// goes to loopback only)"};
    }
    ec = Await([&](auto handler) { asio::async_connect(socket_, allowed, handler); });
    if (ec) return Failed("connect", ec);
    if (!target_.https) return Talk(socket_, request);

    ssl::context context(ssl::context::tls_client);
    context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                        ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
    if (ca_file.empty()) {
      context.set_default_verify_paths();
    } else {
      Result<std::string> ca = LoadCaCertificates(ca_file, "webhook CA file");
      if (!ca.ok()) return {0, ca.status().message()};
      beast::error_code bad;
      context.add_certificate_authority(asio::buffer(*ca), bad);
      if (bad) return {0, "webhook CA file " + ca_file + ": " + bad.message()};
    }
    context.set_verify_mode(ssl::verify_peer);
    ssl::stream<tcp::socket&> stream(socket_, context);
    if (!IsIpAddress(target_.host) && !SSL_set_tlsext_host_name(stream.native_handle(), target_.host.c_str())) {
      return {0, "cannot set the TLS server name " + target_.host};
    }
    bool host_mismatch = false;
    stream.set_verify_callback([&](bool preverified, ssl::verify_context& verify) {
      const bool ok = ssl::host_name_verification(target_.host)(preverified, verify);
      if (preverified && !ok) host_mismatch = true;
      return ok;
    });
    ec = Await([&](auto handler) { stream.async_handshake(ssl::stream_base::client, handler); });
    if (ec) {
      if (timed_out_) return Failed("TLS handshake", ec);
      if (host_mismatch) return {0, "certificate verify failed: the certificate is not for " + target_.host};
      const long verify = SSL_get_verify_result(stream.native_handle());
      if (verify != X509_V_OK) {
        return {0, std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify)};
      }
      return Failed("TLS handshake", ec);
    }
    return Talk(stream, request);
  }

 private:
  template <class Stream>
  SendOutcome Talk(Stream& stream, const http::request<http::string_body>& request) {
    beast::error_code ec = Await([&](auto handler) { http::async_write(stream, request, handler); });
    if (ec) return Failed("send", ec);
    beast::flat_buffer buffer;
    http::response_parser<http::empty_body> parser;
    parser.header_limit(64 * 1024);
    ec = Await([&](auto handler) { http::async_read_header(stream, buffer, parser, handler); });
    if (ec) return Failed("read the answer", ec);
    const int status = static_cast<int>(parser.get().result_int());
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    SendOutcome out{status, ""};
    if (!out.delivered()) out.error = "HTTP " + std::to_string(status);
    return out;
  }

  SendOutcome Failed(const std::string& what, const beast::error_code& ec) const {
    if (canceled_) {
      SendOutcome out{0, "canceled: the master is stopping (" + what + ")"};
      out.canceled = true;
      return out;
    }
    if (timed_out_) {
      std::ostringstream seconds;
      seconds << timeout_.count() / 1000.0;
      return {0, "timed out after " + seconds.str() + " s (" + what + ")"};
    }
    return {0, what + ": " + ec.message()};
  }

  // Step() on this exchange's context, canceled by closing the socket.
  template <class Start>
  beast::error_code Await(Start&& start) {
    return Step(io_, cancel_, [this] {
      canceled_ = true;
      resolver_.cancel();
      beast::error_code ignored;
      socket_.close(ignored);
    }, std::forward<Start>(start));
  }

  const WebhookTarget& target_;
  std::chrono::milliseconds timeout_;
  const std::atomic<bool>* cancel_;
  bool canceled_ = false;
  asio::io_context io_;
  tcp::resolver resolver_;
  tcp::socket socket_;
  asio::steady_timer deadline_;
  bool timed_out_ = false;
};

}  // namespace

SendOutcome PostJson(const WebhookTarget& target, const std::vector<std::pair<std::string, std::string>>& headers,
                     const std::string& body, std::chrono::milliseconds timeout, const std::string& ca_file,
                     const std::atomic<bool>* cancel) {
  try {
    http::request<http::string_body> request{http::verb::post, target.target, 11};
    const bool ipv6 = target.host.find(':') != std::string::npos;
    const bool default_port = target.port == (target.https ? "443" : "80");
    request.set(http::field::host, (ipv6 ? "[" + target.host + "]" : target.host) +
                                       (default_port ? "" : ":" + target.port));
    request.set(http::field::user_agent, "Steadfast-Webhooks/1");
    request.set(http::field::content_type, "application/json");
    request.set(http::field::connection, "close");
    for (const auto& [name, value] : headers) request.set(name, value);
    request.body() = body;
    request.prepare_payload();
    Exchange exchange(target, timeout, cancel);
    return exchange.Send(request, ca_file);
  } catch (const std::exception& e) {
    return {0, std::string("send: ") + e.what()};
  }
}

}  // namespace sf::master::webhooks
