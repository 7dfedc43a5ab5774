"""The encoder-decoder's hyper-parameters: one frozen dataclass, with the Table 3 presets.

`EncoderDecoderConfig.base(vocab_size=37000)` and `EncoderDecoderConfig.big(...)` reproduce the two
rows of Table 3 of Vaswani et al. (2017); `tiny` is a small model for tests and laptops. These
presets are the only place the paper's sizes are written; training configs start from them
(`transformer_jax.models.config_section("encoder_decoder", "base")`).
"""

from __future__ import annotations

import dataclasses

from transformer_jax.deprecation import deprecated_names
from transformer_jax.models.fields import TINY, TransformerFields, check_transformer_fields
from transformer_jax.tokens import PAD_ID


@dataclasses.dataclass(frozen=True)
class EncoderDecoderConfig(TransformerFields):
    """Shape and behaviour of the paper's encoder-decoder Transformer.

    Every field is validated on construction; a bad value raises `ValueError` naming the field.
    """

    vocab_size: int  # Shared source/target vocabulary size (§3.4: one vocabulary, one embedding).
    num_encoder_layers: int = 6  # N for the encoder stack (§3.1).
    num_decoder_layers: int = 6  # N for the decoder stack (§3.1).
    d_model: int = 512  # Width of every residual stream (§3.1).
    num_heads: int = 8  # h, parallel attention heads (§3.2.2); d_k = d_v = d_model / h.
    d_ff: int = 2048  # Inner width of the position-wise feed-forward network (§3.3).
    dropout_rate: float = 0.1  # P_drop on sublayer outputs and embedding sums (§5.4).
    attention_dropout_rate: float = 0.0  # Dropout on attention weights (not in the paper).
    norm: str = "post"  # "post" = LayerNorm(x + Sublayer(x)) as in §3.1; "pre" = x + ...
    activation: str = "relu"  # FFN non-linearity: ReLU in eq. (2), "gelu", "gelu_tanh", "silu".
    positional: str = "sinusoidal"  # §3.5; "sinusoidal_halves" (sines, then cosines); "learned".
    max_len: int = 256  # Longest sequence for learned positions and the decoding cache.
    share_embeddings: bool = True  # One embedding matrix for source and target (§3.4).
    tie_output: bool = True  # Pre-softmax projection = (target) embedding transposed (§3.4).
    scale_embeddings: bool = True  # Token embeddings times sqrt(d_model) (§3.4); False: unscaled.
    logits_bias: bool = False  # A bias [V] added to the output logits (Marian's final_logits_bias).
    use_bias: bool = True  # Biases in attention projections.
    layer_norm_eps: float = 1e-6  # LayerNorm epsilon.
    dtype: str = "float32"  # Computation dtype: "float32" or "bfloat16"; parameters stay float32.
    attention_kernel: str = "auto"  # "auto" (per device), "reference", "xla", "cudnn", "splash".
    scan_layers: bool = False  # Run the layers as one lax.scan: one block compiled, any depth.
    remat: str = "none"  # Backward pass recomputes: "none", "full" (least memory) or "dots".
    pad_id: int = PAD_ID  # Token id that is padding; it never influences a non-pad output.

    def __post_init__(self):
        check_transformer_fields(
            self,
            positive=("vocab_size", "d_model", "num_heads", "d_ff", "max_len"),
            non_negative=("num_encoder_layers", "num_decoder_layers"),
        )

    PRESETS = ("base", "big", "tiny")  # Class methods giving named sizes.

    @classmethod
    def base(cls, vocab_size: int = 37000, **overrides) -> EncoderDecoderConfig:
        """Table 3, row "base": N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1 (about 63M params)."""
        return cls(vocab_size=vocab_size, **overrides)

    @classmethod
    def big(cls, vocab_size: int = 37000, **overrides) -> EncoderDecoderConfig:
        """Table 3, row "big": N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3 (about 213M)."""
        fields = dict(d_model=1024, d_ff=4096, num_heads=16, dropout_rate=0.3)
        return cls(vocab_size=vocab_size, **{**fields, **overrides})

    @classmethod
    def tiny(cls, vocab_size: int = 64, **overrides) -> EncoderDecoderConfig:
        """A two-layer, 32-wide model for tests and quick experiments."""
        fields = dict(TINY, num_encoder_layers=2, num_decoder_layers=2)
        return cls(vocab_size=vocab_size, **{**fields, **overrides})


# The name from when translation was the only task; it goes in the next release.
__getattr__ = deprecated_names(__name__, {"TransformerConfig": f"{__name__}.EncoderDecoderConfig"})
