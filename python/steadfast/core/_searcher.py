"""The searcher's operations for this trial (Determined's SearcherContext)."""

from __future__ import annotations

import math
from typing import Any, Iterator, Optional

from ._distributed import DistributedContext
from ._link import Link, Operation
from ._train import Train, check_steps, to_number

__all__ = ["Searcher", "SearcherOperation"]


class SearcherOperation:
    """One operation: train until the trial's total reaches `length` (in `unit`: "batches" or
    "epochs", the experiment's searcher.max_length unit), validate, then `report_completed`.

    On failure: a searcher metric that is not a finite number (int, float, or a numpy/torch
    scalar) raises ValueError naming the trial, and completes nothing; a master that refuses the completion raises TrialLinkError.
    On ranks other than the chief, report_progress and report_completed do nothing.
    """

    def __init__(self, searcher: "Searcher", op: Operation) -> None:
        self._searcher = searcher
        self._op = op
        self._completed = False

    @property
    def length(self) -> int:
        return self._op.target_length

    @property
    def unit(self) -> str:
        return self._op.unit

    @property
    def validate_after(self) -> bool:
        return self._op.validate_after

    def __repr__(self) -> str:
        return f"SearcherOperation(length={self.length}, unit={self.unit!r})"

    def report_progress(self, length: Any) -> None:
        """How far training has got towards `length` (display only; cheap, rate-limited)."""
        s = self._searcher
        n = check_steps(f"{s._label}: report_progress", length)
        if s._chief:
            s._train.report_progress(n)

    def report_completed(self, searcher_metric: Any) -> None:
        """Tells the searcher the operation is done, with the validation metric it ranks by.

        Sends the metrics reported so far first (flush), so the master has the validation
        behind the metric before the searcher acts on it.
        """
        s = self._searcher
        where = f"{s._label}: report_completed"
        try:
            metric = float(to_number(f"{where}: searcher_metric", searcher_metric))
        except TypeError as e:
            raise ValueError(str(e)) from None
        if not math.isfinite(metric):
            raise ValueError(f"{where}: searcher_metric is {metric}, not a finite number")
        if self._completed:
            raise RuntimeError(f"{where}: the operation {self!r} is completed already")
        if s._chief:
            s._train.flush()
            s._link.complete_operation(self._op, metric)
        self._completed = True


class Searcher:
    """The searcher's operations for this trial.

    On failure: a master that stays unreachable past the retry window, or refuses the request,
    makes operations() raise TrialLinkError; an operation left without report_completed (on
    the chief) makes it raise RuntimeError when the next one is asked for.
    """

    def __init__(self, link: Link, dist: DistributedContext, train: Train, *, label: str,
                 only_operation: Optional[Operation] = None) -> None:
        self._link = link
        self._dist = dist
        self._train = train
        self._label = label
        self._chief = dist.rank == 0
        self._only = only_operation

    def operations(self) -> Iterator[SearcherOperation]:
        """The operations, in order; the iteration ends when the searcher has no more.

        The chief asks the master (GetNextOperation, which may take up to 20 s to answer); with
        several ranks it sends each operation, or the end, to the others, so every rank
        iterates the same operations. In local and unmanaged mode there is exactly one: the
        length of searcher.max_length.
        """
        first = True
        while True:
            op: Optional[Operation] = None
            if self._chief:
                if self._only is not None:
                    op = self._only if first else None
                else:
                    op = self._link.next_operation()
            if self._dist.size > 1:
                op = self._dist.broadcast(op)
            first = False
            if op is None:
                return
            current = SearcherOperation(self, op)
            yield current
            if self._chief and not current._completed:
                raise RuntimeError(
                    f"{self._label}: searcher operation {current!r} was not report_completed "
                    f"before the next operation was asked for")
