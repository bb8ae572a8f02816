// sf-serve as a real process in tests: the binary started in the background (ServeProcess, the
// port read from its first stdout line) and one HTTP(S) request per call (Call), shared by
// serve_test.cc and serve_registry_test.cc.
#pragma once

#include <signal.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/subprocess.h"
#include "common/value.h"
#include "tests/support/testing.h"

namespace sf::serve::serve_testing {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

inline std::string Binary(const std::string& rel) { return sf::testing::BinaryDir() + "/" + rel; }

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

struct HttpReply {
  int status = 0;
  std::string body;
  std::string retry_after, allow;
  std::string error;  // transport failure
};

// One request on a new connection (HTTPS when `tls` is given; it trusts any certificate).
inline HttpReply Call(int port, http::verb verb, const std::string& target,
                      const std::string& body = "", const std::string& token = "",
                      asio::ssl::context* tls = nullptr) {
  HttpReply out;
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    if (verb == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    http::response<http::string_body> res;
    beast::flat_buffer buffer;
    auto exchange = [&](auto& stream) {
      http::write(stream, req);
      http::read(stream, buffer, res);
    };
    if (tls) {
      beast::ssl_stream<beast::tcp_stream> stream(io, *tls);
      beast::get_lowest_layer(stream).connect(resolver.resolve("127.0.0.1", std::to_string(port)));
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
      stream.handshake(asio::ssl::stream_base::client);
      exchange(stream);
    } else {
      beast::tcp_stream stream(io);
      stream.connect(resolver.resolve("127.0.0.1", std::to_string(port)));
      stream.expires_after(std::chrono::seconds(30));
      exchange(stream);
    }
    out.status = res.result_int();
    out.body = res.body();
    out.retry_after = std::string(res[http::field::retry_after]);
    out.allow = std::string(res[http::field::allow]);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

inline HttpReply Translate(int port, const Value::List& texts, int beam,
                           const std::string& extra = "") {
  return Call(
      port, http::verb::post, "/v1/translate",
      "{\"text\": " + Value(texts).ToJson() + ", \"beam\": " + std::to_string(beam) + extra + "}");
}

// The value of an unlabelled metric in Prometheus text (-1 when absent).
inline double Metric(const std::string& text, const std::string& name) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex("\n" + name + " ([0-9.e+]+)"))) return std::stod(m[1]);
  return -1;
}

// sf-serve in the background, through `sh -c 'echo $$ >pid; exec sf-serve ...'` under RunCommand
// (its own process group, killed if the test dies); stdout and stderr go to files.
class ServeProcess {
 public:
  ServeProcess(const std::string& dir, const std::string& name, std::vector<std::string> flags)
      : dir_(dir) {
    std::string command = "echo $$ > " + name + ".pid; exec '" + Binary("serve/sf-serve") + "'";
    for (const auto& f : flags) command += " '" + f + "'";
    command += " > " + name + ".out 2> " + name + ".err";
    out_ = dir + "/" + name + ".out";
    err_ = dir + "/" + name + ".err";
    pid_file_ = dir + "/" + name + ".pid";
    thread_ = std::thread([this, command] {
      CommandOptions o;
      o.working_dir = dir_;
      o.timeout = std::chrono::minutes(5);
      auto r = RunCommand({"/bin/sh", "-c", command}, o);
      exit_code_ = r.ok() ? r->exit_code : -1;
      exited_ = true;
    });
    // The first stdout line names the port.
    const std::regex listening("listening on [^:]+:([0-9]+)\n");
    for (int i = 0; i < 600 && !exited_; ++i) {
      std::smatch m;
      const std::string out = ReadFile(out_);
      if (std::regex_search(out, m, listening)) {
        port_ = std::stoi(m[1]);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~ServeProcess() { Stop(); }

  int port() const { return port_; }
  std::string log() const { return ReadFile(out_) + ReadFile(err_); }
  // Waits for /ready (with `token`).
  bool WaitReady(const std::string& token = "", asio::ssl::context* tls = nullptr) {
    for (int i = 0; i < 600 && !exited_; ++i) {
      if (Call(port_, http::verb::get, "/ready", "", token, tls).status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // SIGTERM; returns the exit status.
  int Stop() {
    if (!thread_.joinable()) return exit_code_;
    const std::string pid = ReadFile(pid_file_);
    if (!pid.empty() && !exited_) ::kill(static_cast<pid_t>(std::stol(pid)), SIGTERM);
    thread_.join();
    return exit_code_;
  }

 private:
  std::string dir_, out_, err_, pid_file_;
  std::thread thread_;
  std::atomic<bool> exited_{false};
  int exit_code_ = -1;
  int port_ = 0;
};

}  // namespace sf::serve::serve_testing
