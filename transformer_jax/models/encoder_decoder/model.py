"""The encoder-decoder Transformer (§3, Figure 1) and its KV-cached decoding step.

The encoder is a `Stack` of non-causal blocks, the decoder a `Stack` of causal blocks with
encoder-decoder attention; both come from `transformer_jax.nn`. Beyond the paper, the config can
describe Marian's models (OPUS-MT): sines-then-cosines positions, a SiLU feed-forward, a bias on
the output logits, unscaled embeddings.

Letters: B batch, S source length, T target length, C cache length, N heads, H head dim,
D model dim, V vocabulary.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from transformer_jax.deprecation import deprecated_names
from transformer_jax.models.encoder_decoder.config import EncoderDecoderConfig
from transformer_jax.models.fields import SINUSOIDAL, block_spec
from transformer_jax.nn import (
    Embedding,
    Segments,
    Stack,
    dropout,
    fold,
    padding_mask,
    sinusoidal_encoding,
)
from transformer_jax.nn.layers import vocab_logits, xavier_uniform
from transformer_jax.sharding import constrain_batch

Tokens = Int[Array, "B L"]


class EncoderDecoder(nnx.Module):
    """Encoder-decoder Transformer of Vaswani et al. (2017).

    Example:
      >>> cfg = EncoderDecoderConfig.base(vocab_size=37000)
      >>> model = EncoderDecoder(cfg, rngs=nnx.Rngs(0))
      >>> logits = model(src, tgt_in)  # [B, T, V]

    Dropout is off unless `deterministic=False`, which needs an explicit `rng` key.
    """

    def __init__(self, cfg: EncoderDecoderConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        dtype = cfg.compute_dtype

        def embedding():
            return Embedding(
                cfg.vocab_size, cfg.d_model, scaled=cfg.scale_embeddings, dtype=dtype, rngs=rngs
            )

        self.src_embed = embedding()
        self.tgt_embed = self.src_embed if cfg.share_embeddings else embedding()
        if cfg.positional == "learned":
            init = jax.nn.initializers.normal(stddev=0.02)
            self.pos_embed = nnx.Param(
                init(rngs.params(), (cfg.max_len, cfg.d_model)), logical_axes=(None, "embed")
            )
        encoder = block_spec(cfg, causal=False, cross_attention=False)  # §3.1
        decoder = block_spec(cfg, causal=True, cross_attention=True)  # masked, + memory
        self.encoder = Stack(encoder, cfg.num_encoder_layers, rngs=rngs)
        self.decoder = Stack(decoder, cfg.num_decoder_layers, rngs=rngs)
        if not cfg.tie_output:
            self.output_proj = nnx.Param(
                xavier_uniform()(rngs.params(), (cfg.d_model, cfg.vocab_size)),
                logical_axes=("embed", "vocab"),
            )
        if cfg.logits_bias:  # Marian's final_logits_bias; zeros until a checkpoint sets it.
            self.logits_bias = nnx.Param(
                jnp.zeros((cfg.vocab_size,), jnp.float32), logical_axes=("vocab",)
            )

    # ----------------------------------------------------------------------------- embeddings
    def _positions_encoding(self, positions: Int[Array, "B L"]) -> Float[Array, "B L D"]:
        if self.cfg.positional in SINUSOIDAL:
            layout = SINUSOIDAL[self.cfg.positional]
            return sinusoidal_encoding(positions, self.cfg.d_model, layout=layout)
        return jnp.take(self.pos_embed[...], positions, axis=0)

    def _embed(self, embed: Embedding, tokens, positions, rng, deterministic):
        """Embedding * sqrt(d_model) (unless `scale_embeddings=False`) + positional encoding,
        then dropout (§3.4, §3.5, §5.4)."""
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
        x = embed(tokens) + self._positions_encoding(positions).astype(embed.dtype)
        return constrain_batch(dropout(x, self.cfg.dropout_rate, rng, deterministic))

    def _logits(
        self, y: Float[Array, "B T D"], tied_transposed: Float[Array, "D V"] | None = None
    ) -> Float[Array, "B T V"]:
        """Float32 output logits, plus the `logits_bias` when the config has one (every pass:
        teacher-forced, cached and uncached decoding). `tied_transposed` (decoding) is the tied
        table's E^T made before the loop (see `Embedding.transposed_table`)."""
        if self.cfg.tie_output:
            logits = self.tgt_embed.attend(y, tied_transposed)
        else:
            logits = vocab_logits("BTD,DV->BTV", y, self.output_proj[...], 1)
        if self.cfg.logits_bias:
            logits = logits + self.logits_bias[...]
        return logits

    # ---------------------------------------------------------------------------------- masks
    def source_mask(self, src: Tokens, src_segment_ids: Tokens | None = None) -> Bool[Array, "B S"]:
        """True at real source tokens (segment id != 0 when packed, else token != pad_id)."""
        if src_segment_ids is not None:
            return src_segment_ids != 0
        return src != self.cfg.pad_id

    # --------------------------------------------------------------------------------- passes
    def encode(
        self,
        src: Int[Array, "B S"],
        *,
        src_segment_ids: Int[Array, "B S"] | None = None,
        src_positions: Int[Array, "B S"] | None = None,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_attention: bool = False,
    ):
        """Source tokens -> memory `[B, S, D]` (and per-layer self-attention weights if asked)."""
        if src_segment_ids is not None:
            mask = Segments(src_segment_ids, src_segment_ids)
        else:
            mask = padding_mask(src, self.cfg.pad_id)
        x = self._embed(self.src_embed, src, src_positions, fold(rng, 0), deterministic)
        memory, weights = self.encoder(
            x,
            mask,
            rng=fold(rng, 1),
            deterministic=deterministic,
            return_weights=return_attention,
        )
        if return_attention:
            return memory, [w["self"] for w in weights]
        return memory

    def decode(
        self,
        tgt_in: Int[Array, "B T"],
        memory: Float[Array, "B S D"],
        src_mask: Bool[Array, "B S"],
        *,
        tgt_segment_ids: Int[Array, "B T"] | None = None,
        src_segment_ids: Int[Array, "B S"] | None = None,
        tgt_positions: Int[Array, "B T"] | None = None,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_attention: bool = False,
    ):
        """Teacher-forced decoder: shifted targets + memory -> logits `[B, T, V]` (float32).

        `src_mask` is `source_mask(src, src_segment_ids)`. With packed rows pass both segment
        id arrays so that each target segment sees only its own source segment.
        """
        if tgt_segment_ids is not None:
            if src_segment_ids is None:
                raise ValueError("decode: tgt_segment_ids given without src_segment_ids.")
            self_mask = Segments(tgt_segment_ids, tgt_segment_ids)
            cross_mask = Segments(tgt_segment_ids, src_segment_ids)
        else:
            # Causal attention alone keeps every real target from reading the right padding;
            # target ids never mask (Marian's decoder starts from the pad token itself).
            self_mask = None
            cross_mask = src_mask[:, None, None, :]
        y = self._embed(self.tgt_embed, tgt_in, tgt_positions, fold(rng, 2), deterministic)
        y, weights = self.decoder(
            y,
            self_mask,
            memory=memory,
            cross_mask=cross_mask,
            rng=fold(rng, 3),
            deterministic=deterministic,
            return_weights=return_attention,
        )
        logits = self._logits(y)
        if return_attention:
            return logits, {
                "decoder_self": [w["self"] for w in weights],
                "decoder_cross": [w["cross"] for w in weights],
            }
        return logits

    def __call__(
        self,
        src: Int[Array, "B S"],
        tgt_in: Int[Array, "B T"],
        *,
        src_segment_ids: Int[Array, "B S"] | None = None,
        tgt_segment_ids: Int[Array, "B T"] | None = None,
        src_positions: Int[Array, "B S"] | None = None,
        tgt_positions: Int[Array, "B T"] | None = None,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_attention: bool = False,
    ):
        """Full teacher-forced pass: logits `[B, T, V]` (float32).

        With `return_attention=True` returns `(logits, weights)` where `weights` maps
        "encoder", "decoder_self" and "decoder_cross" to per-layer `[B, N, q_len, kv_len]` arrays.
        """
        if not deterministic and rng is None:
            raise ValueError(
                "EncoderDecoder: deterministic=False (dropout on) needs rng=<PRNG key>."
            )
        # The encoder's weights only when asked: computing them keeps its layers unrolled and
        # off the attention kernel.
        encoded = self.encode(
            src,
            src_segment_ids=src_segment_ids,
            src_positions=src_positions,
            rng=rng,
            deterministic=deterministic,
            return_attention=return_attention,
        )
        memory, enc_ws = encoded if return_attention else (encoded, None)
        out = self.decode(
            tgt_in,
            memory,
            self.source_mask(src, src_segment_ids),
            tgt_segment_ids=tgt_segment_ids,
            src_segment_ids=src_segment_ids,
            tgt_positions=tgt_positions,
            rng=rng,
            deterministic=deterministic,
            return_attention=return_attention,
        )
        if return_attention:
            logits, dec_ws = out
            return logits, {"encoder": enc_ws, **dec_ws}
        return out

    # ------------------------------------------------------------------------------ decoding
    def init_cache(
        self, memory: Float[Array, "B S D"], src_mask: Bool[Array, "B S"], max_len: int
    ) -> dict:
        """Decoding state for up to `max_len` target positions.

        The encoder-decoder keys and values of `memory` are computed here, once; each layer's
        self-attention keys/values start empty and fill one position per `decode_step`. A tied
        output projection's E^T is laid out here once too ("output_table").
        """
        if self.cfg.positional == "learned" and max_len > self.cfg.max_len:
            raise ValueError(
                f"init_cache: max_len={max_len} exceeds the learned positions' "
                f"EncoderDecoderConfig.max_len={self.cfg.max_len}."
            )
        layers = self.decoder.init_cache(memory.shape[0], max_len, memory)
        cache = {"index": jnp.zeros((), jnp.int32), "src_mask": src_mask, "layers": layers}
        if self.cfg.tie_output:
            cache["output_table"] = self.tgt_embed.transposed_table()
        return cache

    def decode_step(
        self, tokens: Int[Array, " B"], cache: dict
    ) -> tuple[Float[Array, "B V"], dict]:
        """Logits for the next position given the token at position `cache["index"]`.

        Costs one position's projections plus attention over the cache: past positions are
        never recomputed. Returns float32 logits `[B, V]` and the advanced cache. `tokens` may
        hold G consecutive rows per input of the cache (beams, after `repeat_cache`): the
        encoder-decoder keys/values and `src_mask` keep one row per input.
        """
        index = cache["index"]
        positions = jnp.broadcast_to(index, (tokens.shape[0], 1))
        y = self._embed(self.tgt_embed, tokens[:, None], positions, None, True)
        cross_mask = cache["src_mask"][:, None, None, :]
        y, layers = self.decoder.decode(y, cache["layers"], cross_mask=cross_mask)
        logits = self._logits(y, cache.get("output_table"))[:, 0]
        return logits, {**cache, "index": index + 1, "layers": layers}


# The name from when translation was the only task; it goes in the next release.
__getattr__ = deprecated_names(__name__, {"Transformer": f"{__name__}.EncoderDecoder"})
