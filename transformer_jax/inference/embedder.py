"""Sentence embeddings with an encoder (BERT) workdir: one unit-length vector per text.

    embedder = Embedder.from_checkpoint("runs/minilm")  # converted all-MiniLM-L6-v2
    vectors = embedder.embed(["A man is eating food.", "A man is eating bread."])  # [2, 384]
    embedder.rank("Who is eating?", ["A man is eating food.", "A woman plays violin."])
    # -> [Match(index=0, score=0.61, text="A man is eating food."), Match(index=1, ...)]

A text is laid out as `[CLS] text [SEP]` (segment 0) with the checkpoint's own special tokens,
cut to the longest input, run through the encoder, pooled and L2-normalised
(`transformer_jax.inference.pooling`), so a dot product of two embeddings is their cosine
similarity. The pooling and the longest input are the workdir's own when it was converted from
sentence-transformers (embedding.json); otherwise mean pooling over the model's positions, as
sentence-transformers does for a plain checkpoint. `pooling=` overrides either.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings
from collections.abc import Sequence

import jax
import numpy as np
from flax import nnx

from transformer_jax.data.bert.inputs import encode_plain, real_tokens, specials_of
from transformer_jax.inference.encoder_inputs import batch_inputs, load_encoder
from transformer_jax.inference.pooling import (
    DEFAULT_POOLING,
    EmbeddingSettings,
    check_pooling,
    embed_hidden,
)
from transformer_jax.runs.load import Run
from transformer_jax.serving_mesh import MeshLike, on_mesh, under
from transformer_jax.sharding import to_host

TASKS = ("bert_pretrain", "classify")  # Encoder runs: pretrained (or converted), fine-tuned.


@functools.partial(jax.jit, static_argnums=(0, 4))
def _embeddings(graphdef, params, tokens, segments, pooling: str):
    """Unit-length embeddings [B, D] of laid-out rows (tokens, segments: [B, T])."""
    model = nnx.merge(graphdef, params)
    real = real_tokens(tokens)
    return embed_hidden(model(tokens, segments, attention_mask=real), real, pooling)


@functools.partial(jax.jit, static_argnums=(0,))
def _hidden(graphdef, params, tokens, segments):
    """The encoder's last hidden states [B, T, D] of laid-out rows."""
    model = nnx.merge(graphdef, params)
    return model(tokens, segments, attention_mask=real_tokens(tokens))


@dataclasses.dataclass(frozen=True)
class Match:
    """One text ranked against a query: its index in the input, cosine similarity, the text."""

    index: int
    score: float
    text: str


class Embedder:
    """An encoder that maps texts to unit-length vectors."""

    def __init__(self, run: Run, pooling: str, max_len: int):
        """`max_len`: the most tokens of a text, [CLS] and [SEP] included (at most the
        model's positions); longer texts are cut from the end."""
        self.run = run
        self.pooling = check_pooling(pooling, "Embedder")
        positions = run.model.cfg.max_len
        if not 3 <= max_len <= positions:
            raise ValueError(f"max_len={max_len}: give 3 to the model's {positions} positions.")
        self.max_len = max_len
        self.dimension = run.model.cfg.d_model
        self.specials = specials_of(run.tokenizer)
        self._graphdef, self._params = nnx.split(run.model)

    @classmethod
    def from_checkpoint(
        cls,
        workdir: str | os.PathLike,
        step: int | None = None,
        *,
        pooling: str | None = None,
        mesh: MeshLike | None = None,
    ) -> Embedder:
        """Loads an encoder workdir: converted (a sentence-transformers folder, or any BERT),
        pretrained or fine-tuned here. With `mesh` (axis sizes such as `{"fsdp": 4}`, or a
        `Mesh`) its parameters are restored into their shards and batches split over data and
        fsdp.

        Args:
          pooling: "mean" or "cls"; default the workdir's embedding.json, else "mean".

        Raises:
          ValueError: an unknown `pooling` (checked before anything is read).
          MeshError: `mesh` does not fit the devices or the model (a ValueError).
          CheckpointError: not an encoder's workdir (its model and task named), or a file is
            missing or damaged.
        """
        if pooling is not None:
            check_pooling(pooling, "Embedder.from_checkpoint")
        return cls.from_run(load_encoder(workdir, TASKS, "embed", step, mesh), pooling=pooling)

    @classmethod
    def from_run(cls, run: Run, *, pooling: str | None = None) -> Embedder:
        """The embedder of a loaded encoder run (`load_encoder`), with its embedding.json."""
        settings = EmbeddingSettings.read(run.workdir)
        if settings is None:
            settings = EmbeddingSettings(DEFAULT_POOLING, run.model.cfg.max_len)
        return cls(run, pooling or settings.pooling, min(settings.max_len, run.model.cfg.max_len))

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's ids, cut to fit `max_len` with [CLS] and [SEP]; one warning names how
        many were cut."""
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is a {type(text).__name__}, not a str.")
        ids = encode_plain(self.run.tokenizer, texts)
        room = self.max_len - 2
        cut = [i for i, row in enumerate(ids) if len(row) > room]
        if cut:
            warnings.warn(
                f"{len(cut)} of {len(texts)} texts (the first: texts[{cut[0]}]) have more than "
                f"{room} tokens: each is cut to its first {room}, as sentence-transformers cuts "
                f"them ({self.max_len} with [CLS] and [SEP]).",
                stacklevel=4,  # _encode <- _batches <- embed / token_embeddings <- the caller
            )
        return [row[:room] for row in ids]

    def _batches(self, texts: Sequence[str], batch_size: int):
        """(number of texts, tokens, segments) per batch of `batch_size` rows."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
        encoded = self._encode(texts)
        for start in range(0, len(encoded), batch_size):
            chunk = [(ids, None) for ids in encoded[start : start + batch_size]]
            tokens, segments = batch_inputs(
                chunk, self.max_len, rows=batch_size, specials=self.specials
            )
            yield len(chunk), *on_mesh(self.run.mesh, tokens, segments)

    def embed(self, texts: str | Sequence[str], *, batch_size: int = 32) -> np.ndarray:
        """Unit-length embeddings, float32 `[len(texts), D]` (`[D]` for one text)."""
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        out = [np.zeros((0, self.dimension), np.float32)]
        for count, tokens, segments in self._batches(texts, batch_size):
            with under(self.run.mesh):
                vectors = _embeddings(self._graphdef, self._params, tokens, segments, self.pooling)
            out.append(to_host(vectors)[:count])
        vectors = np.concatenate(out)
        return vectors[0] if single else vectors

    def token_embeddings(self, texts: Sequence[str], *, batch_size: int = 32) -> list[np.ndarray]:
        """Each text's last hidden states, float32 `[n_i, D]` for its n_i tokens ([CLS] text
        [SEP], cut as in `embed`): what the pooling reads."""
        texts = list(texts)
        out = []
        for count, tokens, segments in self._batches(texts, batch_size):
            with under(self.run.mesh):
                hidden = to_host(_hidden(self._graphdef, self._params, tokens, segments))
            lengths = np.asarray(real_tokens(to_host(tokens))).sum(axis=1)
            out += [hidden[r, : lengths[r]] for r in range(count)]
        return out

    def rank(self, query: str, texts: Sequence[str], *, batch_size: int = 32) -> list[Match]:
        """`texts` by cosine similarity to `query`, most similar first (ties keep the input
        order)."""
        if not isinstance(query, str):
            raise TypeError(f"query is a {type(query).__name__}, not a str.")
        texts = list(texts)
        scores = self.embed(texts, batch_size=batch_size) @ self.embed(query)
        order = np.argsort(-scores, kind="stable")
        return [Match(int(i), float(scores[i]), texts[i]) for i in order]


__all__ = ["Embedder", "Match"]
