"""The shell server (python/steadfast/shell.py) as the agent runs it, against a real TrialLink
server on loopback: it reports its URL, lets in only the task's token, runs a login shell in a
pseudo-terminal per WebSocket with the size the client asks for, and ends each with its exit
status; with no session for the idle timeout it exits 0."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from trial_link_server import TrialLinkServer, clean_env

HAS_TORNADO = importlib.util.find_spec("tornado") is not None


@unittest.skipUnless(HAS_TORNADO, "Tornado is not installed (apt-get install python3-tornado)")
class ShellServerTest(unittest.TestCase):
    def start_shell(self, task: int, token: str, idle_timeout: int, work: str = "",
                    **popen: object) -> tuple[subprocess.Popen, str]:
        """`python3 -m steadfast.shell` as the agent starts it for task `task` with service token
        `token`, in `work` (a fresh directory when empty); returns it once it reported its URL,
        and the URL. Both end with the test."""
        server = TrialLinkServer()
        self.addCleanup(server.close)
        if not work:
            work = tempfile.mkdtemp(prefix="sf-shell-")
            self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        env = clean_env(SF_MASTER_ADDRESS=server.address, SF_TASK_ID=f"task{task}-r0-a1.0", SF_RANK="0",
                        SF_RESTART="0", SF_TASK_TOKEN="sft1_task", SF_SERVE_TOKEN=token, SF_TASK_KIND="SHELL")
        shell = subprocess.Popen([sys.executable, "-m", "steadfast.shell", "--idle-timeout", str(idle_timeout)],
                                 env=env, cwd=work, **popen)
        self.addCleanup(lambda: shell.poll() is None and shell.kill())
        deadline = time.monotonic() + 60
        while not server.requests("ReportEndpoint"):
            self.assertIsNone(shell.poll(), "the shell server exited before it reported its URL")
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)
        return shell, server.requests("ReportEndpoint")[0].url
    def test_a_terminal_per_websocket_with_its_exit_status_and_only_with_the_token(self) -> None:
        import tornado.httpclient
        import tornado.ioloop
        import tornado.websocket

        token = "sfs1_" + "cd" * 32
        work = tempfile.mkdtemp(prefix="sf-shell-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        shell, url = self.start_shell(9, token, idle_timeout=10, work=work,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertRegex(url, r"^http://[^/]+:\d+/proxy/9/$")

        def status(with_token: str) -> int:
            headers = {"Authorization": "Bearer " + with_token} if with_token else {}
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code
        self.assertEqual(status(token), 200)
        self.assertEqual(status(""), 403)
        self.assertEqual(status("sfs1_" + "00" * 32), 403)

        async def session(script: bytes, with_token: str = token, query: str = "rows=33&cols=101",
                          eof: bool = False) -> tuple[bytes, dict]:
            request = tornado.httpclient.HTTPRequest(
                url.replace("http://", "ws://") + "terminal?" + query,
                headers={"Authorization": "Bearer " + with_token})
            ws = await tornado.websocket.websocket_connect(request)
            await ws.write_message(script, binary=True)
            if eof:
                await ws.write_message(json.dumps({"eof": True}))
            output, control = b"", {}
            while True:
                message = await ws.read_message()
                if message is None:
                    return output, control
                if isinstance(message, bytes):
                    output += message
                else:
                    control = json.loads(message)

        loop = tornado.ioloop.IOLoop.current()
        output, control = loop.run_sync(
            lambda: session(b"stty size; pwd; echo kind-$SF_TASK_KIND; exit 4\n"), timeout=30)
        self.assertEqual(control, {"exit": 4}, output)
        self.assertIn(b"33 101", output)
        self.assertIn(work.encode(), output)
        self.assertIn(b"kind-SHELL", output)
        # No terminal: the shell reads the script from a pipe and ends at its end, with the
        # status of its last command.
        output, control = loop.run_sync(
            lambda: session(b"echo piped-$SF_TASK_KIND\nfalse\n", query="tty=0", eof=True), timeout=30)
        self.assertEqual(control, {"exit": 1}, output)
        self.assertEqual(output, b"piped-SHELL\n")
        with self.assertRaises(tornado.httpclient.HTTPClientError) as refused:
            loop.run_sync(lambda: session(b"exit\n", "sfs1_" + "00" * 32), timeout=30)
        self.assertEqual(refused.exception.code, 403)

        # No session for 10 s: it exits 0.
        out, _ = shell.communicate(timeout=60)
        self.assertEqual(shell.returncode, 0, out)
        self.assertIn("no session for 10 s: stopping", out)

    def test_a_flood_waits_for_the_client_instead_of_piling_up(self) -> None:
        import tornado.httpclient
        import tornado.ioloop
        import tornado.websocket

        token = "sfs1_" + "ef" * 32
        shell, url = self.start_shell(8, token, idle_timeout=60, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)

        def rss_mib() -> float:
            with open(f"/proc/{shell.pid}/status") as f:
                kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            return kib / 1024

        async def flood() -> tuple[float, int]:
            request = tornado.httpclient.HTTPRequest(url.replace("http://", "ws://") + "terminal?tty=0",
                                                     headers={"Authorization": "Bearer " + token})
            ws = await tornado.websocket.websocket_connect(request)
            # About 1 GB/s of output, and a client that reads nothing for 4 s: without
            # backpressure the server holds gigabytes by then.
            await ws.write_message(b"yes 0123456789abcdef0123456789abcdef\n", binary=True)
            await tornado.gen.sleep(4)
            held = rss_mib()
            taken = 0
            while taken < 50_000_000:  # then it flows again, as fast as the client reads
                message = await ws.read_message()
                self.assertIsNotNone(message, "the session ended under the flood")
                taken += len(message) if isinstance(message, bytes) else 0
            ws.close()
            return held, taken

        import tornado.gen
        held, taken = tornado.ioloop.IOLoop.current().run_sync(flood, timeout=60)
        self.assertLess(held, 300, f"the shell server held {held:.0f} MiB while its client read nothing")
        self.assertGreaterEqual(taken, 50_000_000)


if __name__ == "__main__":
    unittest.main()
