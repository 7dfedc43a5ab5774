"""The decoder-only language model (GPT): the Transformer's decoder without cross-attention.

A `Stack` of causal blocks from `transformer_jax.nn` over token + position embeddings, with the
output projection tied to the token embedding. Decoding goes through the blocks' `KVCache`: a
prompt is fed in one call, then one token per call.

Letters: B batch, T length, C cache length, N heads, D model dim, V vocabulary.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from transformer_jax.models.decoder_only.config import DecoderOnlyConfig
from transformer_jax.models.fields import SINUSOIDAL, block_spec
from transformer_jax.nn import (
    Embedding,
    Segments,
    Stack,
    combine_masks,
    dropout,
    fold,
    key_mask,
    sinusoidal_encoding,
)
from transformer_jax.sharding import constrain_batch


def positions_after_padding(attention_mask: Bool[Array, "B T"]) -> Int[Array, "B T"]:
    """Positions counted over real tokens only: a left-padded row's first real token gets 0.

    `max(cumsum(mask) - 1, 0)`, Hugging Face's positions for padded prompts; padding takes
    the position of the real token before it (0 before the first), which nothing reads.
    """
    return jnp.maximum(jnp.cumsum(attention_mask.astype(jnp.int32), axis=1) - 1, 0)


class DecoderOnly(nnx.Module):
    """GPT-style language model: logits for the next token at every position.

    Example:
      >>> model = DecoderOnly(DecoderOnlyConfig.gpt2_small(), rngs=nnx.Rngs(0))
      >>> logits = model(tokens)  # [B, T, V]
      >>> logits = model(tokens, attention_mask=tokens_are_real)  # padded rows

    Padding is never read from token values (a token with id `cfg.pad_id` is attended to like
    any other): a padded batch says where its padding is with `attention_mask` or, packed,
    `segment_ids`.
    """

    def __init__(self, cfg: DecoderOnlyConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dtype = cfg.compute_dtype
        # GPT's embedding is not scaled by sqrt(d_model); weights with std 0.02.
        self.embed = Embedding(cfg.vocab_size, cfg.d_model, scaled=False, dtype=dtype, rngs=rngs)
        if cfg.positional == "learned":
            init = jax.nn.initializers.normal(stddev=0.01)
            self.pos_embed = nnx.Param(
                init(rngs.params(), (cfg.max_len, cfg.d_model)), logical_axes=(None, "embed")
            )
        spec = block_spec(cfg, causal=True, cross_attention=False)  # no encoder to attend to
        self.decoder = Stack(spec, cfg.num_layers, rngs=rngs)

    def _embed(self, tokens, positions, rng, deterministic) -> Float[Array, "B T D"]:
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
        if self.cfg.positional in SINUSOIDAL:
            layout = SINUSOIDAL[self.cfg.positional]
            pos = sinusoidal_encoding(positions, self.cfg.d_model, layout=layout)
        else:
            pos = jnp.take(self.pos_embed[...], positions, axis=0)
        x = self.embed(tokens) + pos.astype(self.embed.dtype)
        return constrain_batch(dropout(x, self.cfg.dropout_rate, rng, deterministic))

    def __call__(
        self,
        tokens: Int[Array, "B T"],
        *,
        attention_mask: Bool[Array, "B T"] | None = None,
        segment_ids: Int[Array, "B T"] | None = None,
        positions: Int[Array, "B T"] | None = None,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_attention: bool = False,
    ):
        """Teacher-forced pass: float32 logits `[B, T, V]` for the token after each position.

        Args:
          tokens: token ids `[B, T]`; their values never mask anything.
          attention_mask: `[B, T]`, True at real tokens, False at padding, which is never
            attended to. None: every token is real, which is also right for right padding
            (no position attends to a later one). With it and no `positions`, positions count
            real tokens only (`positions_after_padding`), so a left-padded prompt gives what
            `init_cache(start=...)` + `decode_step` give.
          segment_ids: packed rows: the document of each token (0 = padding), with
            per-document `positions`; no document then attends to another. (With
            `attention_mask` too, a key must pass both.)
          positions: position ids `[B, T]` (default 0, 1, 2, ... or as above).
          rng, deterministic: dropout's key, and whether dropout is off.
          return_attention: also return the per-layer self-attention weights `[B, N, T, T]`.
        """
        if not deterministic and rng is None:
            raise ValueError("DecoderOnly: deterministic=False (dropout on) needs rng=<PRNG key>.")
        if self.cfg.positional == "learned" and tokens.shape[1] > self.cfg.max_len:
            raise ValueError(
                f"DecoderOnly: {tokens.shape[1]} tokens exceed the learned positions "
                f"(DecoderOnlyConfig.max_len={self.cfg.max_len})."
            )
        mask = None
        if attention_mask is not None:
            mask = key_mask(attention_mask)
            if positions is None:
                positions = positions_after_padding(attention_mask)
        if segment_ids is not None:
            mask = combine_masks(Segments(segment_ids, segment_ids), mask)
        x = self._embed(tokens, positions, fold(rng, 0), deterministic)
        y, weights = self.decoder(
            x, mask, rng=fold(rng, 1), deterministic=deterministic, return_weights=return_attention
        )
        logits = self.embed.attend(y)
        if return_attention:
            return logits, [w["self"] for w in weights]
        return logits

    # ------------------------------------------------------------------------------ decoding
    def init_cache(self, batch: int, max_len: int, start: Int[Array, " B"] | None = None) -> dict:
        """An empty cache for up to `max_len` positions (prompt and generated tokens).

        `start[b]` is the number of left-padding positions of row b (prompts of different
        lengths, right-aligned): they are never attended to, and row b's first real token
        gets position 0, as in the full pass with `attention_mask` False on them. The tied
        output table's E^T is laid out here once ("output_table", see
        `Embedding.transposed_table`).
        """
        if self.cfg.positional == "learned" and max_len > self.cfg.max_len:
            raise ValueError(
                f"init_cache: max_len={max_len} exceeds the learned positions' "
                f"DecoderOnlyConfig.max_len={self.cfg.max_len}."
            )
        start = jnp.zeros((batch,), jnp.int32) if start is None else jnp.asarray(start, jnp.int32)
        return {
            "index": jnp.zeros((), jnp.int32),
            "start": start,
            "layers": self.decoder.init_cache(batch, max_len),
            "output_table": self.embed.transposed_table(),
        }

    def decode_step(
        self, tokens: Int[Array, "B T"], cache: dict
    ) -> tuple[Float[Array, "B T V"], dict]:
        """Logits after each of the next `T` tokens (a whole prompt at once, or one token).

        Past positions are never recomputed: each call costs its own positions' projections
        plus attention over the cache. Returns float32 logits and the advanced cache.
        """
        index, start = cache["index"], cache["start"]
        columns = index + jnp.arange(tokens.shape[1])  # [T] cache slots being written
        positions = jnp.maximum(columns[None, :] - start[:, None], 0)  # [B, T]
        slots = jnp.arange(cache["layers"][0]["self"].key.shape[2])  # [C]
        live = (slots[None, :] >= start[:, None])[:, None, None, :]  # [B, 1, 1, C]: no padding
        x = self._embed(tokens, positions, None, True)
        y, layers = self.decoder.decode(x, cache["layers"], live)
        new = {**cache, "index": index + tokens.shape[1], "layers": layers}
        return self.embed.attend(y, cache["output_table"]), new
