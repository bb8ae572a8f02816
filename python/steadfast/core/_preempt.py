"""Pause, preemption and kill (Determined's PreemptContext)."""

from __future__ import annotations

import threading
from typing import Callable, Optional

from ._distributed import DistributedContext
from ._link import Action, Link, TrialLinkError

__all__ = ["Preempt"]


class Preempt:
    """Whether the trial should stop now: paused, preempted for another trial, or killed.

    The chief runs a background thread that asks the master (ShouldStop, with the last reported
    steps) once a second; should_preempt() returns its latest answer, without waiting on the
    network. With several ranks, every rank must call should_preempt() at the same points: the
    chief sends its answer to the others (a collective: one round trip through the master, or
    through the context given to init(distributed=...)), so all ranks stop together. When it
    says True: save a checkpoint and return (exit 0).

    The first True is acknowledged to the master (``auto_ack``, as Determined's): the script
    will exit with work left and is to be resumed. With ``should_preempt(auto_ack=False)`` the
    script calls acknowledge_preemption_signal() itself before it exits; a script that exits 0
    with its operation unfinished and never acknowledged ends its trial in ERROR when the stop
    was withdrawn meanwhile (a pause undone before the exit). Acknowledging is the chief's; on
    other ranks it is a no-op.

    No SIGTERM handler is installed: a kill still ends the process within the agent's grace
    period even when the script never asks.

    On failure: a master that is unreachable is retried in the background (the answer stays
    the last one known); a final error from the master (e.g. the trial is no longer running)
    is raised by the next should_preempt() as TrialLinkError on the chief, and as RuntimeError
    naming it on the other ranks.
    """

    def __init__(self, link: Link, dist: DistributedContext, *, label: str,
                 steps: Callable[[], int], poll: bool, interval_s: float = 1.0) -> None:
        self._link = link
        self._label = label
        self._dist = dist
        self._steps = steps
        self._interval_s = interval_s
        self._action = Action.CONTINUE
        self._acknowledged = False
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

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """True once the master asked this trial to stop (pause, preemption or kill). With
        `auto_ack`, the first True is acknowledged (acknowledge_preemption_signal)."""
        answer: bool | str = False  # or, from a chief whose poller failed, the error's text
        if self._dist.rank == 0:
            answer = str(self._error) if self._error is not None else (
                self._action != Action.CONTINUE)
            if answer is True and auto_ack and not self._acknowledged:
                try:
                    self.acknowledge_preemption_signal()
                except TrialLinkError as e:
                    answer = str(e)
                    self._error = e
        if self._dist.size > 1:
            answer = self._dist.broadcast(answer)
        if isinstance(answer, str):
            if self._error is not None:
                raise TrialLinkError(self._label, self._error.call, self._error.code,
                                     self._error.details)
            raise RuntimeError(f"{self._label}: should_preempt: the chief failed: {answer}")
        return bool(answer)

    def acknowledge_preemption_signal(self) -> None:
        """Tells the master this trial is stopping with work left and expects to be resumed
        (Determined's call of the same name). The chief's; a no-op on other ranks. Raises
        TrialLinkError when the master refuses it."""
        if self._dist.rank != 0 or self._acknowledged:
            return
        self._link.acknowledge_preemption()
        self._acknowledged = True

    def close(self) -> None:
        """Ends the background thread (an RPC in flight is abandoned, not waited for)."""
        self._stop.set()
