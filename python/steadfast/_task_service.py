"""What a task that serves something needs from the agent's environment (steadfast.notebook,
steadfast.shell): its task's id, a port, the address the master reaches it at, a TrialLink
client to report its URL with (the master's proxy then forwards /proxy/TASK_ID/... there), and,
when the master gave the task a certificate, the TLS front that is the only way in from the
network (docs/security.md, "The hop to tasks")."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import ssl
import sys
import tempfile
import threading
from typing import Any, Optional

MASTER_IDENTITY = "urn:steadfast:master"


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


def tls_context() -> Optional[ssl.SSLContext]:
    """The server side of the hop from the master's proxy, from the certificate the master issued
    this task ($SF_TASK_TLS_CERT, its key $SF_TASK_TLS_KEY and the cluster CA $SF_TASK_TLS_CA, PEM
    text): TLS 1.2 or newer, and a client must present a certificate from that CA fit for client
    use (which only the master's is). None when the master gave none (no CA configured). The key
    leaves the environment here, so the programs the task starts (Jupyter's kernels, the
    terminals' shells) never see it."""
    env = os.environ
    cert, key, ca = env.get("SF_TASK_TLS_CERT"), env.pop("SF_TASK_TLS_KEY", None), env.get("SF_TASK_TLS_CA")
    if not (cert and key and ca):
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_REQUIRED
    # load_cert_chain reads files: a private directory, removed once they are read.
    with tempfile.TemporaryDirectory(prefix="sf-task-tls-") as private:
        os.chmod(private, 0o700)
        paths = []
        for name, text in (("cert.pem", cert), ("key.pem", key)):
            path = os.path.join(private, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
            paths.append(path)
        context.load_cert_chain(paths[0], paths[1])
    return context


def names_master(peer_certificate: Optional[dict]) -> bool:
    """Whether a verified client certificate names the master (its URI subject alternative name)."""
    names = (peer_certificate or {}).get("subjectAltName", ())
    return ("URI", MASTER_IDENTITY) in names


def tls_front(context: ssl.SSLContext, local_port: int, program: str) -> int:
    """Listens on every interface with TLS (`context`, tls_context()) and carries each connection
    that proves the master's identity to 127.0.0.1:local_port and back, byte for byte (HTTP and
    WebSockets alike), on a thread of its own. The service behind it listens on loopback only.
    Returns the port the master is to dial."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", 0))
    listener.listen(128)
    port = int(listener.getsockname()[1])

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError, OSError):
            pass
        finally:
            writer.close()

    async def carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not names_master(writer.get_extra_info("peercert")):
            print(f"{program}: refused a TLS client that is not the master", file=sys.stderr, flush=True)
            writer.close()
            return
        try:
            local_reader, local_writer = await asyncio.open_connection("127.0.0.1", local_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pump(reader, local_writer), pump(local_reader, writer))

    async def serve() -> None:
        server = await asyncio.start_server(carry, sock=listener, ssl=context, ssl_handshake_timeout=30)
        async with server:
            await server.serve_forever()

    threading.Thread(target=lambda: asyncio.run(serve()), name="tls-front", daemon=True).start()
    return port
