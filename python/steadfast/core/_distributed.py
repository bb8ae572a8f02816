"""The workers of a trial meeting each other (Determined's DistributedContext).

Two kinds, with one interface (rank, size, local_rank, local_size, cross_rank, cross_size, host,
torch_backend; allgather, gather, broadcast, barrier and their *_local forms):

- `DistributedContext`: the script's own, over collectives it already has — a torch.distributed
  process group (from_torch_distributed, from_deepspeed), Horovod (from_horovod), or any
  allgather of picklable objects (mpi4py's ``comm.allgather``) — for
  ``init(distributed=...)`` when a launcher of the user's own (torchrun, Horovod, DeepSpeed,
  mpirun) starts the workers.
- `Distributed`: the one init() builds otherwise, for the ranks the agents start. Its
  collectives go through TrialLink.Rendezvous: each call is a new round named ``core/<n>``,
  where n counts this process's collective calls (0, 1, 2, ...), so ranks that call the same
  collectives in the same order meet in the same rounds. The payload is ``pickle.dumps(obj)``.

Both carry small control-plane objects (an operation, a decision, a file list), not tensors:
use torch.distributed for those.
"""

from __future__ import annotations

import os
import pickle
import socket
import threading
from typing import Any, Callable, Optional

from ._link import Link

__all__ = ["DistributedContext", "Distributed"]

_WHERE = "steadfast: DistributedContext"


def _check_int(where: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: {name} is {value!r} ({type(value).__name__}), not an int")
    return value


def _check_place(where: str, rank: Any, size: Any) -> None:
    _check_int(where, "rank", rank)
    _check_int(where, "size", size)
    if size < 1:
        raise ValueError(f"{where}: size is {size}; a trial has at least 1 worker")
    if not 0 <= rank < size:
        raise ValueError(f"{where}: rank {rank} is not in [0, {size})")


def _backend_for(slot_ids: str) -> str:
    slots = [s.strip() for s in slot_ids.split(",") if s.strip()]
    return "nccl" if any(s.startswith("cuda") for s in slots) else "gloo"


def _env_local(group_is_world: bool) -> tuple[Optional[int], Optional[int]]:
    """torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE, when both are set and describe the world."""
    raw_rank = os.environ.get("LOCAL_RANK", "")
    raw_size = os.environ.get("LOCAL_WORLD_SIZE", "")
    if not group_is_world or not raw_rank or not raw_size:
        return None, None
    try:
        return int(raw_rank), int(raw_size)
    except ValueError:
        raise ValueError(f"{_WHERE}.from_torch_distributed: $LOCAL_RANK {raw_rank!r} and "
                         f"$LOCAL_WORLD_SIZE {raw_size!r} must be integers") from None


class DistributedContext:
    """This worker's place among the trial's workers, and collectives over all of them.

    The constructor is the generic form, for any launcher: `allgather(obj)` must return every
    worker's `obj`, as a list indexed by rank (Horovod's ``hvd.allgather_object``, mpi4py's
    ``comm.allgather``); `broadcast(obj)`, optional, must return rank 0's `obj` on every worker
    (``hvd.broadcast_object``, ``comm.bcast``); without it broadcast is built on allgather.
    `local_rank` and `local_size` (both or neither) are this worker's index among the workers
    on its host and their number; `host` names the host (default: the host name), and is what
    cross_rank, cross_size and the *_local collectives group by.

    Constructing one is a collective (one allgather of every worker's host and local numbers):
    every worker constructs it at the same point. Every worker must then make the same
    collective calls in the same order; they are not for use from several threads at once.

    On failure: bad arguments (size < 1, a rank outside [0, size), an allgather that is not
    callable, a local_rank without local_size) raise ValueError naming them, on the worker that
    gave them, before any collective; local numbers that do not fit the hosts (two workers on
    one host both local_rank 0, a local_size that is not the number of workers there) raise
    ValueError on every worker. What the given allgather or broadcast raises (a timeout, a peer
    that died) propagates; an allgather whose answer is not a list of `size` objects raises
    RuntimeError. With one worker the collectives return at once, without calling them.
    """

    def __init__(self, *, rank: int, size: int, allgather: Callable[[Any], list[Any]],
                 local_rank: Optional[int] = None, local_size: Optional[int] = None,
                 broadcast: Optional[Callable[[Any], Any]] = None,
                 host: Optional[str] = None) -> None:
        _check_place(_WHERE, rank, size)
        if not callable(allgather):
            raise ValueError(f"{_WHERE}: allgather is {type(allgather).__name__}, not a function "
                             f"of an object returning every worker's, by rank")
        if broadcast is not None and not callable(broadcast):
            raise ValueError(f"{_WHERE}: broadcast is {type(broadcast).__name__}, not a function "
                             f"of an object returning rank 0's")
        if (local_rank is None) != (local_size is None):
            raise ValueError(f"{_WHERE}: give local_rank and local_size together (got "
                             f"local_rank={local_rank!r}, local_size={local_size!r}), or neither "
                             f"to count them from the workers' hosts")
        if local_rank is not None:
            _check_int(_WHERE, "local_rank", local_rank)
            _check_int(_WHERE, "local_size", local_size)
        if host is not None and (not isinstance(host, str) or not host):
            raise ValueError(f"{_WHERE}: host is {host!r}, not a non-empty string")
        self._set_place(rank=rank, size=size, host=host or socket.gethostname(),
                        torch_backend=_backend_for(os.environ.get("SF_SLOT_IDS", "")))
        self._allgather_fn = allgather
        self._broadcast_fn = broadcast
        # Every worker checks every worker's local numbers, so that all raise alike.
        places = self.allgather((self.host, local_rank, local_size))
        self._hosts = [p[0] for p in places]
        for worker, (_, given_rank, given_size) in enumerate(places):
            mine = self._ranks_on(worker)
            if given_rank is None or (given_rank, given_size) == (mine.index(worker), len(mine)):
                continue
            raise ValueError(
                f"{_WHERE}: worker {worker} has local_rank {given_rank} of local_size "
                f"{given_size}, but the workers on its host {self._hosts[worker]!r} are {mine}: "
                f"pass each worker's host (host=...) to group them otherwise")
        here = self._ranks_on(rank)
        self.local_rank = here.index(rank)
        self.local_size = len(here)

    def _set_place(self, *, rank: int, size: int, host: str, torch_backend: str) -> None:
        self.rank = rank
        self.size = size
        #: "nccl" or "gloo": the backend for torch.distributed.init_process_group (the process
        #: group's own for from_torch_distributed; else "nccl" when this task's slots are CUDA
        #: slots).
        self.torch_backend = torch_backend
        #: Where this worker runs (its agent in a task without a context of the script's own;
        #: else the host name, or the constructor's `host`).
        self.host = host
        # Each worker's host, by rank; until known (Distributed.learn_hosts) only this one's.
        self._hosts: list[str] = [host] if size == 1 else []

    @classmethod
    def from_torch_distributed(cls, group: Any = None) -> "DistributedContext":
        """A context over torch.distributed's default process group, or `group`, which the
        script has initialised already (``init_process_group``, e.g. under torchrun).

        rank and size are the group's; local_rank and local_size are $LOCAL_RANK and
        $LOCAL_WORLD_SIZE (torchrun's) for the default group, else counted from the hosts;
        torch_backend is the group's backend. The collectives are ``all_gather_object`` and
        ``broadcast_object_list`` over the group (gloo and nccl; on nccl the objects pass
        through the current CUDA device: call ``torch.cuda.set_device`` first, as DDP needs).
        A collective (see the class): every worker of the group calls it at the same point.
        RuntimeError when torch.distributed is not initialised; ValueError when this process
        is not in `group`.
        """
        import torch.distributed as tdist

        where = f"{_WHERE}.from_torch_distributed"
        if not tdist.is_available() or not tdist.is_initialized():
            raise RuntimeError(f"{where}: torch.distributed is not initialised: call "
                               f"torch.distributed.init_process_group first")
        rank = tdist.get_rank(group)
        size = tdist.get_world_size(group)
        if rank < 0:
            raise ValueError(f"{where}: this process (global rank {tdist.get_rank()}) is not in "
                             f"the group")
        # broadcast_object_list's source is a global rank: the group's rank 0 in the world.
        source = 0 if group is None else tdist.get_global_rank(group, 0)

        def allgather(obj: Any) -> list[Any]:
            every: list[Any] = [None] * size
            tdist.all_gather_object(every, obj, group=group)
            return every

        def broadcast(obj: Any) -> Any:
            box = [obj]
            tdist.broadcast_object_list(box, src=source, group=group)
            return box[0]

        local_rank, local_size = _env_local(group is None)
        ctx = cls(rank=rank, size=size, allgather=allgather, broadcast=broadcast,
                  local_rank=local_rank, local_size=local_size)
        ctx.torch_backend = str(tdist.get_backend(group))
        return ctx

    @classmethod
    def from_deepspeed(cls) -> "DistributedContext":
        """DeepSpeed's workers (after ``deepspeed.init_distributed()``): DeepSpeed runs on
        torch.distributed's default process group, so this is from_torch_distributed()."""
        return cls.from_torch_distributed()

    @classmethod
    def from_horovod(cls, hvd: Any) -> "DistributedContext":
        """Horovod's workers (after ``hvd.init()``; `hvd` is e.g. ``horovod.torch``): its rank,
        size, local rank and size, and ``hvd.allgather_object`` / ``hvd.broadcast_object`` as
        the collectives. A collective, as the constructor."""
        return cls(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(),
                   local_size=hvd.local_size(), allgather=hvd.allgather_object,
                   broadcast=hvd.broadcast_object)

    def _host_list(self) -> list[str]:
        if not self._hosts:
            raise RuntimeError("steadfast: the ranks' hosts are not known yet "
                               "(Distributed.learn_hosts)")
        return self._hosts

    def _ranks_on(self, rank: int) -> list[int]:
        """The workers on `rank`'s host, in rank order."""
        hosts = self._host_list()
        return [r for r, h in enumerate(hosts) if h == hosts[rank]]

    @property
    def cross_size(self) -> int:
        """How many hosts the trial's workers run on."""
        return len(dict.fromkeys(self._host_list()))

    @property
    def cross_rank(self) -> int:
        """This worker's host among them, numbered by the lowest rank on each (0 for rank
        0's)."""
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

    def _gather_objects(self, obj: Any) -> list[Any]:
        """Every worker's `obj`, by rank: the one collective the others are built on."""
        if self.size == 1:
            return [obj]
        every = self._allgather_fn(obj)
        if not isinstance(every, (list, tuple)) or len(every) != self.size:
            shown = f"{len(every)} objects" if isinstance(every, (list, tuple)) else \
                type(every).__name__
            raise RuntimeError(f"{_WHERE}: the allgather returned {shown}, not a list of "
                               f"{self.size} (one per worker, by rank)")
        return list(every)

    def allgather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, as a list indexed by rank, on every rank."""
        return self._gather_objects(obj)

    def gather(self, obj: Any) -> Optional[list[Any]]:
        """Every rank's `obj`, indexed by rank, on the chief (rank 0); None on the others."""
        every = self._gather_objects(obj)
        return every if self.rank == 0 else None

    def broadcast(self, obj: Any) -> Any:
        """The chief's `obj` on every rank (the others' `obj` is not used)."""
        if self.size == 1:
            return obj
        if self._broadcast_fn is not None:
            return self._broadcast_fn(obj)
        return self._gather_objects(obj if self.rank == 0 else None)[0]

    def barrier(self) -> None:
        """Returns when every rank has arrived."""
        self._gather_objects(None)

    # The *_local collectives (Determined's): every rank of the trial calls them, as the others;
    # each gets what the ranks on its own host sent, in rank order.
    def allgather_local(self, obj: Any) -> list[Any]:
        """The `obj` of every rank on this rank's host, in rank order."""
        every = self.allgather(obj)
        return [every[r] for r in self._ranks_on(self.rank)]

    def gather_local(self, obj: Any) -> Optional[list[Any]]:
        """As allgather_local, on the host's first rank (its local chief); None on the others."""
        mine = self._ranks_on(self.rank)
        every = self.allgather(obj)
        return [every[r] for r in mine] if mine[0] == self.rank else None

    def broadcast_local(self, obj: Any) -> Any:
        """The `obj` of this host's first rank (its local chief), on every rank of the host."""
        mine = self._ranks_on(self.rank)
        every = self.allgather(obj if mine[0] == self.rank else None)
        return every[mine[0]]


class Distributed(DistributedContext):
    """The context init() builds for the ranks the agents start (one process per slot), with
    collectives through the master (see the module docstring).

    Same contract as DistributedContext. On failure: a rank that does not arrive within the
    rendezvous timeout (SF_RENDEZVOUS_TIMEOUT_S, default 300 s) makes the call raise
    TrialLinkError (FAILED_PRECONDITION, naming the missing ranks) on the ranks that did; the
    master stops the trial. With one rank the collectives return at once, without the master.
    """

    def __init__(self, link: Link, *, rank: int = 0, size: int = 1, local_rank: int = 0,
                 local_size: int = 1, slot_ids: str = "", timeout_s: int = 300,
                 host: str = "") -> None:
        # Not DistributedContext.__init__: nothing meets here; init() learns the hosts with
        # learn_hosts(), a named rendezvous round.
        _check_place("steadfast", rank, size)
        self._set_place(rank=rank, size=size, host=host or socket.gethostname(),
                        torch_backend=_backend_for(slot_ids))
        self.local_rank = local_rank
        self.local_size = local_size
        self._link = link
        self._timeout_s = timeout_s
        self._count = 0
        self._lock = threading.Lock()

    def learn_hosts(self) -> None:
        """Learns every rank's host in one rendezvous round (init() calls it for a multi-rank
        trial, on every rank), for cross_rank, cross_size and the *_local collectives."""
        if not self._hosts:
            self._hosts = [p.decode() for p in self.named_round("hosts", self.host.encode())]

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

    def _gather_objects(self, obj: Any) -> list[Any]:
        return [pickle.loads(p) for p in self._exchange(pickle.dumps(obj))]

    def broadcast(self, obj: Any) -> Any:
        """The chief's `obj` on every rank (the others' `obj` is not sent)."""
        payloads = self._exchange(pickle.dumps(obj) if self.rank == 0 else b"")
        return pickle.loads(payloads[0])
