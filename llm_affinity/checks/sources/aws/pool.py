"""How the audit runs its calls: one overall deadline, daemon worker threads, progress lines.

Why not ``concurrent.futures.ThreadPoolExecutor``: its workers are joined when the interpreter
exits, so one call stuck on an endpoint that accepts connections and never answers would keep
the process alive for the whole read timeout times the retries after the audit has already
reported. These workers are daemon threads: when the deadline passes, the audit stops waiting,
reports what it saw, and a call still blocked on a socket cannot delay the exit.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import IO, Any, Callable, ParamSpec, TypeAlias, TypeVar

from .errors import TimedOut

T = TypeVar("T")
P = ParamSpec("P")
#: One queued call: its future, the function and its arguments.
_Job: TypeAlias = "tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]"


class Deadline:
    """The audit's overall time budget (``--timeout``), from a monotonic clock."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float | None:
        if self.seconds is None:
            return None
        return max(0.0, self.seconds - self.elapsed())

    def expired(self) -> bool:
        return self.seconds is not None and self.elapsed() >= self.seconds

    def error(self) -> TimedOut:
        return TimedOut(f"the audit's --timeout of {self.seconds:g} s ran out before this could be read")

    def check(self) -> None:
        """Raise :class:`TimedOut` once the budget is spent (a call not yet sent is not sent)."""
        if self.expired():
            raise self.error()

    def wait(self, fut: Future[T], grace: float = 0.0) -> T:
        """``fut.result()``, but never past the deadline (+ ``grace``): then :class:`TimedOut`."""
        remaining = self.remaining()
        try:
            return fut.result(timeout=None if remaining is None else remaining + grace)
        except FutureTimeout:
            fut.cancel()
            raise self.error() from None


class DaemonPool:
    """A fixed number of daemon worker threads fed from one queue (see the module doc)."""

    def __init__(self, workers: int, name: str):
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(max(1, workers))
        ]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fut, fn, args, kwargs = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to whoever waits on the future
                fut.set_exception(exc)
            else:
                fut.set_result(result)

    def submit(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        fut: Future[T] = Future()
        self._queue.put((fut, fn, args, kwargs))
        return fut

    def shutdown(self, wait: bool) -> None:
        """Stop the workers after the queued work; ``wait=False`` does not wait for calls that
        are still blocked (they end with their read timeout, or with the process)."""
        for _ in self._threads:
            self._queue.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


class ProgressLines:
    """One line on stderr every ``every`` seconds while the audit runs (for logs and CI, where
    stderr is not a terminal and a progress bar would be noise); never on stdout."""

    def __init__(self, status: Callable[[], str], every: float, stream: IO[str] | None = None):
        self._status = status
        self._every = every
        self._stream = stream
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="audit-progress", daemon=True)

    def start(self) -> "ProgressLines":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                line = f"llm-affinity: audit: {self._status()}\n"
            except Exception as exc:  # a status that cannot be told is still a sign of life
                line = f"llm-affinity: audit: running ({type(exc).__name__})\n"
            try:
                stream = self._stream or sys.stderr
                stream.write(line)
                stream.flush()
            except (OSError, ValueError):  # a closed stderr must not break the audit
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1)
