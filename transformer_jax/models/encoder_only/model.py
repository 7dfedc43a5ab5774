"""The encoder-only model (BERT): the Transformer's encoder alone, with BERT's embeddings,
pooler and heads.

Token + segment + learned position embeddings, summed, normalised and dropped out; a `Stack` of
bidirectional blocks from `transformer_jax.nn` that never attend to the padding the caller's
`attention_mask` marks (token values mark nothing); then, on the hidden states: the pooler
(dense + tanh on `[CLS]`, position 0), the masked-LM head (dense + GELU + LayerNorm, output tied
to the token embedding with its own bias), the next-sentence head (2-way on the pooled output),
and sequence / token classification heads (`num_labels`-way).

Letters: B batch, T length, D model dim, V vocabulary, K labels.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from transformer_jax.models.encoder_only.config import EncoderOnlyConfig
from transformer_jax.models.fields import block_spec
from transformer_jax.nn import ACTIVATIONS, Embedding, LayerNorm, Stack, dropout, fold, key_mask
from transformer_jax.nn.layers import param
from transformer_jax.sharding import constrain_batch

_INIT = jax.nn.initializers.normal(stddev=0.02)  # BERT's initialiser for every new weight
_ZEROS = jax.nn.initializers.zeros


class _Dense(nnx.Module):
    """x W + b, float32 parameters, computed in the model's dtype."""

    def __init__(self, d_in: int, d_out: int, axes: tuple, *, dtype, rngs: nnx.Rngs):
        self.kernel = param(_INIT, rngs.params(), (d_in, d_out), axes)
        self.bias = param(_ZEROS, rngs.params(), (d_out,), axes[1:])
        self.dtype = dtype

    def __call__(self, x: Float[Array, "*B I"]) -> Float[Array, "*B O"]:
        y = jnp.einsum("...i,io->...o", x.astype(self.dtype), self.kernel[...].astype(self.dtype))
        return y + self.bias[...].astype(self.dtype)


class EncoderOnly(nnx.Module):
    """BERT: hidden states for every position, and the heads that read them.

    Example:
      >>> model = EncoderOnly(EncoderOnlyConfig.bert_base(), rngs=nnx.Rngs(0))
      >>> hidden = model(tokens, segment_ids, attention_mask=tokens_are_real)  # [B, T, D]
      >>> model.mlm_logits(hidden), model.nsp_logits(model.pool(hidden))  # [B, T, V], [B, 2]
    """

    def __init__(self, cfg: EncoderOnlyConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dtype, d = cfg.compute_dtype, cfg.d_model
        self.embed = Embedding(cfg.vocab_size, d, scaled=False, dtype=dtype, rngs=rngs)
        self.pos_embed = param(_INIT, rngs.params(), (cfg.max_len, d), (None, "embed"))
        self.type_embed = param(_INIT, rngs.params(), (cfg.type_vocab_size, d), (None, "embed"))
        self.embed_norm = LayerNorm(d, eps=cfg.layer_norm_eps, dtype=dtype)
        self.encoder = Stack(block_spec(cfg, causal=False, cross_attention=False), cfg.num_layers,
                             rngs=rngs)  # fmt: skip
        self.pooler = _Dense(d, d, ("embed", "mlp"), dtype=dtype, rngs=rngs)
        self.mlm_transform = _Dense(d, d, ("embed", "mlp"), dtype=dtype, rngs=rngs)
        self.mlm_norm = LayerNorm(d, eps=cfg.layer_norm_eps, dtype=dtype)
        self.mlm_bias = param(_ZEROS, rngs.params(), (cfg.vocab_size,), ("vocab",))
        self.nsp_head = _Dense(d, 2, ("embed", None), dtype=dtype, rngs=rngs)
        self.sequence_head = _Dense(d, cfg.num_labels, ("embed", None), dtype=dtype, rngs=rngs)
        self.token_head = _Dense(d, cfg.num_labels, ("embed", None), dtype=dtype, rngs=rngs)

    def __call__(
        self,
        tokens: Int[Array, "B T"],
        segment_ids: Int[Array, "B T"] | None = None,
        *,
        attention_mask: Bool[Array, "B T"] | None = None,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_attention: bool = False,
    ):
        """Hidden states `[B, T, D]` of every position.

        Args:
          tokens: token ids `[B, T]`; their values never mask anything.
          segment_ids: the token types (0 for `[CLS] A [SEP]`, 1 for `B [SEP]`; default all 0).
          attention_mask: `[B, T]`, True at real tokens, False at padding, which is never
            attended to: a padded row's real positions get what the row alone gives. None:
            every token is real. For rows laid out by `transformer_jax.data.bert.inputs`,
            `real_tokens(tokens)` is this mask.
          rng, deterministic: dropout's key, and whether dropout is off.
          return_attention: also return the per-layer weights `[B, N, T, T]`.
        """
        if not deterministic and rng is None:
            raise ValueError("EncoderOnly: deterministic=False (dropout on) needs rng=<PRNG key>.")
        length = tokens.shape[1]
        if length > self.cfg.max_len:
            raise ValueError(
                f"EncoderOnly: {length} tokens exceed the learned positions "
                f"(EncoderOnlyConfig.max_len={self.cfg.max_len}); truncate the input."
            )
        mask = None
        if attention_mask is not None:
            mask = key_mask(attention_mask)
        if segment_ids is None:
            segment_ids = jnp.zeros_like(tokens)
        x = (
            self.embed(tokens)
            + self.pos_embed[...][:length].astype(self.embed.dtype)[None]
            + jnp.take(self.type_embed[...], segment_ids, axis=0).astype(self.embed.dtype)
        )
        x = dropout(self.embed_norm(x), self.cfg.dropout_rate, fold(rng, 0), deterministic)
        hidden, weights = self.encoder(
            constrain_batch(x),
            mask,
            rng=fold(rng, 1),
            deterministic=deterministic,
            return_weights=return_attention,
        )
        if return_attention:
            return hidden, [w["self"] for w in weights]
        return hidden

    def pool(
        self, hidden: Float[Array, "B T D"], attention_mask: Bool[Array, "B T"] | None = None
    ) -> Float[Array, "B D"]:
        """The whole input as one vector: tanh(W h_[CLS] + b) (`pool="cls"`, BERT's; position
        0 is `[CLS]`), or with `pool="mean"` the mean of the hidden states where
        `attention_mask` is True (every position when None), which skips the pooler."""
        if self.cfg.pool == "cls":
            return jnp.tanh(self.pooler(hidden[:, 0]))
        if attention_mask is None:
            return hidden.mean(axis=1)
        weights = attention_mask.astype(hidden.dtype)[..., None]  # [B, T, 1]
        return (hidden * weights).sum(axis=1) / jnp.maximum(weights.sum(axis=1), 1)

    def mlm_logits(self, hidden: Float[Array, "B T D"]) -> Float[Array, "B T V"]:
        """Masked-LM logits (float32): GELU dense, LayerNorm, the tied embedding, a bias."""
        h = self.mlm_norm(ACTIVATIONS[self.cfg.activation](self.mlm_transform(hidden)))
        return self.embed.attend(h) + self.mlm_bias[...]

    def nsp_logits(self, pooled: Float[Array, "B D"]) -> Float[Array, "B 2"]:
        """Next-sentence logits: [IsNext, NotNext] (float32)."""
        return self.nsp_head(pooled).astype(jnp.float32)

    def classify(
        self,
        pooled: Float[Array, "B D"],
        *,
        rng: jax.Array | None = None,
        deterministic: bool = True,
    ) -> Float[Array, "B K"]:
        """Sequence (or sentence-pair) classification logits from the pooled output."""
        pooled = dropout(pooled, self.cfg.dropout_rate, rng, deterministic)
        return self.sequence_head(pooled).astype(jnp.float32)

    def token_logits(
        self,
        hidden: Float[Array, "B T D"],
        *,
        rng: jax.Array | None = None,
        deterministic: bool = True,
    ) -> Float[Array, "B T K"]:
        """Token classification logits (e.g. tagging) for every position."""
        hidden = dropout(hidden, self.cfg.dropout_rate, rng, deterministic)
        return self.token_head(hidden).astype(jnp.float32)
