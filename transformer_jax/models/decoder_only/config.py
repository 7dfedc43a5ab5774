"""The decoder-only language model's hyper-parameters, with the GPT-1 and GPT-2 presets.

GPT is the Transformer's decoder used alone: causal self-attention blocks without cross-attention
(Radford et al. 2018, 2019). `gpt2_small` is the 124M-parameter GPT-2 (12 layers, d 768, 12 heads,
1,024 positions, pre-LN, a final LayerNorm, tanh-GELU); `gpt1` the original GPT (post-LN, 512
positions); `cpu` a model a laptop trains in minutes; `tiny` one for tests.
"""

from __future__ import annotations

import dataclasses

from transformer_jax.models.fields import TINY, TransformerFields, check_transformer_fields
from transformer_jax.tokens import PAD_ID


@dataclasses.dataclass(frozen=True)
class DecoderOnlyConfig(TransformerFields):
    """Shape and behaviour of the decoder-only language model; validated on construction."""

    vocab_size: int  # Tokenizer vocabulary (GPT-2: 50,257 byte-level BPE tokens).
    num_layers: int = 12  # Causal self-attention blocks.
    d_model: int = 768  # Residual width.
    num_heads: int = 12  # Attention heads; head dim = d_model / num_heads.
    d_ff: int = 3072  # Feed-forward inner width (4 d_model in GPT).
    dropout_rate: float = 0.1  # On embeddings, sublayer outputs (GPT: 0.1).
    attention_dropout_rate: float = 0.1  # On attention weights (GPT: 0.1).
    norm: str = "pre"  # "pre" with a final LayerNorm (GPT-2) or "post" (GPT-1).
    activation: str = "gelu_tanh"  # GPT's tanh-approximated GELU; "gelu" (erf), "relu", "silu".
    positional: str = "learned"  # Learned (GPT), "sinusoidal" (§3.5) or "sinusoidal_halves".
    max_len: int = 1024  # Positions (context length) and the longest decoding cache.
    use_bias: bool = True  # Biases in attention projections (keys never have one).
    layer_norm_eps: float = 1e-5  # LayerNorm epsilon (GPT-2: 1e-5).
    dtype: str = "float32"  # Computation dtype: "float32" or "bfloat16"; parameters stay float32.
    attention_kernel: str = "auto"  # "auto" (per device), "reference", "xla", "cudnn", "splash".
    scan_layers: bool = False  # Run the layers as one lax.scan: one block compiled, any depth.
    remat: str = "none"  # Backward pass recomputes: "none", "full" (least memory) or "dots".
    pad_id: int = PAD_ID  # Id batches pad with; the model never reads it (masks mark padding).

    def __post_init__(self):
        check_transformer_fields(
            self,
            positive=("vocab_size", "num_layers", "d_model", "num_heads", "d_ff", "max_len"),
        )

    PRESETS = ("gpt2_small", "gpt1", "cpu", "tiny")  # Class methods giving named sizes.

    @classmethod
    def gpt2_small(cls, vocab_size: int = 50257, **overrides) -> DecoderOnlyConfig:
        """GPT-2 small: 12 layers, d 768, 12 heads, 1,024 positions (about 124M parameters)."""
        return cls(vocab_size=vocab_size, **overrides)

    @classmethod
    def gpt1(cls, vocab_size: int = 40478, **overrides) -> DecoderOnlyConfig:
        """GPT-1: the same widths, post-LN, 512 positions, a 40k BPE vocabulary."""
        fields = dict(norm="post", max_len=512, layer_norm_eps=1e-5)
        return cls(vocab_size=vocab_size, **{**fields, **overrides})

    @classmethod
    def cpu(cls, vocab_size: int = 4096, **overrides) -> DecoderOnlyConfig:
        """4 layers, d 256: a language model that a 2-core CPU trains in minutes."""
        fields = dict(num_layers=4, d_model=256, num_heads=4, d_ff=1024, max_len=256)
        return cls(vocab_size=vocab_size, **{**fields, **overrides})

    @classmethod
    def tiny(cls, vocab_size: int = 64, **overrides) -> DecoderOnlyConfig:
        """2 layers, d 32, no dropout: for tests."""
        fields = dict(TINY, num_layers=2, attention_dropout_rate=0.0)
        return cls(vocab_size=vocab_size, **{**fields, **overrides})
