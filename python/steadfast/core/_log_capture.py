"""The output of an unmanaged script, in its trial's logs.

A managed trial's output is captured by the agent that started it; a script started by hand
(unmanaged mode) has no agent, so LogShipper does that job: it copies every line the script
writes to sys.stdout and sys.stderr (print, logging, tracebacks printed by Python) into the
trial's logs through TrialLink ReportLogs, while the text still reaches the terminal as before.
`sf trial logs` and the dashboard then show it like any trial's output.

Batches go out from a background thread about once a second (at most 1,000 lines each, the
master's limit), numbered per process (an incarnation and a sequence), so a batch the link
retries is stored once. Lines are cut to 16 KiB (the master's limit); at most 10,000 lines wait
while the master is unreachable, and the oldest are dropped past that (the terminal keeps
everything). Output written below Python (C extensions writing to file descriptor 1 or 2) is not
captured. A master that refuses the logs for good stops the shipping with one line on stderr;
the training goes on.
"""

from __future__ import annotations

import collections
import io
import sys
import threading
import time
import uuid
from typing import Any, Callable, Optional, TextIO

__all__ = ["LogShipper"]

_MAX_LINE_BYTES = 16 * 1024
_MAX_BATCH = 1000
_MAX_PENDING = 10_000

# (stream, message, unix time)
Line = tuple[str, str, float]


def _clean(text: str) -> str:
    """A line as the master takes it: UTF-8 without NUL, at most 16 KiB."""
    text = text.replace("\0", "\\0")
    if len(text) <= _MAX_LINE_BYTES // 4:  # at most 4 bytes a character: short enough as it is
        return text
    data = text.encode("utf-8", errors="replace")
    if len(data) <= _MAX_LINE_BYTES:
        return text
    return data[:_MAX_LINE_BYTES].decode("utf-8", errors="ignore")


class _Tee(io.TextIOBase):
    """Writes through to `inner`, and hands every complete line to `emit`."""

    def __init__(self, name: str, inner: TextIO, emit: Callable[[str, str], None]) -> None:
        super().__init__()
        self._name = name
        self._inner = inner
        self._emit = emit
        self._partial = ""
        self._lock = threading.Lock()

    def write(self, s: str) -> int:
        n = self._inner.write(s)
        with self._lock:
            text = self._partial + s
            *lines, self._partial = text.split("\n")
            if len(self._partial) > 4 * _MAX_LINE_BYTES:  # a very long line without a newline
                lines.append(self._partial)
                self._partial = ""
        for line in lines:
            self._emit(self._name, line.rstrip("\r"))
        return n if n is not None else len(s)

    def flush(self) -> None:
        self._inner.flush()

    def take_partial(self) -> str:
        with self._lock:
            rest, self._partial = self._partial, ""
        return rest

    # What callers ask a real stream (isatty, fileno, encoding, buffer, ...).
    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._inner, "encoding", "utf-8")

    def writable(self) -> bool:
        return True


class LogShipper:
    """See the module docstring. `send(incarnation, sequence, lines)` delivers one batch (the
    link's report_logs); it raises for a batch the master refuses for good."""

    def __init__(self, send: Callable[[str, int, list[Line]], None], *,
                 interval_s: float = 1.0, max_pending: int = _MAX_PENDING) -> None:
        self._send = send
        self._interval_s = interval_s
        self._max_pending = max_pending
        self._incarnation = uuid.uuid4().hex
        self._sequence = 0
        self._pending: collections.deque[Line] = collections.deque()
        self._dropped = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._broken = False
        self._thread: Optional[threading.Thread] = None
        self._tees: list[_Tee] = []
        self._saved: Optional[tuple[TextIO, TextIO]] = None

    def start(self) -> None:
        self._saved = (sys.stdout, sys.stderr)
        out = _Tee("stdout", sys.stdout, self._add)
        err = _Tee("stderr", sys.stderr, self._add)
        self._tees = [out, err]
        sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
        self._thread = threading.Thread(target=self._run, name="steadfast-logs", daemon=True)
        self._thread.start()

    def _add(self, stream: str, message: str) -> None:
        with self._lock:
            if self._broken:
                return
            self._pending.append((stream, _clean(message), time.time()))
            while len(self._pending) > self._max_pending:
                self._pending.popleft()
                self._dropped += 1
            full = len(self._pending) >= _MAX_BATCH
        if full:
            self._wake.set()

    def add_text(self, stream: str, text: str) -> None:
        """Lines for the logs only (not written to the terminal): the traceback of the
        exception that ends the script, which Python prints after the streams are put back."""
        for line in text.rstrip("\n").split("\n"):
            self._add(stream, line)

    def _ship(self) -> None:
        """Sends what waits, batch by batch, until nothing does (or the master refuses)."""
        while True:
            with self._lock:
                if self._broken or not self._pending:
                    return
                if self._dropped:
                    note = (f"steadfast: {self._dropped} log lines were dropped while the "
                            f"master could not be reached")
                    self._pending.appendleft(("stderr", note, time.time()))
                    self._dropped = 0
                batch = [self._pending.popleft()
                         for _ in range(min(_MAX_BATCH, len(self._pending)))]
                self._sequence += 1
                sequence = self._sequence
            try:
                self._send(self._incarnation, sequence, batch)
            except Exception as e:  # refused for good, or the link is closed: stop shipping
                with self._lock:
                    self._broken = True
                    self._pending.clear()
                original = self._saved[1] if self._saved else sys.__stderr__
                if original is not None:
                    print(f"steadfast: the trial's output is no longer stored: {e}",
                          file=original, flush=True)
                return

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval_s)
            self._wake.clear()
            self._ship()

    def close(self) -> None:
        """Puts the streams back, and sends every line still waiting (partial last lines
        included)."""
        if self._saved is None:
            return
        sys.stdout, sys.stderr = self._saved
        self._saved = None
        for tee in self._tees:
            rest = tee.take_partial()
            if rest:
                self._add(tee._name, rest)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self._ship()
