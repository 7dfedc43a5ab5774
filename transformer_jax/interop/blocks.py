"""The blocks several families share, mapped once (see `transformer_jax.interop.tables`)."""

from __future__ import annotations

from typing import Any

from transformer_jax.interop.tables import Row, attention, dense, norm

# The encoder's sizes and dropouts as ours and Hugging Face's BERT and ViT configs name them.
_ENCODER_SIZES = (("num_layers", "num_hidden_layers"), ("d_model", "hidden_size"),
                  ("num_heads", "num_attention_heads"), ("d_ff", "intermediate_size"))  # fmt: skip
_ENCODER_DROPOUTS = (("dropout_rate", "hidden_dropout_prob"),
                     ("attention_dropout_rate", "attention_probs_dropout_prob"))  # fmt: skip


def encoder_fields(hf: dict[str, Any], default_dropout: float) -> dict[str, Any]:
    """Our encoder config's sizes and dropouts from a BERT or ViT `config.json` (a dropout it
    leaves out is `default_dropout`, the family's own default)."""
    return {ours: int(hf[theirs]) for ours, theirs in _ENCODER_SIZES} | {
        ours: float(hf.get(theirs, default_dropout)) for ours, theirs in _ENCODER_DROPOUTS
    }


def hf_encoder_fields(cfg) -> dict[str, Any]:
    """`encoder_fields`' inverse: the `config.json` entries of `cfg`'s sizes and dropouts."""
    return {theirs: getattr(cfg, ours) for ours, theirs in _ENCODER_SIZES + _ENCODER_DROPOUTS}


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
