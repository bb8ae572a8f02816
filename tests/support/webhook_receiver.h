// A webhook receiver for tests: an HTTP/1.1 server on 127.0.0.1 (a port picked at start) that
// records every request it gets and answers each with the status its Responder picks; a status
// of 0 holds the request unanswered until Release() or destruction (a receiver that hangs).
// With a certificate and key (WithTls) it speaks HTTPS only. Thread-safe; one thread per
// connection. Header-only (Boost.Beast; link OpenSSL::SSL and OpenSSL::Crypto).
#pragma once

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sf::testing {

class WebhookReceiver {
 public:
  struct Received {
    std::string delivery, timestamp, signature, content_type, body;
  };
  // The status to answer `r` with, given how many times its delivery id came so far (1 the
  // first time); 0: hang.
  using Responder = std::function<int(const Received& r, int nth)>;

  explicit WebhookReceiver(Responder respond = [](const Received&, int) { return 200; },
                           const std::string& cert_file = "", const std::string& key_file = "")
      : respond_(std::move(respond)), acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    if (!cert_file.empty()) {
      tls_ = std::make_unique<boost::asio::ssl::context>(boost::asio::ssl::context::tls_server);
      tls_->use_certificate_chain_file(cert_file);
      tls_->use_private_key_file(key_file, boost::asio::ssl::context::pem);
    }
    port_ = acceptor_.local_endpoint().port();
    accepter_ = std::thread([this] { AcceptLoop(); });
  }
  ~WebhookReceiver() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      released_ = true;
    }
    changed_.notify_all();
    boost::system::error_code ec;
    boost::asio::ip::tcp::socket wake(io_);
    wake.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port_)}, ec);
    accepter_.join();
    for (std::thread& t : connections_) t.join();
  }
  WebhookReceiver(const WebhookReceiver&) = delete;
  WebhookReceiver& operator=(const WebhookReceiver&) = delete;

  // What Steadfast-Signature must be, computed here straight with OpenSSL (as a receiver
  // would): "v1=" + hex HMAC-SHA256(secret, timestamp + "." + body).
  static std::string ExpectedSignature(const std::string& secret, const Received& r) {
    const std::string message = r.timestamp + "." + r.body;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
         reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &size);
    static const char kHex[] = "0123456789abcdef";
    std::string out = "v1=";
    for (unsigned int i = 0; i < size; ++i) {
      out += kHex[mac[i] >> 4];
      out += kHex[mac[i] & 15];
    }
    return out;
  }

  int port() const { return port_; }
  std::string url(const std::string& path = "/hook") const {
    return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_) + path;
  }
  std::vector<Received> received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  // Answers the requests held by a 0 status (with 200), and every later one.
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    changed_.notify_all();
  }
  // Waits until `done(received())` holds; false after `timeout`.
  bool WaitFor(const std::function<bool(const std::vector<Received>&)>& done, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return done(received_); });
  }

 private:
  void AcceptLoop() {
    while (true) {
      boost::asio::ip::tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      if (ec) continue;
      connections_.emplace_back([this, s = std::move(socket)]() mutable { Serve(std::move(s)); });
    }
  }

  void Serve(boost::asio::ip::tcp::socket socket) {
    if (!tls_) {
      Exchange(socket);
      boost::system::error_code ec;
      socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
      return;
    }
    boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream(std::move(socket), *tls_);
    boost::system::error_code ec;
    stream.handshake(boost::asio::ssl::stream_base::server, ec);
    if (ec) return;  // e.g. a client that does not trust this certificate
    Exchange(stream);
    stream.shutdown(ec);
  }

  template <class Stream>
  void Exchange(Stream& socket) {
    namespace http = boost::beast::http;
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> request;
    boost::system::error_code ec;
    http::read(socket, buffer, request, ec);
    if (ec) return;
    Received r{std::string(request["Steadfast-Delivery"]), std::string(request["Steadfast-Timestamp"]),
               std::string(request["Steadfast-Signature"]), std::string(request[http::field::content_type]),
               request.body()};
    int status = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      received_.push_back(r);
      const int nth = ++seen_[r.delivery];
      status = respond_(r, nth);
      changed_.notify_all();
      if (status == 0) {
        changed_.wait(lock, [this] { return released_; });
        status = 200;
      }
    }
    http::response<http::string_body> response{static_cast<http::status>(status), 11};
    response.set(http::field::content_type, "text/plain");
    if (status != 204 && status != 304) response.body() = "ok";
    response.prepare_payload();
    http::write(socket, response, ec);
  }

  Responder respond_;
  std::unique_ptr<boost::asio::ssl::context> tls_;  // HTTPS only when set
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  int port_ = 0;
  std::thread accepter_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Received> received_;
  std::map<std::string, int> seen_;
  std::vector<std::thread> connections_;
  bool stopping_ = false, released_ = false;
};

}  // namespace sf::testing
