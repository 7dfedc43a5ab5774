"""Continuous batching for the GPT front end: requests share one KV cache of fixed slots.

    engine = SlotEngine(Generator.from_checkpoint("runs/gpt"), slots=8)
    engine.warmup()  # every program the engine runs is compiled here, none later
    engine.start()
    request = engine.submit(engine.encode("The json module"), max_new_tokens=64,
                            on_token=lambda token, reason: ...)  # called from the engine thread
    request.cancel()  # or wait for on_token(None, "stop" | "length")
    engine.stop(drain_s=5)

JetStream-style slots: each slot is a batch-1 `DecoderOnly` cache of the whole context C with
its own index and left padding, the slots stacked on a leading axis and stepped together by
`jax.vmap`, so every slot advances by itself through the model's own `decode_step`. A new
request is prefilled alone: its ids but the last, left-aligned in a buffer of one of a few
bucket lengths, go through `decode_step` into an empty cache whose index is then set back to
the prompt's end; the padding columns written past it are never seen (position i attends to
columns <= i) and are overwritten as decoding goes on. That cache is written into a free slot
(one program per bucket), and the request joins at the next step. One step program feeds every
slot its last token and picks the next with the slot's own settings and key, derived as
`Generator.generate` derives a batch of one's, so a request's text is
`generate([prompt], ...)[0]`'s. Free slots compute garbage that nobody reads.

Letters: S slots, C context (cache length), L prompt bucket, V vocabulary.
"""

from __future__ import annotations

import atexit
import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
from flax import nnx

from transformer_jax.inference.generator import Generator, check_sampling
from transformer_jax.serving.slot_programs import (
    Slots,
    admit,
    empty_slots,
    output_table,
    prompt_buckets,
    request_key,
    step,
)

log = logging.getLogger(__name__)

OnToken = Callable[[int | None, str | None], None]
FINISH_REASONS = ("stop", "length", "cancelled", "error")  # on_token(None, reason)


# ------------------------------------------------------------------------------------ Request
class Request:
    """A submitted request. `on_token(id, None)` per new token, then `on_token(None, reason)`
    once, both from the engine thread; `cancel()` ends it at the engine's next step."""

    def __init__(self, engine: SlotEngine, ids: list[int], settings: dict, on_token: OnToken):
        self.ids, self.settings, self.on_token = ids, settings, on_token
        self.max_new_tokens: int = settings["max_new_tokens"]
        self.generated = 0  # tokens delivered
        self.finish_reason: str | None = None
        self._engine = engine
        self._cancelled = False
        self._done = threading.Event()

    def cancel(self) -> None:
        """Frees the request's slot (or queue place) at the next step; on_token(None,
        "cancelled") follows unless it has already finished."""
        self._cancelled = True
        self._engine._wake()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | int | None = None) -> bool:
        """Blocks until the request has finished (its last on_token returned); False on timeout."""
        return self._done.wait(timeout)


# --------------------------------------------------------------------------------- SlotEngine
class SlotEngine:
    """A decode engine for a server: many requests share one KV cache of `slots` rows.

    A request waits in a FIFO until a slot is free, is prefilled between two steps and joins the
    next; a finished or cancelled one frees its slot at once. No XLA compilation happens after
    `warmup()`, whatever the prompt lengths and settings. See the module doc.

    Args:
      generator: the model and tokenizer (`Generator`), whose parameters are used as they lie.
      slots: S, the requests decoded together.
      max_new_tokens: the most new tokens a request may ask for (default C - 1).
    """

    def __init__(self, generator: Generator, *, slots: int = 8, max_new_tokens: int | None = None):
        self.generator = generator
        self._context = context = generator.model.cfg.max_len
        if not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be an integer >= 1, got {slots!r}.")
        cap = context - 1 if max_new_tokens is None else max_new_tokens
        if not isinstance(cap, int) or not 1 <= cap < context:
            raise ValueError(
                f"max_new_tokens must be an integer in [1, {context - 1}] (the context of "
                f"{context} positions less one prompt token), got {max_new_tokens!r}."
            )
        self.max_new_tokens = cap
        self._slots = slots
        self._buckets = prompt_buckets(context)
        self._graphdef, self._params = nnx.split(generator.model)
        self._eos_id = generator.tokenizer.eos_id
        key_shape = request_key(0).shape
        # Per-slot inputs of the step, on the host: rewritten at admission and after a step's
        # tokens are read (never while a step that may alias them runs), sent every step.
        self._host = dict(
            last=np.zeros(slots, np.int32),
            live=np.zeros(slots, bool),
            keys=np.zeros((slots, *key_shape), np.uint32),
            steps=np.zeros(slots, np.int32),
            temperature=np.ones(slots, np.float32),
            top_k=np.zeros(slots, np.int32),
            top_p=np.ones(slots, np.float32),
            greedy=np.ones(slots, bool),
        )
        self._requests: list[Request | None] = [None] * slots  # the engine thread's alone
        self._pending: collections.deque[Request] = collections.deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed, self._deadline = False, None
        self._state = self._table = None

    # ------------------------------------------------------------------------------ facts
    @property
    def slots(self) -> int:
        return self._slots

    @property
    def context(self) -> int:
        """C: prompt tokens + new tokens of one request (DecoderOnlyConfig.max_len)."""
        return self._context

    @property
    def active(self) -> int:
        """Slots in use."""
        return int(self._host["live"].sum())

    @property
    def waiting(self) -> int:
        """Requests queued, not yet in a slot."""
        return len(self._pending)

    # -------------------------------------------------------------------------- lifecycle
    def warmup(self) -> None:
        """Compiles every program the engine will run: the empty slots, each prefill bucket,
        the step (its greedy and sampling branches) and the key derivation.

        A program's output may lie differently from its input (its layout, or its sharding
        over several devices), and jit compiles once per input signature: so every bucket's
        prefill runs here on each state it can meet while serving (fresh slots, another
        prefill's, a step's), and the step on a prefill's and on its own."""
        if self._thread is not None:
            raise RuntimeError("warmup() must run before start().")
        request_key(0)
        self._table = output_table(self._graphdef, self._params)

        def prefill(length: int) -> None:
            prompt = np.zeros((1, length), np.int32)
            self._state = admit(
                self._graphdef, self._params, self._state, prompt, np.int32(0), np.int32(0),
                context=self._context,
            )  # fmt: skip

        for length in self._buckets:
            self._state = self._empty()
            prefill(length)  # on fresh slots
            prefill(length)  # on a prefill's state
            _, self._state = self._step()  # a step on a prefill's state
            prefill(length)  # on a step's state
        tokens, self._state = self._step()
        tokens, self._state = self._step()  # a step on a step's state
        np.asarray(tokens)
        self._state = self._empty()

    def start(self) -> None:
        """Starts the decode thread (warming up first if `warmup()` was not called)."""
        if self._closed:
            raise RuntimeError("this SlotEngine was stopped; make a new one.")
        if self._thread is not None:
            return
        if self._state is None:
            self.warmup()
        self._thread = threading.Thread(target=self._loop, name="gpt-slots", daemon=True)
        self._thread.start()
        # A daemon thread killed inside an XLA call at interpreter exit aborts the process.
        atexit.register(self.stop)

    def stop(self, drain_s: float | int = 0) -> None:
        """Stops taking requests, lets those submitted finish for up to `drain_s` seconds,
        cancels the rest (on_token(None, "cancelled")) and joins the decode thread."""
        with self._cond:
            self._closed = True
            self._deadline = time.monotonic() + max(drain_s, 0)
            self._cond.notify_all()
        if self._thread is threading.current_thread():
            return  # called from on_token: the loop ends after this step
        if self._thread is not None:
            self._thread.join()
            atexit.unregister(self.stop)
        else:  # never started: only queued requests
            self._end_all("cancelled")

    # --------------------------------------------------------------------------- requests
    def encode(self, prompt: str) -> list[int]:
        """The prompt's ids as `Generator` makes them (its start token rules), uncut."""
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__}.")
        return self.generator.prompt_ids(prompt)

    def submit(
        self,
        ids: Sequence[int],
        *,
        max_new_tokens: int,
        temperature: float | int = 1.0,
        top_k: int = 0,
        top_p: float | int = 1.0,
        seed: int = 0,
        on_token: OnToken,
    ) -> Request:
        """Queues a request for `ids` (from `encode`); settings as in `Generator.generate`
        (temperature 0 = greedy). Raises ValueError for a bad setting or a request that does
        not fit the context: prompt tokens + max_new_tokens <= C."""
        check_sampling(max_new_tokens, temperature, top_k, top_p, seed)
        if max_new_tokens > self.max_new_tokens:
            raise ValueError(
                f"max_new_tokens={max_new_tokens} exceeds this server's limit of "
                f"{self.max_new_tokens}."
            )
        ids = self._checked_ids(ids)
        if len(ids) + max_new_tokens > self._context:
            room = self._context - len(ids)
            fix = f"or ask for at most {room} new tokens" if room >= 1 else "first"
            raise ValueError(
                f"the prompt's {len(ids)} tokens + max_new_tokens={max_new_tokens} exceed the "
                f"model's context of {self._context} tokens: shorten the prompt to at most "
                f"{self._context - max_new_tokens} tokens {fix}."
            )
        if not callable(on_token):
            raise TypeError(f"on_token must be callable, got {type(on_token).__name__}.")
        settings = dict(
            max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
            seed=seed,
        )  # fmt: skip
        request = Request(self, ids, settings, on_token)
        with self._cond:
            if self._closed:
                raise RuntimeError("this SlotEngine is stopped: it takes no more requests.")
            self._pending.append(request)
            self._cond.notify_all()
        return request

    def _checked_ids(self, ids: Sequence[int]) -> list[int]:
        vocab = self.generator.model.cfg.vocab_size
        ids = list(ids)
        if not ids:
            raise ValueError("ids is empty: a prompt has at least its start token (encode()).")
        for i, x in enumerate(ids):
            if not isinstance(x, int | np.integer) or isinstance(x, bool) or not 0 <= x < vocab:
                raise ValueError(f"ids[{i}] = {x!r} is not a token id in [0, {vocab}).")
        return [int(x) for x in ids]

    # ---------------------------------------------------------------------- engine thread
    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._pending or self.active or self._closed):
                    self._cond.wait()
                if self._closed and (
                    time.monotonic() >= self._deadline or not (self._pending or self.active)
                ):
                    break
            taken: list[Request] = []
            try:
                self._iterate(taken)
            except Exception:  # noqa: BLE001 - whatever failed, its callers must hear of it
                log.exception("gpt_slots: the engine loop failed; its requests end with 'error'")
                self._reset([r for r in taken if r not in self._requests])
        self._end_all("cancelled")

    def _iterate(self, taken: list[Request]) -> None:
        """One round: cancelled requests leave, waiting ones fill the free slots, one step."""
        for slot, request in enumerate(self._requests):
            if request is not None and request._cancelled:
                self._free(slot, "cancelled")
        taken += self._take_pending()
        free = [slot for slot, request in enumerate(self._requests) if request is None]
        for request in taken:
            if request._cancelled:
                self._end(request, "cancelled")
                continue
            slot = free.pop(0)
            try:
                self._prefill(request, slot)
            except Exception:  # noqa: BLE001
                log.exception("gpt_slots: a prefill failed; the requests in slots end too")
                self._end(request, "error")
                self._reset()
                free = [slot for slot, request in enumerate(self._requests) if request is None]
        if not self.active:
            return
        try:
            tokens, self._state = self._step()
            tokens = np.asarray(tokens)
        except Exception:  # noqa: BLE001
            log.exception("gpt_slots: a decode step failed; the requests in slots end")
            self._reset()
            return
        for slot, request in enumerate(self._requests):
            if request is not None:
                self._advance(slot, request, int(tokens[slot]))

    def _take_pending(self) -> list[Request]:
        """Waiting requests for the free slots, FIFO, and every cancelled one in the queue."""
        taken, free = [], self._slots - self.active
        with self._cond:
            for request in list(self._pending):
                if request._cancelled or free > 0:
                    free -= not request._cancelled
                    self._pending.remove(request)
                    taken.append(request)
        return taken

    def _prefill(self, request: Request, slot: int) -> None:
        ids, s = request.ids, request.settings
        bucket = next(b for b in self._buckets if b >= len(ids) - 1)
        prompt = np.zeros((1, bucket), np.int32)  # padding ids: never attended to
        prompt[0, : len(ids) - 1] = ids[:-1]
        self._state = admit(
            self._graphdef, self._params, self._state, prompt, np.int32(len(ids) - 1),
            np.int32(slot), context=self._context,
        )  # fmt: skip
        host = self._host
        host["last"][slot], host["steps"][slot] = ids[-1], 0
        host["keys"][slot] = request_key(s["seed"])
        host["temperature"][slot] = max(s["temperature"], 1e-6)  # as Generator._settings
        host["top_k"][slot], host["top_p"][slot] = s["top_k"], s["top_p"]
        host["greedy"][slot] = s["temperature"] == 0
        self._requests[slot] = request
        host["live"][slot] = True

    def _step(self):
        h = self._host
        return step(
            self._graphdef, self._params, self._table, self._state, h["last"], h["live"],
            h["keys"], h["steps"], h["temperature"], h["top_k"], h["top_p"], h["greedy"],
            context=self._context,
        )  # fmt: skip

    def _advance(self, slot: int, request: Request, token: int) -> None:
        self._host["last"][slot] = token
        self._host["steps"][slot] += 1
        if token == self._eos_id:
            self._free(slot, "stop")
            return
        request.generated += 1
        self._call(request, token, None)
        if request.generated >= request.max_new_tokens:
            self._free(slot, "length")

    def _free(self, slot: int, reason: str) -> None:
        request = self._requests[slot]
        self._requests[slot] = None
        self._host["live"][slot] = False
        self._end(request, reason)

    def _end(self, request: Request, reason: str) -> None:
        if request.done:
            return
        request.finish_reason = reason
        self._call(request, None, reason)
        request._done.set()

    def _call(self, request: Request, token: int | None, reason: str | None) -> None:
        """on_token, guarded: a callback that raises ends its own request, not the engine."""
        try:
            request.on_token(token, reason)
        except Exception:  # noqa: BLE001
            log.exception("gpt_slots: on_token raised; the request is cancelled")
            request._cancelled = True

    def _reset(self, others: Sequence[Request] = ()) -> None:
        """After a failure: every request in a slot, and `others`, end with "error", and the
        slots start again from an empty state (the old one may have been donated)."""
        for slot, request in enumerate(self._requests):
            if request is not None:
                self._free(slot, "error")
        for request in others:
            self._end(request, "error")
        try:
            self._state = self._empty()
        except Exception:  # noqa: BLE001
            log.exception("gpt_slots: could not rebuild the slots")

    def _end_all(self, reason: str) -> None:
        for slot, request in enumerate(self._requests):
            if request is not None:
                self._free(slot, reason)
        with self._cond:
            pending, self._pending = list(self._pending), collections.deque()
        for request in pending:
            self._end(request, reason)

    def _empty(self) -> Slots:
        return empty_slots(self._graphdef, self._params, slots=self._slots, context=self._context)
