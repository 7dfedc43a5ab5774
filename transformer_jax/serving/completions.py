"""GPT runs served by continuous batching: `SlotEngine` behind OpenAI's completions.

Each prompt is checked (it fits the context with its `max_tokens`), then a request's prompts
are counted against the queue and submitted to the engine in one step of the event loop (no
await between: concurrent requests cannot all pass the check before any is queued). Tokens
come back through an asyncio queue as the engine makes them; `pieces` turns them into text
(`TextPieces`), cuts at a `stop` string, and cancels the engine request when the client
leaves or a stop string ends it, which frees its slot at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Sequence

from transformer_jax.inference.generator import Generator, TextPieces
from transformer_jax.serving.errors import OVERLOADED, ApiError
from transformer_jax.serving.gpt_slots import Request, SlotEngine
from transformer_jax.serving.metrics import Metrics
from transformer_jax.serving.settings import Limits

FINISH = {"stop": "stop", "length": "length", "cancelled": "stop", "error": "error"}


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many trailing characters of `text` could begin a stop string (kept back)."""
    longest = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), longest, -1):
            if text.endswith(stop[:n]):
                longest = n
                break
    return longest


@dataclasses.dataclass
class Submitted:
    """A prompt in the engine: its ids, its engine request and the queue its tokens reach."""

    ids: list[int]
    request: Request
    tokens: asyncio.Queue
    start: float  # time.monotonic() at submission: the deadline counts from here


class CompletionService:
    """A language-model run served (`Generator` through a `SlotEngine` of `max_batch` slots)."""

    KIND = "completion"
    ROUTES = ("/v1/completions",)

    def __init__(self, name: str, generator: Generator, limits: Limits, metrics: Metrics):
        self.name, self.limits, self.metrics = name, limits, metrics
        self.generator = generator
        context = generator.model.cfg.max_len
        self.max_tokens = min(limits.max_tokens, context - 1)
        self.engine = SlotEngine(generator, slots=limits.max_batch, max_new_tokens=self.max_tokens)
        # Read at each scrape: a slot freed by a cancel shows at once, not at the next finish.
        metrics.active_slots.labels(name).set_function(lambda: self.engine.active)
        metrics.queue_depth.labels(name).set_function(lambda: self.engine.waiting)

    def warmup(self, progress=lambda _: None) -> int:
        self.engine.warmup()
        progress(f"{self.name}: warm-up done")
        return 1

    def start(self) -> None:
        self.engine.start()

    def stop(self, drain_s: float) -> None:
        self.engine.stop(drain_s)

    def describe(self) -> dict:
        return {
            "id": self.name,
            "object": "model",
            "owned_by": "transformer_jax",
            "kind": self.KIND,
            "endpoints": list(self.ROUTES),
            "context": self.engine.context,
            "max_tokens": self.max_tokens,
        }

    def prompt_ids(self, prompt: str, param: str, max_tokens: int) -> list[int]:
        ids = self.engine.encode(prompt)
        room = self.engine.context - max_tokens
        if len(ids) > room:
            raise ApiError(
                422,
                f"{param} is {len(ids)} tokens; with max_tokens={max_tokens} at "
                f"most {room} fit the model's context of {self.engine.context}. "
                "Shorten it or ask for fewer tokens.",
                param=param,
            )
        return ids

    def submit_all(self, prompts: Sequence[list[int]], settings: dict) -> list[Submitted]:
        """Queues every prompt of one request, or none: raises a 503 `ApiError` when the
        engine's queue cannot take them all, or is stopping (413 when it never could).

        Synchronous on purpose: the check and the queueing happen with no await between."""
        waiting, room = self.engine.waiting, self.limits.max_queue
        retry = {"Retry-After": str(self.limits.retry_after_s)}
        if len(prompts) > room:
            raise ApiError(
                413,
                f"prompt lists {len(prompts)} prompts; {self.name} queues at most {room} "
                "(the server's --max_queue). Send fewer per request.",
                param="prompt",
            )
        if waiting + len(prompts) > room:
            raise ApiError(
                503,
                f"{self.name} has {waiting} prompts waiting for a slot already (its "
                f"--max_queue is {room}). Retry after {self.limits.retry_after_s} s.",
                type=OVERLOADED,
                headers=retry,
            )
        loop, ended = asyncio.get_running_loop(), self.metrics.completions_ended
        out: list[Submitted] = []
        for ids in prompts:
            queue: asyncio.Queue = asyncio.Queue()

            def on_token(token, reason, queue=queue):
                if token is None:  # Counted here: a cancelled stream has no reader left.
                    ended.labels(self.name, reason).inc()
                loop.call_soon_threadsafe(queue.put_nowait, (token, reason))

            try:
                request = self.engine.submit(ids, on_token=on_token, **settings)
            except RuntimeError as e:  # Stopped: shutting down.
                cancel_all(out)
                raise ApiError(
                    503, f"{e} Retry on another server.", type=OVERLOADED, headers=retry
                ) from None
            out.append(Submitted(ids, request, queue, time.monotonic()))
        return out

    async def pieces(
        self, submitted: Submitted, stops: Sequence[str], stats: dict
    ) -> AsyncIterator[tuple[str, str | None]]:
        """(text piece, None) as tokens come, then ("", finish_reason) once; `stats["tokens"]`
        counts the tokens generated."""
        stats["tokens"] = 0
        ids, request, queue = submitted.ids, submitted.request, submitted.tokens
        text = TextPieces(self.generator, ids)
        held, first = "", True
        try:
            while True:
                remaining = submitted.start + self.limits.timeout_s - time.monotonic()
                try:
                    token, reason = await asyncio.wait_for(queue.get(), max(remaining, 0.001))
                except TimeoutError:
                    raise ApiError(
                        504,
                        f"the completion took more than {self.limits.timeout_s:g}"
                        " s (the server's --timeout_s).",
                        type="timeout_error",
                    ) from None
                if token is None:
                    if reason == "error":
                        raise ApiError(
                            500,
                            "the model failed while decoding; see the server log.",
                            type="server_error",
                        )
                    held += text.finish()
                    cut = min((held.find(s) for s in stops if s in held), default=-1)
                    yield (held if cut < 0 else held[:cut]), None
                    yield "", "stop" if cut >= 0 else FINISH[reason]
                    return
                stats["tokens"] += 1
                self.metrics.tokens.labels(self.name).inc()
                if first:
                    waited = time.monotonic() - submitted.start
                    self.metrics.first_token.labels(self.name).observe(waited)
                    first = False
                held += text.add(token)
                cut = min((held.find(s) for s in stops if s in held), default=-1)
                if cut >= 0:
                    yield held[:cut], None
                    yield "", "stop"
                    return
                keep = _held_back(held, stops)
                piece, held = held[: len(held) - keep], held[len(held) - keep :]
                if piece:
                    yield piece, None
        finally:
            request.cancel()  # No-op when it finished; frees the slot otherwise.


def cancel_all(submitted: Sequence[Submitted]) -> None:
    """Cancels each engine request (a no-op for finished ones): their slots are freed at the
    engine's next step."""
    for one in submitted:
        one.request.cancel()
