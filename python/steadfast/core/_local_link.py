"""Local mode's stand-in for the master: no network, everything on this machine.

Metrics are printed one line per report to stdout (``steadfast: training steps_completed=10
loss=0.5231``) and appended as JSON lines to ``<dir>/metrics.jsonl``; the searcher's answer and
each checkpoint are printed too. There is one rank, so a rendezvous returns this rank's own
payload; nothing ever asks to stop.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import sys
import threading
from typing import Any, Optional

from ._link import Action, CheckpointFile, MetricRecord, Operation

__all__ = ["LocalTrialLink", "format_value"]


def format_value(v: float | int | str) -> str:
    """A metric value for the one-line display: ints as they are, floats to 4 digits, text
    quoted (its first 40 characters)."""
    if isinstance(v, str):
        return repr(v if len(v) <= 40 else v[:40] + "...")
    if isinstance(v, int):
        return str(v)
    return f"{v:.4g}"


def _json_value(v: float | int | str) -> Any:
    # JSON has no NaN/Infinity: written as strings, as the master writes them.
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


class LocalTrialLink:
    """The Link of local mode. On failure: a metrics.jsonl that cannot be written raises the
    OSError at the report call (in local mode reports are written on the caller's thread)."""

    def __init__(self, local_dir: str) -> None:
        self.local_dir = local_dir
        self.metrics_path = os.path.join(local_dir, "metrics.jsonl")
        self._lock = threading.Lock()

    def next_operation(self) -> Optional[Operation]:
        return None  # the searcher is given its one operation directly

    def report_metrics(self, records: list[MetricRecord]) -> None:
        with self._lock:
            lines = []
            for r in records:
                shown = " ".join(f"{k}={format_value(v)}" for k, v in r.values.items())
                print(f"steadfast: {r.kind} steps_completed={r.steps_completed} {shown}".rstrip(),
                      file=sys.stdout, flush=True)
                lines.append(json.dumps({
                    "kind": r.kind,
                    "steps_completed": r.steps_completed,
                    "metrics": {k: _json_value(v) for k, v in r.values.items()},
                    "time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                }, allow_nan=False))
            os.makedirs(self.local_dir, exist_ok=True)
            with open(self.metrics_path, "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))

    def complete_operation(self, op: Operation, searcher_metric: float) -> None:
        print(f"steadfast: searcher operation completed: length={op.target_length} {op.unit} "
              f"metric={format_value(searcher_metric)}", file=sys.stdout, flush=True)

    def report_checkpoint(self, uuid: str, path: str, steps_completed: int, size: int,
                          files: list[CheckpointFile], metadata: dict[str, Any]) -> None:
        print(f"steadfast: checkpoint {uuid} steps_completed={steps_completed} files={len(files)} "
              f"size={size} path={path}", file=sys.stdout, flush=True)

    def should_stop(self, steps_completed: int, stop: Optional[threading.Event] = None) -> str:
        return Action.CONTINUE

    def rendezvous(self, round_name: str, world_size: int, payload: bytes,
                   timeout_s: int) -> list[bytes]:
        if world_size != 1:
            raise ValueError(f"steadfast: local mode has one rank, not {world_size}")
        return [payload]

    def report_progress(self, batches: int) -> None:
        pass

    def end_trial(self, failed: bool, error: str) -> None:
        pass

    def report_early_exit(self, reason: Any) -> None:
        print(f"steadfast: early exit: {reason.value}", file=sys.stdout, flush=True)

    def get_experiment_best_validation(self) -> Optional[float]:
        return None  # no experiment (Determined's local context answers None too)

    def acknowledge_preemption(self) -> None:
        pass  # nothing ever asks a local trial to stop

    def delete_checkpoint(self, uuid: str) -> bool:
        print(f"steadfast: checkpoint {uuid} deleted", file=sys.stdout, flush=True)
        return False  # no master: the files are the caller's to remove

    def close(self) -> None:
        pass
