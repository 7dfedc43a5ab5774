"""Sentence embeddings from an encoder's hidden states: pooling, L2 normalisation, and the
settings a workdir records for them (`embedding.json`).

Pooling follows sentence-transformers (all-MiniLM-L6-v2 and most of its models use "mean"):

- "mean": the mean of the last hidden states over the real tokens ([CLS] and [SEP] included,
  padding left out);
- "cls": the last hidden state of [CLS] (position 0) as it is, without BERT's tanh pooler.

The pooled vector is then divided by its L2 norm (at least 1e-12, as `torch.nn.functional.
normalize`), so that a dot product of two embeddings is their cosine similarity.

Letters: B batch, T length, D model dim.
"""

from __future__ import annotations

import dataclasses
import json

import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from transformer_jax import storage
from transformer_jax.runs.layout import CheckpointError, Workdir

POOLINGS = ("mean", "cls")
DEFAULT_POOLING = "mean"  # sentence-transformers' choice for a checkpoint that names none.
NORM_EPS = 1e-12


def mean_pool(hidden: Float[Array, "B T D"], real: Bool[Array, "B T"]) -> Float[Array, "B D"]:
    """The mean of `hidden` over the positions where `real` is True (a row with none gives 0)."""
    weights = real.astype(hidden.dtype)[..., None]
    return (hidden * weights).sum(axis=1) / jnp.maximum(weights.sum(axis=1), 1e-9)


def cls_pool(hidden: Float[Array, "B T D"]) -> Float[Array, "B D"]:
    """The hidden state at position 0, [CLS]."""
    return hidden[:, 0]


def l2_normalise(x: Float[Array, "B D"], eps: float = NORM_EPS) -> Float[Array, "B D"]:
    """Each row divided by its L2 norm (at least `eps`)."""
    return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), eps)


def embed_hidden(
    hidden: Float[Array, "B T D"], real: Bool[Array, "B T"], pooling: str
) -> Float[Array, "B D"]:
    """Unit-length sentence embeddings of hidden states, pooled by `pooling` (see POOLINGS)."""
    pooled = mean_pool(hidden, real) if pooling == "mean" else cls_pool(hidden)
    return l2_normalise(pooled.astype(jnp.float32))


def check_pooling(pooling: object, where: str) -> str:
    """`pooling` if it is one of POOLINGS; a ValueError naming `where` otherwise."""
    if pooling not in POOLINGS:
        raise ValueError(
            f"{where}: pooling {pooling!r} is not one of {', '.join(POOLINGS)} (the mean of the "
            f"real tokens' hidden states, or the hidden state of [CLS])."
        )
    return str(pooling)


@dataclasses.dataclass(frozen=True)
class EmbeddingSettings:
    """How a workdir's encoder embeds sentences: what `embedding.json` holds.

    Written by the conversion of a sentence-transformers folder (its 1_Pooling/config.json and
    its max_seq_length); a workdir without the file pools with DEFAULT_POOLING over the
    model's positions.
    """

    pooling: str  # One of POOLINGS.
    max_len: int  # The most tokens of a text, [CLS] and [SEP] included; longer ones are cut.

    def write(self, workdir: Workdir) -> None:
        text = json.dumps(dataclasses.asdict(self), indent=1)
        storage.write_text_atomic(workdir.embedding_json, text)

    @classmethod
    def read(cls, workdir: Workdir) -> EmbeddingSettings | None:
        """The workdir's settings, or None when it has no embedding.json.

        Raises:
          CheckpointError: the file is unreadable or holds an unknown pooling or a bad length.
        """
        path = workdir.embedding_json
        if not path.is_file():
            return None
        try:
            fields = json.loads(path.read_text())
            pooling = check_pooling(fields["pooling"], str(path))
            max_len = fields["max_len"]
            if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 3:
                raise ValueError(f"max_len must be an integer >= 3, got {max_len!r}")
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(
                f"{path}: unreadable ({type(e).__name__}: {e}). It records the pooling of a "
                f"converted sentence-transformers model: convert the model again, or delete "
                f"the file and pass --pooling."
            ) from None
        return cls(pooling, max_len)
