"""init(distributed=DistributedContext...): workers that a launcher of the script's own starts
(here two processes on a torch.distributed gloo group over loopback, as torchrun would start
them), against a real TrialLink server on loopback; and contexts that do not fit."""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import textwrap
import threading
import unittest

from steadfast.core import DistributedContext, init
from steadfast.v1 import trial_link_pb2
from rest_server import RestServer
from trial_link_server import TrialLinkServer, clean_env, out_line, run_ranks

# Every script starts the same way: the launcher's process group, as torchrun leaves it (with a
# timeout, so that a worker left waiting fails the test instead of hanging it), destroyed at
# exit (torch 1.13's gloo may abort a process that exits with its group alive).
PREAMBLE = """\
import atexit, datetime, json, os, sys, time
import torch.distributed as tdist
import steadfast
from steadfast.core import DistributedContext
tdist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
atexit.register(tdist.destroy_process_group)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ArgumentsTest(unittest.TestCase):
    """What is refused before any collective, in this process."""

    def test_bad_arguments_raise_value_errors_naming_them(self) -> None:
        def gather(obj: object) -> list:
            return [obj]

        cases = [
            (dict(rank=0, size=0), "size is 0; a trial has at least 1 worker"),
            (dict(rank=2, size=2), r"rank 2 is not in \[0, 2\)"),
            (dict(rank=-1, size=2), r"rank -1 is not in \[0, 2\)"),
            (dict(rank="0", size=1), "rank is '0' \\(str\\), not an int"),
            (dict(rank=0, size=2, local_rank=0), "give local_rank and local_size together"),
            (dict(rank=0, size=2, local_rank=0, local_size=1.0), "local_size is 1.0 \\(float\\)"),
            (dict(rank=0, size=1, host=""), "host is '', not a non-empty string"),
            (dict(rank=0, size=1, broadcast=3), "broadcast is int, not a function"),
        ]
        for kwargs, message in cases:
            with self.assertRaisesRegex(ValueError, "steadfast: DistributedContext: " + message,
                                        msg=str(kwargs)):
                DistributedContext(allgather=gather, **kwargs)
        with self.assertRaisesRegex(ValueError, "allgather is list, not a function"):
            DistributedContext(rank=0, size=1, allgather=[])

    def test_one_worker_needs_no_collective(self) -> None:
        def never(obj: object) -> list:
            raise AssertionError("called with one worker")

        d = DistributedContext(rank=0, size=1, allgather=never)
        self.assertEqual((d.rank, d.size, d.local_rank, d.local_size, d.cross_rank, d.cross_size),
                         (0, 1, 0, 1, 0, 1))
        self.assertEqual((d.allgather("a"), d.gather("b"), d.broadcast("c")), (["a"], ["b"], "c"))

    def test_init_takes_only_a_context_of_the_scripts_own(self) -> None:
        directory = tempfile.mkdtemp(prefix="sf-dctx-")
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
        with self.assertRaisesRegex(ValueError, r"init\(distributed=...\) takes a "
                                                r"DistributedContext .*, not str"):
            init(local=True, local_dir=directory, distributed="gloo")  # type: ignore[arg-type]
        with init(local=True, local_dir=directory) as ctx:
            with self.assertRaisesRegex(ValueError, "not another context's ctx.distributed"):
                init(local=True, local_dir=directory, distributed=ctx.distributed)
        with self.assertRaisesRegex(RuntimeError, "torch.distributed is not initialised: call "
                                                  "torch.distributed.init_process_group first"):
            DistributedContext.from_torch_distributed()


class WorkersTest(unittest.TestCase):
    """Two worker processes of one launcher, on a gloo group over loopback."""

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="sf-dctx-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.checkpoints = os.path.join(self.dir, "storage", "trial-7")
        os.makedirs(self.checkpoints)
        self.port = free_port()

    def serve(self, operations=None) -> TrialLinkServer:
        server = TrialLinkServer(operations)
        self.addCleanup(server.close)
        return server

    def launcher_env(self, worker: int, **extra: str) -> dict[str, str]:
        """What torchrun gives worker `worker` of two on this host."""
        return clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(self.port), RANK=str(worker),
                         WORLD_SIZE="2", LOCAL_RANK=str(worker), LOCAL_WORLD_SIZE="2",
                         GLOO_SOCKET_IFNAME="lo", **extra)

    def task_env(self, server: TrialLinkServer, worker: int, rank: int = 0,
                 world_size: int = 1, **extra: str) -> dict[str, str]:
        """Worker `worker` of the launcher, in the task rank `rank` of `world_size`."""
        return self.launcher_env(
            worker, SF_MASTER_ADDRESS=server.address, SF_TASK_TOKEN="token-7", SF_TRIAL_ID="7",
            SF_EXPERIMENT_ID="3", SF_TASK_ID="task-7-0", SF_RESTART="0", SF_RANK=str(rank),
            SF_WORLD_SIZE=str(world_size), SF_LOCAL_RANK=str(rank),
            SF_LOCAL_SIZE=str(world_size), SF_HPARAMS='{"lr": 0.01}',
            SF_CHECKPOINT_DIR=self.checkpoints, SF_SLOT_IDS="cpu0", SF_RENDEZVOUS_TIMEOUT_S="60",
            **extra)

    def script(self, body: str) -> str:
        path = os.path.join(self.dir, "train.py")
        with open(path, "w") as f:
            f.write(PREAMBLE + textwrap.dedent(body))
        return path

    def run_workers(self, path: str, envs: list[dict[str, str]]) -> list:
        """Runs the script once per worker at the same time; each must exit 0 and print one
        "OUT <json>" line, returned by worker."""
        return [out_line(self, r, f"worker {w}:") for w, r in enumerate(run_ranks(path, envs, self.dir))]

    def assert_one_identity(self, server: TrialLinkServer, rank: int = 0) -> None:
        for method, request, metadata in server.calls:
            self.assertEqual(metadata.get("x-sf-task-token"), "token-7", method)
            self.assertEqual((request.who.trial_id, request.who.rank), (7, rank), method)

    def test_a_launcher_inside_one_task_runs_the_same_code_on_every_worker(self) -> None:
        server = self.serve([(3, "batches"), (5, "batches")])
        path = self.script("""
            torch_context = DistributedContext.from_torch_distributed()
            with steadfast.core.init(distributed=torch_context) as ctx:
                d = ctx.distributed
                out = {"place": [d.rank, d.size, d.local_rank, d.local_size, d.cross_rank,
                                 d.cross_size],
                       "backend": d.torch_backend,
                       "env": [os.environ[k] for k in ("MASTER_PORT", "RANK", "WORLD_SIZE")],
                       "info": [ctx.info.mode, ctx.info.trial_id, ctx.info.hparams],
                       "gather": d.gather(d.rank * 10),
                       "broadcast": d.broadcast("from %d" % d.rank),
                       "allgather_local": d.allgather_local(d.rank)}
                steps, ops, plain, sharded = 0, [], [], []
                for op in ctx.searcher.operations():
                    ops.append(op.length)
                    while steps < op.length:
                        steps += 1
                        ctx.train.report_training_metrics(steps, {"loss": float(d.rank)})
                        op.report_progress(steps)
                    ctx.train.report_validation_metrics(steps, {"validation_loss": float(d.rank)})
                    with ctx.checkpoint.store_path({"steps_completed": steps}) as (p, uuid):
                        open(os.path.join(p, "plain-%d.bin" % d.rank), "w").write("x")
                    plain.append(uuid)
                    meta = {"steps_completed": steps}
                    with ctx.checkpoint.store_path(meta, shard=True) as (p, uuid):
                        open(os.path.join(p, "shard-%d.bin" % d.rank), "w").write("x")
                    sharded.append(uuid)
                    op.report_completed(0.5 + d.rank)
                # Every worker asks at the same points; the chief's answer reaches both.
                answers = []
                deadline = time.time() + 60
                while not answers or not answers[-1]:
                    assert time.time() < deadline, "never preempted"
                    answers.append(ctx.preempt.should_preempt())
                    time.sleep(0.02)
                out.update(ops=ops, plain=plain, sharded=sharded, answers=answers)
            print("OUT", json.dumps(out))
            """)

        def pause_once_both_operations_completed() -> None:
            with server.lock:
                server.lock.wait_for(lambda: len([m for m, _, _ in server.calls
                                                  if m == "CompleteOperation"]) == 2)
                server.stop_action = trial_link_pb2.ShouldStopResponse.ACTION_CHECKPOINT_AND_STOP

        threading.Thread(target=pause_once_both_operations_completed, daemon=True).start()
        w0, w1 = self.run_workers(path, [self.task_env(server, w) for w in range(2)])

        self.assertEqual(w0["place"], [0, 2, 0, 2, 0, 1])
        self.assertEqual(w1["place"], [1, 2, 1, 2, 0, 1])
        self.assertEqual(w0["gather"], [0, 10])
        self.assertIsNone(w1["gather"])
        for w, worker in enumerate((w0, w1)):
            self.assertEqual(worker["backend"], "gloo")
            # The launcher's environment is left as it was.
            self.assertEqual(worker["env"], [str(self.port), str(w), "2"])
            self.assertEqual(worker["info"], ["managed", 7, {"lr": 0.01}])
            self.assertEqual(worker["broadcast"], "from 0")
            self.assertEqual(worker["allgather_local"], [0, 1])
            # Both follow the searcher's operations, which only the chief asked for.
            self.assertEqual(worker["ops"], [3, 5])
        self.assertEqual(len(server.requests("GetNextOperation")), 3)  # 2 operations, the end
        # should_preempt gave the same answers, at the same calls, on both.
        self.assertEqual(w0["answers"], w1["answers"])
        self.assertEqual(w0["answers"][-1], True)
        self.assertEqual(len(server.requests("AcknowledgePreemption")), 1)

        # Only the chief's reports reach the master (worker 1 reports loss 1.0).
        reports = [(r.kind, r.batches, list(r.values.values())[0])
                   for b in server.requests("ReportMetrics") for r in b.reports]
        self.assertEqual(reports, [("training", n, 0.0) for n in range(1, 4)]
                         + [("validation", 3, 0.0)]
                         + [("training", n, 0.0) for n in range(4, 6)]
                         + [("validation", 5, 0.0)])
        self.assertEqual([(c.op.target_length, c.searcher_metric)
                          for c in server.requests("CompleteOperation")], [(3, 0.5), (5, 0.5)])
        # A plain checkpoint is stored once, by the chief; a sharded one holds both workers'.
        self.assertEqual(w1["plain"], ["", ""])
        self.assertEqual(w0["sharded"], w1["sharded"])
        stored = {r.checkpoint.uuid: sorted(f.path for f in r.checkpoint.files)
                  for r in server.requests("ReportCheckpoint")}
        self.assertEqual(stored, {**{u: ["metadata.json", "plain-0.bin"] for u in w0["plain"]},
                                  **{u: ["metadata.json", "shard-0.bin", "shard-1.bin"]
                                     for u in w0["sharded"]}})
        self.assertEqual(sorted(os.listdir(self.checkpoints)), sorted(stored))
        # The collectives went through the process group, none through the master.
        self.assertEqual(server.requests("Rendezvous"), [])
        self.assert_one_identity(server)

    def test_the_generic_form_and_horovods_take_the_scripts_own_collectives(self) -> None:
        server = self.serve([(4, "batches")])
        path = self.script("""
            import pickle, types, torch

            calls = [0]

            def allgather(obj):
                # The script's own allgather: pickled bytes through two tensor all_gathers.
                calls[0] += 1
                n = tdist.get_world_size()
                data = torch.tensor(list(pickle.dumps(obj)), dtype=torch.uint8)
                sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(n)]
                tdist.all_gather(sizes, torch.tensor([data.numel()]))
                longest = max(int(s) for s in sizes)
                padded = torch.zeros(longest, dtype=torch.uint8)
                padded[:data.numel()] = data
                every = [torch.zeros(longest, dtype=torch.uint8) for _ in range(n)]
                tdist.all_gather(every, padded)
                return [pickle.loads(bytes(t[:int(s)].tolist())) for t, s in zip(every, sizes)]

            rank = tdist.get_rank()
            local = dict(local_rank=int(os.environ["LOCAL_RANK"]),
                         local_size=int(os.environ["LOCAL_WORLD_SIZE"]))
            d = DistributedContext(rank=rank, size=tdist.get_world_size(), allgather=allgather,
                                   **local)
            out = {}
            with steadfast.core.init(distributed=d) as ctx:
                for op in ctx.searcher.operations():
                    for n in range(1, op.length + 1):
                        ctx.train.report_training_metrics(n, {"loss": float(rank)})
                        assert not ctx.preempt.should_preempt()
                    with ctx.checkpoint.store_path({"steps_completed": n}, shard=True) as (p, u):
                        open(os.path.join(p, "shard-%d.bin" % rank), "w").write("x")
                    op.report_completed(1.0 + rank)
                out["ops"] = [op.length]
                out["uuid"] = u
                out["calls"] = calls[0]

            # Grouped by the hosts it is given.
            by_node = DistributedContext(rank=rank, size=2, allgather=allgather,
                                         host="node%d" % rank)
            out["by_node"] = [by_node.local_rank, by_node.local_size, by_node.cross_rank,
                              by_node.cross_size, by_node.allgather_local(rank)]
            # Local numbers that do not fit the hosts: every worker raises the same error.
            try:
                DistributedContext(rank=rank, size=2, allgather=allgather, local_rank=0,
                                   local_size=1)
            except ValueError as e:
                out["unfit"] = str(e)
            try:
                DistributedContext(rank=rank, size=2, allgather=lambda obj: [obj])
            except RuntimeError as e:
                out["short"] = str(e)

            # Horovod's names (a stand-in module over the same group), and DeepSpeed's.
            broadcasts = []

            def broadcast_object(obj, root_rank=0):
                broadcasts.append(root_rank)
                return allgather(obj)[root_rank]

            hvd = types.SimpleNamespace(rank=tdist.get_rank, size=tdist.get_world_size,
                                        local_rank=lambda: local["local_rank"],
                                        local_size=lambda: local["local_size"],
                                        allgather_object=allgather,
                                        broadcast_object=broadcast_object)
            h = DistributedContext.from_horovod(hvd)
            out["horovod"] = [h.rank, h.size, h.local_rank, h.local_size,
                              h.broadcast("from %d" % rank), broadcasts]
            ds = DistributedContext.from_deepspeed()
            out["deepspeed"] = [ds.rank, ds.size, ds.torch_backend, ds.allgather(rank)]
            # A group of the script's: local numbers from the hosts; a process outside is refused.
            sub = DistributedContext.from_torch_distributed(tdist.new_group([0, 1]))
            out["group"] = [sub.rank, sub.size, sub.local_rank, sub.local_size,
                            sub.broadcast("from %d" % rank)]
            only_1 = tdist.new_group([1])
            try:
                out["only_1"] = DistributedContext.from_torch_distributed(only_1).size
            except ValueError as e:
                out["only_1"] = str(e)
            print("OUT", json.dumps(out))
            """)
        w0, w1 = self.run_workers(path, [self.task_env(server, w) for w in range(2)])
        host = socket.gethostname()
        for w, worker in enumerate((w0, w1)):
            self.assertEqual(worker["ops"], [4])
            self.assertGreater(worker["calls"], 4)  # the operations, should_preempt, the shards
            self.assertEqual(worker["by_node"], [0, 1, w, 2, [w]])
            self.assertEqual(worker["unfit"],
                             f"steadfast: DistributedContext: worker 0 has local_rank 0 of "
                             f"local_size 1, but the workers on its host {host!r} are [0, 1]: "
                             f"pass each worker's host (host=...) to group them otherwise")
            self.assertEqual(worker["short"],
                             "steadfast: DistributedContext: the allgather returned 1 objects, "
                             "not a list of 2 (one per worker, by rank)")
            self.assertEqual(worker["horovod"], [w, 2, w, 2, "from 0", [0]])
            self.assertEqual(worker["deepspeed"], [w, 2, "gloo", [0, 1]])
            self.assertEqual(worker["group"], [w, 2, w, 2, "from 0"])
        self.assertEqual(w0["only_1"], "steadfast: DistributedContext.from_torch_distributed: "
                                       "this process (global rank 0) is not in the group")
        self.assertEqual(w1["only_1"], 1)
        self.assertEqual(w0["calls"], w1["calls"])
        self.assertEqual(w0["uuid"], w1["uuid"])
        reports = [(r.batches, r.values["loss"]) for b in server.requests("ReportMetrics")
                   for r in b.reports]
        self.assertEqual(reports, [(n, 0.0) for n in range(1, 5)])
        self.assertEqual([c.searcher_metric for c in server.requests("CompleteOperation")], [1.0])
        [checkpoint] = [r.checkpoint for r in server.requests("ReportCheckpoint")]
        self.assertEqual(checkpoint.uuid, w0["uuid"])
        self.assertEqual(sorted(f.path for f in checkpoint.files),
                         ["metadata.json", "shard-0.bin", "shard-1.bin"])
        self.assertEqual(server.requests("Rendezvous"), [])
        self.assert_one_identity(server)

    def test_two_tasks_with_torch_contexts_meet_without_rendezvous_rounds(self) -> None:
        server = self.serve([(2, "batches")])
        path = self.script("""
            torch_context = DistributedContext.from_torch_distributed()
            with steadfast.core.init(distributed=torch_context) as ctx:
                d = ctx.distributed
                out = {"allgather": d.allgather(d.rank), "place": [d.rank, d.size],
                       "env": [os.environ[k] for k in ("MASTER_PORT", "RANK", "WORLD_SIZE")]}
                d.barrier()
                for op in ctx.searcher.operations():
                    for n in range(1, op.length + 1):
                        ctx.train.report_training_metrics(n, {"loss": float(d.rank)})
                        out["preempt"] = ctx.preempt.should_preempt()
                    with ctx.checkpoint.store_path({"steps_completed": n}, shard=True) as (p, u):
                        open(os.path.join(p, "rank%d.bin" % d.rank), "w").write("x")
                    op.report_completed(0.25)
                    out["op"] = op.length
            print("OUT", json.dumps(out))
            """)
        outs = self.run_workers(path, [self.task_env(server, w, rank=w, world_size=2)
                                       for w in range(2)])
        for w, worker in enumerate(outs):
            self.assertEqual(worker["allgather"], [0, 1])
            self.assertEqual(worker["place"], [w, 2])
            self.assertEqual(worker["env"], [str(self.port), str(w), "2"])
            self.assertEqual((worker["op"], worker["preempt"]), (2, False))
        self.assertEqual(server.requests("Rendezvous"), [])
        # Each task speaks as its own rank; only rank 0 calls the master.
        self.assertEqual({r.who.rank for _, r, _ in server.calls}, {0})
        reports = [(r.batches, r.values["loss"]) for b in server.requests("ReportMetrics")
                   for r in b.reports]
        self.assertEqual(reports, [(1, 0.0), (2, 0.0)])
        [checkpoint] = [r.checkpoint for r in server.requests("ReportCheckpoint")]
        self.assertEqual(sorted(f.path for f in checkpoint.files),
                         ["metadata.json", "rank0.bin", "rank1.bin"])

    def test_contexts_that_do_not_fit_the_task_are_refused_on_every_worker(self) -> None:
        server = self.serve([(1, "batches")])
        path = self.script("""
            ctx = DistributedContext.from_torch_distributed()
            errors = []
            for env in json.loads(os.environ["SCENARIOS"]):
                os.environ.update(env)
                try:
                    steadfast.core.init(distributed=ctx)
                    errors.append(None)
                except ValueError as e:
                    errors.append(str(e))
            # Every worker raised at the same point: the context still works.
            os.environ.update(SF_RANK="0", SF_WORLD_SIZE="1")
            with steadfast.core.init(distributed=ctx) as c:
                after = c.distributed.allgather(ctx.rank)
                print("OUT", json.dumps({"errors": errors, "after": after}))
            """)
        # (SF_RANK, SF_WORLD_SIZE) of worker 0 and worker 1, in each scenario.
        scenarios = [
            [("1", "2"), ("0", "2")],  # the task ranks swapped
            [("0", "3"), ("1", "3")],  # 3 task ranks for 2 workers
            [("0", "1"), ("0", "2")],  # not one task's ranks
            [("0", "1"), ("1", "1")],  # a launcher in a one-rank task, with worker 1 in rank 1
        ]
        envs = []
        for w in range(2):
            env = self.task_env(server, w)
            env["SCENARIOS"] = json.dumps([{"SF_RANK": s[w][0], "SF_WORLD_SIZE": s[w][1]}
                                           for s in scenarios])
            envs.append(env)
        w0, w1 = self.run_workers(path, envs)
        self.assertEqual(w0["errors"], w1["errors"])
        where = "steadfast: init(distributed=...): "
        self.assertEqual(w0["errors"], [
            where + "the context's rank 0 is not the task's rank (SF_RANK 1): with SF_WORLD_SIZE "
                    "2 == the context's size, each agent-started rank must be the context's "
                    "worker of the same rank",
            where + "the context's size 2 is not a multiple of the task's SF_WORLD_SIZE 3: each "
                    "of the task's ranks must run the same number of workers",
            where + "the context's workers have different SF_WORLD_SIZE (1, 2): they are not the "
                    "ranks of one task",
            where + "the context's rank 1 runs in the task's rank SF_RANK 1, but with 2 workers "
                    "per task rank (size 2 / SF_WORLD_SIZE 1) it belongs in rank 0",
        ])
        self.assertEqual(w0["after"], [0, 1])
        # A refused context never reached the master.
        self.assertEqual([m for m, _, _ in server.calls if m != "ShouldStop"], [])

    def test_local_mode_keeps_only_the_chiefs_metrics_and_checkpoint(self) -> None:
        local = os.path.join(self.dir, "local")
        path = self.script("""
            torch_context = DistributedContext.from_torch_distributed()
            with steadfast.core.init(max_length=3, hparams={"lr": 0.5},
                                     distributed=torch_context) as ctx:
                rank = ctx.distributed.rank
                for op in ctx.searcher.operations():
                    for n in range(1, op.length + 1):
                        ctx.train.report_training_metrics(n, {"loss": float(rank)})
                    with ctx.checkpoint.store_path({"steps_completed": n}) as (p, u):
                        open(os.path.join(p, "w%d.bin" % rank), "w").write("x")
                    op.report_completed(0.1)
                    print("OUT", json.dumps({"mode": ctx.info.mode, "op": op.length, "uuid": u}))
            """)
        w0, w1 = self.run_workers(path, [self.launcher_env(w, SF_LOCAL_DIR=local)
                                         for w in range(2)])
        self.assertEqual((w0["mode"], w0["op"], w1["op"]), ("local", 3, 3))
        self.assertEqual(w1["uuid"], "")
        with open(os.path.join(local, "metrics.jsonl")) as f:
            rows = [(r["steps_completed"], r["metrics"]["loss"]) for r in map(json.loads, f)]
        self.assertEqual(rows, [(1, 0.0), (2, 0.0), (3, 0.0)])
        self.assertEqual(os.listdir(os.path.join(local, "checkpoints")), [w0["uuid"]])
        self.assertEqual(sorted(os.listdir(os.path.join(local, "checkpoints", w0["uuid"]))),
                         ["metadata.json", "w0.bin"])

    def test_unmanaged_mode_makes_one_trial_that_the_chief_reports_and_ends(self) -> None:
        link = self.serve()
        answer = {
            "experiment": {"id": "11"}, "trial": {"id": "21", "hparams": {"lr": 0.2}},
            "taskId": "unmanaged-21", "taskToken": "tt-21", "trialLinkAddress": link.address,
            "checkpointDir": self.checkpoints, "errors": [],
        }
        route = ("POST", "/api/v1/unmanaged-trials")
        rest = RestServer({route: (200, answer)})
        self.addCleanup(rest.close)
        path = self.script("""
            try:
                torch_context = DistributedContext.from_torch_distributed()
                ctx = steadfast.core.init(max_length=2, distributed=torch_context)
            except Exception as e:
                print("OUT", json.dumps({"error": [type(e).__name__, str(e)]}))
                sys.exit(0)
            with ctx:
                rank = ctx.distributed.rank
                print("WORKER %d" % rank)
                for op in ctx.searcher.operations():
                    for n in range(1, op.length + 1):
                        ctx.train.report_training_metrics(n, {"loss": float(rank)})
                    op.report_completed(0.3)
                print("OUT", json.dumps({"trial": ctx.info.trial_id, "hparams": ctx.info.hparams,
                                         "op": op.length}))
            """)
        envs = [self.launcher_env(w, SF_MASTER=rest.url, SF_TOKEN="api-token") for w in range(2)]
        outs = self.run_workers(path, envs)
        self.assertEqual(outs, [{"trial": 21, "hparams": {"lr": 0.2}, "op": 2}] * 2)
        self.assertEqual(len(rest.requests), 1)  # one trial, created by the chief
        reports = [(r.batches, r.values["loss"]) for b in link.requests("ReportMetrics")
                   for r in b.reports]
        self.assertEqual(reports, [(1, 0.0), (2, 0.0)])
        self.assertEqual(len(link.requests("CompleteOperation")), 1)
        self.assertEqual([(e.failed, e.error) for e in link.requests("EndTrial")], [(False, "")])
        logged = [line.message for b in link.requests("ReportLogs") for line in b.lines]
        self.assertIn("WORKER 0", logged)
        self.assertNotIn("WORKER 1", logged)

        # A trial the master refuses: the chief raises its error, the other worker names it.
        rest.routes[route] = (200, {**answer, "errors": [{"path": "searcher",
                                                          "message": "bad searcher"}]})
        self.port = free_port()
        envs = [self.launcher_env(w, SF_MASTER=rest.url, SF_TOKEN="api-token") for w in range(2)]
        w0, w1 = self.run_workers(path, envs)
        refused = ("steadfast: the master refused the config (init(config=...)): searcher: "
                   "bad searcher")
        self.assertEqual(w0["error"], ["ValueError", refused])
        self.assertEqual(w1["error"], ["RuntimeError", "steadfast: init(distributed=...): the "
                                       "chief could not create the unmanaged trial: ValueError: "
                                       + refused])


if __name__ == "__main__":
    unittest.main()
