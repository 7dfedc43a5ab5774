"""The blocks several families share, mapped once (see `transformer_jax.interop.tables`)."""

from __future__ import annotations

from transformer_jax.interop.tables import Row, attention, dense, norm


def encoder_layer(self_attn: str, attn_norm: str, ffn_norm: str, *, keep_bias: bool = True,
                  older_norms: bool = False) -> list[Row]:  # fmt: skip
    """A Hugging Face BERT-style encoder layer (BERT: `attention.self`, post-LN norms
    `attention.output.LayerNorm` and `output.LayerNorm`; ViT: `attention.attention`, pre-LN
    `layernorm_before` and `layernorm_after`), relative to `encoder.layer.{i}.` and to our
    `encoder/layers/{i}/`."""
    return [
        *attention(
            "self_attn",
            [f"{self_attn}.{name}" for name in ("query", "key", "value")],
            "attention.output.dense",
            keep_bias=keep_bias,
        ),
        *norm("self_attn_norm", attn_norm, older_norms),
        *dense("ffn/w1", "ffn/b1", "intermediate.dense", "d", "f"),
        *dense("ffn/w2", "ffn/b2", "output.dense", "f", "d"),
        *norm("ffn_norm", ffn_norm, older_norms),
    ]


BERT_LAYER = encoder_layer(
    "attention.self", "attention.output.LayerNorm", "output.LayerNorm", older_norms=True
)
VIT_LAYER = encoder_layer("attention.attention", "layernorm_before", "layernorm_after")
