// An interactive terminal on a shell task, through the master's proxy (docs/tasks.md,
// "Shells"; python/steadfast/shell.py is the other end): a WebSocket to
// MASTER/proxy/ID/terminal (Boost.Beast, over TLS for an https:// master, verified by its CA).
//
// While it lasts: the local terminal is in raw mode when stdin is one (restored on every way
// out), its size goes with the request and again on every SIGWINCH; stdin's bytes go to the
// shell as binary messages; the shell's bytes go to stdout as they come. When stdin is not a
// terminal (a script piped in), the shell gets no terminal either: it reads the script from a
// pipe and ends at its end ({"eof": true}), as `ssh host < script` does.
// Ctrl-C goes to the shell, not to sf. It ends when the shell does: the result is its exit
// status ({"exit": N}); an error names the step (connect, TLS, the WebSocket handshake with the
// master's refusal: 401, 403, 404, 503) or says the connection ended without a status.
#pragma once

#include <cstdint>
#include <string>

#include "common/http/client.h"
#include "common/status.h"

namespace sf::cli {

Result<int> OpenTerminal(const http::Url& master, const std::string& ca_file,
                         const std::string& token, int64_t task_id);

}  // namespace sf::cli
