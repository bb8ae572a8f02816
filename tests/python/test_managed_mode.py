"""Managed mode (a task the agent started) against a real TrialLink server on loopback: the
scripts run as separate processes with the environment the agent gives a task."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import textwrap
import threading
import time
import unittest

import grpc

from steadfast.v1 import trial_link_pb2
from trial_link_server import TrialLinkServer, clean_env, out_line, run_ranks, run_script

CODE = grpc.StatusCode


class ManagedTrialTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="sf-managed-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.checkpoints = os.path.join(self.dir, "storage", "trial-7")
        os.makedirs(self.checkpoints)

    def serve(self, operations=None, credentials=None) -> TrialLinkServer:
        server = TrialLinkServer(operations, credentials)
        self.addCleanup(server.close)
        return server

    def task_env(self, server: TrialLinkServer, rank: int = 0, world_size: int = 1,
                 **extra: str) -> dict[str, str]:
        return clean_env(
            SF_MASTER_ADDRESS=server.address, SF_TASK_TOKEN="token-7", SF_TRIAL_ID="7",
            SF_EXPERIMENT_ID="3", SF_TASK_ID="task-7-0", SF_RESTART="0", SF_RANK=str(rank),
            SF_WORLD_SIZE=str(world_size), SF_LOCAL_RANK=str(rank),
            SF_LOCAL_SIZE=str(world_size), SF_HPARAMS='{"lr": 0.01, "layers": 2}',
            SF_CHECKPOINT_DIR=self.checkpoints, SF_SLOT_IDS="cpu0", SF_RENDEZVOUS_TIMEOUT_S="60",
            **extra)

    def script(self, body: str) -> str:
        path = os.path.join(self.dir, "train.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(body))
        return path

    def run_ranks(self, path: str, envs: list[dict[str, str]]) -> list:
        """Every rank at once; each must exit 0 and print one "OUT <json>" line: by rank."""
        return [out_line(self, r) for r in run_ranks(path, envs, self.dir)]

    def run_ok(self, path: str, env: dict[str, str]) -> str:
        p = run_script(path, env, self.dir)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout

    def test_local_collectives_and_cross_rank_follow_the_ranks_hosts(self) -> None:
        # Three ranks: 0 and 2 on agent "a", 1 on agent "b".
        server = self.serve([(4, "batches")])
        path = self.script("""
            import json, steadfast
            with steadfast.core.init() as ctx:
                d = ctx.distributed
                out = {"cross": [d.cross_rank, d.cross_size],
                       "allgather_local": d.allgather_local(d.rank * 10),
                       "gather_local": d.gather_local(d.rank),
                       "broadcast_local": d.broadcast_local("from %d" % d.rank)}
                print("OUT", json.dumps(out))
            """)
        agents = ["a", "b", "a"]
        outs = self.run_ranks(path, [self.task_env(server, r, 3, SF_AGENT_ID=agents[r])
                                     for r in range(3)])
        self.assertEqual([o["cross"] for o in outs], [[0, 2], [1, 2], [0, 2]])
        self.assertEqual([o["allgather_local"] for o in outs], [[0, 20], [10], [0, 20]])
        self.assertEqual([o["gather_local"] for o in outs], [[0, 2], [1], None])
        self.assertEqual([o["broadcast_local"] for o in outs], ["from 0", "from 1", "from 0"])
        self.assertIn("hosts", {req.round for req in server.requests("Rendezvous")})

    def test_report_early_exit_reaches_the_master_after_the_reports_before_it(self) -> None:
        server = self.serve([(20, "batches")])
        path = self.script("""
            import steadfast
            from steadfast.core import EarlyExitReason
            with steadfast.core.init() as ctx:
                for op in ctx.searcher.operations():
                    ctx.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})
                    try:
                        ctx.train.report_early_exit("BOGUS")
                    except TypeError as e:
                        print("BAD", e)
                    ctx.train.report_early_exit(EarlyExitReason.INVALID_HP)
                    break
            """)
        out = self.run_ok(path, self.task_env(server))
        self.assertIn("BAD steadfast: trial 7: report_early_exit: reason is 'BOGUS', not one of "
                      "ERRORED, USER_REQUESTED_STOP, INVALID_HP", out)
        exits = server.requests("ReportEarlyExit")
        self.assertEqual([e.reason for e in exits],
                         [trial_link_pb2.ReportEarlyExitRequest.REASON_INVALID_HYPERPARAMETERS])
        methods = [m for m, _, _ in server.calls]
        self.assertLess(methods.index("ReportMetrics"), methods.index("ReportEarlyExit"))
        self.assertEqual(server.requests("CompleteOperation"), [])

    def test_get_experiment_best_validation_asks_the_master_with_the_trials_identity(self) -> None:
        server = self.serve([(20, "batches")])
        path = self.script("""
            import steadfast
            with steadfast.core.init() as ctx:
                print("BEST", ctx.train.get_experiment_best_validation())
            """)
        out = self.run_ok(path, self.task_env(server))
        self.assertIn("BEST 0.25", out)  # the test server's answer
        asked = server.requests("GetExperimentBestValidation")
        self.assertEqual(len(asked), 1)
        self.assertEqual(asked[0].who.trial_id, 7)

    def test_a_trial_trains_reports_checkpoints_and_completes_its_operations(self) -> None:
        server = self.serve([(20, "batches"), (40, "batches")])
        path = self.script("""
            import json, os, steadfast
            with steadfast.core.init() as ctx:
                print("INFO", json.dumps([ctx.info.mode, ctx.info.trial_id, ctx.info.experiment_id,
                                          ctx.info.hparams, ctx.distributed.torch_backend]))
                print("ENV", json.dumps({k: os.environ[k] for k in ["MASTER_ADDR", "RANK",
                                          "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"]}))
                steps = 0
                for op in ctx.searcher.operations():
                    print("OP", op.length, op.unit)
                    while steps < op.length:
                        steps += 1
                        ctx.train.report_training_metrics(steps_completed=steps,
                                                          metrics={"loss": 1.0 / steps})
                        op.report_progress(steps)
                    ctx.train.report_validation_metrics(steps_completed=steps,
                                                        metrics={"validation_loss": 0.5 / steps})
                    with ctx.checkpoint.store_path({"steps_completed": steps, "note": "x"}) as (p, uuid):
                        with open(os.path.join(p, "weights.bin"), "wb") as f:
                            f.write(b"w" * steps)
                    op.report_completed(0.5 / steps)
            """)
        out = self.run_ok(path, self.task_env(server))
        info = json.loads(out.split("INFO ", 1)[1].splitlines()[0])
        self.assertEqual(info, ["managed", 7, 3, {"lr": 0.01, "layers": 2}, "gloo"])
        env = json.loads(out.split("ENV ", 1)[1].splitlines()[0])
        self.assertEqual(env, {"MASTER_ADDR": "127.0.0.1", "RANK": "0", "WORLD_SIZE": "1",
                               "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"})
        self.assertIn("OP 20 batches", out)
        self.assertIn("OP 40 batches", out)

        # Every call carries the task's identity and token.
        for method, request, metadata in server.calls:
            self.assertEqual(metadata.get("x-sf-task-token"), "token-7", method)
            self.assertEqual((request.who.trial_id, request.who.rank, request.who.task_id,
                              request.who.restart), (7, 0, "task-7-0", 0), method)

        # Every report arrives once, batched into fewer calls than reports.
        batches = server.requests("ReportMetrics")
        reports = [r for b in batches for r in b.reports]
        training = [(r.batches, r.values["loss"]) for r in reports if r.kind == "training"]
        self.assertEqual(training, [(n, 1.0 / n) for n in range(1, 41)])
        validation = [(r.batches, r.values["validation_loss"]) for r in reports
                      if r.kind == "validation"]
        self.assertEqual(validation, [(20, 0.5 / 20), (40, 0.5 / 40)])
        self.assertLess(len(batches), 10)

        # Each completion comes after its validation reached the master (flushed first).
        with server.lock:
            order = [(m, r) for m, r, _ in server.calls]
        completes = [i for i, (m, _) in enumerate(order) if m == "CompleteOperation"]
        self.assertEqual([order[i][1].op.target_length for i in completes], [20, 40])
        self.assertEqual([order[i][1].searcher_metric for i in completes], [0.5 / 20, 0.5 / 40])
        for i, length in zip(completes, [20, 40]):
            seen = [r.batches for m, b in order[:i] if m == "ReportMetrics" for r in b.reports
                    if r.kind == "validation"]
            self.assertIn(length, seen)

        checkpoints = [r.checkpoint for r in server.requests("ReportCheckpoint")]
        self.assertEqual([c.batches for c in checkpoints], [20, 40])
        for c in checkpoints:
            self.assertEqual(c.path, os.path.join(self.checkpoints, c.uuid))
            files = {f.path: f for f in c.files}
            self.assertEqual(sorted(files), ["metadata.json", "weights.bin"])
            for name, f in files.items():
                with open(os.path.join(c.path, name), "rb") as fh:
                    data = fh.read()
                self.assertEqual((f.size, f.sha256), (len(data), hashlib.sha256(data).hexdigest()))
            self.assertEqual(c.size, sum(f.size for f in c.files))
            self.assertEqual(c.metadata["steps_completed"], c.batches)
            self.assertEqual(c.metadata["note"], "x")
            with open(os.path.join(c.path, "metadata.json")) as fh:
                self.assertEqual(json.load(fh), {"steps_completed": c.batches, "note": "x"})
        # Progress goes out rate-limited, not once per step.
        progress = server.requests("ReportProgress")
        self.assertGreaterEqual(len(progress), 1)
        self.assertLess(len(progress), 10)
        self.assertEqual(len(server.requests("EndTrial")), 0)  # managed trials end by exiting

    def test_transient_errors_are_retried_and_nothing_is_lost(self) -> None:
        server = self.serve([(5, "batches")])
        server.fail("GetNextOperation", CODE.UNAVAILABLE)
        server.fail("ReportMetrics", CODE.UNAVAILABLE, CODE.DEADLINE_EXCEEDED)
        server.fail("CompleteOperation", CODE.ABORTED)
        server.fail("ReportCheckpoint", CODE.CANCELLED)
        path = self.script("""
            import steadfast
            with steadfast.core.init() as ctx:
                for op in ctx.searcher.operations():
                    for n in range(1, op.length + 1):
                        ctx.train.report_training_metrics(n, {"loss": float(n)})
                    with ctx.checkpoint.store_path({"steps_completed": op.length}) as (p, u):
                        pass
                    op.report_completed(1.5)
            print("DONE")
            """)
        started = time.monotonic()
        out = self.run_ok(path, self.task_env(server))
        self.assertIn("DONE", out)
        reports = [r.batches for b in server.requests("ReportMetrics") for r in b.reports]
        self.assertEqual(reports, [1, 2, 3, 4, 5])
        self.assertEqual(len(server.requests("CompleteOperation")), 1)
        self.assertEqual(len(server.requests("ReportCheckpoint")), 1)
        self.assertLess(time.monotonic() - started, 30)

    def test_a_final_error_is_raised_by_the_next_call_and_names_the_trial(self) -> None:
        server = self.serve([(5, "batches")])
        server.fail("ReportMetrics", CODE.PERMISSION_DENIED)
        path = self.script("""
            import steadfast
            from steadfast.core import TrialLinkError
            with steadfast.core.init() as ctx:
                ctx.train.report_training_metrics(1, {"loss": 1.0})
                try:
                    ctx.train.flush()
                except TrialLinkError as e:
                    print("FLUSH", e.code, e)
                try:
                    ctx.train.report_training_metrics(2, {"loss": 1.0})
                except TrialLinkError as e:
                    print("REPORT", e.code)
            """)
        p = run_script(path, self.task_env(server), self.dir)
        # The error is kept: leaving the context raises it once more.
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("FLUSH PERMISSION_DENIED steadfast: trial 7: ReportMetrics: injected "
                      "PERMISSION_DENIED (gRPC code PERMISSION_DENIED)", p.stdout)
        self.assertIn("REPORT PERMISSION_DENIED", p.stdout)
        self.assertIn("TrialLinkError", p.stderr)

    def test_should_preempt_turns_true_when_the_master_asks_to_stop(self) -> None:
        server = self.serve([(1000, "batches")])
        path = self.script("""
            import time, steadfast
            with steadfast.core.init() as ctx:
                for op in ctx.searcher.operations():
                    ctx.train.report_training_metrics(12, {"loss": 1.0})
                    deadline = time.time() + 30
                    while not ctx.preempt.should_preempt():
                        assert time.time() < deadline, "never preempted"
                        time.sleep(0.05)
                    print("PREEMPTED", ctx.preempt.action)
                    break
            """)

        def pause_soon() -> None:
            with server.lock:
                server.lock.wait_for(lambda: any(m == "ShouldStop" for m, _, _ in server.calls))
                server.stop_action = trial_link_pb2.ShouldStopResponse.ACTION_CHECKPOINT_AND_STOP

        threading.Thread(target=pause_soon, daemon=True).start()
        out = self.run_ok(path, self.task_env(server))
        self.assertIn("PREEMPTED checkpoint_and_stop", out)
        self.assertIn(12, [r.batches for r in server.requests("ShouldStop")])
        # The first True is acknowledged, once, by default (Determined's auto_ack).
        self.assertEqual(len(server.requests("AcknowledgePreemption")), 1)

    def test_auto_ack_false_leaves_the_acknowledgement_to_the_script(self) -> None:
        path = self.script("""
            import os, time, steadfast
            with steadfast.core.init() as ctx:
                deadline = time.time() + 30
                while not ctx.preempt.should_preempt(auto_ack=False):
                    assert time.time() < deadline, "never preempted"
                    time.sleep(0.05)
                assert ctx.preempt.should_preempt(auto_ack=False)
                if os.environ.get("DO_ACK"):
                    ctx.preempt.acknowledge_preemption_signal()
                    ctx.preempt.acknowledge_preemption_signal()  # once is enough
                print("STOPPING")
            """)
        for do_ack, expected in (("", 0), ("1", 1)):
            server = self.serve([(1000, "batches")])
            server.stop_action = trial_link_pb2.ShouldStopResponse.ACTION_CHECKPOINT_AND_STOP
            env = self.task_env(server)
            env["DO_ACK"] = do_ack
            self.assertIn("STOPPING", self.run_ok(path, env))
            self.assertEqual(len(server.requests("AcknowledgePreemption")), expected, do_ack)

    def test_trial_seed_and_checkpoint_delete_go_through_the_master(self) -> None:
        server = self.serve([(2, "batches")])
        path = self.script("""
            import os, steadfast
            with steadfast.core.init() as ctx:
                print("SEED", ctx.info.trial_seed)
                with ctx.checkpoint.store_path({"steps_completed": 1}) as (p, uuid):
                    open(os.path.join(p, "w.bin"), "wb").write(b"x")
                ctx.checkpoint.delete(uuid)
                print("DELETED", uuid)
            """)
        env = self.task_env(server)
        env["SF_TRIAL_SEED"] = "123456789"
        out = self.run_ok(path, env)
        self.assertIn("SEED 123456789", out)
        uuid = out.split("DELETED ")[1].split()[0]
        self.assertEqual([r.uuid for r in server.requests("DeleteCheckpoint")], [uuid])

    def test_two_ranks_meet_share_operations_and_shard_a_checkpoint(self) -> None:
        server = self.serve([(4, "batches")])
        path = self.script("""
            import json, os, steadfast
            with steadfast.core.init() as ctx:
                d = ctx.distributed
                out = {"rank": d.rank, "size": d.size,
                       "allgather": d.allgather({"r": d.rank}),
                       "gather": d.gather(d.rank * 10),
                       "broadcast": d.broadcast("from %d" % d.rank),
                       "env": [os.environ[k] for k in ["MASTER_ADDR", "MASTER_PORT", "RANK",
                                                      "WORLD_SIZE"]]}
                d.barrier()
                ops = []
                for op in ctx.searcher.operations():
                    ops.append(op.length)
                    ctx.train.report_training_metrics(op.length, {"loss": float(d.rank)})
                    with ctx.checkpoint.store_path({"steps_completed": op.length}, shard=True) as (p, uuid):
                        with open(os.path.join(p, "shard-%d.bin" % d.rank), "w") as f:
                            f.write("rank %d" % d.rank)
                    out["uuid"] = uuid
                    try:
                        with ctx.checkpoint.store_path({"steps_completed": op.length}, shard=True) as (p, u):
                            with open(os.path.join(p, "same.bin"), "w") as f:
                                f.write("x")
                    except RuntimeError as e:
                        out["conflict"] = str(e)
                    with ctx.checkpoint.store_path({"steps_completed": op.length}) as (p, u):
                        with open(os.path.join(p, "plain-%d.bin" % d.rank), "w") as f:
                            f.write("x")
                        out["plain"] = [p.startswith(ctx.checkpoint.directory), u]
                    out["plain_left"] = os.path.exists(p)
                    out["preempt"] = ctx.preempt.should_preempt()
                    op.report_completed(0.25)
                out["ops"] = ops
                import torch, torch.distributed as tdist
                tdist.init_process_group(d.torch_backend, init_method="env://")
                t = torch.tensor([float(d.rank + 1)])
                tdist.all_reduce(t)
                out["all_reduce"] = t.item()
                tdist.destroy_process_group()
                print("OUT", json.dumps(out))
            """)
        outs = self.run_ranks(path, [self.task_env(server, r, 2) for r in range(2)])
        r0, r1 = outs
        for o in outs:
            self.assertEqual(o["allgather"], [{"r": 0}, {"r": 1}])
            self.assertEqual(o["broadcast"], "from 0")
            self.assertEqual(o["ops"], [4])
            self.assertFalse(o["preempt"])
            self.assertEqual(o["all_reduce"], 3.0)
            self.assertIn("ranks 0 and 1 both wrote 'same.bin'", o["conflict"])
        self.assertEqual(r0["gather"], [0, 10])
        self.assertIsNone(r1["gather"])
        self.assertEqual(r0["env"][0:2], r1["env"][0:2])  # one MASTER_ADDR:MASTER_PORT
        self.assertEqual([r0["env"][2], r1["env"][2]], ["0", "1"])
        self.assertEqual(r0["env"][3], "2")
        # A plain store_path stores on the chief; on rank 1 it is a scratch directory, dropped.
        self.assertEqual(r0["plain"][0], True)
        self.assertNotEqual(r0["plain"][1], "")
        self.assertEqual(r1["plain"], [False, ""])
        self.assertFalse(r1["plain_left"])
        self.assertEqual(r0["uuid"], r1["uuid"])
        # One sharded checkpoint holding both ranks' files; the conflicting one left nothing.
        stored = [r.checkpoint for r in server.requests("ReportCheckpoint")]
        self.assertEqual(len(stored), 2)  # the sharded one and rank 0's plain one
        sharded = [c for c in stored if c.uuid == r0["uuid"]][0]
        self.assertEqual(sorted(f.path for f in sharded.files),
                         ["metadata.json", "shard-0.bin", "shard-1.bin"])
        self.assertEqual(sorted(os.listdir(self.checkpoints)), sorted(c.uuid for c in stored))
        # Only the chief reports, asks for operations and polls ShouldStop.
        reports = [(r.batches, r.values["loss"]) for b in server.requests("ReportMetrics")
                   for r in b.reports]
        self.assertEqual(reports, [(4, 0.0)])
        self.assertEqual({req.who.rank for req in server.requests("ShouldStop")}, {0})
        self.assertEqual({req.who.rank for req in server.requests("GetNextOperation")}, {0})
        rounds = {req.round for req in server.requests("Rendezvous")}
        self.assertIn("torch-env", rounds)
        self.assertIn("core/0", rounds)

    def test_the_same_script_measures_the_same_values_in_local_and_managed_mode(self) -> None:
        server = self.serve([(12, "batches")])
        path = self.script("""
            import torch, steadfast
            torch.manual_seed(0)
            with steadfast.core.init(max_length=12) as ctx:
                model = torch.nn.Linear(4, 1)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                x, y = torch.randn(32, 4), torch.randn(32, 1)
                for op in ctx.searcher.operations():
                    for step in range(1, op.length + 1):
                        loss = torch.nn.functional.mse_loss(model(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                        ctx.train.report_training_metrics(step, {"loss": loss})
                    op.report_completed(loss.item())
            """)
        self.run_ok(path, self.task_env(server))
        managed = [(r.batches, r.values["loss"]) for b in server.requests("ReportMetrics")
                   for r in b.reports]
        self.run_ok(path, clean_env(SF_LOCAL_DIR=os.path.join(self.dir, "local")))
        with open(os.path.join(self.dir, "local", "metrics.jsonl")) as f:
            local = [(row["steps_completed"], row["metrics"]["loss"])
                     for row in map(json.loads, f)]
        self.assertEqual(len(managed), 12)
        self.assertEqual(managed, local)

    def test_report_calls_cost_microseconds(self) -> None:
        server = self.serve([(10000, "batches")])
        path = self.script("""
            import time, steadfast
            with steadfast.core.init() as ctx:
                t0 = time.perf_counter()
                for n in range(1, 10001):
                    ctx.train.report_training_metrics(n, {"loss": 0.5, "lr": 1e-3})
                print("PER_CALL_US", (time.perf_counter() - t0) / 10000 * 1e6)
            """)
        out = self.run_ok(path, self.task_env(server))
        per_call = float(out.split("PER_CALL_US ", 1)[1].split()[0])
        self.assertLess(per_call, 200.0)  # typically ~5 us; generous for loaded CI machines
        reports = sum(len(b.reports) for b in server.requests("ReportMetrics"))
        self.assertEqual(reports, 10000)

    def test_restore_path_finds_the_latest_own_and_sibling_checkpoints(self) -> None:
        server = self.serve()
        restore = os.path.join(self.dir, "restore-copy")
        os.makedirs(restore)
        own = os.path.join(self.checkpoints, "own-uuid")
        sibling = os.path.join(self.dir, "storage", "trial-6", "sibling-uuid")
        for d in (own, sibling):
            os.makedirs(d)
            with open(os.path.join(d, "metadata.json"), "w") as f:
                json.dump({"steps_completed": 3, "where": os.path.basename(d)}, f)
        path = self.script("""
            import json, steadfast
            with steadfast.core.init() as ctx:
                out = {"latest": ctx.info.latest_checkpoint}
                for u in ["latest-uuid", "own-uuid", "sibling-uuid"]:
                    with ctx.checkpoint.restore_path(u) as p:
                        out[u] = p
                out["meta"] = ctx.checkpoint.get_metadata("sibling-uuid")
                try:
                    with ctx.checkpoint.restore_path("missing-uuid"):
                        pass
                except FileNotFoundError as e:
                    out["missing"] = str(e)
                print("OUT", json.dumps(out))
            """)
        out = self.run_ok(path, self.task_env(server, SF_LATEST_CHECKPOINT="latest-uuid",
                                              SF_RESTORE_CHECKPOINT=restore))
        o = json.loads(out.split("OUT ", 1)[1].splitlines()[0])
        self.assertEqual(o["latest"], "latest-uuid")
        self.assertEqual(o["latest-uuid"], restore)
        self.assertEqual(o["own-uuid"], own)
        self.assertEqual(o["sibling-uuid"], sibling)
        self.assertEqual(o["meta"]["where"], "sibling-uuid")
        self.assertIn("checkpoint missing-uuid is not in", o["missing"])

    @unittest.skipUnless(shutil.which("openssl"), "needs the openssl tool")
    def test_a_tls_master_is_verified_with_the_ca_file(self) -> None:
        key, cert = os.path.join(self.dir, "key.pem"), os.path.join(self.dir, "cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                        "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        with open(key, "rb") as f, open(cert, "rb") as g:
            credentials = grpc.ssl_server_credentials([(f.read(), g.read())])
        server = self.serve([(1, "batches")], credentials)
        path = self.script("""
            import steadfast
            with steadfast.core.init() as ctx:
                for op in ctx.searcher.operations():
                    op.report_completed(1.0)
            print("TLS OK")
            """)
        self.assertIn("TLS OK", self.run_ok(path, self.task_env(server, SF_MASTER_CA_FILE=cert)))
        self.assertEqual(len(server.requests("CompleteOperation")), 1)


if __name__ == "__main__":
    unittest.main()
