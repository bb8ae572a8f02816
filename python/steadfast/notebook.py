"""A notebook on the cluster (`sf notebook start`, docs/tasks.md "Notebooks").

The master schedules `python3 -m steadfast.notebook --idle-timeout N` on a slot as a task of
kind NOTEBOOK. This runs Debian's Jupyter Notebook server for it:

- on a free port of the agent's host, with its base URL /proxy/TASK_ID/, so that every link and
  redirect it makes goes through the master's proxy (master/proxy/task_proxy.h);
- with its token set to the task's service token ($SF_SERVE_TOKEN), which only the master's
  proxy sends (`Authorization: token ...`): the user's master session is the only credential a
  user has, and a request that reaches the port without the proxy gets nothing;
- when the master gave the task a certificate (a master with the cluster CA), Jupyter listens on
  loopback only, behind a TLS front that takes only the master (steadfast._task_service), and
  the URL reported is https://;
- in the task's working directory (its context, if one was given), with the `steadfast` package
  importable (the agent puts it on PYTHONPATH), so a cell can use the Core API unmanaged;
- then it reports the URL to the master (TrialLink ReportEndpoint) once Jupyter answers, and
  stops Jupyter, exiting 0, once Jupyter's own `last_activity` (/api/status) is older than the
  idle timeout: the task ends STOPPED and its slot is free. SIGTERM (sf notebook kill) stops
  Jupyter too.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Optional

from ._task_service import free_port, host, master_link, task_number, tls_context, tls_front


def _status(base: str, token: str) -> Optional[dict]:
    request = urllib.request.Request(base + "api/status", headers={"Authorization": "token " + token})
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return json.loads(r.read().decode())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _idle_seconds(status: dict) -> float:
    last = datetime.datetime.fromisoformat(status["last_activity"].replace("Z", "+00:00"))
    return (datetime.datetime.now(datetime.timezone.utc) - last).total_seconds()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m steadfast.notebook")
    parser.add_argument("--idle-timeout", type=int, default=3600,
                        help="seconds without activity after which the notebook stops (default 3600)")
    args = parser.parse_args(argv)
    env = os.environ
    token = env.get("SF_SERVE_TOKEN", "")
    if not token:
        print("steadfast.notebook: no $SF_SERVE_TOKEN: run by `sf notebook start`, not by hand",
              file=sys.stderr)
        return 2
    task = task_number(env.get("SF_TASK_ID", ""), "steadfast.notebook")
    base_url = f"/proxy/{task}/"
    port = free_port()
    tls = tls_context()
    jupyter = subprocess.Popen([
        sys.executable, "-m", "notebook", "--no-browser", "--allow-root",
        f"--NotebookApp.ip={'127.0.0.1' if tls else '0.0.0.0'}", f"--NotebookApp.port={port}",
        "--NotebookApp.port_retries=0",
        f"--NotebookApp.base_url={base_url}", f"--NotebookApp.token={token}",
        "--NotebookApp.password=",
        # The master's proxy is the only way in, and it sends the token: the browser's Origin is
        # the master's, which Jupyter would otherwise refuse for its API and kernels' WebSockets.
        "--NotebookApp.allow_origin=*",
        # Behind the TLS front Jupyter listens on loopback, and would then refuse requests whose
        # Host is the agent's address (the one the master dials): the front admits the master only.
        "--NotebookApp.allow_remote_access=True",
        # Kernels talk to Jupyter over Unix sockets named after each kernel, not TCP ports: many
        # notebooks on one host picked the same free port now and then, and the kernel never
        # started (ZMQError: Address already in use; bench/proxy_load.sh found it).
        "--KernelManager.transport=ipc",
        f"--NotebookApp.notebook_dir={os.getcwd()}",
    ])

    def stop(signum: int, _frame: object) -> None:
        jupyter.terminate()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    local = f"http://127.0.0.1:{port}{base_url}"
    deadline = time.monotonic() + 120
    while _status(local, token) is None:
        if jupyter.poll() is not None:
            print(f"steadfast.notebook: Jupyter exited with status {jupyter.returncode} before it answered",
                  file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            print("steadfast.notebook: Jupyter did not answer within 120 s", file=sys.stderr)
            jupyter.terminate()
            return 1
        time.sleep(0.2)

    link = master_link(f"steadfast: notebook {task}")
    url = (f"https://{host()}:{tls_front(tls, port, 'steadfast.notebook')}{base_url}" if tls
           else f"http://{host()}:{port}{base_url}")
    link.report_endpoint(url)
    print(f"steadfast.notebook: Jupyter answers at {url}, reached through the master at {base_url}; "
          f"stops after {args.idle_timeout} s without activity", flush=True)

    poll = max(1.0, min(30.0, args.idle_timeout / 5))
    while jupyter.poll() is None:
        time.sleep(poll)
        status = _status(local, token)
        if status is not None and _idle_seconds(status) > args.idle_timeout:
            print(f"steadfast.notebook: no activity for {args.idle_timeout} s: stopping", flush=True)
            jupyter.terminate()
            try:
                jupyter.wait(timeout=30)
            except subprocess.TimeoutExpired:
                jupyter.kill()
            link.close()
            return 0
    link.close()
    # Ended by a signal (sf notebook kill) or on its own.
    return 0 if jupyter.returncode in (0, -signal.SIGTERM) else jupyter.returncode


if __name__ == "__main__":
    sys.exit(main())
