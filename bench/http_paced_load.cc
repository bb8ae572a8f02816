// Open-loop HTTP load at a fixed rate (what wrk2's -R does; Debian's wrk has no fixed rate):
// GET requests to one URL path, RATE per second in total, spread over CONNECTIONS keep-alive
// connections, for SECONDS. Request i is due at start + i/RATE; its latency is measured from
// that due time, not from when it was actually sent, so a stalled server shows up in the
// percentiles instead of silently lowering the offered rate (coordinated omission).
//
//   http_paced_load HOST PORT PATH RATE SECONDS [CONNECTIONS] [--post-bodies FILE]
//
// With --post-bodies, the requests are POSTs (Content-Type: application/json) whose bodies are
// FILE's lines in turn: request i sends line i mod (number of lines) — bench/serve_load.sh sends
// one sentence per request this way. Without it, GETs as before.
//
// Prints the offered and achieved rates, the latency percentiles and the non-200 count, as
// "key: value" lines (bench/api_load.sh reads them). With $SF_TOKEN set, every request carries
// it as `Authorization: Bearer` (from the environment, so it is not in the process listing).
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/command_line.h"

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  CLI::App app("Open-loop HTTP GET load at a fixed rate, latency from each request's due time.", "http_paced_load");
  sf::cmdline::UseDefaults(app);
  std::string host, path;
  int port = 0, connections = 32;
  double rate = 0, seconds = 0;
  app.add_option("HOST", host, "server address")->required();
  app.add_option("PORT", port, "server port")->required()->check(CLI::Range(1, 65535));
  app.add_option("PATH", path, "request path, e.g. /api/v1/experiments")->required();
  app.add_option("RATE", rate, "requests per second, all connections together")->required()->check(CLI::Range(1.0, 1e6));
  app.add_option("SECONDS", seconds, "how long to offer load")->required()->check(CLI::Range(0.1, 3600.0));
  app.add_option("CONNECTIONS", connections, "keep-alive connections, one thread each")->check(CLI::Range(1, 1024));
  std::string bodies_file;
  app.add_option("--post-bodies", bodies_file, "POST these bodies (one per line, in turn) instead of GETs")
      ->check(CLI::ExistingFile);
  if (auto exit_code = sf::cmdline::Parse(app, argc, argv)) return *exit_code;
  std::vector<std::string> bodies;
  if (!bodies_file.empty()) {
    std::ifstream in(bodies_file);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) bodies.push_back(line);
    }
    if (bodies.empty()) {
      std::fprintf(stderr, "http_paced_load: %s has no bodies\n", bodies_file.c_str());
      return 2;
    }
  }

  const int64_t total = static_cast<int64_t>(rate * seconds);
  const auto interval = std::chrono::duration<double>(1.0 / rate);
  std::vector<std::vector<double>> latencies(static_cast<size_t>(connections));
  std::atomic<int64_t> errors{0}, non_ok{0};
  const auto start = Clock::now() + std::chrono::milliseconds(200);  // every thread connected by then
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      boost::asio::io_context io;
      tcp::resolver resolver(io);
      beast::tcp_stream stream(io);
      auto connect = [&] {
        beast::error_code ec;
        stream.socket().close(ec);
        stream.connect(resolver.resolve(host, std::to_string(port)), ec);
        stream.socket().set_option(tcp::no_delay(true), ec);
        return !ec;
      };
      bool connected = connect();
      http::request<http::string_body> req{bodies.empty() ? http::verb::get : http::verb::post, path, 11};
      req.set(http::field::host, host);
      if (const char* token = std::getenv("SF_TOKEN"); token && *token) {
        req.set(http::field::authorization, std::string("Bearer ") + token);
      }
      req.keep_alive(true);
      if (!bodies.empty()) req.set(http::field::content_type, "application/json");
      beast::flat_buffer buffer;
      // Connection c sends requests c, c + C, c + 2C, ...: together, one every 1/RATE seconds.
      for (int64_t i = c; i < total; i += connections) {
        const auto due = start + std::chrono::duration_cast<Clock::duration>(interval * static_cast<double>(i));
        std::this_thread::sleep_until(due);
        beast::error_code ec;
        if (!connected) connected = connect();
        if (!bodies.empty()) {
          req.body() = bodies[static_cast<size_t>(i) % bodies.size()];
          req.prepare_payload();
        }
        if (connected) {
          http::write(stream, req, ec);
          http::response<http::string_body> res;
          if (!ec) http::read(stream, buffer, res, ec);
          if (!ec && res.result() != http::status::ok) non_ok++;
          if (!ec && !res.keep_alive()) connected = connect();
        }
        if (ec || !connected) {
          errors++;
          connected = false;
          continue;
        }
        latencies[static_cast<size_t>(c)].push_back(std::chrono::duration<double, std::milli>(Clock::now() - due).count());
      }
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(all.size())))];
  };
  std::printf("offered_requests_per_second: %.0f\n", rate);
  std::printf("achieved_requests_per_second: %.0f\n", static_cast<double>(all.size()) / elapsed);
  std::printf("requests: %zu\n", all.size());
  std::printf("latency_p50_ms: %.2f\nlatency_p90_ms: %.2f\nlatency_p99_ms: %.2f\nlatency_p999_ms: %.2f\nlatency_max_ms: %.2f\n",
              pct(50), pct(90), pct(99), pct(99.9), all.empty() ? 0.0 : all.back());
  std::printf("connection_errors: %lld\nnon_200: %lld\n", static_cast<long long>(errors.load()),
              static_cast<long long>(non_ok.load()));
  return errors.load() == 0 && non_ok.load() == 0 ? 0 : 1;
}
