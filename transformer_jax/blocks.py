"""Encoder and decoder layers and stacks (§3.1), with post-LN (the paper) or pre-LN residuals.

Letters: B batch, T target length, S source length, N heads, H head dim, D model dim,
C cache length.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from transformer_jax.attention import dropout
from transformer_jax.config import TransformerConfig
from transformer_jax.layers import FeedForward, LayerNorm, MultiHeadAttention
from transformer_jax.sharding import constrain_batch


def fold(rng: jax.Array | None, i: int) -> jax.Array | None:
    """A distinct key per sublayer and layer; `None` stays `None` (deterministic runs)."""
    return None if rng is None else jax.random.fold_in(rng, i)


def residual(x, sublayer, norm: LayerNorm, cfg: TransformerConfig, rng, deterministic):
    """One residual sublayer: post-LN `LN(x + Drop(f(x)))` (§3.1, §5.4), or pre-LN
    `x + Drop(f(LN(x)))`.

    `sublayer(h, rng)` returns `(output, attention weights or None)`.
    """
    inner, outer = fold(rng, 0), fold(rng, 1)
    if cfg.norm == "post":
        y, weights = sublayer(x, inner)
        return norm(x + dropout(y, cfg.dropout_rate, outer, deterministic)), weights
    y, weights = sublayer(norm(x), inner)
    return x + dropout(y, cfg.dropout_rate, outer, deterministic), weights


def _attention(cfg: TransformerConfig, rngs: nnx.Rngs) -> MultiHeadAttention:
    return MultiHeadAttention(
        cfg.d_model,
        cfg.num_heads,
        use_bias=cfg.use_bias,
        dropout_rate=cfg.attention_dropout_rate,
        dtype=cfg.compute_dtype,
        rngs=rngs,
    )


def _norm(cfg: TransformerConfig) -> LayerNorm:
    return LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps, dtype=cfg.compute_dtype)


def _ffn(cfg: TransformerConfig, rngs: nnx.Rngs) -> FeedForward:
    return FeedForward(
        cfg.d_model, cfg.d_ff, activation=cfg.activation, dtype=cfg.compute_dtype, rngs=rngs
    )


class EncoderLayer(nnx.Module):
    """Self-attention then feed-forward, each wrapped in a residual sublayer (§3.1)."""

    def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.self_attn = _attention(cfg, rngs)
        self.self_attn_norm = _norm(cfg)
        self.ffn = _ffn(cfg, rngs)
        self.ffn_norm = _norm(cfg)

    def __call__(
        self,
        x: Float[Array, "B S D"],
        mask: Bool[Array, "#B #N #S #S"] | None,
        *,
        rng=None,
        deterministic=True,
    ) -> tuple[Float[Array, "B S D"], Float[Array, "B N S S"]]:
        """Returns the layer output and its self-attention weights."""

        def attend(h, key):
            return self.self_attn(
                h, h, mask, rng=key, deterministic=deterministic, return_weights=True
            )

        x, weights = residual(x, attend, self.self_attn_norm, self.cfg, fold(rng, 0), deterministic)
        x, _ = residual(
            x,
            lambda h, _: (self.ffn(h), None),
            self.ffn_norm,
            self.cfg,
            fold(rng, 1),
            deterministic,
        )
        return x, weights


class DecoderLayer(nnx.Module):
    """Masked self-attention, encoder-decoder attention, feed-forward (§3.1)."""

    def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.self_attn = _attention(cfg, rngs)
        self.self_attn_norm = _norm(cfg)
        self.cross_attn = _attention(cfg, rngs)
        self.cross_attn_norm = _norm(cfg)
        self.ffn = _ffn(cfg, rngs)
        self.ffn_norm = _norm(cfg)

    def _cross_and_ffn(self, y, cross_kv, cross_mask, rng, deterministic):
        k, v = cross_kv

        def cross(h, key):
            return self.cross_attn.attend(
                h, k, v, cross_mask, rng=key, deterministic=deterministic, return_weights=True
            )

        y, cross_w = residual(y, cross, self.cross_attn_norm, self.cfg, fold(rng, 1), deterministic)
        y, _ = residual(
            y,
            lambda h, _: (self.ffn(h), None),
            self.ffn_norm,
            self.cfg,
            fold(rng, 2),
            deterministic,
        )
        return y, cross_w

    def __call__(
        self,
        y: Float[Array, "B T D"],
        memory: Float[Array, "B S D"],
        self_mask: Bool[Array, "#B #N #T #T"] | None,
        cross_mask: Bool[Array, "#B #N #T #S"] | None,
        *,
        rng=None,
        deterministic=True,
    ) -> tuple[Float[Array, "B T D"], Float[Array, "B N T T"], Float[Array, "B N T S"]]:
        """Teacher-forced pass; returns output, self- and cross-attention weights."""

        def attend(h, key):
            return self.self_attn(
                h, h, self_mask, rng=key, deterministic=deterministic, return_weights=True
            )

        y, self_w = residual(y, attend, self.self_attn_norm, self.cfg, fold(rng, 0), deterministic)
        y, cross_w = self._cross_and_ffn(
            y, self.cross_attn.key_value(memory), cross_mask, rng, deterministic
        )
        return y, self_w, cross_w

    def decode_step(
        self,
        y: Float[Array, "B 1 D"],
        cache: dict[str, Array],
        index: Int[Array, ""],
        cross_mask: Bool[Array, "#B #N #T #S"],
    ) -> tuple[Float[Array, "B 1 D"], dict[str, Array]]:
        """One new target position against cached keys/values; returns output and new cache.

        `cache` holds `k`, `v` `[B, C, N, H]` of the positions decoded so far and `cross_k`,
        `cross_v` `[B, S, N, H]` of the encoder output, computed once by the caller.
        """
        cache_len = cache["k"].shape[1]
        live = (jnp.arange(cache_len) <= index)[None, None, None, :]  # [1, 1, 1, C]
        new_cache = dict(cache)

        def attend(h, _):
            k_new, v_new = self.self_attn.key_value(h)
            start = (0, index, 0, 0)
            new_cache["k"] = jax.lax.dynamic_update_slice(
                cache["k"], k_new.astype(cache["k"].dtype), start
            )
            new_cache["v"] = jax.lax.dynamic_update_slice(
                cache["v"], v_new.astype(cache["v"].dtype), start
            )
            return self.self_attn.attend(h, new_cache["k"], new_cache["v"], live), None

        y, _ = residual(y, attend, self.self_attn_norm, self.cfg, None, True)
        y, _ = self._cross_and_ffn(y, (cache["cross_k"], cache["cross_v"]), cross_mask, None, True)
        return y, new_cache


class Encoder(nnx.Module):
    """N identical encoder layers; pre-LN adds a final LayerNorm."""

    def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
        self.layers = nnx.List(
            [EncoderLayer(cfg, rngs=rngs) for _ in range(cfg.num_encoder_layers)]
        )
        self.final_norm = _norm(cfg) if cfg.norm == "pre" else None

    def __call__(self, x, mask, *, rng=None, deterministic=True):
        """`[B, S, D]` -> (`[B, S, D]`, list of per-layer self-attention weights)."""
        weights = []
        for i, layer in enumerate(self.layers):
            x, w = layer(x, mask, rng=fold(rng, i), deterministic=deterministic)
            x = constrain_batch(x)
            weights.append(w)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, weights


class Decoder(nnx.Module):
    """N identical decoder layers; pre-LN adds a final LayerNorm."""

    def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
        self.layers = nnx.List(
            [DecoderLayer(cfg, rngs=rngs) for _ in range(cfg.num_decoder_layers)]
        )
        self.final_norm = _norm(cfg) if cfg.norm == "pre" else None

    def _finish(self, y):
        return y if self.final_norm is None else self.final_norm(y)

    def __call__(self, y, memory, self_mask, cross_mask, *, rng=None, deterministic=True):
        """`[B, T, D]` -> (`[B, T, D]`, self-attention weights, cross-attention weights)."""
        self_ws, cross_ws = [], []
        for i, layer in enumerate(self.layers):
            y, sw, cw = layer(
                y, memory, self_mask, cross_mask, rng=fold(rng, i), deterministic=deterministic
            )
            y = constrain_batch(y)
            self_ws.append(sw)
            cross_ws.append(cw)
        return self._finish(y), self_ws, cross_ws

    def decode_step(self, y, caches, index, cross_mask):
        """One position through every layer with their caches (a tuple, one dict per layer)."""
        new_caches = []
        for layer, cache in zip(self.layers, caches, strict=True):
            y, cache = layer.decode_step(y, cache, index, cross_mask)
            new_caches.append(cache)
        return self._finish(y), tuple(new_caches)
