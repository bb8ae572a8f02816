"""Unmanaged mode: a script run by hand creates an experiment of one trial over REST, then
speaks TrialLink as its rank 0 (stand-ins for both of the master's listeners on loopback)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
import unittest

from rest_server import RestServer
from trial_link_server import TrialLinkServer, clean_env, run_script


class UnmanagedTrialTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="sf-unmanaged-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.link = TrialLinkServer()
        self.addCleanup(self.link.close)
        self.checkpoints = os.path.join(self.dir, "storage", "trial-21")
        answer = {
            "experiment": {"id": "11", "state": "EXPERIMENT_STATE_ACTIVE"},
            "trial": {"id": "21", "experimentId": "11", "hparams": {"from_master": 1}},
            "taskId": "unmanaged-21", "taskToken": "tt-21",
            "trialLinkAddress": self.link.address, "checkpointDir": self.checkpoints,
            "errors": [],
        }
        self.rest = RestServer({("POST", "/api/v1/unmanaged-trials"): (200, answer)})
        self.addCleanup(self.rest.close)

    def run_trial(self, body: str, **env: str):
        path = os.path.join(self.dir, "my_script.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(body))
        env = {"SF_MASTER": self.rest.url, "SF_TOKEN": "api-token", **env}
        return run_script(path, clean_env(**env), self.dir)

    def test_a_script_run_by_hand_reports_into_its_own_trial(self) -> None:
        p = self.run_trial("""
            import json, os, steadfast
            with steadfast.core.init(hparams={"lr": 0.1, "sizes": [1, 2]}, max_length=8) as ctx:
                print("INFO", json.dumps([ctx.info.mode, ctx.info.trial_id, ctx.info.experiment_id,
                                          ctx.info.hparams]))
                for op in ctx.searcher.operations():
                    print("OP", op.length, op.unit)
                    for n in range(1, op.length + 1):
                        ctx.train.report_training_metrics(n, {"loss": 1.0 / n})
                    ctx.train.report_validation_metrics(op.length, {"validation_loss": 0.3})
                    with ctx.checkpoint.store_path({"steps_completed": op.length}) as (path, uuid):
                        open(os.path.join(path, "w"), "w").write("w")
                    op.report_completed(0.3)
                import sys
                print("to stderr", file=sys.stderr)
                sys.stdout.write("no newline at the end")
            """)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # The script's output also went to the trial's logs (no agent captures it), in order,
        # each batch numbered in one incarnation, all before the trial ended.
        batches = self.link.requests("ReportLogs")
        self.assertGreaterEqual(len(batches), 1)
        self.assertEqual({b.incarnation for b in batches}, {batches[0].incarnation})
        self.assertEqual([b.sequence for b in batches], list(range(1, len(batches) + 1)))
        logged = [(l.stream, l.message) for b in batches for l in b.lines]
        self.assertEqual(logged[1:], [("stdout", "OP 8 batches"), ("stderr", "to stderr"),
                                      ("stdout", "no newline at the end")])
        self.assertTrue(logged[0][1].startswith("INFO "), logged)
        self.assertIn("no newline at the end", p.stdout)  # and the terminal still has it
        methods = [m for m, _, _ in self.link.calls]
        self.assertLess(max(i for i, m in enumerate(methods) if m == "ReportLogs"),
                        methods.index("EndTrial"))
        self.assertIn('INFO ["unmanaged", 21, 11, {"lr": 0.1, "sizes": [1, 2]}]', p.stdout)
        self.assertIn("OP 8 batches", p.stdout)
        self.assertIn(f"steadfast: unmanaged trial 21 of experiment 11 on {self.rest.url}",
                      p.stderr)

        request = self.rest.requests[0]
        self.assertEqual(request["headers"]["Authorization"], "Bearer api-token")
        self.assertEqual(request["body"]["workspace"], "")
        config = json.loads(request["body"]["config_yaml"])  # JSON is YAML
        self.assertEqual(config["name"], "my_script.py")
        self.assertTrue(config["entrypoint"].startswith("python3 "))
        self.assertEqual(config["searcher"], {"name": "single", "metric": "validation_loss",
                                              "max_length": {"batches": 8}})
        self.assertEqual(config["hyperparameters"],
                         {"lr": {"type": "const", "val": 0.1},
                          "sizes": {"type": "const", "val": [1, 2]}})

        for method, req, metadata in self.link.calls:
            self.assertEqual(metadata.get("x-sf-task-token"), "tt-21", method)
            self.assertEqual((req.who.trial_id, req.who.rank, req.who.task_id, req.who.restart),
                             (21, 0, "unmanaged-21", 0))
        # One operation of max_length, from the config: the master is not asked for it.
        self.assertEqual(self.link.requests("GetNextOperation"), [])
        complete = self.link.requests("CompleteOperation")
        self.assertEqual([(c.op.target_length, c.op.unit, c.searcher_metric) for c in complete],
                         [(8, "batches", 0.3)])
        reports = [r.batches for b in self.link.requests("ReportMetrics") for r in b.reports]
        self.assertEqual(reports, [1, 2, 3, 4, 5, 6, 7, 8, 8])
        checkpoint = self.link.requests("ReportCheckpoint")[0].checkpoint
        self.assertTrue(checkpoint.path.startswith(self.checkpoints + "/"))
        end = self.link.requests("EndTrial")
        self.assertEqual([(e.failed, e.error) for e in end], [(False, "")])

    def test_a_failing_script_ends_its_trial_as_failed_with_the_reason(self) -> None:
        config = os.path.join(self.dir, "exp.yaml")
        with open(config, "w") as f:
            f.write("name: by-hand\nsearcher:\n  name: single\n  metric: loss\n  max_length:\n"
                    "    epochs: 3\nhyperparameters:\n  lr: 0.1\n")
        p = self.run_trial(f"""
            import steadfast
            with steadfast.core.init(config={config!r}) as ctx:
                print("HP", ctx.info.hparams)
                for op in ctx.searcher.operations():
                    print("OP", op.length, op.unit)
                    raise ValueError("bad shape\\nmore detail")
            """)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("HP {'from_master': 1}", p.stdout)  # the trial's, as the master has them
        self.assertIn("OP 3 epochs", p.stdout)
        with open(config) as f:
            self.assertEqual(self.rest.requests[0]["body"]["config_yaml"], f.read())
        end = self.link.requests("EndTrial")
        self.assertEqual([(e.failed, e.error) for e in end], [(True, "ValueError: bad shape")])
        # The traceback is in the trial's logs too.
        logged = [(l.stream, l.message) for b in self.link.requests("ReportLogs") for l in b.lines]
        self.assertIn(("stdout", "OP 3 epochs"), logged)
        self.assertIn(("stderr", "ValueError: bad shape"), logged)
        self.assertIn(("stderr", "Traceback (most recent call last):"), logged)

    def test_unmanaged_true_needs_a_reachable_master(self) -> None:
        p = self.run_trial("""
            import steadfast
            try:
                steadfast.core.init(unmanaged=True)
            except steadfast.ApiError as e:
                print("API", e.status, e)
            """, SF_MASTER="http://127.0.0.1:1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("API 0 POST /api/v1/unmanaged-trials: cannot reach the master at "
                      "http://127.0.0.1:1", p.stdout)



class MaxLengthTest(unittest.TestCase):
    """The one operation's length comes from the config the script gives, YAML or JSON."""

    def test_the_forms_of_searcher_max_length(self) -> None:
        from steadfast.core._unmanaged import max_length_of
        cases = [
            ("searcher: {name: single, metric: l, max_length: {batches: 50}}\n", (50, "batches")),
            ("searcher:\n  max_length:  # how long\n\n    epochs: 2\n", (2, "epochs")),
            ('{"searcher": {"max_length": {"batches": 7}}}', (7, "batches")),
        ]
        for text, expected in cases:
            op = max_length_of(text, "exp.yaml")
            self.assertEqual((op.target_length, op.unit), expected, text)
        op = max_length_of({"searcher": {"max_length": {"epochs": 4}}}, "init(config=...)")
        self.assertEqual((op.target_length, op.unit), (4, "epochs"))
        with self.assertRaisesRegex(ValueError, "exp.yaml: no searcher.max_length"):
            max_length_of("name: x\n", "exp.yaml")
        with self.assertRaisesRegex(ValueError, "searcher.max_length must be"):
            max_length_of({"searcher": {"max_length": 5}}, "init(config=...)")

if __name__ == "__main__":
    unittest.main()
