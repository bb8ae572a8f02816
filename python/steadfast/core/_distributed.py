"""The ranks of a multi-slot trial meeting each other (Determined's DistributedContext).

Collectives go through TrialLink.Rendezvous: each call is a new round named ``core/<n>``,
where n counts this process's collective calls (0, 1, 2, ...), so ranks that call the same
collectives in the same order meet in the same rounds. The payload is ``pickle.dumps(obj)``.
They are for small control-plane objects (an operation, a decision, a file list), not tensors:
use torch.distributed for those.
"""

from __future__ import annotations

import pickle
import socket
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
                 local_size: int = 1, slot_ids: str = "", timeout_s: int = 300,
                 host: str = "") -> None:
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
        #: Where this rank runs (its agent; the host name outside a cluster).
        self.host = host or socket.gethostname()
        # Each rank's host, by rank (learn_hosts()); until then only this rank's is known.
        self._hosts: list[str] = [self.host] if size == 1 else []

    def learn_hosts(self) -> None:
        """Learns every rank's host in one rendezvous round (init() calls it for a multi-rank
        trial, on every rank), for cross_rank, cross_size and the *_local collectives."""
        if not self._hosts:
            self._hosts = [p.decode() for p in self.named_round("hosts", self.host.encode())]

    def _host_list(self) -> list[str]:
        if not self._hosts:
            raise RuntimeError("steadfast: the ranks' hosts are not known yet (Distributed.learn_hosts)")
        return self._hosts

    def _local_ranks(self) -> list[int]:
        hosts = self._host_list()
        return [r for r, h in enumerate(hosts) if h == hosts[self.rank]]

    @property
    def cross_size(self) -> int:
        """How many hosts (agents) the trial's ranks run on."""
        return len(dict.fromkeys(self._host_list()))

    @property
    def cross_rank(self) -> int:
        """This rank's host among them, numbered by the lowest rank on each (0 for rank 0's)."""
        return list(dict.fromkeys(self._host_list())).index(self.host)

    def get_cross_rank(self) -> int:
        return self.cross_rank

    def get_cross_size(self) -> int:
        return self.cross_size

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

    # The *_local collectives (Determined's): every rank of the trial calls them, as the others;
    # each gets what the ranks on its own host sent, in rank order.
    def allgather_local(self, obj: Any) -> list[Any]:
        """The `obj` of every rank on this rank's host, in rank order."""
        every = self.allgather(obj)
        return [every[r] for r in self._local_ranks()]

    def gather_local(self, obj: Any) -> Optional[list[Any]]:
        """As allgather_local, on the host's first rank (its local chief); None on the others."""
        mine = self._local_ranks()
        every = self.allgather(obj)
        return [every[r] for r in mine] if mine[0] == self.rank else None

    def broadcast_local(self, obj: Any) -> Any:
        """The `obj` of this host's first rank (its local chief), on every rank of the host."""
        mine = self._local_ranks()
        every = self.allgather(obj if mine[0] == self.rank else None)
        return every[mine[0]]
