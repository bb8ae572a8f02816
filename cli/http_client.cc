#include "cli/http_client.h"

#include <pwd.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "cli/session_store.h"

namespace sf::cli {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Result<HttpClient> HttpClient::Create(const std::string& base_url) {
  std::string rest = base_url;
  if (rest.rfind("http://", 0) == 0) {
    rest = rest.substr(7);
  } else if (rest.find("://") != std::string::npos) {
    return InvalidArgument("master URL \"" + base_url + "\": only http:// is supported");
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.empty()) return InvalidArgument("master URL \"" + base_url + "\" has no host");
  HttpClient c;
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos) {
    c.host_ = rest;
    c.port_ = "80";
  } else {
    c.host_ = rest.substr(0, colon);
    c.port_ = rest.substr(colon + 1);
  }
  c.base_url_ = "http://" + rest;
  c.token_ = TokenFor(c.base_url_);
  return c;
}

Result<HttpResponse> HttpClient::Request(const std::string& method, const std::string& path,
                                         const std::string& body) {
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(60));
    stream.connect(resolver.resolve(host_, port_));
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
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(512u << 20);
    http::read(stream, buffer, parser);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    return HttpResponse{static_cast<int>(parser.get().result_int()), parser.get().body()};
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
    asio::io_context io;
    tcp::resolver resolver(io);
    tcp::socket socket(io);
    asio::connect(socket, resolver.resolve(host_, port_));
    std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host_ +
                      "\r\nAccept: text/event-stream\r\nConnection: close\r\n" +
                      (token_.empty() ? "" : "Authorization: Bearer " + token_ + "\r\n") + "\r\n";
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
  } catch (const std::exception& e) {
    return Unavailable("cannot reach the master at " + base_url_ + ": " + e.what());
  }
}

}  // namespace sf::cli
