"""The environment torch.distributed's ``env://`` rendezvous reads, for scripts started
without a launcher (the agent starts one process per rank itself)."""

from __future__ import annotations

import os
import socket

from ._distributed import Distributed

__all__ = ["address_towards", "free_port", "set_torch_env", "TORCH_ENV_ROUND"]

TORCH_ENV_ROUND = "torch-env"


def _split_host_port(address: str) -> tuple[str, int]:
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = address.rpartition(":")
        if not host:
            host, port = address, ""
    return host, int(port) if port.isdigit() else 1


def address_towards(master_address: str) -> str:
    """The local IP address of the interface that reaches `master_address` ("host:port"):
    a UDP socket connect()ed there (no packet is sent), then getsockname. Falls back to the
    host name's address, then 127.0.0.1."""
    host, port = _split_host_port(master_address)
    try:
        for family, _, _, _, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM):
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect(sockaddr)
                return s.getsockname()[0]
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def free_port(host: str = "") -> int:
    """A TCP port free now on `host` (bind port 0, read it, close)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def set_torch_env(dist: Distributed, *, master_address: str, overwrite: bool) -> None:
    """Sets MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE.

    With several ranks, the chief picks its address towards the master and a free port and
    sends "addr:port" to every rank in the rendezvous round "torch-env" (every rank must call
    this, as init() does); with one rank: 127.0.0.1 and a free port, no rendezvous.
    `overwrite`: False keeps variables already set (local mode, under a launcher of the
    user's own). Raises TrialLinkError when the round fails.
    """
    if dist.size > 1:
        mine = b""
        if dist.rank == 0:
            addr = address_towards(master_address)
            mine = f"{addr}:{free_port(addr)}".encode()
        chief = dist.named_round(TORCH_ENV_ROUND, mine)[0].decode()
        addr, _, port = chief.rpartition(":")
    else:
        addr, port = "127.0.0.1", str(free_port("127.0.0.1"))
    values = {
        "MASTER_ADDR": addr,
        "MASTER_PORT": port,
        "RANK": str(dist.rank),
        "WORLD_SIZE": str(dist.size),
        "LOCAL_RANK": str(dist.local_rank),
        "LOCAL_WORLD_SIZE": str(dist.local_size),
    }
    for k, v in values.items():
        if overwrite or not os.environ.get(k):
            os.environ[k] = v
