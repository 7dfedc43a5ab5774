"""What every served model shares: its name, limits, batcher, warm-up, and awaiting an answer.

A `Service` wraps one front end (`Translator`, `Embedder`, ...). Requests are checked in the
event loop (`ApiError` for bad input), then queued as payloads with a group key that fixes the
shape of the batch they may join (a length bucket, the decoding settings); `run_batch` runs in
the batcher's thread. `warmup` runs every shape a batch can take once, so nothing compiles
while serving.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar

from transformer_jax.serving.batcher import Batcher, DeadlineExceeded, QueueFull, Stopped
from transformer_jax.serving.errors import OVERLOADED, TIMEOUT, ApiError
from transformer_jax.serving.metrics import Metrics
from transformer_jax.serving.settings import Limits


class Service:
    """One served model (see the module doc). Subclasses set KIND and ROUTES, build their
    front end, and define `run_batch` and `warmup_payloads`."""

    KIND: ClassVar[str]  # What it does, as /v1/models lists it.
    ROUTES: ClassVar[tuple[str, ...]]  # The endpoints that serve it.

    def __init__(self, name: str, limits: Limits, metrics: Metrics):
        self.name, self.limits, self.metrics = name, limits, metrics
        self.batcher = Batcher(
            name,
            self.run_batch,
            max_batch=limits.max_batch,
            max_wait_s=limits.max_wait_ms / 1000,
            max_queue=limits.max_queue,
            on_batch=metrics.batch_observer(name),
        )
        # Read at each scrape: requests dropped by the batcher (cancelled, expired) leave too.
        metrics.queue_depth.labels(name).set_function(lambda: self.batcher.depth)

    # Subclasses ---------------------------------------------------------------------------
    def run_batch(self, payloads: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def warmup_batches(self) -> list[list[Any]]:
        """Batches of payloads that between them run every program `run_batch` can run."""
        raise NotImplementedError

    # Life ---------------------------------------------------------------------------------
    def warmup(self, progress: Callable[[str], None] = lambda _: None) -> int:
        """Runs every warm-up batch; returns how many."""
        batches = self.warmup_batches()
        for i, batch in enumerate(batches):
            self.run_batch(batch)
            progress(f"{self.name}: warm-up {i + 1}/{len(batches)}")
        return len(batches)

    def start(self) -> None:
        self.batcher.start()

    def stop(self, drain_s: float) -> None:
        self.batcher.stop(drain_s)

    def describe(self) -> dict:
        """This model's entry in /v1/models."""
        return {
            "id": self.name,
            "object": "model",
            "owned_by": "transformer_jax",
            "kind": self.KIND,
            "endpoints": list(self.ROUTES),
        }

    # Answering ----------------------------------------------------------------------------
    async def call(self, payload: Any, group: Hashable) -> Any:
        """The result of one payload, through the batcher.

        Raises:
          ApiError: 503 (queue full, shutting down) or 504 (deadline passed).
        """
        try:
            future = self.batcher.submit(payload, group, self.limits.timeout_s)
        except QueueFull as e:
            raise self.overloaded(str(e)) from None
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.limits.timeout_s)
        except (TimeoutError, DeadlineExceeded):
            raise ApiError(
                504,
                f"{self.name} did not answer within {self.limits.timeout_s:g} s "
                "(the server's --timeout_s); the request was dropped.",
                type=TIMEOUT,
            ) from None
        except Stopped as e:
            raise self.overloaded(str(e)) from None

    async def call_many(
        self, payloads: Sequence[tuple[Any, Hashable]], param: str | None = None
    ) -> list[Any]:
        """The results of several payloads (one request's list of texts, the field `param`),
        in order.

        Raises:
          ApiError: 413 when they are more than the queue ever holds (a retry cannot help),
            and as `call`.
        """
        if len(payloads) > self.limits.max_queue:
            raise ApiError(
                413,
                f"{param or 'the request'} lists {len(payloads)} items; {self.name} queues "
                f"at most {self.limits.max_queue} (the server's --max_queue). Send fewer "
                "per request.",
                param=param,
            )
        tasks = [asyncio.ensure_future(self.call(p, g)) for p, g in payloads]
        try:
            return list(await asyncio.gather(*tasks))
        finally:  # One refused or failed: the rest are not worth computing.
            for task in tasks:
                task.cancel()

    def overloaded(self, why: str) -> ApiError:
        return ApiError(
            503,
            f"{why} Retry after {self.limits.retry_after_s} s.",
            type=OVERLOADED,
            headers={"Retry-After": str(self.limits.retry_after_s)},
        )


def text_with_tokens(count: Callable[[str], int], low: int, high: int) -> str:
    """A text that `count` (tokens of a text) puts in [low, high]: a word repeated, for
    warming up the shapes of each length bucket.

    Raises:
      ValueError: no repetition of the candidate words lands there (a tokenizer that merges
        repeats); the warm-up then cannot promise that bucket compiled.
    """
    for word in ("a", "the", "x", "1", "one", "."):
        for k in range(1, 4 * high + 4):
            n = count(" ".join([word] * k))
            if low <= n <= high:
                return " ".join([word] * k)
            if n > high:
                break
    raise ValueError(f"no warm-up text of {low} to {high} tokens could be made.")


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple
