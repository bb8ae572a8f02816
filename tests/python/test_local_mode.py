"""Local mode: the same script on a laptop, without a master. Scripts run as subprocesses."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import tempfile
import textwrap
import unittest

from trial_link_server import clean_env, run_script


class LocalModeTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="sf-local-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def run_script(self, body: str, expect_ok: bool = True, **env: str):
        path = os.path.join(self.dir, "train.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(body))
        p = run_script(path, clean_env(**env), self.dir)
        if expect_ok:
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p

    def test_metrics_checkpoints_and_one_operation_without_a_master(self) -> None:
        p = self.run_script("""
            import json, os, steadfast
            with steadfast.core.init(hparams={"lr": 0.5}, max_length=30) as ctx:
                print("INFO", json.dumps([ctx.info.mode, ctx.info.hparams, ctx.info.trial_id,
                                          ctx.info.latest_checkpoint, ctx.distributed.size,
                                          ctx.distributed.allgather("x"), ctx.preempt.should_preempt()]))
                ops = []
                for op in ctx.searcher.operations():
                    ops.append([op.length, op.unit])
                    for n in range(10, op.length + 1, 10):
                        ctx.train.report_training_metrics(steps_completed=n, metrics={"loss": 1 / n, "n": n})
                    ctx.train.report_validation_metrics(steps_completed=op.length,
                                                        metrics={"validation_loss": 0.4})
                    with ctx.checkpoint.store_path({"steps_completed": op.length, "tag": "t"}) as (path, uuid):
                        os.makedirs(os.path.join(path, "sub"))
                        with open(os.path.join(path, "sub", "model.bin"), "wb") as f:
                            f.write(b"abc")
                    op.report_completed(0.4)
                print("OPS", json.dumps(ops))
                print("UUID", uuid)
            """)
        out = p.stdout
        info = json.loads(out.split("INFO ", 1)[1].splitlines()[0])
        self.assertEqual(info, ["local", {"lr": 0.5}, None, None, 1, ["x"], False])
        self.assertEqual(json.loads(out.split("OPS ", 1)[1].splitlines()[0]), [[30, "batches"]])
        self.assertIn("steadfast: training steps_completed=10 loss=0.1 n=10\n", out)
        self.assertIn("steadfast: training steps_completed=30 loss=0.03333 n=30\n", out)
        self.assertIn("steadfast: validation steps_completed=30 validation_loss=0.4\n", out)
        local = os.path.join(self.dir, "steadfast-local")
        with open(os.path.join(local, "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        self.assertEqual([(r["kind"], r["steps_completed"], r["metrics"]) for r in rows], [
            ("training", 10, {"loss": 0.1, "n": 10}),
            ("training", 20, {"loss": 0.05, "n": 20}),
            ("training", 30, {"loss": 1 / 30, "n": 30}),
            ("validation", 30, {"validation_loss": 0.4}),
        ])
        uuid = out.split("UUID ", 1)[1].split()[0]
        ckpt = os.path.join(local, "checkpoints", uuid)
        with open(os.path.join(ckpt, "metadata.json")) as f:
            self.assertEqual(json.load(f), {"steps_completed": 30, "tag": "t"})
        self.assertTrue(os.path.isfile(os.path.join(ckpt, "sub", "model.bin")))

        # A second run resumes from it: SF_LATEST_CHECKPOINT, as a task gets it.
        p = self.run_script("""
            import json, os, steadfast
            with steadfast.core.init() as ctx:
                uuid = ctx.info.latest_checkpoint
                with ctx.checkpoint.restore_path(uuid) as path:
                    with open(os.path.join(path, "sub", "model.bin"), "rb") as f:
                        print("RESTORED", uuid, f.read().decode(), ctx.checkpoint.get_metadata(uuid)["steps_completed"])
            """, SF_LATEST_CHECKPOINT=uuid, SF_HPARAMS='{"lr": 1}')
        self.assertIn(f"RESTORED {uuid} abc 30", p.stdout)

    def test_bad_reports_raise_at_the_call_naming_the_trial_and_the_problem(self) -> None:
        p = self.run_script("""
            import steadfast
            def attempt(f):
                try:
                    f()
                    print("ACCEPTED")
                except (TypeError, ValueError, RuntimeError) as e:
                    print("ERROR", type(e).__name__, e)
            with steadfast.core.init(local_dir="out") as ctx:
                t = ctx.train
                attempt(lambda: t.report_training_metrics(steps_completed=10, metrics={"loss": "abc"}))
                attempt(lambda: t.report_training_metrics(steps_completed=10, metrics={"ok": True}))
                attempt(lambda: t.report_training_metrics(steps_completed=10, metrics={3: 1.0}))
                attempt(lambda: t.report_training_metrics(steps_completed=-1, metrics={"loss": 1.0}))
                attempt(lambda: t.report_training_metrics(steps_completed=1.5, metrics={"loss": 1.0}))
                attempt(lambda: t.report_training_metrics(steps_completed=50, metrics={"loss": 1.0}))
                attempt(lambda: t.report_training_metrics(steps_completed=40, metrics={"loss": 1.0}))
                attempt(lambda: t.report_training_metrics(steps_completed=50, metrics={"loss": 2.0}))
                attempt(lambda: t.report_validation_metrics(steps_completed=40, metrics={"v": 1.0}))
                def store(meta):
                    with ctx.checkpoint.store_path(meta) as (p, u):
                        pass
                attempt(lambda: store({"epoch": 1}))
                attempt(lambda: store({"steps_completed": "5"}))
                attempt(lambda: store({"steps_completed": 5, "x": object()}))
                for op in ctx.searcher.operations():
                    attempt(lambda: op.report_completed(float("nan")))
                    attempt(lambda: op.report_completed("0.1"))
                    op.report_completed(0.1)
                    attempt(lambda: op.report_completed(0.1))
            """)
        errors = [line for line in p.stdout.splitlines() if line.startswith(("ERROR", "ACCEPTED"))]
        prefix = "steadfast: local trial: report_training_metrics:"
        self.assertEqual(errors, [
            f"ERROR TypeError {prefix} metric \"loss\" is 'abc' (str), not a number: text goes in a "
            "group of the trial's own (report_metrics(\"samples\", ...)); training takes numbers",
            f"ERROR TypeError {prefix} metric \"ok\" is True (bool), not a number",
            f"ERROR TypeError {prefix} metric name 3 (int) is not a string",
            f"ERROR ValueError {prefix} steps_completed -1 is negative",
            f"ERROR TypeError {prefix} steps_completed 1.5 (float) is not an int",
            "ACCEPTED",
            f"ERROR ValueError {prefix} steps_completed 40 is less than 50, the step of the "
            "previous training report",
            "ACCEPTED",  # equal steps are allowed
            "ACCEPTED",  # validation keeps its own order
            "ERROR ValueError steadfast: local trial: store_path: metadata must include "
            "\"steps_completed\" (the trial's steps when the checkpoint was taken), e.g. "
            "{\"steps_completed\": 100}",
            "ERROR ValueError steadfast: local trial: store_path: steps_completed '5' (str) is not "
            "an int",
            "ERROR ValueError steadfast: local trial: store_path: metadata is not JSON: Object of "
            "type object is not JSON serializable",
            "ERROR ValueError steadfast: local trial: report_completed: searcher_metric is nan, "
            "not a finite number",
            "ERROR ValueError steadfast: local trial: report_completed: searcher_metric is '0.1' "
            "(str), not a number",
            "ERROR RuntimeError steadfast: local trial: report_completed: the operation "
            "SearcherOperation(length=1, unit='batches') is completed already",
        ])
        # A refused report is not written; nothing of a refused checkpoint is left behind.
        with open(os.path.join(self.dir, "out", "metrics.jsonl")) as f:
            self.assertEqual([json.loads(line)["steps_completed"] for line in f], [50, 50, 40])
        self.assertEqual(os.listdir(os.path.join(self.dir, "out", "checkpoints"))
                         if os.path.isdir(os.path.join(self.dir, "out", "checkpoints")) else [], [])

    def test_report_metrics_takes_the_two_groups_and_groups_of_the_trials_own(self) -> None:
        p = self.run_script("""
            import steadfast
            def attempt(f):
                try:
                    f()
                    print("ACCEPTED")
                except (TypeError, ValueError) as e:
                    print("ERROR", type(e).__name__, e)
            with steadfast.core.init(local_dir="out") as ctx:
                t = ctx.train
                attempt(lambda: t.report_metrics("training", 10, {"loss": 1.0}))
                attempt(lambda: t.report_metrics("inference", 10, {"latency_ms": 3.5}))
                attempt(lambda: t.report_metrics("inference", 5, {"latency_ms": 3.0}))  # backwards
                attempt(lambda: t.report_metrics("validation", 5, {"validation_loss": 0.5}))
                attempt(lambda: t.report_metrics("Eval", 10, {"x": 1.0}))
                attempt(lambda: t.report_metrics("eval-bleu", 10, {"x": 1.0}))
                attempt(lambda: t.report_metrics(3, 10, {"x": 1.0}))
                print("BEST", t.get_experiment_best_validation())  # no experiment in local mode
            """)
        errors = [line for line in p.stdout.splitlines() if line.startswith(("ERROR", "ACCEPTED"))]
        where = "steadfast: local trial: report_metrics:"
        self.assertEqual(errors, [
            "ACCEPTED",
            "ACCEPTED",
            f"ERROR ValueError {where} steps_completed 5 is less than 10, the step of the previous "
            "inference report",
            "ACCEPTED",  # each group keeps its own order
            f"ERROR ValueError {where} group 'Eval' must be lowercase letters, digits and _, starting "
            "with a letter, at most 64 characters",
            f"ERROR ValueError {where} group 'eval-bleu' must be lowercase letters, digits and _, "
            "starting with a letter, at most 64 characters",
            f"ERROR TypeError {where} group is 3 (int), not a string",
        ])
        self.assertIn("BEST None", p.stdout)
        with open(os.path.join(self.dir, "out", "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f]
        self.assertEqual([(r["kind"], r["steps_completed"]) for r in rows],
                         [("training", 10), ("inference", 10), ("validation", 5)])

    def test_a_group_of_the_trials_own_takes_text_and_the_two_groups_take_numbers(self) -> None:
        p = self.run_script("""
            import steadfast
            def attempt(f):
                try:
                    f()
                    print("ACCEPTED")
                except (TypeError, ValueError) as e:
                    print("ERROR", type(e).__name__, e)
            with steadfast.core.init(local_dir="out") as ctx:
                t = ctx.train
                attempt(lambda: t.report_metrics("samples", 10, {"hypothesis": "Ein Hund läuft.",
                                                                 "reference": "A dog runs.", "wer": 0.5}))
                attempt(lambda: t.report_training_metrics(10, {"loss": 1.0, "note": "warm"}))
                attempt(lambda: t.report_metrics("validation", 10, {"validation_loss": "0.5"}))
                attempt(lambda: t.report_metrics("samples", 20, {"hypothesis": "x" * (64 * 1024 + 1)}))
                attempt(lambda: t.report_metrics("samples", 20, {"hypothesis": "bad \\ud800 text"}))
            """)
        errors = [line for line in p.stdout.splitlines() if line.startswith(("ERROR", "ACCEPTED"))]
        self.assertEqual(errors, [
            "ACCEPTED",
            "ERROR TypeError steadfast: local trial: report_training_metrics: metric \"note\" is 'warm' (str), "
            "not a number: text goes in a group of the trial's own (report_metrics(\"samples\", ...)); "
            "training takes numbers",
            "ERROR TypeError steadfast: local trial: report_metrics: metric \"validation_loss\" is '0.5' (str), "
            "not a number: text goes in a group of the trial's own (report_metrics(\"samples\", ...)); "
            "validation takes numbers",
            "ERROR ValueError steadfast: local trial: report_metrics: metric \"hypothesis\" is text of 65537 "
            "bytes, more than 65536",
            "ERROR ValueError steadfast: local trial: report_metrics: metric \"hypothesis\" is not valid "
            "Unicode text (surrogates not allowed at 4)",
        ])
        self.assertIn("steadfast: samples steps_completed=10 hypothesis='Ein Hund läuft.' "
                      "reference='A dog runs.' wer=0.5", p.stdout)
        with open(os.path.join(self.dir, "out", "metrics.jsonl"), encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        self.assertEqual(rows[0]["kind"], "samples")
        self.assertEqual(rows[0]["metrics"], {"hypothesis": "Ein Hund läuft.", "reference": "A dog runs.",
                                              "wer": 0.5})
        self.assertEqual(len(rows), 1, "a refused report was written")

    def test_numpy_and_torch_scalars_are_numbers(self) -> None:
        p = self.run_script("""
            import numpy as np, torch, steadfast
            with steadfast.core.init() as ctx:
                ctx.train.report_training_metrics(np.int64(3), {
                    "np_float": np.float32(0.25), "np_int": np.int64(7),
                    "torch": torch.tensor(0.5), "torch_int": torch.tensor(2)})
                try:
                    ctx.train.report_training_metrics(4, {"t": torch.ones(3)})
                except TypeError as e:
                    print("ERROR", e)
                try:
                    ctx.train.report_training_metrics(4, {"b": np.bool_(True)})
                except TypeError as e:
                    print("ERROR", e)
            """)
        self.assertIn("steadfast: training steps_completed=3 np_float=0.25 np_int=7 torch=0.5 "
                      "torch_int=2", p.stdout)
        self.assertIn('ERROR steadfast: local trial: report_training_metrics: metric "t" is '
                      'tensor([1., 1., 1.]) (Tensor), not a number: ValueError: only one element tensors',
                      p.stdout)
        self.assertIn('metric "b" is True (bool_), not a number', p.stdout)

    def test_an_exception_in_store_path_leaves_nothing(self) -> None:
        p = self.run_script("""
            import os, steadfast
            with steadfast.core.init() as ctx:
                try:
                    with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
                        open(os.path.join(path, "half"), "w").write("x")
                        raise KeyError("disk full")
                except KeyError:
                    print("LEFT", os.listdir(ctx.checkpoint.directory))
                try:
                    with ctx.checkpoint.restore_path(uuid):
                        pass
                except FileNotFoundError as e:
                    print("MISSING", e)
            """)
        self.assertIn("LEFT []", p.stdout)
        self.assertIn("MISSING steadfast: local trial: restore_path: checkpoint ", p.stdout)

    def test_upload_download_and_delete_a_checkpoint(self) -> None:
        source = os.path.join(self.dir, "weights")
        os.makedirs(os.path.join(source, "sub"))
        for rel, data in (("a.bin", b"alpha"), ("sub/b.txt", b"beta"), ("skip.tmp", b"no")):
            with open(os.path.join(source, rel), "wb") as f:
                f.write(data)
        p = self.run_script("""
            import json, os, steadfast
            with steadfast.core.init() as ctx:
                print("SEED", ctx.info.trial_seed)
                uuid = ctx.checkpoint.upload(%r, {"steps_completed": 3, "note": "up"},
                                             selector=lambda rel: not rel.endswith(".tmp"))
                stored = os.path.join(ctx.checkpoint.directory, uuid)
                print("STORED", sorted(os.listdir(stored)), sorted(os.listdir(stored + "/sub")))
                print("META", json.dumps(ctx.checkpoint.get_metadata(uuid), sort_keys=True))
                out = os.path.join(os.getcwd(), "restored")
                ctx.checkpoint.download(uuid, out, selector=lambda rel: rel.startswith("sub/"))
                print("GOT", sorted(os.listdir(out)), open(out + "/sub/b.txt").read())
                ctx.checkpoint.delete(uuid)
                print("GONE", os.path.exists(stored))
                for bad in ("../x", uuid):
                    try:
                        ctx.checkpoint.delete(bad)
                    except (ValueError, FileNotFoundError) as e:
                        print("REFUSED", type(e).__name__)
                try:
                    ctx.checkpoint.upload(os.path.join(os.getcwd(), "nowhere"), {"steps_completed": 1})
                except FileNotFoundError as e:
                    print("NO_DIR", e)
            """ % source, SF_TRIAL_SEED="77")
        self.assertIn("SEED 77", p.stdout)
        self.assertIn("STORED ['a.bin', 'metadata.json', 'sub'] ['b.txt']", p.stdout)
        self.assertIn('META {"note": "up", "steps_completed": 3}', p.stdout)
        self.assertIn("GOT ['sub'] beta", p.stdout)
        self.assertIn("GONE False", p.stdout)
        self.assertEqual(p.stdout.count("REFUSED"), 2, p.stdout)
        self.assertIn("REFUSED ValueError", p.stdout)
        self.assertIn("REFUSED FileNotFoundError", p.stdout)
        self.assertIn("NO_DIR steadfast: local trial: upload: ", p.stdout)

    def test_local_mode_is_chosen_by_the_environment_and_by_init(self) -> None:
        body = """
            import steadfast
            with steadfast.core.init(local=True) as ctx:
                print("MODE", ctx.info.mode, ctx.info.hparams)
            """
        # Even inside what looks like a task, local=True wins.
        p = self.run_script(body, SF_TRIAL_ID="5", SF_MASTER_ADDRESS="127.0.0.1:1",
                            SF_HPARAMS='{"a": 1}', SF_LOCAL_DIR=os.path.join(self.dir, "d"))
        self.assertIn("MODE local {'a': 1}", p.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "steadfast-local")))
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "d")))

    def test_a_command_or_server_task_is_no_trial_so_init_runs_locally(self) -> None:
        # A task of its own (sf cmd run: docs/tasks.md) has a master and a task id but no
        # trial; an older agent may still set SF_TRIAL_ID=0.
        for trial in (None, "0"):
            env = {"SF_MASTER_ADDRESS": "127.0.0.1:1", "SF_TASK_ID": "task7-r0-a1.0",
                   "SF_TASK_KIND": "COMMAND", "SF_LOCAL_DIR": os.path.join(self.dir, "cmd")}
            if trial is not None:
                env["SF_TRIAL_ID"] = trial
            p = self.run_script("""
                import steadfast
                with steadfast.core.init(hparams={"b": 2}, max_length=1) as ctx:
                    print("MODE", ctx.info.mode, ctx.info.hparams)
                """, **env)
            self.assertIn("MODE local {'b': 2}", p.stdout, trial)

    def test_an_operation_must_be_completed_before_the_next(self) -> None:
        p = self.run_script("""
            import steadfast
            with steadfast.core.init() as ctx:
                for op in ctx.searcher.operations():
                    pass
            """, expect_ok=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("RuntimeError: steadfast: local trial: searcher operation "
                      "SearcherOperation(length=1, unit='batches') was not report_completed before "
                      "the next operation was asked for", p.stderr)

    def test_the_library_does_not_touch_the_users_random_state(self) -> None:
        import numpy as np
        import steadfast
        random.seed(1234)
        np.random.seed(1234)
        before = (random.getstate(), np.random.get_state()[1].tolist())
        saved_env = dict(os.environ)
        try:
            with contextlib.redirect_stdout(io.StringIO()), steadfast.core.init(local=True, local_dir=self.dir, max_length=2) as ctx:
                for op in ctx.searcher.operations():
                    ctx.train.report_training_metrics(1, {"loss": 0.5})
                    with ctx.checkpoint.store_path({"steps_completed": 1}) as (path, uuid):
                        pass
                    op.report_completed(0.5)
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
        after = (random.getstate(), np.random.get_state()[1].tolist())
        self.assertEqual(before, after)


if __name__ == "__main__":
    unittest.main()
