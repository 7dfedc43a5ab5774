"""Marian (`MarianMTModel`: the OPUS-MT translation models) -> the encoder-decoder.

Marian is the paper's post-LN encoder-decoder with: sinusoidal positions laid out as all sines
then all cosines (`positional="sinusoidal_halves"`), the SiLU (swish) activation, embeddings
scaled by sqrt(d) (`scale_embedding`), one embedding table shared by the encoder, the decoder
and the output projection, and `final_logits_bias` (`logits_bias=True`). Its decoder starts
from `<pad>`, which the tokenizer gives as its bos. Key biases are dropped (they cancel in the
softmax); the sinusoidal position tables some checkpoints store are recomputed, not read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from transformer_jax.interop.files import ConversionError
from transformer_jax.interop.tables import Dims, Row, attention, dense, norm, read, repeat, reshaped
from transformer_jax.interop.tensors import Source
from transformer_jax.models.encoder_decoder.config import EncoderDecoderConfig

ARCHITECTURES = ("MarianMTModel",)
PREFIXES = ("",)
IGNORED = ("embed_positions.weight",)  # Sinusoidal tables, recomputed by the model.

_ACTIVATIONS = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu",
                "gelu_new": "gelu_tanh"}  # fmt: skip


def _same(hf: dict[str, Any], where: str, a: str, b: str) -> int:
    if hf.get(a) != hf.get(b):
        raise ConversionError(
            f"{where}: {a}={hf.get(a)!r} but {b}={hf.get(b)!r}; transformer_jax's encoder and "
            f"decoder share one value of this size, so this model cannot be expressed."
        )
    return int(hf[a])


def model_config(hf: dict[str, Any], where: str) -> EncoderDecoderConfig:
    """The encoder-decoder config of a Marian config.json."""
    if hf.get("normalize_before") or hf.get("add_final_layer_norm"):
        raise ConversionError(
            f"{where}: normalize_before: pre-LN Marian models cannot be expressed."
        )
    if not hf.get("share_encoder_decoder_embeddings", True):
        raise ConversionError(
            f"{where}: share_encoder_decoder_embeddings=false (separate source and target "
            f"vocabularies); transformer_jax's encoder-decoder shares one vocabulary."
        )
    decoder_vocab = hf.get("decoder_vocab_size")
    if decoder_vocab not in (None, hf["vocab_size"]):
        raise ConversionError(
            f"{where}: decoder_vocab_size={decoder_vocab} differs from vocab_size."
        )
    activation = hf.get("activation_function", "swish")
    if activation not in _ACTIVATIONS:
        raise ConversionError(
            f"{where}: activation_function={activation!r} is not one of {sorted(_ACTIVATIONS)}."
        )
    return EncoderDecoderConfig(
        vocab_size=int(hf["vocab_size"]),
        num_encoder_layers=int(hf["encoder_layers"]),
        num_decoder_layers=int(hf["decoder_layers"]),
        d_model=int(hf["d_model"]),
        num_heads=_same(hf, where, "encoder_attention_heads", "decoder_attention_heads"),
        d_ff=_same(hf, where, "encoder_ffn_dim", "decoder_ffn_dim"),
        dropout_rate=float(hf.get("dropout", 0.1)),
        attention_dropout_rate=float(hf.get("attention_dropout", 0.0)),
        norm="post",
        activation=_ACTIVATIONS[activation],
        positional="sinusoidal_halves",
        max_len=int(hf.get("max_position_embeddings", 512)),
        share_embeddings=True,
        tie_output=True,
        use_bias=True,
        layer_norm_eps=1e-5,  # nn.LayerNorm's default; Marian has no eps field.
        scale_embeddings=bool(hf.get("scale_embedding", True)),
        logits_bias=True,
        pad_id=int(hf["pad_token_id"]),
    )


def dims(cfg: EncoderDecoderConfig) -> Dims:
    return {"d": cfg.d_model, "n": cfg.num_heads, "h": cfg.head_dim, "f": cfg.d_ff,
            "v": cfg.vocab_size, "one": 1}  # fmt: skip


def _attention(ours: str, theirs: str) -> list[Row]:
    names = [f"{theirs}.{p}" for p in ("q_proj", "k_proj", "v_proj")]
    return attention(ours, names, f"{theirs}.out_proj")


# A Marian (BART-style, post-LN) layer, relative to `model.encoder.layers.{i}.` or
# `model.decoder.layers.{i}.` and to our `encoder/layers/{i}/` or `decoder/layers/{i}/`.
_FFN = [
    *dense("ffn/w1", "ffn/b1", "fc1", "d", "f"),
    *dense("ffn/w2", "ffn/b2", "fc2", "f", "d"),
    *norm("ffn_norm", "final_layer_norm"),
]
ENCODER_LAYER = [
    *_attention("self_attn", "self_attn"),
    *norm("self_attn_norm", "self_attn_layer_norm"),
    *_FFN,
]
DECODER_LAYER = [
    *_attention("self_attn", "self_attn"),
    *norm("self_attn_norm", "self_attn_layer_norm"),
    *_attention("cross_attn", "encoder_attn"),
    *norm("cross_attn_norm", "encoder_attn_layer_norm"),
    *_FFN,
]


def params_from_hf(
    source: Source, cfg: EncoderDecoderConfig
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """(parameters by path, {"key biases": largest |value| dropped})."""
    d, v = cfg.d_model, cfg.vocab_size
    shared = source.get("model.shared.weight", (v, d))
    for tied in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                 "lm_head.weight"):  # fmt: skip
        if source.has(tied):
            if not np.array_equal(source.tensors[tied], shared):
                raise ConversionError(
                    f"{source.where}: {tied} differs from model.shared.weight; transformer_jax "
                    f"ties the embeddings and the output projection, as Marian does."
                )
            source.used.add(tied)
    rows = [
        reshaped("logits_bias", "final_logits_bias", ("one", "v"), ("v",)),
        *repeat(ENCODER_LAYER, "encoder/layers/{i}/", "model.encoder.layers.{i}.",
                cfg.num_encoder_layers),
        *repeat(DECODER_LAYER, "decoder/layers/{i}/", "model.decoder.layers.{i}.",
                cfg.num_decoder_layers),
    ]  # fmt: skip
    out = {"src_embed/embedding": shared} | read(source, rows, dims(cfg))
    dropped = [source.tensors[source.name(r.theirs)] for r in rows if r.ours == ("",)]
    return out, {"key biases": max((float(np.abs(b).max()) for b in dropped), default=0.0)}
