"""Pause, preemption and kill (Determined's PreemptContext)."""

from __future__ import annotations

import threading
from typing import Callable, Optional

from ._distributed import Distributed
from ._link import Action, Link, TrialLinkError

__all__ = ["Preempt"]


class Preempt:
    """Whether the trial should stop now: paused, preempted for another trial, or killed.

    The chief runs a background thread that asks the master (ShouldStop, with the last reported
    steps) once a second; should_preempt() returns its latest answer, without waiting on the
    network. With several ranks, every rank must call should_preempt() at the same points: the
    chief sends its answer to the others (a collective, one round trip through the master), so
    all ranks stop together. When it says True: save a checkpoint and return (exit 0).

    No SIGTERM handler is installed: a kill still ends the process within the agent's grace
    period even when the script never asks.

    On failure: a master that is unreachable is retried in the background (the answer stays
    the last one known); a final error from the master (e.g. the trial is no longer running)
    is raised by the next should_preempt() as TrialLinkError on the chief, and as RuntimeError
    naming it on the other ranks.
    """

    def __init__(self, link: Link, dist: Distributed, *, label: str, steps: Callable[[], int],
                 poll: bool, interval_s: float = 1.0) -> None:
        self._link = link
        self._label = label
        self._dist = dist
        self._steps = steps
        self._interval_s = interval_s
        self._action = Action.CONTINUE
        self._error: Optional[TrialLinkError] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if poll and dist.rank == 0:
            self._thread = threading.Thread(target=self._run, name="steadfast-preempt",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                action = self._link.should_stop(self._steps(), stop=self._stop)
            except TrialLinkError as e:
                if not self._stop.is_set():
                    self._error = e
                return
            if action != Action.CONTINUE:
                self._action = action
                return  # a stop is never taken back
            self._stop.wait(self._interval_s)

    @property
    def action(self) -> str:
        """The chief's latest answer: "continue", "checkpoint_and_stop" or "stop_now"."""
        return self._action

    def should_preempt(self) -> bool:
        """True once the master asked this trial to stop (pause, preemption or kill)."""
        answer: bool | str = False  # or, from a chief whose poller failed, the error's text
        if self._dist.rank == 0:
            answer = str(self._error) if self._error is not None else (
                self._action != Action.CONTINUE)
        if self._dist.size > 1:
            answer = self._dist.broadcast(answer)
        if isinstance(answer, str):
            if self._error is not None:
                raise TrialLinkError(self._label, self._error.call, self._error.code,
                                     self._error.details)
            raise RuntimeError(f"{self._label}: should_preempt: the chief failed: {answer}")
        return bool(answer)

    def close(self) -> None:
        """Ends the background thread (an RPC in flight is abandoned, not waited for)."""
        self._stop.set()
