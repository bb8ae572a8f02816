"""What a task that serves something needs from the agent's environment (steadfast.notebook,
steadfast.shell): its task's id, a port, the address the master reaches it at, and a TrialLink
client to report its URL with (the master's proxy then forwards /proxy/TASK_ID/... there)."""

from __future__ import annotations

import os
import re
import socket
from typing import Any


def task_number(task_id: str, program: str) -> int:
    """The task's id in "task7-r0-a1.0" (its allocation's rank): 7."""
    m = re.match(r"task(\d+)-", task_id)
    if not m:
        raise SystemExit(f"{program}: $SF_TASK_ID {task_id!r} names no task (not run by a master?)")
    return int(m.group(1))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def host() -> str:
    """How the master reaches this host: $SF_NOTEBOOK_HOST, else this host's address on the
    route to the master (no name resolution needed), else the host's name."""
    explicit = os.environ.get("SF_NOTEBOOK_HOST")
    if explicit:
        return explicit
    master = os.environ.get("SF_MASTER_ADDRESS", "")
    name, _, port = master.rpartition(":")
    try:
        family, _, _, _, address = socket.getaddrinfo(name.strip("[]"), int(port), type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(address)  # UDP: no packet is sent, only the route is chosen
            own = s.getsockname()[0]
        return f"[{own}]" if family == socket.AF_INET6 else own
    except (OSError, ValueError, IndexError):
        return socket.gethostname()


def master_link(label: str) -> Any:
    """A TrialLink client speaking for this task's rank (its SF_TASK_TOKEN)."""
    from .core._context import _read_ca, _remote_link_class  # grpc only where a master is
    env = os.environ
    ca_file = env.get("SF_MASTER_CA_FILE", "")
    root = _read_ca(ca_file, "SF_MASTER_CA_FILE") if ca_file else None
    return _remote_link_class()(
        address=env["SF_MASTER_ADDRESS"], trial_id=0, rank=int(env.get("SF_RANK", "0")),
        task_id=env["SF_TASK_ID"], restart=int(env.get("SF_RESTART", "0")),
        token=env.get("SF_TASK_TOKEN", ""), label=label, tls=root is not None, root_certificates=root)
