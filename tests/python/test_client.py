"""steadfast.Client: where it finds the master, and what it sends (against a loopback HTTP
server; the real master's answers are the end-to-end tests' business)."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import tarfile
import tempfile
import unittest
from unittest import mock

import steadfast
from steadfast.client import cli_defaults_path, resolve_master

from rest_server import RestServer


class ResolutionTest(unittest.TestCase):
    def setUp(self) -> None:
        self.home = tempfile.mkdtemp(prefix="sf-home-")
        self.addCleanup(shutil.rmtree, self.home, ignore_errors=True)
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith("SF_") and k != "XDG_CONFIG_HOME"}
        clean["HOME"] = self.home
        patcher = mock.patch.dict(os.environ, clean, clear=True)
        patcher.start()
        self.addCleanup(patcher.stop)

    def write_defaults(self, data: object, base: str = "") -> str:
        path = os.path.join(base or os.path.join(self.home, ".config"), "steadfast", "cli.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(data if isinstance(data, str) else json.dumps(data))
        return path

    def test_the_default_is_loopback_8080(self) -> None:
        self.assertEqual(resolve_master(), ("http://127.0.0.1:8080", ""))
        c = steadfast.Client()
        self.assertEqual((c.url, c.token, c.ca_file), ("http://127.0.0.1:8080", "", ""))

    def test_the_defaults_file_gives_master_and_its_ca(self) -> None:
        self.write_defaults({"master": "https://m:8443/", "ca_file": "/ca.pem",
                             "deployment": "/x"})
        self.assertEqual(cli_defaults_path(), os.path.join(self.home, ".config", "steadfast",
                                                           "cli.json"))
        self.assertEqual(resolve_master(), ("https://m:8443", "/ca.pem"))
        # SF_CA_FILE beats the file's CA; an argument beats both.
        os.environ["SF_CA_FILE"] = "/env-ca.pem"
        self.assertEqual(resolve_master(), ("https://m:8443", "/env-ca.pem"))
        self.assertEqual(resolve_master(ca_file="/arg.pem"), ("https://m:8443", "/arg.pem"))

    def test_xdg_config_home_when_absolute(self) -> None:
        xdg = os.path.join(self.home, "xdg")
        self.write_defaults({"master": "http://xdg:1"}, base=xdg)
        os.environ["XDG_CONFIG_HOME"] = xdg
        self.assertEqual(resolve_master(), ("http://xdg:1", ""))
        os.environ["XDG_CONFIG_HOME"] = "relative"  # ignored, as the CLI ignores it
        self.assertEqual(cli_defaults_path(), os.path.join(self.home, ".config", "steadfast",
                                                           "cli.json"))

    def test_the_environment_beats_the_file_and_the_argument_beats_both(self) -> None:
        self.write_defaults({"master": "https://file:1", "ca_file": "/file-ca.pem"})
        os.environ["SF_MASTER"] = "http://env:2"
        os.environ["SF_TOKEN"] = "tok"
        # The file's CA goes with the file's master only.
        self.assertEqual(resolve_master(), ("http://env:2", ""))
        self.assertEqual(resolve_master("arg:3"), ("http://arg:3", ""))
        c = steadfast.Client()
        self.assertEqual((c.url, c.token), ("http://env:2", "tok"))
        self.assertEqual(steadfast.Client(token="t2").token, "t2")

    def test_the_sf_login_session_for_that_master_is_the_token_without_sf_token(self) -> None:
        path = os.path.join(self.home, ".config", "steadfast", "sessions.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump({"sessions": {"http://m:1": {"username": "alice", "token": "sfs_alice"},
                                    "http://other:2": {"username": "bob", "token": "sfs_bob"}}}, f)
        self.assertEqual(steadfast.Client("http://m:1/").token, "sfs_alice")
        self.assertEqual(steadfast.Client("m:1").token, "sfs_alice")
        self.assertEqual(steadfast.Client("http://none:3").token, "")
        os.environ["SF_TOKEN"] = "tok"  # as for sf: the environment first
        self.assertEqual(steadfast.Client("http://m:1").token, "tok")
        del os.environ["SF_TOKEN"]
        with open(path, "w") as f:
            f.write("not json")  # no session, as for sf
        self.assertEqual(steadfast.Client("http://m:1").token, "")

    def test_a_bad_defaults_file_is_an_error_naming_it(self) -> None:
        path = self.write_defaults("[1, 2]")
        with self.assertRaisesRegex(ValueError, f"sf defaults file {path}: not a JSON object"):
            resolve_master()
        self.write_defaults({"master": 5})
        with self.assertRaisesRegex(ValueError, '"master" must be a string'):
            resolve_master()


class RequestsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="sf-client-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def serve(self, routes) -> steadfast.Client:
        server = RestServer(routes)
        self.addCleanup(server.close)
        self.server = server
        return steadfast.Client(url=server.url, token="secret")

    def test_create_experiment_packs_the_context_of_an_entrypoint_config(self) -> None:
        client = self.serve({("POST", "/api/v1/experiments"):
                             (200, {"experiment": {"id": "42"}, "errors": []})})
        code = os.path.join(self.dir, "code")
        os.makedirs(os.path.join(code, "skip"))
        with open(os.path.join(code, "train.py"), "w") as f:
            f.write("print(1)\n")
        with open(os.path.join(code, "skip", "big.bin"), "w") as f:
            f.write("x")
        with open(os.path.join(code, ".sfignore"), "w") as f:
            f.write("skip/\n")
        config = os.path.join(self.dir, "exp.yaml")
        yaml = ("name: t\nentrypoint: python3 train.py\ncontext_directory: code  # the code\n"
                "searcher: {name: single, metric: loss, max_length: {batches: 5}}\n")
        with open(config, "w") as f:
            f.write(yaml)
        self.assertEqual(client.create_experiment(config, activate=False, workspace="ws"), 42)
        request = self.server.requests[-1]
        self.assertEqual(request["headers"]["Authorization"], "Bearer secret")
        body = request["body"]
        self.assertEqual((body["config_yaml"], body["activate"], body["workspace"]),
                         (yaml, False, "ws"))
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(body["context"])), mode="r:gz") as t:
            self.assertEqual(t.getnames(), [".sfignore", "train.py"])

        # Without an entrypoint: the text alone; a context_directory nested under a key does
        # not count.
        client.create_experiment("name: n\nsearcher:\n  entrypoint: no\n")
        self.assertNotIn("context", self.server.requests[-1]["body"])
        self.assertTrue(self.server.requests[-1]["body"]["activate"])

    def test_errors_carry_the_status_and_the_masters_message(self) -> None:
        client = self.serve({
            ("POST", "/api/v1/experiments"): (400, {
                "code": 3, "message": "invalid experiment config: searcher: missing",
                "errors": [{"path": "searcher", "message": "missing", "line": 1, "column": 1}]}),
            ("GET", "/api/v1/experiments/9"): (404, {"code": 5, "message": "experiment 9 not "
                                                                            "found", "errors": []}),
        })
        with self.assertRaises(steadfast.ApiError) as caught:
            client.create_experiment("name: x\n")
        e = caught.exception
        self.assertEqual((e.status, e.message), (400, "invalid experiment config: searcher: "
                                                      "missing"))
        self.assertEqual(e.errors[0]["path"], "searcher")
        with self.assertRaises(steadfast.ApiError) as caught:
            client.experiment(9)
        self.assertEqual(str(caught.exception),
                         "GET /api/v1/experiments/9: experiment 9 not found (HTTP 404)")
        unreachable = steadfast.Client(url="http://127.0.0.1:1")
        with self.assertRaises(steadfast.ApiError) as caught:
            unreachable.experiment(1)
        self.assertEqual(caught.exception.status, 0)
        self.assertIn("cannot reach the master at http://127.0.0.1:1", str(caught.exception))

    def test_reads_wait_and_kill(self) -> None:
        states = iter(["EXPERIMENT_STATE_ACTIVE", "EXPERIMENT_STATE_ACTIVE",
                       "EXPERIMENT_STATE_COMPLETED"])
        client = self.serve({
            ("GET", "/api/v1/experiments/5"):
                lambda r: (200, {"experiment": {"id": "5", "state": next(states)}}),
            ("GET", "/api/v1/experiments/6"):
                (200, {"experiment": {"id": "6", "state": "EXPERIMENT_STATE_ACTIVE"}}),
            ("GET", "/api/v1/experiments/5/trials?offset=0"):
                (200, {"trials": [{"id": "1"}, {"id": "2"}], "pagination": {"total": 3}}),
            ("GET", "/api/v1/experiments/5/trials?offset=2"):
                (200, {"trials": [{"id": "3"}], "pagination": {"total": 3}}),
            ("GET", "/api/v1/trials/3/metrics?kind=validation"):
                (200, {"metrics": [{"batches": "10", "values": {"validation_loss": 0.5}}]}),
            ("POST", "/api/v1/experiments/kill"):
                (200, {"results": [{"id": "5", "ok": True}, {"id": "6", "ok": True}]}),
        })
        self.assertEqual(client.wait(5, interval=0.01)["state"], "EXPERIMENT_STATE_COMPLETED")
        with self.assertRaisesRegex(TimeoutError, "experiment 6 is still EXPERIMENT_STATE_ACTIVE"):
            client.wait(6, timeout=0.05, interval=0.01)
        self.assertEqual([t["id"] for t in client.trials(5)], ["1", "2", "3"])
        self.assertEqual(client.metrics(3, kind="validation")[0]["values"]["validation_loss"], 0.5)
        self.assertEqual(len(client.kill([5, 6])), 2)
        self.assertEqual(self.server.requests[-1]["body"], {"ids": [5, 6]})
        client.kill(7)
        self.assertEqual(self.server.requests[-1]["body"], {"ids": [7]})


if __name__ == "__main__":
    unittest.main()
