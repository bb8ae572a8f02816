"""A stand-in master for the Python Core API's tests: a real gRPC TrialLink server on loopback
that records what it is sent, answers from a script of operations, and fails calls on demand.
(The real master is exercised by the end-to-end tests.)"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
from concurrent import futures
from typing import Any, Optional

import grpc

from steadfast.v1 import trial_link_pb2, trial_link_pb2_grpc


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any Steadfast or torch.distributed variable (the
    machine running the tests may have SF_MASTER set), plus `extra`."""
    skip = ("SF_", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
            "LOCAL_WORLD_SIZE", "XDG_CONFIG_HOME")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def run_script(path: str, env: dict[str, str], cwd: str,
               timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, path], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def run_ranks(path: str, envs: list[dict[str, str]], cwd: str,
              timeout: float = 180) -> list[tuple[int, str, str]]:
    """Runs the script once per rank at the same time (envs[r] for rank r); (returncode,
    stdout, stderr) of each, by rank. A rank still running when another's wait fails is killed."""
    procs = [subprocess.Popen([sys.executable, path], env=env, cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for env in envs]
    out = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=timeout)
            out.append((p.returncode, stdout, stderr))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def out_line(test: Any, result: tuple[int, str, str], who: str = "") -> Any:
    """A rank's result that must have exited 0 and printed one "OUT <json>" line: the JSON."""
    code, stdout, stderr = result
    test.assertEqual(code, 0, f"{who}\n{stdout}{stderr}" if who else stdout + stderr)
    return json.loads(stdout.split("OUT ", 1)[1].splitlines()[0])


class TrialLinkServer(trial_link_pb2_grpc.TrialLinkServicer):
    """Serves TrialLink on 127.0.0.1:<port>. Thread-safe; every field is read under `lock`."""

    def __init__(self, operations: Optional[list[tuple[int, str]]] = None,
                 credentials: Optional[grpc.ServerCredentials] = None) -> None:
        self.lock = threading.Condition()
        self.operations = collections.deque(operations or [])
        self.calls: list[tuple[str, object, dict[str, str]]] = []  # (method, request, metadata)
        self.failures: dict[str, list[grpc.StatusCode]] = {}
        self.stop_action = trial_link_pb2.ShouldStopResponse.ACTION_CONTINUE
        self.rounds: dict[str, dict[int, bytes]] = {}
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        trial_link_pb2_grpc.add_TrialLinkServicer_to_server(self, self.server)
        if credentials is None:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            self.port = self.server.add_secure_port("127.0.0.1:0", credentials)
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def close(self) -> None:
        self.server.stop(grace=None)

    def fail(self, method: str, *codes: grpc.StatusCode) -> None:
        """The next calls of `method` fail with `codes`, in order."""
        with self.lock:
            self.failures.setdefault(method, []).extend(codes)

    def requests(self, method: str) -> list:
        with self.lock:
            return [r for m, r, _ in self.calls if m == method]

    def _enter(self, method: str, request, context) -> None:
        with self.lock:
            pending = self.failures.get(method)
            if pending:
                code = pending.pop(0)
                context.abort(code, f"injected {code.name}")
            self.calls.append((method, request, dict(context.invocation_metadata())))
            self.lock.notify_all()

    def GetNextOperation(self, request, context):
        self._enter("GetNextOperation", request, context)
        with self.lock:
            if self.operations:
                length, unit = self.operations.popleft()
                return trial_link_pb2.GetNextOperationResponse(
                    train=trial_link_pb2.SearcherOperation(target_length=length, unit=unit,
                                                           validate_after=True))
        return trial_link_pb2.GetNextOperationResponse(complete=True)

    def ReportMetrics(self, request, context):
        self._enter("ReportMetrics", request, context)
        return trial_link_pb2.ReportMetricsResponse()

    def CompleteOperation(self, request, context):
        self._enter("CompleteOperation", request, context)
        return trial_link_pb2.CompleteOperationResponse()

    def ReportCheckpoint(self, request, context):
        self._enter("ReportCheckpoint", request, context)
        return trial_link_pb2.ReportCheckpointResponse()

    def ShouldStop(self, request, context):
        self._enter("ShouldStop", request, context)
        with self.lock:
            return trial_link_pb2.ShouldStopResponse(action=self.stop_action)

    def Rendezvous(self, request, context):
        self._enter("Rendezvous", request, context)
        with self.lock:
            board = self.rounds.setdefault(request.round, {})
            board[request.who.rank] = request.payload
            self.lock.notify_all()
            if not self.lock.wait_for(lambda: len(board) >= request.world_size,
                                      timeout=request.timeout_seconds or 300):
                missing = sorted(set(range(request.world_size)) - set(board))
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"ranks {missing} missing")
            return trial_link_pb2.RendezvousResponse(
                payloads=[board[r] for r in range(request.world_size)])

    def ReportProgress(self, request, context):
        self._enter("ReportProgress", request, context)
        return trial_link_pb2.ReportProgressResponse()

    def ReportLogs(self, request, context):
        self._enter("ReportLogs", request, context)
        return trial_link_pb2.ReportLogsResponse()

    def ReportEndpoint(self, request, context):
        self._enter("ReportEndpoint", request, context)
        return trial_link_pb2.ReportEndpointResponse()

    def ReportEarlyExit(self, request, context):
        self._enter("ReportEarlyExit", request, context)
        return trial_link_pb2.ReportEarlyExitResponse()

    def GetExperimentBestValidation(self, request, context):
        self._enter("GetExperimentBestValidation", request, context)
        return trial_link_pb2.GetExperimentBestValidationResponse(best=0.25)

    def AcknowledgePreemption(self, request, context):
        self._enter("AcknowledgePreemption", request, context)
        return trial_link_pb2.AcknowledgePreemptionResponse()

    def DeleteCheckpoint(self, request, context):
        self._enter("DeleteCheckpoint", request, context)
        return trial_link_pb2.TrialDeleteCheckpointResponse()

    def EndTrial(self, request, context):
        self._enter("EndTrial", request, context)
        return trial_link_pb2.EndTrialResponse()
