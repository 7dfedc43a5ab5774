"""Dynamic batching: a bounded queue per model and one thread that runs its batches.

    batcher = Batcher("minilm", run_batch, max_batch=32, max_wait_s=0.005, max_queue=256)
    batcher.start()
    future = batcher.submit(payload, group=("len", 32), timeout_s=30)  # or raises QueueFull

The thread takes the oldest waiting request and the others of its group (same shape bucket,
same decoding settings) in arrival order, up to `max_batch`; if fewer are waiting it waits at
most `max_wait_s` after the oldest arrived for more to come, then runs `run_batch` on what it
has. A request whose deadline has passed before its batch starts is answered with
`DeadlineExceeded` and never computed; a cancelled one (its client went away) is skipped. The
queue holds at most `max_queue` requests: past that `submit` raises `QueueFull` at once,
so a burst is answered with 503 instead of waiting without bound (Triton's and TF Serving's
"max queue size").
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any


class QueueFull(Exception):
    """The model's queue is full: answer 503 and let the client retry."""


class DeadlineExceeded(Exception):
    """The request waited past its deadline before it could run: answer 504."""


class Stopped(Exception):
    """The server is shutting down and did not get to the request in its drain time."""


@dataclasses.dataclass
class _Job:
    payload: Any
    group: Hashable
    deadline: float  # time.monotonic()
    arrived: float
    future: concurrent.futures.Future


class Batcher:
    """One model's queue and the thread that batches it (see the module doc).

    Args:
      name: the model's name (thread name, errors).
      run_batch: `payloads -> results`, one result per payload in order; an exception fails
        every request of the batch with it.
      max_batch: most requests per `run_batch` call.
      max_wait_s: longest a request waits for others to join its batch.
      max_queue: most requests waiting; more are refused with `QueueFull`.
      on_batch: called with (batch size, seconds) after each batch (metrics).
    """

    def __init__(
        self,
        name: str,
        run_batch: Callable[[Sequence[Any]], Sequence[Any]],
        *,
        max_batch: int,
        max_wait_s: float,
        max_queue: int,
        on_batch: Callable[[int, float], None] | None = None,
    ):
        if max_batch < 1 or max_queue < 1 or max_wait_s < 0:
            raise ValueError(f"{name}: max_batch and max_queue must be >= 1, max_wait_s >= 0.")
        self.name, self._run_batch = name, run_batch
        self.max_batch, self.max_wait_s, self.max_queue = max_batch, max_wait_s, max_queue
        self._on_batch = on_batch
        self._queue: collections.deque[_Job] = collections.deque()
        self._cond = threading.Condition()
        self._accepting = True
        self._stop_at: float | None = None  # Drain deadline once stopping.
        self._thread = threading.Thread(target=self._loop, name=f"batcher-{name}", daemon=True)

    @property
    def depth(self) -> int:
        """Requests waiting (not yet in a running batch)."""
        return len(self._queue)

    def start(self) -> None:
        self._thread.start()

    def submit(self, payload: Any, group: Hashable, timeout_s: float) -> concurrent.futures.Future:
        """Queues one request; its future holds the result, or the batch's exception,
        `DeadlineExceeded` or `Stopped`.

        Raises:
          QueueFull: `max_queue` requests are already waiting, or the server is stopping.
        """
        now = time.monotonic()
        job = _Job(payload, group, now + timeout_s, now, concurrent.futures.Future())
        with self._cond:
            if not self._accepting:
                raise QueueFull(f"{self.name} is shutting down.")
            if len(self._queue) >= self.max_queue:
                raise QueueFull(f"{self.name}'s queue holds {self.max_queue} requests already.")
            self._queue.append(job)
            self._cond.notify()
        return job.future

    def stop(self, drain_s: float) -> None:
        """Refuses new requests, runs the queued ones for at most `drain_s` seconds, fails the
        rest with `Stopped`, and joins the thread."""
        with self._cond:
            self._accepting = False
            self._stop_at = time.monotonic() + drain_s
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(max(drain_s, 0) + 60)  # A batch in flight finishes first.

    # ------------------------------------------------------------------------------ the thread
    def _take(self) -> list[_Job] | None:
        """The next batch (waiting for it), or None when stopped and empty."""
        with self._cond:
            while True:
                if self._stop_at is not None and (
                    not self._queue or time.monotonic() > self._stop_at
                ):
                    for job in self._queue:
                        job.future.set_exception(
                            Stopped(f"{self.name} stopped before the request ran.")
                        )
                    self._queue.clear()
                    return None
                if not self._queue:
                    self._cond.wait()
                    continue
                first = self._queue[0]
                same = [job for job in self._queue if job.group == first.group]
                wait = first.arrived + self.max_wait_s - time.monotonic()
                if len(same) < self.max_batch and wait > 0 and self._stop_at is None:
                    self._cond.wait(wait)
                    continue
                batch = same[: self.max_batch]
                taken = set(map(id, batch))
                self._queue = collections.deque(j for j in self._queue if id(j) not in taken)
                return batch

    def _loop(self) -> None:
        while (batch := self._take()) is not None:
            now = time.monotonic()
            live = []
            for job in batch:
                if not job.future.set_running_or_notify_cancel():
                    continue  # Cancelled: its client went away.
                if job.deadline < now:
                    job.future.set_exception(
                        DeadlineExceeded(
                            f"the request waited {now - job.arrived:.1f} s in {self.name}'s queue, "
                            "past its deadline."
                        )
                    )
                    continue
                live.append(job)
            if not live:
                continue
            start = time.monotonic()
            try:
                results = self._run_batch([job.payload for job in live])
                if len(results) != len(live):
                    raise RuntimeError(f"{self.name}: {len(results)} results for {len(live)}.")
            except Exception as e:  # noqa: BLE001 - every request of the batch gets the error
                for job in live:
                    job.future.set_exception(e)
            else:
                for job, result in zip(live, results, strict=True):
                    job.future.set_result(result)
            if self._on_batch is not None:
                self._on_batch(len(live), time.monotonic() - start)
