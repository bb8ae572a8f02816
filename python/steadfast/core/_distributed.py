"""The ranks of a multi-slot trial meeting each other (Determined's DistributedContext).

Collectives go through TrialLink.Rendezvous: each call is a new round named ``core/<n>``,
where n counts this process's collective calls (0, 1, 2, ...), so ranks that call the same
collectives in the same order meet in the same rounds. The payload is ``pickle.dumps(obj)``.
They are for small control-plane objects (an operation, a decision, a file list), not tensors:
use torch.distributed for those.
"""

from __future__ import annotations

import pickle
import threading
from typing import Any, Optional

from ._link import Link

__all__ = ["Distributed"]


class Distributed:
    """This rank's place in the trial, and collectives over every rank.

    Every rank must make the same collective calls in the same order; they are not for use
    from several threads at once. On failure: a rank that does not arrive within the
    rendezvous timeout (SF_RENDEZVOUS_TIMEOUT_S, default 300 s) makes the call raise
    TrialLinkError (FAILED_PRECONDITION, naming the missing ranks) on the ranks that did; the
    master stops the trial. With one rank the collectives return at once, without the master.
    """

    def __init__(self, link: Link, *, rank: int = 0, size: int = 1, local_rank: int = 0,
                 local_size: int = 1, slot_ids: str = "", timeout_s: int = 300) -> None:
        if size < 1 or not 0 <= rank < size:
            raise ValueError(f"steadfast: rank {rank} is not in [0, {size})")
        self._link = link
        self.rank = rank
        self.size = size
        self.local_rank = local_rank
        self.local_size = local_size
        self._timeout_s = timeout_s
        self._count = 0
        self._lock = threading.Lock()
        slots = [s.strip() for s in slot_ids.split(",") if s.strip()]
        #: "nccl" when this task's slots are CUDA slots, else "gloo": the backend for
        #: torch.distributed.init_process_group.
        self.torch_backend = "nccl" if any(s.startswith("cuda") for s in slots) else "gloo"

    def get_rank(self) -> int:
        return self.rank

    def get_size(self) -> int:
        return self.size

    def get_local_rank(self) -> int:
        return self.local_rank

    def get_local_size(self) -> int:
        return self.local_size

    def _exchange(self, payload: bytes) -> list[bytes]:
        with self._lock:
            n = self._count
            self._count += 1
        if self.size == 1:
            return [payload]
        return self._link.rendezvous(f"core/{n}", self.size, payload, self._timeout_s)

    def named_round(self, name: str, payload: bytes) -> list[bytes]:
        """A rendezvous round outside the ``core/<n>`` count (e.g. "torch-env"): every rank's
        raw payload, by rank."""
        if self.size == 1:
            return [payload]
        return self._link.rendezvous(name, self.size, payload, self._timeout_s)

    def allgather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, as a list indexed by rank, on every rank."""
        return [pickle.loads(p) for p in self._exchange(pickle.dumps(obj))]

    def gather(self, obj: Any) -> Optional[list[Any]]:
        """Every rank's `obj`, indexed by rank, on the chief (rank 0); None on the others."""
        payloads = self._exchange(pickle.dumps(obj))
        return [pickle.loads(p) for p in payloads] if self.rank == 0 else None

    def broadcast(self, obj: Any) -> Any:
        """The chief's `obj` on every rank (the others' `obj` is not sent)."""
        payloads = self._exchange(pickle.dumps(obj) if self.rank == 0 else b"")
        return pickle.loads(payloads[0])

    def barrier(self) -> None:
        """Returns when every rank has arrived."""
        self._exchange(b"")
