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


def _attention(source: Source, out: dict, hf: str, us: str, d: int, n: int, h: int) -> float:
    """The projections of one attention layer; returns the largest |key bias| dropped."""
    for name, proj in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj")):
        out[us + name] = source.get(f"{hf}.{proj}.weight", (d, d)).T.reshape(d, n, h)
        bias = source.get(f"{hf}.{proj}.bias", (d,))
        if name == "key":
            key_bias = float(np.abs(bias).max())
        else:
            out[us + f"{name}_bias"] = bias.reshape(n, h)
    out[us + "out"] = source.get(f"{hf}.out_proj.weight", (d, d)).T.reshape(n, h, d)
    out[us + "out_bias"] = source.get(f"{hf}.out_proj.bias", (d,))
    return key_bias


def _norm(source: Source, out: dict, hf: str, us: str, d: int) -> None:
    out[us + "/scale"] = source.get(f"{hf}.weight", (d,))
    out[us + "/bias"] = source.get(f"{hf}.bias", (d,))


def _ffn(source: Source, out: dict, hf: str, us: str, d: int, f: int) -> None:
    out[us + "ffn/w1"] = source.get(f"{hf}fc1.weight", (f, d)).T
    out[us + "ffn/b1"] = source.get(f"{hf}fc1.bias", (f,))
    out[us + "ffn/w2"] = source.get(f"{hf}fc2.weight", (d, f)).T
    out[us + "ffn/b2"] = source.get(f"{hf}fc2.bias", (d,))


def params_from_hf(
    source: Source, cfg: EncoderDecoderConfig
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """(parameters by path, {"key biases": largest |value| dropped})."""
    d, n, h, f, v = cfg.d_model, cfg.num_heads, cfg.head_dim, cfg.d_ff, cfg.vocab_size
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
    out = {
        "src_embed/embedding": shared,
        "logits_bias": source.get("final_logits_bias", (1, v)).reshape(v),
    }
    key_bias = 0.0
    for i in range(cfg.num_encoder_layers):
        hf, us = f"model.encoder.layers.{i}.", f"encoder/layers/{i}/"
        key_bias = max(
            key_bias, _attention(source, out, hf + "self_attn", us + "self_attn/", d, n, h)
        )
        _norm(source, out, hf + "self_attn_layer_norm", us + "self_attn_norm", d)
        _ffn(source, out, hf, us, d, f)
        _norm(source, out, hf + "final_layer_norm", us + "ffn_norm", d)
    for i in range(cfg.num_decoder_layers):
        hf, us = f"model.decoder.layers.{i}.", f"decoder/layers/{i}/"
        key_bias = max(
            key_bias, _attention(source, out, hf + "self_attn", us + "self_attn/", d, n, h)
        )
        _norm(source, out, hf + "self_attn_layer_norm", us + "self_attn_norm", d)
        key_bias = max(
            key_bias, _attention(source, out, hf + "encoder_attn", us + "cross_attn/", d, n, h)
        )
        _norm(source, out, hf + "encoder_attn_layer_norm", us + "cross_attn_norm", d)
        _ffn(source, out, hf, us, d, f)
        _norm(source, out, hf + "final_layer_norm", us + "ffn_norm", d)
    return out, {"key biases": key_bias}
