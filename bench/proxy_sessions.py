#!/usr/bin/python3
"""Interactive sessions held open through the master's proxy, for bench/proxy_load.sh.

    proxy_sessions.py run --master URL --notebooks N --stats FILE [--cell-interval S] [--tty]
    proxy_sessions.py window BEFORE.json AFTER.json

`run` starts N notebooks and one shell on the cluster (POST /api/v1/notebooks, /api/v1/shells),
waits until each answers through the proxy, then holds, until SIGTERM:

- one Jupyter kernel per notebook (POST /proxy/ID/api/kernels), its channel WebSocket
  (/proxy/ID/api/kernels/KID/channels) open, running `print(1)` every S seconds (default 2) and
  timing each round trip: execute_request sent -> the "1\n" stream and the idle status for it
  came back (the message format of tests/e2e/interactive_test.cc RunCell);
- from SIGUSR1 on, one terminal on the shell (/proxy/ID/terminal?tty=0: bash on a pipe; --tty: a
  pseudo-terminal) running `yes` forever (`while :; do yes flood...; done`), whose output is read
  as fast as it comes: a client draining a shell that prints continuously, not one that stops
  reading.

A WebSocket that closes while we hold it counts as dropped and is opened again a second later.
Every 0.25 s the counters (cumulative) go to FILE (written whole, then renamed): shell bytes,
kernel round trips that succeeded and failed with each one's time and duration, drops, "ready"
once every kernel answered once and "flooding" once the shell printed. On SIGTERM it closes
the sessions, kills the tasks (POST /api/v1/tasks/ID/kill), writes FILE once more and prints a
summary.

`window` prints what happened between two copies of FILE: shell bytes/s through the proxy,
kernel round trips (succeeded, failed, p50/p99/max in ms), drops. Figures only; it asserts
nothing. Needs /usr/bin/python3 with Debian's python3-tornado; no authentication (a cluster
started with --no-auth).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from typing import Any, Optional

SHELL_FLOOD = b"while :; do yes 'flood flood flood flood flood flood flood flood'; done\n"


class Stats:
    def __init__(self) -> None:
        self.started = time.time()
        self.shell_bytes = 0
        self.round_trips: list[tuple[float, float]] = []  # (time it ended, seconds), succeeded
        self.failed: list[tuple[float, str]] = []  # (time, why)
        self.dropped: list[tuple[float, str]] = []  # (time, which session and why)
        self.errors: list[str] = []  # unexpected HTTP answers; kernels Jupyter lost, replaced
        self.ready = False  # every kernel answered once
        self.flooding = False  # the shell printed (after SIGUSR1)
        self.notebooks: list[int] = []
        self.shell: Optional[int] = None

    def write(self, path: str) -> None:
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"time": time.time(), "ready": self.ready, "flooding": self.flooding,
                       "shell_bytes": self.shell_bytes,
                       "round_trips": self.round_trips, "failed": self.failed,
                       "dropped": self.dropped, "errors": self.errors,
                       "notebooks": self.notebooks, "shell": self.shell}, f)
        os.replace(tmp, path)


async def http(master: str, method: str, path: str, body: Optional[dict] = None) -> tuple[int, Any]:
    from tornado.httpclient import AsyncHTTPClient, HTTPRequest
    request = HTTPRequest(master + path, method=method, request_timeout=60,
                          body=None if body is None else json.dumps(body),
                          headers={"Content-Type": "application/json"} if body is not None else None,
                          allow_nonstandard_methods=True)
    response = await AsyncHTTPClient().fetch(request, raise_error=False)
    try:
        parsed = json.loads(response.body or b"null")
    except ValueError:
        parsed = (response.body or b"")[:200].decode(errors="replace")
    return response.code, parsed


async def create_task(master: str, kind: str, stats: Stats) -> int:
    code, body = await http(master, "POST", f"/api/v1/{kind}", {"idleTimeoutSeconds": 3600})
    if code != 200:
        raise RuntimeError(f"POST /api/v1/{kind}: {code} {body}")
    return int(body["task"]["id"])


async def wait_answers(master: str, path: str, stats: Stats, deadline: float) -> None:
    last = None
    while time.monotonic() < deadline:
        code, body = await http(master, "GET", path)
        if code == 200:
            return
        last = (code, body)
        await asyncio.sleep(1)
    raise RuntimeError(f"GET {path} did not answer 200 in time (last: {last})")


def named(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def ws_url(master: str, path: str) -> str:
    return "ws" + master[len("http"):] + path


async def connect(master: str, path: str):
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect
    return await websocket_connect(HTTPRequest(ws_url(master, path), connect_timeout=30,
                                               request_timeout=60),
                                   max_message_size=64 << 20)


def execute_request(msg_id: str) -> str:
    return json.dumps({
        "header": {"msg_id": msg_id, "username": "bench", "session": "bench-session",
                   "msg_type": "execute_request", "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": "print(1)", "silent": False, "store_history": False,
                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}})


async def kernel_session(master: str, notebook: int, stats: Stats, interval: float,
                         stop: asyncio.Event, first: asyncio.Future) -> None:
    kernel = ""
    n = 0
    while not stop.is_set():
        if not kernel:
            code, body = await http(master, "POST", f"/proxy/{notebook}/api/kernels", {"name": "python3"})
            if code not in (200, 201):
                stats.errors.append(f"notebook {notebook}: POST api/kernels: {code} {body}")
                await asyncio.sleep(1)
                continue
            kernel = body["id"]
        path = f"/proxy/{notebook}/api/kernels/{kernel}/channels"
        try:
            ws = await connect(master, path)
        except Exception as e:  # noqa: BLE001 - counted, then tried again
            stats.dropped.append((time.time(), f"notebook {notebook}: connect: {named(e)}"))
            if getattr(e, "code", None) == 404:  # Jupyter no longer has the kernel: a new one
                stats.errors.append(f"notebook {notebook}: kernel {kernel} gone (404): a new one")
                kernel = ""
            await asyncio.sleep(1)
            continue
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                n += 1
                msg_id = f"bench-{notebook}-{n}"
                t0 = time.monotonic()
                ws.write_message(execute_request(msg_id))
                printed, idle = "", False
                timeout = 120 if not first.done() else 30  # the kernel's first cell starts it
                end = t0 + timeout
                while not idle and not stop.is_set():
                    reading = asyncio.ensure_future(ws.read_message())
                    done, _ = await asyncio.wait({reading, stopping}, timeout=max(0.0, end - time.monotonic()),
                                                 return_when=asyncio.FIRST_COMPLETED)
                    if reading not in done:
                        reading.cancel()
                        break
                    raw = reading.result()
                    if raw is None:
                        raise ConnectionError(f"closed ({ws.close_code} {ws.close_reason})")
                    msg = json.loads(raw)
                    if msg.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    kind = msg.get("msg_type")
                    if kind == "stream":
                        printed += msg["content"].get("text", "")
                    elif kind == "status" and msg["content"].get("execution_state") == "idle":
                        idle = True
                if stop.is_set():
                    break
                if idle and printed == "1\n":
                    stats.round_trips.append((time.time(), time.monotonic() - t0))
                    if not first.done():
                        first.set_result(None)
                else:
                    stats.failed.append((time.time(), f"notebook {notebook}: idle={idle} printed={printed!r}"))
                    # Jupyter keeps a dead or deleted kernel's channel open: open it again (a
                    # kernel it no longer has answers 404 and is replaced above).
                    raise ConnectionError(f"no answer in {timeout} s: the channel is opened again")
                try:
                    await asyncio.wait_for(stop.wait(), max(0.0, t0 + interval - time.monotonic()))
                except asyncio.TimeoutError:
                    pass
        except Exception as e:  # noqa: BLE001 - counted, then opened again
            if not stop.is_set():
                stats.dropped.append((time.time(), f"notebook {notebook}: {named(e)}"))
                await asyncio.sleep(1)
        finally:
            stopping.cancel()
            ws.close()


async def shell_session(master: str, shell: int, stats: Stats, tty: bool, stop: asyncio.Event,
                        first: asyncio.Future) -> None:
    path = f"/proxy/{shell}/terminal?tty={1 if tty else 0}"
    while not stop.is_set():
        try:
            ws = await connect(master, path)
        except Exception as e:  # noqa: BLE001
            stats.dropped.append((time.time(), f"shell {shell}: connect: {named(e)}"))
            await asyncio.sleep(1)
            continue
        try:
            ws.write_message(SHELL_FLOOD, binary=True)
            reading = asyncio.ensure_future(ws.read_message())
            stopping = asyncio.ensure_future(stop.wait())
            while True:
                done, _ = await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if stopping in done:
                    reading.cancel()
                    break
                message = reading.result()
                if message is None:
                    raise ConnectionError(f"closed ({ws.close_code} {ws.close_reason})")
                if isinstance(message, bytes):
                    stats.shell_bytes += len(message)
                    if not first.done():
                        first.set_result(None)
                else:
                    raise ConnectionError(f"the shell ended: {message}")
                reading = asyncio.ensure_future(ws.read_message())
            stopping.cancel()
        except Exception as e:  # noqa: BLE001
            if not stop.is_set():
                stats.dropped.append((time.time(), f"shell {shell}: {named(e)}"))
                await asyncio.sleep(1)
        finally:
            ws.close()


async def run(args: argparse.Namespace) -> int:
    stats = Stats()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    async def writer() -> None:
        while True:
            stats.write(args.stats)
            await asyncio.sleep(0.25)
    writing = asyncio.ensure_future(writer())

    sessions: list[asyncio.Future] = []
    try:
        for _ in range(args.notebooks):
            stats.notebooks.append(await create_task(args.master, "notebooks", stats))
        stats.shell = await create_task(args.master, "shells", stats)
        print(f"proxy_sessions: notebooks {stats.notebooks}, shell {stats.shell}", flush=True)
        deadline = time.monotonic() + args.start_timeout
        await asyncio.gather(
            *(wait_answers(args.master, f"/proxy/{n}/api/status", stats, deadline) for n in stats.notebooks),
            wait_answers(args.master, f"/proxy/{stats.shell}/", stats, deadline))
        print(f"proxy_sessions: every notebook and the shell answer through the proxy after "
              f"{time.time() - stats.started:.0f} s", flush=True)
        firsts = [loop.create_future() for _ in range(args.notebooks)]
        for n, first in zip(stats.notebooks, firsts):
            sessions.append(asyncio.ensure_future(
                kernel_session(args.master, n, stats, args.cell_interval, stop, first)))
        await asyncio.wait_for(asyncio.gather(*firsts), args.start_timeout)
        flood = asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, flood.set)  # before "ready" goes out
        stats.ready = True
        print(f"proxy_sessions: {args.notebooks} kernel channels open and answering after "
              f"{time.time() - stats.started:.0f} s; the shell's terminal opens on SIGUSR1", flush=True)
        await asyncio.wait({asyncio.ensure_future(flood.wait()), asyncio.ensure_future(stop.wait())},
                           return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set():
            printed = loop.create_future()
            sessions.append(asyncio.ensure_future(
                shell_session(args.master, stats.shell, stats, args.tty, stop, printed)))
            await asyncio.wait_for(printed, args.start_timeout)
            stats.flooding = True
            print(f"proxy_sessions: the shell prints, after {time.time() - stats.started:.0f} s",
                  flush=True)
        await stop.wait()
        code = 0
    except Exception as e:  # noqa: BLE001 - the bench reports it and stops
        print(f"proxy_sessions: {named(e)}", file=sys.stderr, flush=True)
        code = 1
    stop.set()
    await asyncio.gather(*sessions, return_exceptions=True)
    troubled = {int(why.split()[1].rstrip(":")) for _, why in stats.dropped + stats.failed}
    for task in sorted(troubled):  # what their services said, kept beside FILE
        code, body = await http(args.master, "GET", f"/api/v1/tasks/{task}/logs?limit=5000")
        with open(f"{args.stats}.task-{task}.log", "w") as f:
            for line in body.get("logs", []) if isinstance(body, dict) else [body]:
                f.write((line.get("message", json.dumps(line)) if isinstance(line, dict) else str(line)) + "\n")
    for task in stats.notebooks + ([stats.shell] if stats.shell else []):
        kill, body = await http(args.master, "POST", f"/api/v1/tasks/{task}/kill", {})
        if kill != 200:
            stats.errors.append(f"kill task {task}: {kill} {body}")
    writing.cancel()
    stats.write(args.stats)
    print(f"proxy_sessions: {len(stats.round_trips)} kernel round trips succeeded, "
          f"{len(stats.failed)} failed, {stats.shell_bytes / 1e6:.0f} MB from the shell, "
          f"{len(stats.dropped)} sessions dropped, {len(stats.errors)} errors", flush=True)
    for when, why in stats.dropped[:10]:
        print(f"proxy_sessions: dropped at +{when - stats.started:.1f} s: {why}", flush=True)
    for why in stats.errors[:10]:
        print(f"proxy_sessions: error: {why}", flush=True)
    return code


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))]


def window(before_path: str, after_path: str) -> int:
    with open(before_path) as f:
        before = json.load(f)
    with open(after_path) as f:
        after = json.load(f)
    t0, t1 = before["time"], after["time"]
    rtts = sorted(1000 * s for when, s in after["round_trips"] if t0 < when <= t1)
    failed = [why for when, why in after["failed"] if t0 < when <= t1]
    dropped = [why for when, why in after["dropped"] if t0 < when <= t1]
    print(f"shell_bytes_per_second_through_proxy: {(after['shell_bytes'] - before['shell_bytes']) / (t1 - t0):.0f}")
    print(f"kernel_round_trips_ok: {len(rtts)}")
    print(f"kernel_round_trips_failed: {len(failed)}")
    print(f"kernel_round_trip_ms_p50: {percentile(rtts, 50):.1f}")
    print(f"kernel_round_trip_ms_p99: {percentile(rtts, 99):.1f}")
    print(f"kernel_round_trip_ms_max: {rtts[-1] if rtts else float('nan'):.1f}")
    print(f"sessions_dropped: {len(dropped)}")
    for why in (failed + dropped)[:5]:
        print(f"  {why}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="proxy_sessions.py")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="hold the sessions open until SIGTERM")
    r.add_argument("--master", required=True, help="http://127.0.0.1:PORT")
    r.add_argument("--notebooks", type=int, default=20)
    r.add_argument("--stats", required=True, help="where the counters go (JSON)")
    r.add_argument("--cell-interval", type=float, default=2.0, help="seconds between cells per kernel")
    r.add_argument("--start-timeout", type=float, default=300.0, help="seconds for everything to answer")
    r.add_argument("--tty", action="store_true", help="the shell on a pseudo-terminal instead of a pipe")
    w = sub.add_parser("window", help="what happened between two copies of the stats file")
    w.add_argument("before")
    w.add_argument("after")
    args = parser.parse_args()
    if args.command == "window":
        return window(args.before, args.after)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
