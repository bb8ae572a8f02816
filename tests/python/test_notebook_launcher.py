"""The notebook launcher (python/steadfast/notebook.py) as the agent runs it, against a real
TrialLink server on loopback: it starts Debian's Jupyter Notebook server with the task's base
URL, reports its URL once Jupyter answers, lets in only requests with the task's token, and
stops Jupyter and exits 0 after the idle timeout."""

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

HAS_NOTEBOOK = importlib.util.find_spec("notebook") is not None


def fetch(url: str, token: str = "") -> tuple[int, bytes]:
    headers = {"Authorization": "token " + token} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@unittest.skipUnless(HAS_NOTEBOOK, "Jupyter Notebook is not installed (apt-get install python3-notebook)")
class NotebookLauncherTest(unittest.TestCase):
    def test_reports_its_url_lets_in_only_the_token_and_stops_when_idle(self) -> None:
        server = TrialLinkServer()
        self.addCleanup(server.close)
        work = tempfile.mkdtemp(prefix="sf-notebook-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        with open(os.path.join(work, "data.txt"), "w") as f:
            f.write("from the context\n")
        token = "sfs1_" + "ab" * 32
        env = clean_env(SF_MASTER_ADDRESS=server.address, SF_TASK_ID="task7-r0-a1.0", SF_RANK="0",
                        SF_RESTART="0", SF_TASK_TOKEN="sft1_task", SF_SERVE_TOKEN=token,
                        JUPYTER_RUNTIME_DIR=os.path.join(work, ".runtime"))
        launcher = subprocess.Popen([sys.executable, "-m", "steadfast.notebook", "--idle-timeout", "10"],
                                    env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True)
        self.addCleanup(lambda: launcher.poll() is None and launcher.kill())

        deadline = time.monotonic() + 120
        while not server.requests("ReportEndpoint"):
            self.assertIsNone(launcher.poll(), "the launcher exited before it reported its URL")
            self.assertLess(time.monotonic(), deadline, "no ReportEndpoint within 120 s")
            time.sleep(0.2)
        reported = server.requests("ReportEndpoint")[0]
        self.assertEqual(reported.who.task_id, "task7-r0-a1.0")
        self.assertRegex(reported.url, r"^http://[^/]+:\d+/proxy/7/$")
        metadata = [m for name, _, m in server.calls if name == "ReportEndpoint"][0]
        self.assertEqual(metadata.get("x-sf-task-token"), "sft1_task")

        # The token is the only way in; its working directory is the task's.
        status, body = fetch(reported.url + "api/status", token)
        self.assertEqual(status, 200, body)
        self.assertIn("last_activity", json.loads(body))
        self.assertEqual(fetch(reported.url + "api/status")[0], 403)
        self.assertEqual(fetch(reported.url + "api/status", "sfs1_" + "00" * 32)[0], 403)
        status, body = fetch(reported.url + "api/contents/data.txt", token)
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["content"], "from the context\n")

        # Idle for 10 s: Jupyter is stopped and the launcher exits 0.
        output, _ = launcher.communicate(timeout=120)
        self.assertEqual(launcher.returncode, 0, output)
        self.assertIn("no activity for 10 s: stopping", output)
        with self.assertRaises(OSError):
            urllib.request.urlopen(reported.url + "api/status", timeout=5)


if __name__ == "__main__":
    unittest.main()
