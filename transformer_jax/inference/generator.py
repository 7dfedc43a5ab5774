"""Generate text with a trained language model: batched, KV-cached, greedy or sampled.

    generator = Generator.from_checkpoint("runs/gpt")
    generator.generate(["The json module", ""], max_new_tokens=64, temperature=0.8, top_p=0.95)
    for piece in generator.stream("Return the", max_new_tokens=64):
        print(piece, end="", flush=True)

A prompt is `BOS` + its tokens (an empty prompt is `BOS` alone), as documents were in training.
Prompts of different lengths are right-aligned in one batch (left padding that no position
attends to, positions counted from each row's first token); all but the last prompt token are
prefilled in one pass, then one token per step in one jitted loop (`search.sample_loop`).
Prompt lengths are padded to a multiple of 16, so similar calls reuse one compiled program; the
sampling settings are traced values (no recompilation when they change).

Letters: B batch, P prompt length, L new tokens.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from collections.abc import Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from transformer_jax.inference import loading
from transformer_jax.inference.search import greedy_pick, sample_loop, sampling_pick
from transformer_jax.models.decoder_only import DecoderOnly
from transformer_jax.tokens import BOS_ID, EOS_ID, PAD_ID
from transformer_jax.workdir import CheckpointError, Workdir

LENGTH_STEP = 16  # Prompt lengths are padded to a multiple of this: few compiled shapes.


def check_sampling(max_new_tokens: int, temperature: float, top_k: int, top_p: float) -> None:
    """Raises ValueError naming a sampling setting outside its valid range."""
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 1
    ):
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}.")
    if not temperature >= 0:  # also catches NaN
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature!r}.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"top_k must be an integer >= 0 (0 = off), got {top_k!r}.")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1] (1 = off), got {top_p!r}.")


def _pick(greedy: bool, temperature, top_k, top_p):
    return greedy_pick if greedy else sampling_pick(temperature, top_k, top_p)


def _prefill(model: DecoderOnly, prompt, start, cache_len: int):
    """The cache after all prompt tokens but the last (which the first step feeds)."""
    cache = model.init_cache(prompt.shape[0], cache_len, start)
    if prompt.shape[1] > 1:
        _, cache = model.decode_step(prompt[:, :-1], cache)
    return cache


def _step_fn(model: DecoderOnly):
    def step(tokens, cache):
        logits, cache = model.decode_step(tokens[:, None], cache)
        return jax.nn.log_softmax(logits[:, 0].astype(jnp.float32), axis=-1), cache

    return step


@functools.partial(jax.jit, static_argnames=("graphdef", "cache_len", "max_new", "greedy"))
def _generate(graphdef, params, prompt, start, key, temperature, top_k, top_p, *,
              cache_len, max_new, greedy):  # fmt: skip
    model = nnx.merge(graphdef, params)
    cache = _prefill(model, prompt, start, cache_len)
    return sample_loop(
        _step_fn(model),
        cache,
        batch_size=prompt.shape[0],
        max_len=max_new,
        pick_fn=_pick(greedy, temperature, top_k, top_p),
        rng=key,
        bos_id=prompt[:, -1],
        eos_id=EOS_ID,
        pad_id=PAD_ID,
    ).tokens


@functools.partial(jax.jit, static_argnames=("graphdef", "cache_len"))
def _prefill_jit(graphdef, params, prompt, start, *, cache_len):
    return _prefill(nnx.merge(graphdef, params), prompt, start, cache_len)


@functools.partial(jax.jit, static_argnames=("graphdef", "greedy"))
def _one_step(graphdef, params, cache, token, key, t, temperature, top_k, top_p, *, greedy):
    log_probs, cache = _step_fn(nnx.merge(graphdef, params))(token, cache)
    # The key of step t as sample_loop folds it, so stream() draws what generate() draws.
    return _pick(greedy, temperature, top_k, top_p)(log_probs, jax.random.fold_in(key, t)), cache


class Generator:
    """Continues text prompts with a `DecoderOnly` model and its tokenizer.

    Attributes:
      model, tokenizer: what generates; `steps`: the checkpoint steps loaded (if any).
    """

    def __init__(self, model: DecoderOnly, tokenizer, *, mesh: Mesh | None = None, steps=()):
        if not isinstance(model, DecoderOnly):
            raise TypeError(f"Generator needs a DecoderOnly model, got {type(model).__name__}.")
        self.model, self.tokenizer, self.mesh, self.steps = model, tokenizer, mesh, tuple(steps)
        self._graphdef, self._params = nnx.split(model)

    @classmethod
    def from_checkpoint(
        cls, workdir: str | os.PathLike, step: int | None = None, average_last: int = 0
    ) -> Generator:
        """Loads a language-model workdir written by train.py (config, tokenizer, parameters).

        Raises:
          CheckpointError: the workdir or its files cannot be used, or it is not a language
            model's; the message names the file and what to do.
        """
        workdir = Workdir.at(workdir).require()
        config = workdir.read_config()
        if config.model.name != "decoder_only":
            raise CheckpointError(
                f"{workdir.config_json}: the run trained a {config.model.name!r} model; "
                f"Generator needs a 'decoder_only' language model (config.task="
                f"'language_model'). Use Translator for translation runs."
            )
        tokenizer = loading.load_tokenizer(workdir, config)
        model, steps = loading.load_model(workdir, config, tokenizer, step, average_last)
        return cls(model, tokenizer, steps=steps)

    # ------------------------------------------------------------------------------ prompts
    def _encode(self, prompts: Sequence[str], max_new_tokens: int) -> list[list[int]]:
        """BOS + tokens of each prompt, keeping the last tokens of one too long for the context."""
        context = self.model.cfg.max_len
        if max_new_tokens >= context:
            raise ValueError(
                f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the model's "
                f"context of {context} positions. Use at most {context - 1}."
            )
        room, encoded = context - max_new_tokens, []
        for i, prompt in enumerate(prompts):
            if not isinstance(prompt, str):
                raise TypeError(f"prompts[{i}] is a {type(prompt).__name__}, not a str.")
            ids = [BOS_ID, *self.tokenizer.encode(prompt)]
            if len(ids) > room:
                warnings.warn(
                    f"prompt {i} has {len(ids)} tokens but only {room} fit before "
                    f"{max_new_tokens} new ones in the context of {context}: its first "
                    f"{len(ids) - room} tokens are dropped.",
                    stacklevel=3,
                )
                ids = ids[-room:]
            encoded.append(ids)
        return encoded

    def _batch(self, encoded: list[list[int]], rows: int, max_new_tokens: int):
        """Right-aligned prompts `[rows, P]` and each row's left padding `[rows]`."""
        longest = max(len(ids) for ids in encoded)
        width = min(
            LENGTH_STEP * math.ceil(longest / LENGTH_STEP), self.model.cfg.max_len - max_new_tokens
        )
        prompt = np.full((rows, width), PAD_ID, np.int32)
        start = np.full((rows,), width - 1, np.int32)
        prompt[:, -1] = BOS_ID  # rows beyond the prompts: a BOS-only prompt
        for r, ids in enumerate(encoded):
            prompt[r, width - len(ids) :] = ids
            start[r] = width - len(ids)
        return prompt, start, width - 1 + max_new_tokens

    def _continuation(self, prompt_ids: list[int], new_ids: Sequence[int]) -> str:
        # Decode prompt and continuation together, then cut the prompt's text: a piece's
        # leading space (SentencePiece "▁") survives only in context.
        prompt_text = self.tokenizer.decode(prompt_ids)
        text = self.tokenizer.decode([*prompt_ids, *new_ids])
        return (
            text[len(prompt_text) :]
            if text.startswith(prompt_text)
            else self.tokenizer.decode(new_ids)
        )

    def _settings(self, temperature, top_k, top_p):
        return (jnp.float32(max(temperature, 1e-6)), jnp.int32(top_k), jnp.float32(top_p))

    # --------------------------------------------------------------------------- generation
    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int = 100,
        *,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        batch_size: int = 32,
    ) -> list[str]:
        """The continuation of each prompt (text after the prompt), in input order.

        Args:
          prompts: texts to continue ("" starts a document from BOS).
          max_new_tokens: most tokens generated per prompt (a row also stops at EOS).
          temperature: softmax temperature; 0 = greedy (argmax).
          top_k: sample among the k most probable tokens (0 = all).
          top_p: then among the smallest set reaching probability p (1 = all).
          seed: the sampling key (batch i uses seed folded with i).
          batch_size: prompts per batch.
        """
        check_sampling(max_new_tokens, temperature, top_k, top_p)
        if isinstance(prompts, str):
            raise TypeError("prompts must be a sequence of str; wrap a single prompt in a list.")
        encoded = self._encode(prompts, max_new_tokens)
        settings = self._settings(temperature, top_k, top_p)
        outputs = []
        for i in range(0, len(encoded), batch_size):
            chunk = encoded[i : i + batch_size]
            rows = min(batch_size, 1 << (len(chunk) - 1).bit_length())  # few distinct shapes
            prompt, start, cache_len = self._batch(chunk, rows, max_new_tokens)
            key = jax.random.fold_in(jax.random.key(seed), i // batch_size)
            with jax.set_mesh(self.mesh) if self.mesh is not None else _nothing():
                tokens = _generate(
                    self._graphdef, self._params, prompt, start, key, *settings,
                    cache_len=cache_len, max_new=max_new_tokens, greedy=temperature == 0,
                )  # fmt: skip
            tokens = np.asarray(jax.device_get(tokens))
            outputs += [
                self._continuation(ids, row) for ids, row in zip(chunk, tokens, strict=False)
            ]
        return outputs

    def stream(
        self,
        prompt: str,
        max_new_tokens: int = 100,
        *,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> Iterator[str]:
        """Yields the continuation of one prompt piece by piece, as tokens are produced.

        The pieces join to `generate([prompt], ...)[0]` with the same settings; an incomplete
        UTF-8 character (byte tokens) is held back until it completes.
        """
        check_sampling(max_new_tokens, temperature, top_k, top_p)
        (ids,) = self._encode([prompt], max_new_tokens)
        prompt_arr, start, cache_len = self._batch([ids], 1, max_new_tokens)
        key = jax.random.fold_in(jax.random.key(seed), 0)
        settings = self._settings(temperature, top_k, top_p)
        with jax.set_mesh(self.mesh) if self.mesh is not None else _nothing():
            cache = _prefill_jit(
                self._graphdef, self._params, prompt_arr, start, cache_len=cache_len
            )
            token, new, sent = jnp.asarray(prompt_arr[:, -1]), [], ""
            for t in range(max_new_tokens):
                token, cache = _one_step(
                    self._graphdef, self._params, cache, token, key, jnp.int32(t), *settings,
                    greedy=temperature == 0,
                )  # fmt: skip
                value = int(token[0])
                if value == EOS_ID:
                    break
                new.append(value)
                text = self._continuation(ids, new)
                if text.endswith("\ufffd"):
                    continue  # maybe half a character: wait for its other bytes
                if len(text) > len(sent) and text.startswith(sent):
                    yield text[len(sent) :]
                    sent = text
        final = self._continuation(ids, new)
        if final != sent and final.startswith(sent):
            yield final[len(sent) :]


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
