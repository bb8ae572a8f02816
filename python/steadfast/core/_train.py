"""Metrics: what the script measured at each step (Determined's TrainContext).

A report is checked on the caller's thread (so a mistake raises at the line that made it) and
then handed to a background thread that batches reports into one ReportMetrics call (every
0.5 s, or at once when 256 are pending): a report costs microseconds and never waits on the
network. In local mode reports are written on the caller's thread instead (stdout and
metrics.jsonl, _local_link.py).
"""

from __future__ import annotations

import operator
import re
import sys
import threading
import time
from typing import Any, Mapping, Optional

from ._link import EarlyExitReason, Link, MetricRecord, TrialLinkError

# A metric group's name, as the master checks it (master/ingest/metric_groups.h).
_GROUP = re.compile(r"[a-z][a-z0-9_]{0,63}")

__all__ = ["Train", "check_steps", "to_number"]


def _shown(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _not_a_number(where: str, v: Any, why: str = "") -> TypeError:
    return TypeError(f"{where} is {_shown(v)} ({type(v).__name__}), not a number{why}")


# The longest text a metric may carry (UTF-8 bytes): a sample translation or transcript, not a file.
MAX_TEXT_BYTES = 64 * 1024


def _metric_value(where: str, kind: str, v: Any) -> float | int | str:
    """A metric's value: a number (to_number), or in a group of the trial's own also text (a
    sample transcript, a translation beside its reference; at most MAX_TEXT_BYTES). training and
    validation take numbers only: the searcher and the curves read them."""
    if isinstance(v, str):
        if kind in ("training", "validation"):
            raise TypeError(f"{where} is {_shown(v)} (str), not a number: text goes in a group of the "
                            f"trial's own (report_metrics(\"samples\", ...)); {kind} takes numbers")
        try:
            size = len(v.encode("utf-8"))
        except UnicodeEncodeError as e:  # a lone surrogate: no UTF-8 for it, nor for the master
            raise ValueError(f"{where} is not valid Unicode text ({e.reason} at {e.start})") from None
        if size > MAX_TEXT_BYTES:
            raise ValueError(f"{where} is text of {size} bytes, more than {MAX_TEXT_BYTES}")
        return v
    return to_number(where, v)


def to_number(where: str, v: Any) -> float | int:
    """`v` as a Python int or float: ints, floats, and scalars with `.item()` (numpy, torch)
    or `__float__`; bool and str are refused. Raises TypeError starting with `where`."""
    if isinstance(v, bool):
        raise _not_a_number(where, v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, (str, bytes)):
        raise _not_a_number(where, v)
    item = getattr(v, "item", None)
    if callable(item):
        try:
            x = item()
        except Exception as e:  # e.g. a tensor of several elements
            raise _not_a_number(where, v, f": {type(e).__name__}: {e}") from None
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise _not_a_number(where, v)
        return x
    if hasattr(v, "__float__"):
        try:
            return float(v)
        except Exception as e:
            raise _not_a_number(where, v, f": {type(e).__name__}: {e}") from None
    raise _not_a_number(where, v)


def check_steps(where: str, steps: Any) -> int:
    """`steps` as a non-negative int (numpy and torch integers accepted); TypeError for other
    types, ValueError for a negative count, each message starting with `where`."""
    if isinstance(steps, bool) or isinstance(steps, float):
        raise TypeError(f"{where}: steps_completed {_shown(steps)} ({type(steps).__name__}) "
                        f"is not an int")
    try:
        n = operator.index(steps)
    except TypeError:
        raise TypeError(f"{where}: steps_completed {_shown(steps)} ({type(steps).__name__}) "
                        f"is not an int") from None
    if n < 0:
        raise ValueError(f"{where}: steps_completed {n} is negative")
    return n


def _fresh(error: BaseException, label: str) -> BaseException:
    """A new exception carrying a kept error, so each raise has its own traceback."""
    if isinstance(error, TrialLinkError):
        e = TrialLinkError.__new__(TrialLinkError)
        RuntimeError.__init__(e, str(error))
        e.call, e.code, e.details = error.call, error.code, error.details
        return e
    return RuntimeError(f"{label}: reporting metrics failed: {type(error).__name__}: {error}")


class _Shipper:
    """The background thread that sends reports (and progress) to the master."""

    def __init__(self, link: Link, label: str, flush_interval_s: float, max_pending: int) -> None:
        self._link = link
        self._label = label
        self._interval = flush_interval_s
        self._max_pending = max_pending
        self._cond = threading.Condition()
        self._pending: list[MetricRecord] = []
        self._first_pending_at = 0.0
        self._submitted = 0
        self._shipped = 0
        self._flush_wanted = False
        self._closing = False
        self.error: Optional[BaseException] = None
        self._progress: Optional[int] = None
        self._progress_sent_at = -1e9
        self._progress_warned = False
        self._thread = threading.Thread(target=self._run, name="steadfast-metrics", daemon=True)
        self._thread.start()

    def submit(self, record: MetricRecord) -> None:
        with self._cond:
            if self.error is not None:
                raise _fresh(self.error, self._label)
            self._pending.append(record)
            self._submitted += 1
            n = len(self._pending)
            if n == 1:
                self._first_pending_at = time.monotonic()
                self._cond.notify()
            elif n >= self._max_pending:
                self._cond.notify()

    def set_progress(self, batches: int) -> None:
        with self._cond:
            self._progress = batches
            self._cond.notify()

    def flush(self) -> None:
        with self._cond:
            target = self._submitted
            self._flush_wanted = True
            self._cond.notify_all()
            while self._shipped < target and self.error is None:
                self._cond.wait()
            if self.error is not None:
                raise _fresh(self.error, self._label)

    def close(self) -> None:
        """Ships what is pending, then ends the thread. Raises a kept error."""
        try:
            self.flush()
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify_all()
            self._thread.join()

    def _next(self) -> Optional[tuple[list[MetricRecord], Optional[int]]]:
        """Waits for work; None when closing with nothing left."""
        with self._cond:
            while True:
                now = time.monotonic()
                n = len(self._pending)
                due = n > 0 and (self._closing or self._flush_wanted or n >= self._max_pending
                                 or now - self._first_pending_at >= self._interval)
                progress_due = (self._progress is not None and not self._closing
                                and now - self._progress_sent_at >= 1.0)
                if due or progress_due:
                    break
                if self._closing:
                    return None
                timeout = None
                if n > 0:
                    timeout = self._first_pending_at + self._interval - now
                if self._progress is not None:
                    t = self._progress_sent_at + 1.0 - now
                    timeout = t if timeout is None else min(timeout, t)
                self._cond.wait(timeout)
            batch: list[MetricRecord] = []
            if due:
                batch = self._pending[:1024]
                del self._pending[:len(batch)]
                if self._pending:
                    self._first_pending_at = now
                else:
                    self._flush_wanted = False
            progress = None
            if progress_due:
                progress, self._progress = self._progress, None
                self._progress_sent_at = now
            return batch, progress

    def _run(self) -> None:
        while True:
            work = self._next()
            if work is None:
                return
            batch, progress = work
            error: Optional[BaseException] = None
            if batch:
                try:
                    self._link.report_metrics(batch)
                except BaseException as e:  # kept for the user's thread, never lost
                    error = e
            if progress is not None and error is None:
                try:
                    self._link.report_progress(progress)
                except Exception as e:  # progress is for display only: warn once, go on
                    if not self._progress_warned:
                        self._progress_warned = True
                        print(f"{self._label}: report_progress: {e} (progress is not shown)",
                              file=sys.stderr, flush=True)
            with self._cond:
                self._shipped += len(batch)
                if error is not None and self.error is None:
                    self.error = error
                if self.error is not None:
                    # Nothing more goes out: what is pending is dropped, and every later
                    # report, flush and close raises the kept error.
                    self._shipped += len(self._pending)
                    self._pending.clear()
                self._cond.notify_all()


class Train:
    """Reports training and validation metrics.

    `steps_completed` is a non-negative int: the trial's total steps (batches) when the metrics
    were measured; per kind it never goes backwards (equal is allowed). `metrics` maps names
    (str) to numbers: int, float, or numpy/torch scalars (read with `.item()`, which for a CUDA
    tensor waits for the GPU); bool and str are refused.

    Only the chief (rank 0) reports; on the other ranks the calls check their arguments just
    the same and then drop the report (Determined does the same), so every rank can run the
    same code.

    On failure: a bad argument raises at the call (TypeError or ValueError, naming the trial,
    the call and what is wrong), and the report is not kept. A report that the master refuses
    for good (or that stays unreachable for 5 minutes) is kept as the trial's error: the next
    report, flush or close raises it (TrialLinkError), and nothing more is sent.
    """

    def __init__(self, link: Link, *, label: str, chief: bool, synchronous: bool,
                 flush_interval_s: float = 0.5, max_pending: int = 256) -> None:
        self._link = link
        self._label = label
        self._chief = chief
        self._synchronous = synchronous
        self._last_steps: dict[str, int] = {}
        self._lock = threading.Lock()
        self._shipper: Optional[_Shipper] = None
        if chief and not synchronous:
            self._shipper = _Shipper(link, label, flush_interval_s, max_pending)
        self._closed = False

    @property
    def last_steps_completed(self) -> int:
        """The largest steps_completed reported so far (0 before any report)."""
        return max(self._last_steps.values(), default=0)

    def report_training_metrics(self, steps_completed: int, metrics: Mapping[str, Any]) -> None:
        """Reports `metrics` measured in training at `steps_completed`."""
        self._report("training", "report_training_metrics", steps_completed, metrics)

    def report_validation_metrics(self, steps_completed: int, metrics: Mapping[str, Any]) -> None:
        """Reports `metrics` measured in validation at `steps_completed`."""
        self._report("validation", "report_validation_metrics", steps_completed, metrics)

    def report_metrics(self, group: str, steps_completed: int, metrics: Mapping[str, Any]) -> None:
        """Reports `metrics` of `group` at `steps_completed` (Determined's report_metrics).

        `group` "training" and "validation" are report_training_metrics and
        report_validation_metrics; any other group is the trial's own ("inference",
        "eval_bleu": lowercase letters, digits and _, starting with a letter, at most 64
        characters), stored and shown like them (`sf trial metrics ID --group NAME`,
        GET /api/v1/trials/ID/metrics?kind=NAME) and never read by the searcher. Such a group's
        values may also be text (at most 64 KiB each: a sample output beside its reference);
        training and validation take numbers only. Per group, steps_completed never goes
        backwards."""
        where = f"{self._label}: report_metrics"
        if not isinstance(group, str):
            raise TypeError(f"{where}: group is {_shown(group)} ({type(group).__name__}), not a string")
        if not _GROUP.fullmatch(group):
            raise ValueError(f"{where}: group {_shown(group)} must be lowercase letters, digits and _, "
                             f"starting with a letter, at most 64 characters")
        self._report(group, "report_metrics", steps_completed, metrics)

    def _report(self, kind: str, call: str, steps_completed: Any, metrics: Any) -> None:
        where = f"{self._label}: {call}"
        if self._closed:
            raise RuntimeError(f"{where}: the context is closed")
        steps = check_steps(where, steps_completed)
        if not isinstance(metrics, Mapping):
            raise TypeError(f"{where}: metrics is {_shown(metrics)} ({type(metrics).__name__}), "
                            f"not a dict of names to numbers")
        values: dict[str, float | int | str] = {}
        for name, v in metrics.items():
            if not isinstance(name, str):
                raise TypeError(f"{where}: metric name {_shown(name)} ({type(name).__name__}) "
                                f"is not a string")
            values[name] = _metric_value(f'{where}: metric "{name}"', kind, v)
        with self._lock:
            previous = self._last_steps.get(kind)
            if previous is not None and steps < previous:
                raise ValueError(f"{where}: steps_completed {steps} is less than {previous}, the "
                                 f"step of the previous {kind} report")
            self._last_steps[kind] = steps
        if not self._chief:
            return
        record = MetricRecord(kind, steps, values)
        if self._shipper is not None:
            self._shipper.submit(record)
        else:
            self._link.report_metrics([record])

    def get_experiment_best_validation(self) -> Optional[float]:
        """The best searcher metric any trial of this experiment has reported so far (by the
        experiment's searcher.smaller_is_better; op.report_completed's values), or None before
        the first (Determined's call). Any rank may ask; local mode has no experiment: None."""
        if self._closed:
            raise RuntimeError(f"{self._label}: get_experiment_best_validation: the context is closed")
        return self._link.get_experiment_best_validation()

    def report_early_exit(self, reason: EarlyExitReason) -> None:
        """Ends the searcher operation early for `reason` (EarlyExitReason, or its name): the
        master acts on it when the script then exits with status 0 (return from the operations
        loop): INVALID_HP makes a search sample a replacement and ends this trial in ERROR,
        ERRORED fails it without a restart, USER_REQUESTED_STOP ends it COMPLETED where it is.
        Reports made before are sent first. The chief's call counts; others are checked and
        dropped. An unmanaged trial refuses it (TrialLinkError): its script ends it itself."""
        where = f"{self._label}: report_early_exit"
        if isinstance(reason, str) and reason in EarlyExitReason.__members__:
            reason = EarlyExitReason[reason]
        if not isinstance(reason, EarlyExitReason):
            raise TypeError(f"{where}: reason is {_shown(reason)}, not one of "
                            f"{', '.join(EarlyExitReason.__members__)} (steadfast.core.EarlyExitReason)")
        if not self._chief:
            return
        self.flush()
        self._link.report_early_exit(reason)

    def report_progress(self, batches: int) -> None:
        """Progress in the current operation, for display; sent at most once a second."""
        if self._shipper is not None:
            self._shipper.set_progress(batches)
        elif self._chief:
            self._link.report_progress(batches)

    def flush(self) -> None:
        """Returns once every report made so far has reached the master; raises a kept error."""
        if self._shipper is not None:
            self._shipper.flush()

    def close(self) -> None:
        """Flushes and ends the background thread; raises a kept error. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._shipper is not None:
            self._shipper.close()
