"""What the Core API's classes need from the master, in plain Python types.

Two implementations: `RemoteTrialLink` (_trial_link.py: TrialLink over gRPC, for managed and
unmanaged trials) and `LocalTrialLink` (_local_link.py: no master, for local mode). The
classes of steadfast.core talk only to this interface, so they behave the same in every mode.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass
from typing import Any, Optional, Protocol

__all__ = ["Operation", "MetricRecord", "CheckpointFile", "TrialLinkError", "Link", "Action",
           "EarlyExitReason"]


@dataclass(frozen=True)
class Operation:
    """A searcher operation: train until the trial's total reaches `target_length` `unit`s."""

    target_length: int
    unit: str  # batches | epochs
    validate_after: bool = True


@dataclass(frozen=True)
class MetricRecord:
    """One report: the metrics of one kind at one step."""

    kind: str  # training | validation | a group of the trial's own
    steps_completed: int
    values: dict[str, float | int | str]  # text only in a group of the trial's own


@dataclass(frozen=True)
class CheckpointFile:
    path: str  # relative to the checkpoint's directory
    size: int
    sha256: str


class Action:
    """ShouldStop's answers."""

    CONTINUE = "continue"
    CHECKPOINT_AND_STOP = "checkpoint_and_stop"  # pause or preemption
    STOP_NOW = "stop_now"  # kill


class TrialLinkError(RuntimeError):
    """A TrialLink call failed for good: a final gRPC error, or a transient one (UNAVAILABLE,
    DEADLINE_EXCEEDED, CANCELLED, ABORTED) that lasted past the retry window (5 minutes).

    `call` is the RPC's name, `code` the gRPC status code's name (e.g. "FAILED_PRECONDITION"),
    `details` the master's message.
    """

    def __init__(self, label: str, call: str, code: str, details: str) -> None:
        super().__init__(f"{label}: {call}: {details} (gRPC code {code})")
        self.call = call
        self.code = code
        self.details = details


class EarlyExitReason(enum.Enum):
    """Why a trial ends its searcher operation early (Train.report_early_exit); Determined's
    names. INVALID_HP: a search samples a replacement for these hyperparameters; ERRORED: the
    trial fails, without a restart; USER_REQUESTED_STOP: the trial ends as completed."""

    ERRORED = "ERRORED"
    USER_REQUESTED_STOP = "USER_REQUESTED_STOP"
    INVALID_HP = "INVALID_HP"


class Link(Protocol):
    """The calls; each raises TrialLinkError when it fails for good. `stop`: an event that ends
    retries early (the call then raises TrialLinkError with code "CANCELLED")."""

    def next_operation(self) -> Optional[Operation]:
        """The next operation, or None when the searcher has nothing more (complete)."""

    def report_metrics(self, records: list[MetricRecord]) -> None: ...

    def complete_operation(self, op: Operation, searcher_metric: float) -> None: ...

    def report_checkpoint(self, uuid: str, path: str, steps_completed: int, size: int,
                          files: list[CheckpointFile], metadata: dict[str, Any]) -> None: ...

    def should_stop(self, steps_completed: int, stop: Optional[threading.Event] = None) -> str:
        """One of the Action constants."""

    def rendezvous(self, round_name: str, world_size: int, payload: bytes,
                   timeout_s: int) -> list[bytes]:
        """Every rank's payload, indexed by rank."""

    def report_progress(self, batches: int) -> None: ...

    def end_trial(self, failed: bool, error: str) -> None: ...

    def report_early_exit(self, reason: EarlyExitReason) -> None: ...

    def get_experiment_best_validation(self) -> Optional[float]:
        """The best searcher metric of the trial's experiment so far; None before the first."""

    def acknowledge_preemption(self) -> None:
        """Tells the master this trial will exit with work left, to be resumed."""

    def delete_checkpoint(self, uuid: str) -> bool:
        """The master deletes checkpoint `uuid` (files and record): True. False where there is
        no master (local mode): the caller removes the files itself."""

    def close(self) -> None: ...
