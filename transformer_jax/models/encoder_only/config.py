"""The encoder-only model's hyper-parameters (BERT), with the BERT-base preset.

BERT is the Transformer's encoder used alone (Devlin et al. 2019): bidirectional self-attention
over `[CLS] A [SEP] B [SEP]`, token + segment + learned position embeddings, post-LN blocks with
exact (erf) GELU. `bert_base` is BERT-base (12 layers, d 768, 12 heads, d_ff 3072, 512
positions, 2 segments, a 30,522-piece vocabulary); `cpu` a model a laptop trains in minutes;
`tiny` one for tests.
"""

from __future__ import annotations

import dataclasses

from transformer_jax.models.fields import TINY, TransformerFields, check_transformer_fields
from transformer_jax.tokens import PAD_ID

POOLS = ("cls", "mean")  # BERT's pooler on [CLS], or the mean over the real tokens.


@dataclasses.dataclass(frozen=True)
class EncoderOnlyConfig(TransformerFields):
    """Shape and behaviour of the encoder-only model; validated on construction."""

    vocab_size: int  # Tokenizer vocabulary (BERT-base: 30,522 WordPieces).
    num_layers: int = 12  # Bidirectional self-attention blocks.
    d_model: int = 768  # Hidden size.
    num_heads: int = 12  # Attention heads; head dim = d_model / num_heads.
    d_ff: int = 3072  # Feed-forward inner width (4 d_model).
    dropout_rate: float = 0.1  # On embeddings and sublayer outputs (BERT: 0.1).
    attention_dropout_rate: float = 0.1  # On attention weights (BERT: 0.1).
    norm: str = "post"  # BERT normalises after each residual ("post"); "pre" is selectable.
    activation: str = "gelu"  # Exact (erf) GELU as in BERT; "gelu_tanh", "relu" or "silu".
    max_len: int = 512  # Learned positions: the longest input.
    type_vocab_size: int = 2  # Segments (token types): A and B.
    use_bias: bool = True  # Biases in attention projections (keys never have one).
    layer_norm_eps: float = 1e-12  # LayerNorm epsilon (BERT: 1e-12).
    num_labels: int = 2  # Classes of the sequence / token classification heads.
    pool: str = "cls"  # The whole input as one vector: "cls" (BERT's pooler) or "mean".
    dtype: str = "float32"  # Computation dtype: "float32" or "bfloat16"; parameters stay float32.
    attention_kernel: str = "auto"  # "auto" (per device), "reference", "xla", "cudnn", "splash".
    scan_layers: bool = False  # Run the layers as one lax.scan: one block compiled, any depth.
    remat: str = "none"  # Backward pass recomputes: "none", "full" (least memory) or "dots".
    pad_id: int = PAD_ID  # Id batches pad with; the model never reads it (masks mark padding).

    def __post_init__(self):
        if self.pool not in POOLS:
            raise ValueError(
                f"EncoderOnlyConfig.pool={self.pool!r}: use one of {', '.join(map(repr, POOLS))} "
                f"(tanh(W h_[CLS] + b) as BERT, or the mean of the real tokens' hidden states)."
            )
        check_transformer_fields(
            self,
            positive=(
                "vocab_size",
                "num_layers",
                "d_model",
                "num_heads",
                "d_ff",
                "max_len",
                "type_vocab_size",
                "num_labels",
            ),
        )

    PRESETS = ("bert_base", "cpu", "tiny")  # Class methods giving named sizes.

    @classmethod
    def bert_base(cls, vocab_size: int = 30522, **overrides) -> EncoderOnlyConfig:
        """BERT-base: 12 layers, d 768, 12 heads, 512 positions (about 110M parameters)."""
        return cls(vocab_size=vocab_size, **overrides)

    @classmethod
    def cpu(cls, vocab_size: int = 4096, **overrides) -> EncoderOnlyConfig:
        """4 layers, d 256, 128 positions: an encoder that a 2-core CPU trains in minutes."""
        fields = dict(num_layers=4, d_model=256, num_heads=4, d_ff=1024, max_len=128)
        return cls(vocab_size=vocab_size, **{**fields, **overrides})

    @classmethod
    def tiny(cls, vocab_size: int = 64, **overrides) -> EncoderOnlyConfig:
        """2 layers, d 32, no dropout: for tests."""
        fields = dict(TINY, num_layers=2, attention_dropout_rate=0.0)
        return cls(vocab_size=vocab_size, **{**fields, **overrides})
