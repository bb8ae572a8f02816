"""TrialLink over gRPC with retries: the managed and unmanaged modes' link to the master.

The Python twin of trainer/run/cluster_mode.cc's TrialLinkClient: every call carries this
task's TrialIdentity and its token (metadata `x-sf-task-token`); UNAVAILABLE,
DEADLINE_EXCEEDED, CANCELLED and ABORTED are retried with backoff (200 ms doubling to 5 s) for
up to 5 minutes, so a master restart is waited out; any other error is final and raised as
TrialLinkError. The channel sends HTTP/2 keepalive pings every 5 s, so a call across a cut
network fails within ~10 s and is retried instead of waiting out its whole deadline.

Thread-safe: the metrics thread, the preemption poller and the user's thread share one link.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Optional

import grpc
from google.protobuf import struct_pb2

from steadfast.v1 import common_pb2, trial_link_pb2, trial_link_pb2_grpc

from ._link import Action, CheckpointFile, EarlyExitReason, MetricRecord, Operation, TrialLinkError

__all__ = ["RemoteTrialLink", "TRANSIENT_CODES", "channel_options"]

TRANSIENT_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.ABORTED,
})

_RETRY_WINDOW_S = 300.0
_FIRST_DELAY_S = 0.2
_MAX_DELAY_S = 5.0


def channel_options() -> list[tuple[str, int]]:
    """The C++ client's channel arguments: keepalive pings every 5 s, also without calls."""
    return [
        ("grpc.keepalive_time_ms", 5000),
        ("grpc.keepalive_timeout_ms", 5000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.max_reconnect_backoff_ms", 5000),
    ]


def _to_struct(values: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(values)
    return s


class RemoteTrialLink:
    """TrialLink for one rank of one trial. On failure: retries transient errors for up to
    `retry_window_s` (5 minutes), then raises TrialLinkError; raises other errors at once."""

    def __init__(self, *, address: str, trial_id: int, rank: int, task_id: str, restart: int,
                 token: str, label: str, tls: bool = False,
                 root_certificates: Optional[bytes] = None,
                 retry_window_s: float = _RETRY_WINDOW_S) -> None:
        self._label = label
        self._retry_window_s = retry_window_s
        options = channel_options()
        if tls:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(address, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        self._stub = trial_link_pb2_grpc.TrialLinkStub(self._channel)
        self._who = trial_link_pb2.TrialIdentity(trial_id=trial_id, rank=rank, task_id=task_id,
                                                 restart=restart)
        self._metadata = (("x-sf-task-token", token),) if token else ()
        self._closed = threading.Event()

    def _call(self, name: str, request: Any, timeout_s: float = 60.0,
              stop: Optional[threading.Event] = None) -> Any:
        request.who.CopyFrom(self._who)
        method: Callable[..., Any] = getattr(self._stub, name)
        deadline = time.monotonic() + self._retry_window_s
        delay = _FIRST_DELAY_S
        warned = False
        while True:
            try:
                return method(request, timeout=timeout_s, metadata=self._metadata)
            except grpc.RpcError as e:
                code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
                details = (e.details() if hasattr(e, "details") else str(e)) or str(code)
                if code not in TRANSIENT_CODES or time.monotonic() + delay > deadline:
                    raise TrialLinkError(self._label, name, code.name, details) from None
                if self._closed.is_set() or (stop is not None and stop.is_set()):
                    raise TrialLinkError(self._label, name, "CANCELLED",
                                         f"stopped while retrying: {details}") from None
                if not warned:
                    # One line per call that has to wait, not one per attempt.
                    print(f"{self._label}: {name}: {details} ({code.name}); retrying for up to "
                          f"{self._retry_window_s:.0f} s", file=sys.stderr, flush=True)
                    warned = True
                if stop is not None:
                    stop.wait(delay)
                else:
                    self._closed.wait(delay)
                delay = min(delay * 2, _MAX_DELAY_S)

    def next_operation(self) -> Optional[Operation]:
        # The master long-polls up to 20 s; an answer with neither field means "ask again".
        while True:
            resp = self._call("GetNextOperation", trial_link_pb2.GetNextOperationRequest(),
                              timeout_s=30.0)
            which = resp.WhichOneof("result")
            if which == "train":
                t = resp.train
                return Operation(int(t.target_length), t.unit or "batches", t.validate_after)
            if which == "complete" and resp.complete:
                return None

    def report_metrics(self, records: list[MetricRecord]) -> None:
        request = trial_link_pb2.ReportMetricsRequest()
        for r in records:
            request.reports.append(common_pb2.MetricReport(
                batches=r.steps_completed, kind=r.kind, values=_to_struct(r.values)))
        self._call("ReportMetrics", request)

    def complete_operation(self, op: Operation, searcher_metric: float) -> None:
        self._call("CompleteOperation", trial_link_pb2.CompleteOperationRequest(
            op=trial_link_pb2.SearcherOperation(target_length=op.target_length, unit=op.unit,
                                                validate_after=op.validate_after),
            searcher_metric=searcher_metric))

    def report_checkpoint(self, uuid: str, path: str, steps_completed: int, size: int,
                          files: list[CheckpointFile], metadata: dict[str, Any]) -> None:
        checkpoint = common_pb2.Checkpoint(uuid=uuid, path=path, batches=steps_completed,
                                           size=size, metadata=_to_struct(metadata))
        for f in files:
            checkpoint.files.append(common_pb2.CheckpointFile(path=f.path, size=f.size,
                                                              sha256=f.sha256))
        self._call("ReportCheckpoint", trial_link_pb2.ReportCheckpointRequest(checkpoint=checkpoint))

    def should_stop(self, steps_completed: int, stop: Optional[threading.Event] = None) -> str:
        resp = self._call("ShouldStop", trial_link_pb2.ShouldStopRequest(batches=steps_completed),
                          timeout_s=30.0, stop=stop)
        a = trial_link_pb2.ShouldStopResponse
        if resp.action == a.ACTION_STOP_NOW:
            return Action.STOP_NOW
        if resp.action == a.ACTION_CHECKPOINT_AND_STOP:
            return Action.CHECKPOINT_AND_STOP
        return Action.CONTINUE

    def rendezvous(self, round_name: str, world_size: int, payload: bytes,
                   timeout_s: int) -> list[bytes]:
        resp = self._call("Rendezvous", trial_link_pb2.RendezvousRequest(
            world_size=world_size, payload=payload, round=round_name, timeout_seconds=timeout_s),
            timeout_s=timeout_s + 30.0)
        if len(resp.payloads) != world_size:
            raise TrialLinkError(self._label, "Rendezvous", "INTERNAL",
                                 f"round {round_name}: {len(resp.payloads)} payloads for "
                                 f"{world_size} ranks")
        return list(resp.payloads)

    def report_progress(self, batches: int) -> None:
        self._call("ReportProgress", trial_link_pb2.ReportProgressRequest(batches=batches),
                   timeout_s=10.0)

    def end_trial(self, failed: bool, error: str) -> None:
        self._call("EndTrial", trial_link_pb2.EndTrialRequest(failed=failed, error=error))

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        r = trial_link_pb2.ReportEarlyExitRequest
        code = {EarlyExitReason.ERRORED: r.REASON_ERRORED,
                EarlyExitReason.USER_REQUESTED_STOP: r.REASON_USER_REQUESTED_STOP,
                EarlyExitReason.INVALID_HP: r.REASON_INVALID_HYPERPARAMETERS}[reason]
        self._call("ReportEarlyExit", r(reason=code))

    def get_experiment_best_validation(self) -> Optional[float]:
        resp = self._call("GetExperimentBestValidation", trial_link_pb2.GetExperimentBestValidationRequest())
        return resp.best if resp.HasField("best") else None

    def acknowledge_preemption(self) -> None:
        self._call("AcknowledgePreemption", trial_link_pb2.AcknowledgePreemptionRequest())

    def delete_checkpoint(self, uuid: str) -> bool:
        self._call("DeleteCheckpoint", trial_link_pb2.TrialDeleteCheckpointRequest(uuid=uuid))
        return True

    def report_endpoint(self, url: str) -> None:
        """Where this task's service answers (a notebook's Jupyter): the master's proxy forwards
        /proxy/TASK_ID/... there while this run lasts."""
        self._call("ReportEndpoint", trial_link_pb2.ReportEndpointRequest(url=url))

    def report_logs(self, incarnation: str, sequence: int, lines: list[tuple[str, str, float]],
                    host: str = "") -> None:
        """One batch of output lines, (stream, message, unix time) each; the master stores a
        (incarnation, sequence) once, so a retried batch is not doubled."""
        request = trial_link_pb2.ReportLogsRequest(incarnation=incarnation, sequence=sequence,
                                                   host=host)
        for stream, message, at in lines:
            line = request.lines.add(stream=stream, message=message)
            line.time.FromNanoseconds(int(at * 1e9))
        self._call("ReportLogs", request)

    def close(self) -> None:
        """Ends retries in progress and closes the channel; later calls fail."""
        self._closed.set()
        self._channel.close()
