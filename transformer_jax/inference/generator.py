"""Generate text with a trained language model: batched, KV-cached, greedy or sampled.

    generator = Generator.from_checkpoint("runs/gpt")
    generator.generate(["The json module", ""], max_new_tokens=64, temperature=0.8, top_p=0.95)
    for piece in generator.stream("Return the", max_new_tokens=64):
        print(piece, end="", flush=True)

A prompt is `BOS` + its tokens where the tokenizer adds a bos (`tokenizer.add_bos`: the
tokenizers trained here, whose documents start with it in training), else its tokens alone (a
converted GPT-2, as `transformers`' text-generation pipeline feeds it). An empty prompt is the
start token alone: bos, or eos where the tokenizer has no bos (GPT-2's `<|endoftext|>` is
both). Prompts of different lengths are right-aligned in one batch: each row's left padding
is masked out and its positions count from its own first token
(`DecoderOnly.init_cache(start=...)`). All prompt tokens but the last are prefilled in one
pass, then `search.sample_loop` feeds one token per step in one jitted loop. Prompt lengths
are padded to a multiple of 16 and batch rows to a power of two, so similar calls reuse one
compiled program; the sampling settings are traced values (changing them does not recompile).
`TextPieces` cuts a continuation into `stream()`'s pieces for callers that make the tokens
themselves (`transformer_jax.serving.gpt_slots`).

Letters: B batch rows, P padded prompt length.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from transformer_jax import sharding as shd
from transformer_jax.inference.front_end import FromCheckpoint
from transformer_jax.inference.search import greedy_pick, sample_loop, sampling_pick
from transformer_jax.models.decoder_only import DecoderOnly
from transformer_jax.nn import unstacked
from transformer_jax.runs.load import Expect, Run
from transformer_jax.runs.tokenizer import AnyTokenizer
from transformer_jax.tokens import EOS_ID, PAD_ID

LENGTH_STEP = 16  # Prompt lengths are padded to a multiple of this: few compiled shapes.


def _is_int(x) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def check_sampling(
    max_new_tokens: int, temperature: float | int, top_k: int, top_p: float | int, seed: int = 0
) -> None:
    """Raises ValueError naming a generation setting outside its valid range."""
    if not _is_int(max_new_tokens) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}.")
    if not 0 <= temperature < math.inf:  # also catches NaN
        raise ValueError(f"temperature must be finite and >= 0 (0 = greedy), got {temperature!r}.")
    if not _is_int(top_k) or top_k < 0:
        raise ValueError(f"top_k must be an integer >= 0 (0 = off), got {top_k!r}.")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1] (1 = off), got {top_p!r}.")
    if not _is_int(seed) or not -(2**63) <= seed < 2**63:  # What jax.random.key takes.
        raise ValueError(f"seed must be a 64-bit integer, got {seed!r}.")


# --------------------------------------------------------------- jitted pieces (pure functions)
def _pick(greedy: bool, temperature, top_k, top_p):
    return greedy_pick if greedy else sampling_pick(temperature, top_k, top_p)


def _prefill(model: DecoderOnly, prompt, start, cache_len: int) -> dict:
    """The cache after every prompt token but the last (which the first step feeds)."""
    cache = model.init_cache(prompt.shape[0], cache_len, start)
    if prompt.shape[1] > 1:
        _, cache = model.decode_step(prompt[:, :-1], cache)
    return cache


def _step_fn(model: DecoderOnly):
    def step(tokens, cache):
        logits, cache = model.decode_step(tokens[:, None], cache)
        return jax.nn.log_softmax(logits[:, 0].astype(jnp.float32), axis=-1), cache

    return step


@functools.partial(
    jax.jit, static_argnames=("graphdef", "cache_len", "max_new", "greedy", "eos_id", "pad_id")
)
def _generate(graphdef, params, prompt, start, filler, key, temperature, top_k, top_p, *,
              cache_len, max_new, greedy, eos_id=EOS_ID, pad_id=PAD_ID):  # fmt: skip
    """New tokens `[B, max_new]` (eos, then pad, where a row stopped) after `prompt [B, P]`;
    `eos_id` and `pad_id` are the tokenizer's (a pretrained GPT-2's are its own)."""
    model = unstacked(nnx.merge(graphdef, params))  # Layers sliced once, not at every step.
    return sample_loop(
        _step_fn(model),
        _prefill(model, prompt, start, cache_len),
        batch_size=prompt.shape[0],
        max_len=max_new,
        pick_fn=_pick(greedy, temperature, top_k, top_p),
        rng=key,
        bos_id=prompt[:, -1],
        eos_id=eos_id,
        pad_id=pad_id,
        finished=filler,
    ).tokens


generate_program = _generate  # What `transformer_jax.aot` compiles ahead of time.


@functools.partial(jax.jit, static_argnames=("graphdef", "cache_len"))
def _prefill_jit(graphdef, params, prompt, start, *, cache_len):
    return _prefill(nnx.merge(graphdef, params), prompt, start, cache_len)


@functools.partial(jax.jit, static_argnames=("graphdef", "greedy"))
def _one_step(graphdef, params, cache, token, key, t, temperature, top_k, top_p, *, greedy):
    log_probs, cache = _step_fn(nnx.merge(graphdef, params))(token, cache)
    # Step t's key exactly as sample_loop folds it, so stream() draws what generate() draws.
    return _pick(greedy, temperature, top_k, top_p)(log_probs, jax.random.fold_in(key, t)), cache


# --------------------------------------------------------------------------- text of new tokens
def continuation(
    tokenizer: AnyTokenizer,
    prompt_ids: Sequence[int],
    new_ids: Sequence[int],
    prompt_text: str | None = None,
) -> str:
    """The text of `new_ids` after the prompt. Decoded together with the prompt, then cut:
    a SentencePiece "▁" word start becomes a space only in context. `prompt_text`: the
    prompt's decoded text where the caller already has it."""
    if prompt_text is None:
        prompt_text = tokenizer.decode(list(prompt_ids))
    text = tokenizer.decode([*prompt_ids, *new_ids])
    if text.startswith(prompt_text):
        return text[len(prompt_text) :]
    return tokenizer.decode(list(new_ids))


class TextPieces:
    """A continuation's text piece by piece, as its tokens arrive (what `Generator.stream`
    yields): each piece is the new text since the last one. An incomplete UTF-8 character
    (byte tokens decode it to a trailing "\ufffd") is held back until it completes.

        pieces = TextPieces(generator, prompt_ids)
        for token in new_tokens:  # eos excluded
            send(pieces.add(token))  # maybe ""
        send(pieces.finish())
    """

    def __init__(self, source: Generator | AnyTokenizer, prompt_ids: Sequence[int]):
        self.tokenizer = source.tokenizer if isinstance(source, Generator) else source
        self.prompt_ids = list(prompt_ids)
        self.new_ids: list[int] = []
        self.sent = ""  # the text given out so far
        self._prompt_text = self.tokenizer.decode(self.prompt_ids)

    def add(self, token_id: int) -> str:
        """The text that `token_id` completes ("" while a character is incomplete)."""
        self.new_ids.append(int(token_id))
        text = self._text()
        if text.endswith("\ufffd"):
            return ""  # perhaps a character cut between tokens: wait for its rest
        return self._piece(text)

    def finish(self) -> str:
        """The text still held back after the last token (an incomplete character as is)."""
        return self._piece(self._text())

    def _text(self) -> str:
        return continuation(self.tokenizer, self.prompt_ids, self.new_ids, self._prompt_text)

    def _piece(self, text: str) -> str:
        if len(text) > len(self.sent) and text.startswith(self.sent):
            piece, self.sent = text[len(self.sent) :], text
            return piece
        return ""


# ---------------------------------------------------------------------------------- Generator
class Generator(FromCheckpoint):
    """Continues text prompts with a `DecoderOnly` model and its tokenizer.

    Without a mesh, batch rows are split over this host's devices; with one (e.g. the training
    mesh, or the one `from_checkpoint(mesh=...)` restored the parameters into) every process
    feeds the same full batch, split over the data and fsdp axes.

    Attributes:
      model, tokenizer: what generates; steps: the checkpoint steps loaded (if any).
    """

    EXPECT = Expect(
        "Generator",
        tasks=("language_model",),
        models=("decoder_only",),
        needs="a 'decoder_only' language model (task 'language_model', a configs/gpt_*.py run). "
        "For translation use Translator (`python -m transformer_jax translate`).",
    )

    def __init__(
        self,
        model: DecoderOnly,
        tokenizer: AnyTokenizer,
        *,
        mesh: Mesh | None = None,
        steps: Sequence[int] = (),
    ):
        self.model, self.tokenizer, self.steps = model, tokenizer, tuple(steps)
        # The tokenizer's special ids; GPT-2's one special token is bos, eos and padding.
        self._start_id = tokenizer.bos_id if tokenizer.bos_id is not None else tokenizer.eos_id
        self._pad_id = tokenizer.pad_id if tokenizer.pad_id is not None else tokenizer.eos_id
        self._graphdef, self._params = nnx.split(model)
        self._global_mesh = mesh
        self._mesh = Mesh(np.asarray(jax.local_devices()), ("data",)) if mesh is None else mesh

    @classmethod
    def from_run(cls, run: Run) -> Generator:
        return cls(run.model, run.tokenizer, steps=run.steps, mesh=run.mesh)

    # ------------------------------------------------------------------------------ batches
    def _encode(self, prompts: Sequence[str], max_new_tokens: int) -> list[list[int]]:
        """Each prompt's ids (see the module doc: the start token first where the tokenizer adds
        a bos, or where the prompt is empty); a prompt too long for the context keeps its last
        tokens."""
        context = self.model.cfg.max_len
        if max_new_tokens >= context:
            raise ValueError(
                f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the model's "
                f"context of {context} positions (DecoderOnlyConfig.max_len); use at most "
                f"{context - 1}."
            )
        room, encoded = context - max_new_tokens, []
        for i, prompt in enumerate(prompts):
            if not isinstance(prompt, str):
                raise TypeError(f"prompts[{i}] is a {type(prompt).__name__}, not a str.")
            ids = self.prompt_ids(prompt)
            if len(ids) > room:
                warnings.warn(
                    f"prompt {i} has {len(ids)} tokens but only {room} fit before "
                    f"{max_new_tokens} new ones in the context of {context}: its first "
                    f"{len(ids) - room} tokens were dropped.",
                    stacklevel=3,
                )
                ids = ids[-room:]
            encoded.append(ids)
        return encoded

    def prompt_ids(self, prompt: str) -> list[int]:
        """The ids a prompt is continued from, uncut: its tokens after the start token where
        the tokenizer adds a bos or the prompt is empty (see the module doc)."""
        ids = self.tokenizer.encode(prompt)
        if self.tokenizer.add_bos or not ids:
            ids = [self._start_id, *ids]
        return ids

    def _rows(self, count: int, batch_size: int) -> int:
        """A power of two up to `batch_size` (few shapes), a multiple of the device count."""
        rows = min(batch_size, 1 << max(count - 1, 0).bit_length())
        return self._mesh.size * math.ceil(rows / self._mesh.size)

    def _batch(self, encoded: list[list[int]], rows: int, max_new_tokens: int):
        """Right-aligned prompts `[rows, P]`, left padding `[rows]`, filler rows `[rows]`, and
        the cache length; rows past the prompts are start-token fillers, finished at once."""
        longest = max(len(ids) for ids in encoded)
        width = min(
            LENGTH_STEP * math.ceil(longest / LENGTH_STEP), self.model.cfg.max_len - max_new_tokens
        )
        prompt = np.full((rows, width), self._pad_id, np.int32)
        prompt[:, -1] = self._start_id
        start = np.full((rows,), width - 1, np.int32)
        for r, ids in enumerate(encoded):
            prompt[r, width - len(ids) :] = ids
            start[r] = width - len(ids)
        filler = np.arange(rows) >= len(encoded)
        return (*(self._place(a) for a in (prompt, start, filler)), width - 1 + max_new_tokens)

    def _place(self, x: np.ndarray) -> jax.Array:
        if self._global_mesh is not None:
            return shd.place_batch(x, self._global_mesh)
        return jax.device_put(x, NamedSharding(self._mesh, PartitionSpec("data")))

    def _run(self, jitted, *args, **static):
        # The mesh is set around each call only: a stream() consumer never runs under it.
        with jax.set_mesh(self._mesh):
            return jitted(*args, **static)

    def _continuation(self, prompt_ids: list[int], new_ids: Sequence[int]) -> str:
        return continuation(self.tokenizer, prompt_ids, new_ids)

    @staticmethod
    def _settings(temperature: float | int, top_k: int, top_p: float | int) -> tuple:
        # Traced, not static: new values reuse the compiled program (0 = greedy is static).
        return jnp.float32(max(temperature, 1e-6)), jnp.int32(top_k), jnp.float32(top_p)

    # --------------------------------------------------------------------------- generation
    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int = 100,
        *,
        temperature: float | int = 1.0,
        top_k: int = 0,
        top_p: float | int = 1.0,
        seed: int = 0,
        batch_size: int = 32,
    ) -> list[str]:
        """The continuation of each prompt (the text after it), in input order.

        Args:
          prompts: texts to continue ("" starts from the start token: bos, else eos).
          max_new_tokens: most tokens generated per prompt (a row also stops at EOS).
          temperature: softmax temperature; 0 = greedy (argmax).
          top_k: sample among the k most probable tokens (0 = all).
          top_p: then among the smallest set whose probability reaches p (1 = all).
          seed: the sampling key (batch i draws with the seed's key folded with i).
          batch_size: prompts per batch.
        """
        check_sampling(max_new_tokens, temperature, top_k, top_p, seed)
        if isinstance(prompts, str):
            raise TypeError("prompts must be a sequence of str; wrap a single prompt in a list.")
        if not _is_int(batch_size) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}.")
        encoded = self._encode(prompts, max_new_tokens)
        settings = self._settings(temperature, top_k, top_p)
        outputs = []
        for first in range(0, len(encoded), batch_size):
            chunk = encoded[first : first + batch_size]
            prompt, start, filler, cache_len = self._batch(
                chunk, self._rows(len(chunk), batch_size), max_new_tokens
            )
            key = jax.random.fold_in(jax.random.key(seed), first // batch_size)
            tokens = self._run(
                _generate, self._graphdef, self._params, prompt, start, filler, key, *settings,
                cache_len=cache_len, max_new=max_new_tokens, greedy=temperature == 0,
                eos_id=self.tokenizer.eos_id, pad_id=self._pad_id,
            )  # fmt: skip
            tokens = shd.to_host(tokens)[: len(chunk)]
            outputs += [
                self._continuation(ids, row.tolist())
                for ids, row in zip(chunk, tokens, strict=True)
            ]
        return outputs

    def stream(
        self,
        prompt: str,
        max_new_tokens: int = 100,
        *,
        temperature: float | int = 1.0,
        top_k: int = 0,
        top_p: float | int = 1.0,
        seed: int = 0,
    ) -> Iterator[str]:
        """Yields the continuation of one prompt piece by piece, as tokens are produced.

        The pieces join to `generate([prompt], ...)[0]` with the same settings: the same batch
        layout, prefill and per-step keys. An incomplete UTF-8 character (byte tokens) is held
        back until it completes. Bad settings raise here, before the first piece.
        """
        check_sampling(max_new_tokens, temperature, top_k, top_p, seed)
        (ids,) = self._encode([prompt], max_new_tokens)
        settings = self._settings(temperature, top_k, top_p)
        return self._pieces(ids, max_new_tokens, settings, seed, temperature == 0)

    def _pieces(self, ids, max_new_tokens, settings, seed, greedy) -> Iterator[str]:
        prompt, start, _, cache_len = self._batch([ids], self._rows(1, 1), max_new_tokens)
        key = jax.random.fold_in(jax.random.key(seed), 0)  # generate()'s key of batch 0
        pieces = TextPieces(self.tokenizer, ids)
        cache = self._run(
            _prefill_jit, self._graphdef, self._params, prompt, start, cache_len=cache_len
        )
        token = prompt[:, -1]
        for t in range(max_new_tokens):
            token, cache = self._run(
                _one_step, self._graphdef, self._params, cache, token, key, jnp.int32(t),
                *settings, greedy=greedy,
            )  # fmt: skip
            value = int(shd.to_host(token)[0])
            if value == self.tokenizer.eos_id:
                break
            if piece := pieces.add(value):
                yield piece
        if piece := pieces.finish():
            yield piece
