"""A shell on the cluster (`sf shell start`, `sf shell open ID`; docs/tasks.md "Shells").

The master schedules `python3 -m steadfast.shell --idle-timeout N` on a slot as a task of kind
SHELL. This serves terminals over WebSockets (Tornado, from Debian's python3-tornado), with no
sshd on the agent:

- on a free port of the agent's host, under /proxy/TASK_ID/, answering only requests that carry
  the task's service token ($SF_SERVE_TOKEN) as `Authorization: Bearer ...`, which only the
  master's proxy sends (master/proxy/task_proxy.h): a user reaches it with their master
  credentials, through the master; when the master gave the task a certificate, it listens on
  loopback only, behind a TLS front that takes only the master (steadfast._task_service);
- GET /proxy/ID/ answers {"sessions": N, "idle_seconds": S} (readiness);
- each WebSocket to /proxy/ID/terminal?rows=R&cols=C starts a login shell (bash, else sh) in a
  new pseudo-terminal, in the task's working directory (its context) with the task's
  environment; with ?tty=0 (a script piped in, no terminal) the shell reads from a pipe instead
  and its output and errors come back together. Binary messages carry bytes: the client's are
  the shell's input, ours its output. Text messages carry JSON: the client sends
  {"resize": [rows, cols]} (a terminal) or {"eof": true} (no terminal: the input ended); we send
  {"exit": STATUS} when the shell ended (128 + N for a signal N), then close. Closing the
  WebSocket hangs the shell up (SIGHUP). The shell's output is read only as fast as the client
  takes it (the shell blocks on a full pipe meanwhile), so a flood costs no memory here.
- It reports its URL to the master (TrialLink ReportEndpoint) once it listens, and exits 0 after
  the idle timeout with no session open: the task ends STOPPED.
"""

from __future__ import annotations

import argparse
import fcntl
import hmac
import json
import os
import pty
import signal
import struct
import sys
import termios
import time
from typing import Optional

from ._task_service import free_port, host, master_link, task_number, tls_context, tls_front


def _shell() -> list[str]:
    for candidate in ("/bin/bash", "/bin/sh"):
        if os.access(candidate, os.X_OK):
            return [candidate, "-l"] if candidate.endswith("bash") else [candidate]
    return ["/bin/sh"]


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", max(1, rows), max(1, cols), 0, 0))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m steadfast.shell")
    parser.add_argument("--idle-timeout", type=int, default=3600,
                        help="seconds without an open session after which it stops (default 3600)")
    args = parser.parse_args(argv)
    token = os.environ.get("SF_SERVE_TOKEN", "")
    if not token:
        print("steadfast.shell: no $SF_SERVE_TOKEN: run by `sf shell start`, not by hand", file=sys.stderr)
        return 2
    task = task_number(os.environ.get("SF_TASK_ID", ""), "steadfast.shell")
    base = f"/proxy/{task}/"

    import tornado.ioloop
    import tornado.web
    import tornado.websocket

    sessions: set = set()
    last_active = [time.monotonic()]

    def authorised(handler: tornado.web.RequestHandler) -> bool:
        given = handler.request.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    class Status(tornado.web.RequestHandler):
        def get(self) -> None:
            if not authorised(self):
                raise tornado.web.HTTPError(403)
            idle = 0 if sessions else time.monotonic() - last_active[0]
            self.write({"sessions": len(sessions), "idle_seconds": round(idle, 1)})

    class Terminal(tornado.websocket.WebSocketHandler):
        def check_origin(self, origin: str) -> bool:
            return True  # the token, which only the master's proxy sends, is the check

        def prepare(self) -> None:
            if not authorised(self):
                raise tornado.web.HTTPError(403)

        def open(self) -> None:
            self.tty = self.get_query_argument("tty", "1") != "0"
            self.stdin_fd = -1
            if self.tty:
                rows = int(self.get_query_argument("rows", "24") or 24)
                cols = int(self.get_query_argument("cols", "80") or 80)
                pid, fd = pty.fork()
                if pid == 0:  # the shell, in the task's directory and environment
                    os.environ["TERM"] = os.environ.get("TERM") or "xterm-256color"
                    try:
                        os.execv(_shell()[0], _shell())
                    finally:
                        os._exit(127)
                _set_size(fd, rows, cols)
                self.pid, self.fd, self.stdin_fd = pid, fd, fd
            else:
                # No terminal (a script piped to `sf shell open`): the shell reads its commands
                # from a pipe, as `ssh host < script` runs one, and ends at the script's end.
                stdin_r, stdin_w = os.pipe()
                out_r, out_w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.dup2(stdin_r, 0)
                    os.dup2(out_w, 1)
                    os.dup2(out_w, 2)
                    for fd in (stdin_r, stdin_w, out_r, out_w):
                        os.close(fd)
                    try:
                        os.execv(_shell()[0], _shell()[:1])
                    finally:
                        os._exit(127)
                os.close(stdin_r)
                os.close(out_w)
                self.pid, self.fd, self.stdin_fd = pid, out_r, stdin_w
            sessions.add(self)
            tornado.ioloop.IOLoop.current().add_handler(self.fd, self._output, tornado.ioloop.IOLoop.READ)

        def _output(self, fd: int, _events: int) -> None:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if data:
                try:
                    flushed = self.write_message(data, binary=True)
                except tornado.websocket.WebSocketClosedError:
                    return  # the client went: drop its output until the hung-up shell ends
                if not flushed.done():
                    # Backpressure: the shell waits (its output pipe fills) while the client has
                    # not taken what was sent, so a flood never piles up here in memory.
                    loop = tornado.ioloop.IOLoop.current()
                    loop.remove_handler(fd)
                    flushed.add_done_callback(lambda f: self._resume(fd, f))
                return
            self._ended()

        def _resume(self, fd: int, flushed) -> None:
            flushed.exception()  # taken (a closed connection's), so it is not reported unread
            if self in sessions:
                tornado.ioloop.IOLoop.current().add_handler(fd, self._output, tornado.ioloop.IOLoop.READ)

        def _ended(self) -> None:
            loop = tornado.ioloop.IOLoop.current()
            loop.remove_handler(self.fd)
            _, status = os.waitpid(self.pid, 0)
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # a signal N: 128 + N, as a shell says
            sessions.discard(self)  # first: on_close must not signal a reaped pid
            last_active[0] = time.monotonic()
            for fd in {self.fd, self.stdin_fd}:
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                self.write_message(json.dumps({"exit": code}))
                self.close()
            except tornado.websocket.WebSocketClosedError:
                pass

        def on_message(self, message) -> None:
            if isinstance(message, bytes):
                try:
                    os.write(self.stdin_fd, message)
                except OSError:
                    pass  # the shell is gone or closed its input: its end comes on the output side
                return
            try:
                control = json.loads(message)
                if control.get("eof") and not self.tty:  # the script's end: the shell's input ends
                    os.close(self.stdin_fd)
                elif "resize" in control and self.tty:
                    rows, cols = control["resize"]
                    _set_size(self.fd, int(rows), int(cols))
                    os.kill(self.pid, signal.SIGWINCH)
            except (ValueError, KeyError, TypeError, OSError, AttributeError):
                pass

        def on_close(self) -> None:
            if self in sessions:  # the client went away: hang the shell up
                try:
                    os.kill(self.pid, signal.SIGHUP)
                except OSError:
                    pass


    port = free_port()
    app = tornado.web.Application([(base, Status), (base + "terminal", Terminal)])
    tls = tls_context()  # with the master's certificate: loopback behind a TLS front (docs/security.md)
    app.listen(port, address="127.0.0.1" if tls else "0.0.0.0")
    url = (f"https://{host()}:{tls_front(tls, port, 'steadfast.shell')}{base}" if tls
           else f"http://{host()}:{port}{base}")
    link = master_link(f"steadfast: shell {task}")
    link.report_endpoint(url)
    print(f"steadfast.shell: terminals at {url}, reached through the master at {base}terminal; "
          f"stops after {args.idle_timeout} s without a session", flush=True)

    loop = tornado.ioloop.IOLoop.current()

    def idle_check() -> None:
        if not sessions and time.monotonic() - last_active[0] > args.idle_timeout:
            print(f"steadfast.shell: no session for {args.idle_timeout} s: stopping", flush=True)
            loop.stop()
    tornado.ioloop.PeriodicCallback(idle_check, max(1000, min(30000, args.idle_timeout * 200))).start()
    signal.signal(signal.SIGTERM, lambda *_: loop.add_callback_from_signal(loop.stop))
    loop.start()
    link.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
