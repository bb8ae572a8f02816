#include "cli/shell_session.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <thread>

#include "common/http/tls_context.h"
#include "common/value.h"

namespace sf::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

// SIGWINCH's handler writes a byte here; the input thread reads it.
int g_winch_pipe = -1;
void OnWinch(int) {
  const char b = 'w';
  [[maybe_unused]] ssize_t n = write(g_winch_pipe, &b, 1);
}

// Raw mode on stdin while alive (when it is a terminal).
class RawTerminal {
 public:
  RawTerminal() : tty_(isatty(STDIN_FILENO) == 1) {
    if (!tty_ || tcgetattr(STDIN_FILENO, &saved_) != 0) {
      tty_ = false;
      return;
    }
    termios raw = saved_;
    cfmakeraw(&raw);
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  }
  ~RawTerminal() {
    if (tty_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  bool tty() const { return tty_; }

 private:
  bool tty_;
  termios saved_{};
};

std::pair<int, int> TerminalSize() {
  winsize w{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_row > 0 && w.ws_col > 0)
    return {w.ws_row, w.ws_col};
  return {24, 80};
}

// One session over an open WebSocket (plain or TLS underneath).
template <class Next>
Result<int> Session(asio::io_context& io, websocket::stream<Next>& ws) {
  std::deque<std::pair<bool, std::string>> queue;  // (text?, bytes), written one at a time
  bool writing = false;
  std::optional<int> exit_code;
  std::string failure;
  std::function<void()> write_next = [&] {
    if (writing || queue.empty()) return;
    writing = true;
    ws.text(queue.front().first);
    ws.async_write(asio::buffer(queue.front().second), [&](beast::error_code ec, size_t) {
      queue.pop_front();
      writing = false;
      if (!ec) write_next();
    });
  };
  auto send = [&](bool text, std::string bytes) {
    asio::post(io, [&, text, bytes = std::move(bytes)]() mutable {
      queue.emplace_back(text, std::move(bytes));
      write_next();
    });
  };
  beast::flat_buffer buffer;
  std::function<void()> read_next = [&] {
    ws.async_read(buffer, [&](beast::error_code ec, size_t) {
      if (ec) {
        if (ec != websocket::error::closed && !exit_code) failure = ec.message();
        return;
      }
      const std::string message = beast::buffers_to_string(buffer.data());
      buffer.consume(buffer.size());
      if (ws.got_binary()) {
        for (size_t done = 0; done < message.size();) {
          const ssize_t n = write(STDOUT_FILENO, message.data() + done, message.size() - done);
          if (n <= 0) break;
          done += static_cast<size_t>(n);
        }
      } else if (auto control = Value::FromJson(message); control.ok() && control->Find("exit")) {
        exit_code = static_cast<int>(control->Find("exit")->as_double());
      }
      read_next();
    });
  };

  RawTerminal terminal;
  int wake[2];
  if (pipe(wake) != 0) return Internal("pipe failed");
  g_winch_pipe = wake[1];
  struct sigaction sa {};
  sa.sa_handler = OnWinch;
  sigaction(SIGWINCH, &sa, nullptr);
  std::atomic<bool> done{false};
  // Input: stdin's bytes and window changes, until the session ends (a 'q' on the pipe).
  std::thread input([&] {
    bool stdin_open = true;
    while (!done) {
      pollfd fds[2] = {{wake[0], POLLIN, 0},
                       {STDIN_FILENO, static_cast<short>(stdin_open ? POLLIN : 0), 0}};
      if (poll(fds, stdin_open ? 2 : 1, -1) < 0) continue;
      if (fds[0].revents & POLLIN) {
        char c = 0;
        if (read(wake[0], &c, 1) == 1 && c == 'w') {
          const auto [rows, cols] = TerminalSize();
          send(
              true,
              Value(Value::Map{{"resize", Value(Value::List{Value(rows), Value(cols)})}}).ToJson());
        }
        continue;
      }
      if (stdin_open && (fds[1].revents & (POLLIN | POLLHUP))) {
        char chunk[4096];
        const ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
        if (n > 0) {
          send(false, std::string(chunk, static_cast<size_t>(n)));
        } else {
          stdin_open = false;
          if (!terminal.tty())
            send(true, R"({"eof": true})");  // a script's end ends the shell's input
        }
      }
    }
  });
  read_next();
  io.run();
  done = true;
  const char q = 'q';
  [[maybe_unused]] ssize_t n = write(wake[1], &q, 1);
  input.join();
  signal(SIGWINCH, SIG_DFL);
  g_winch_pipe = -1;
  close(wake[0]);
  close(wake[1]);
  if (exit_code) return *exit_code;
  return Unavailable("the shell's connection ended without an exit status" +
                     (failure.empty() ? "" : ": " + failure));
}

std::string Target(int64_t task_id) {
  const std::string base = "/proxy/" + std::to_string(task_id) + "/terminal";
  if (isatty(STDIN_FILENO) != 1) return base + "?tty=0";  // a script: the shell reads a pipe
  const auto [rows, cols] = TerminalSize();
  return base + "?rows=" + std::to_string(rows) + "&cols=" + std::to_string(cols);
}

// The master's answer to a refused handshake, in one line.
std::string Refusal(const websocket::response_type& res) {
  auto parsed = Value::FromJson(res.body());
  const Value* message = parsed.ok() ? parsed->Find("message") : nullptr;
  return "HTTP " + std::to_string(res.result_int()) +
         (message && message->is_string() ? ": " + message->as_string() : std::string());
}

template <class Next>
Status Handshake(websocket::stream<Next>& ws, const http::Url& master, const std::string& token,
                 int64_t task_id) {
  ws.set_option(websocket::stream_base::decorator([&token](websocket::request_type& req) {
    if (!token.empty()) req.set(beast::http::field::authorization, "Bearer " + token);
  }));
  websocket::response_type res;
  beast::error_code ec;
  ws.handshake(res, master.HostHeader(), Target(task_id), ec);
  if (ec == websocket::error::upgrade_declined)
    return Unavailable("shell " + std::to_string(task_id) + ": " + Refusal(res));
  if (ec) return Unavailable("WebSocket handshake: " + ec.message());
  ws.binary(true);
  return Status::Ok();
}

}  // namespace

Result<int> OpenTerminal(const http::Url& master, const std::string& ca_file,
                         const std::string& token, int64_t task_id) {
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    beast::error_code ec;
    auto endpoints = resolver.resolve(master.host, master.port, ec);
    if (ec) return Unavailable("resolve " + master.host + ": " + ec.message());
    if (!master.https) {
      websocket::stream<tcp::socket> ws(io);
      asio::connect(ws.next_layer(), endpoints, ec);
      if (ec) return Unavailable("connect: " + ec.message());
      SF_RETURN_IF_ERROR(Handshake(ws, master, token, task_id));
      return Session(io, ws);
    }
    SF_ASSIGN_OR_RETURN(std::unique_ptr<asio::ssl::context> tls,
                        http::ClientTlsContext(ca_file, "CA file"));
    websocket::stream<asio::ssl::stream<tcp::socket>> ws(io, *tls);
    asio::connect(ws.next_layer().next_layer(), endpoints, ec);
    if (ec) return Unavailable("connect: " + ec.message());
    bool host_mismatch = false;
    if (!http::VerifyHost(ws.next_layer(), master.host, &host_mismatch)) {
      return InvalidArgument("cannot set the TLS server name " + master.host);
    }
    ws.next_layer().handshake(asio::ssl::stream_base::client, ec);
    if (ec) {
      const std::string why =
          http::ClientTlsFailure(ws.next_layer().native_handle(), host_mismatch, master.host);
      return Unavailable(why.empty() ? "TLS handshake: " + ec.message() : why);
    }
    SF_RETURN_IF_ERROR(Handshake(ws, master, token, task_id));
    return Session(io, ws);
  } catch (const std::exception& e) {
    return Unavailable(std::string("shell: ") + e.what());
  }
}

}  // namespace sf::cli
