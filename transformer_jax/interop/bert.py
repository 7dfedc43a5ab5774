"""BERT (`BertForPreTraining`, `BertModel`, `BertForMaskedLM`, `BertForSequenceClassification`)
<-> the encoder-only model.

The architectures agree: post-LN blocks, learned positions and segment (token type) embeddings
with a LayerNorm, the erf GELU, the tanh pooler on [CLS], the masked-LM head (dense, GELU,
LayerNorm, the output tied to the token embedding, a vocabulary bias) and the next-sentence
head. `nn.Linear` weights are `[out, in]`. The key bias is dropped (it cancels in the softmax).
Heads a class lacks (e.g. `BertModel` has no masked-LM head) are left at their initial values
and named by the conversion.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from transformer_jax.interop.files import ConversionError
from transformer_jax.interop.tensors import Source
from transformer_jax.models.encoder_only.config import EncoderOnlyConfig

ARCHITECTURES = (
    "BertForPreTraining",
    "BertModel",
    "BertForMaskedLM",
    "BertForSequenceClassification",
)
PREFIXES = ("bert.", "")
IGNORED = ("position_ids",)  # A buffer of older checkpoints.

_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                "relu": "relu"}  # fmt: skip
_EXPORTED = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}


def model_config(hf: dict[str, Any], where: str) -> EncoderOnlyConfig:
    """The encoder-only config of a BERT config.json."""
    position = hf.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ConversionError(
            f"{where}: position_embedding_type={position!r}; transformer_jax's BERT has "
            f"absolute learned positions only, so this model cannot be expressed."
        )
    if hf.get("is_decoder") or hf.get("add_cross_attention"):
        raise ConversionError(
            f"{where}: is_decoder/add_cross_attention: a BERT decoder cannot be expressed."
        )
    activation = hf.get("hidden_act", "gelu")
    if activation not in _ACTIVATIONS:
        raise ConversionError(
            f"{where}: hidden_act={activation!r} is not one of {sorted(_ACTIVATIONS)}; "
            f"transformer_jax cannot express it."
        )
    labels = hf.get("id2label") or {}
    return EncoderOnlyConfig(
        vocab_size=int(hf["vocab_size"]),
        num_layers=int(hf["num_hidden_layers"]),
        d_model=int(hf["hidden_size"]),
        num_heads=int(hf["num_attention_heads"]),
        d_ff=int(hf["intermediate_size"]),
        dropout_rate=float(hf.get("hidden_dropout_prob", 0.1)),
        attention_dropout_rate=float(hf.get("attention_probs_dropout_prob", 0.1)),
        norm="post",
        activation=_ACTIVATIONS[activation],
        max_len=int(hf["max_position_embeddings"]),
        type_vocab_size=int(hf.get("type_vocab_size", 2)),
        use_bias=True,
        layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
        num_labels=int(hf.get("num_labels") or len(labels) or 2),
        pad_id=int(hf.get("pad_token_id") or 0),
    )


def _norm(source: Source, name: str, d: int) -> tuple[np.ndarray, np.ndarray]:
    """(scale, bias) of a LayerNorm saved as weight/bias or (older) gamma/beta."""
    return (
        source.get(f"{name}.weight", (d,), f"{name}.gamma"),
        source.get(f"{name}.bias", (d,), f"{name}.beta"),
    )


def _dense(source: Source, name: str, d_in: int, d_out: int) -> tuple[np.ndarray, np.ndarray]:
    """(kernel [in, out], bias) of an nn.Linear."""
    return source.get(f"{name}.weight", (d_out, d_in)).T, source.get(f"{name}.bias", (d_out,))


def params_from_hf(
    source: Source, cfg: EncoderOnlyConfig, fresh: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], list[str]]:
    """(the parameters by path, the heads left at their `fresh` initial values)."""
    d, n, h, f = cfg.d_model, cfg.num_heads, cfg.head_dim, cfg.d_ff
    out = dict(fresh)
    out["embed/embedding"] = source.get("embeddings.word_embeddings.weight", (cfg.vocab_size, d))
    out["pos_embed"] = source.get("embeddings.position_embeddings.weight", (cfg.max_len, d))
    out["type_embed"] = source.get(
        "embeddings.token_type_embeddings.weight", (cfg.type_vocab_size, d)
    )
    out["embed_norm/scale"], out["embed_norm/bias"] = _norm(source, "embeddings.LayerNorm", d)
    for i in range(cfg.num_layers):
        hf, us = f"encoder.layer.{i}.", f"encoder/layers/{i}/"
        for name in ("query", "key", "value"):
            kernel, bias = _dense(source, hf + f"attention.self.{name}", d, d)
            out[us + f"self_attn/{name}"] = kernel.reshape(d, n, h)
            if name != "key":  # The key bias cancels in the softmax.
                out[us + f"self_attn/{name}_bias"] = bias.reshape(n, h)
        kernel, out[us + "self_attn/out_bias"] = _dense(source, hf + "attention.output.dense", d, d)
        out[us + "self_attn/out"] = kernel.reshape(n, h, d)
        out[us + "self_attn_norm/scale"], out[us + "self_attn_norm/bias"] = _norm(
            source, hf + "attention.output.LayerNorm", d
        )
        out[us + "ffn/w1"], out[us + "ffn/b1"] = _dense(source, hf + "intermediate.dense", d, f)
        out[us + "ffn/w2"], out[us + "ffn/b2"] = _dense(source, hf + "output.dense", f, d)
        out[us + "ffn_norm/scale"], out[us + "ffn_norm/bias"] = _norm(
            source, hf + "output.LayerNorm", d
        )
    kept = set()
    if source.has("pooler.dense.weight"):
        out["pooler/kernel"], out["pooler/bias"] = _dense(source, "pooler.dense", d, d)
        kept.add("pooler")
    if source.has("cls.predictions.transform.dense.weight"):
        p = "cls.predictions."
        out["mlm_transform/kernel"], out["mlm_transform/bias"] = _dense(
            source, p + "transform.dense", d, d
        )
        out["mlm_norm/scale"], out["mlm_norm/bias"] = _norm(source, p + "transform.LayerNorm", d)
        out["mlm_bias"] = source.get(p + "bias", (cfg.vocab_size,), p + "decoder.bias")
        for tied in (p + "decoder.weight", p + "decoder.bias"):
            if source.has(tied):
                source.used.add(source.name(tied))
        kept.add("mlm")
    if source.has("cls.seq_relationship.weight"):
        out["nsp_head/kernel"], out["nsp_head/bias"] = _dense(source, "cls.seq_relationship", d, 2)
        kept.add("nsp")
    if source.has("classifier.weight"):
        out["sequence_head/kernel"], out["sequence_head/bias"] = _dense(
            source, "classifier", d, cfg.num_labels
        )
        kept.add("sequence")
    heads = {"pooler": "pooler", "mlm": "masked-LM head", "nsp": "next-sentence head",
             "sequence": "sequence classifier"}  # fmt: skip
    return out, [heads[k] for k in heads if k not in kept]


def _linear(kernel: np.ndarray) -> np.ndarray:
    """An nn.Linear weight `[out, in]` from a kernel `[in, out]`."""
    return np.ascontiguousarray(kernel.T)


def params_to_hf(
    flat: dict[str, np.ndarray], cfg: EncoderOnlyConfig, classifier: bool = False
) -> dict[str, np.ndarray]:
    """BertForPreTraining's tensors; with `classifier`, BertForSequenceClassification's (the
    encoder, the pooler and the sequence head as `classifier`)."""
    d = cfg.d_model
    zeros = np.zeros(d, np.float32)
    out = {
        "bert.embeddings.word_embeddings.weight": flat["embed/embedding"],
        "bert.embeddings.position_embeddings.weight": flat["pos_embed"],
        "bert.embeddings.token_type_embeddings.weight": flat["type_embed"],
        "bert.embeddings.LayerNorm.weight": flat["embed_norm/scale"],
        "bert.embeddings.LayerNorm.bias": flat["embed_norm/bias"],
        "bert.pooler.dense.weight": _linear(flat["pooler/kernel"]),
        "bert.pooler.dense.bias": flat["pooler/bias"],
        "cls.predictions.transform.dense.weight": _linear(flat["mlm_transform/kernel"]),
        "cls.predictions.transform.dense.bias": flat["mlm_transform/bias"],
        "cls.predictions.transform.LayerNorm.weight": flat["mlm_norm/scale"],
        "cls.predictions.transform.LayerNorm.bias": flat["mlm_norm/bias"],
        "cls.predictions.bias": flat["mlm_bias"],
        "cls.seq_relationship.weight": _linear(flat["nsp_head/kernel"]),
        "cls.seq_relationship.bias": flat["nsp_head/bias"],
    }
    for i in range(cfg.num_layers):
        hf, us = f"bert.encoder.layer.{i}.", f"encoder/layers/{i}/"
        for name in ("query", "key", "value"):
            out[hf + f"attention.self.{name}.weight"] = _linear(
                flat[us + f"self_attn/{name}"].reshape(d, d)
            )
            bias = flat.get(us + f"self_attn/{name}_bias")
            out[hf + f"attention.self.{name}.bias"] = zeros if bias is None else bias.reshape(d)
        out[hf + "attention.output.dense.weight"] = _linear(
            flat[us + "self_attn/out"].reshape(d, d)
        )
        out[hf + "attention.output.dense.bias"] = flat.get(us + "self_attn/out_bias", zeros)
        out[hf + "attention.output.LayerNorm.weight"] = flat[us + "self_attn_norm/scale"]
        out[hf + "attention.output.LayerNorm.bias"] = flat[us + "self_attn_norm/bias"]
        out[hf + "intermediate.dense.weight"] = _linear(flat[us + "ffn/w1"])
        out[hf + "intermediate.dense.bias"] = flat[us + "ffn/b1"]
        out[hf + "output.dense.weight"] = _linear(flat[us + "ffn/w2"])
        out[hf + "output.dense.bias"] = flat[us + "ffn/b2"]
        out[hf + "output.LayerNorm.weight"] = flat[us + "ffn_norm/scale"]
        out[hf + "output.LayerNorm.bias"] = flat[us + "ffn_norm/bias"]
    if classifier:  # BertForSequenceClassification: the encoder, its pooler, the classifier.
        out = {k: v for k, v in out.items() if k.startswith("bert.")}
        out["classifier.weight"] = _linear(flat["sequence_head/kernel"])
        out["classifier.bias"] = flat["sequence_head/bias"]
    return out


def check_exportable(cfg: EncoderOnlyConfig, where: str) -> None:
    if cfg.norm != "post":
        raise ConversionError(f"{where}: norm={cfg.norm!r}; BERT blocks are post-LN ('post').")
    if cfg.pool != "cls":
        raise ConversionError(f"{where}: pool={cfg.pool!r}; BERT pools [CLS] ('cls').")
    if cfg.activation not in _EXPORTED:
        raise ConversionError(f"{where}: activation={cfg.activation!r} has no BERT hidden_act.")


def config_to_hf(
    cfg: EncoderOnlyConfig, pad_id: int, labels: list[str] | None = None
) -> dict[str, Any]:
    """BertForPreTraining's config.json; with `labels`, BertForSequenceClassification's."""
    extra = {}
    if labels is not None:
        extra = {
            "id2label": {str(i): name for i, name in enumerate(labels)},
            "label2id": {name: i for i, name in enumerate(labels)},
        }
    return extra | {
        "model_type": "bert",
        "architectures": ["BertForSequenceClassification" if labels else "BertForPreTraining"],
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "intermediate_size": cfg.d_ff,
        "hidden_act": _EXPORTED[cfg.activation],
        "hidden_dropout_prob": cfg.dropout_rate,
        "attention_probs_dropout_prob": cfg.attention_dropout_rate,
        "max_position_embeddings": cfg.max_len,
        "type_vocab_size": cfg.type_vocab_size,
        "layer_norm_eps": cfg.layer_norm_eps,
        "position_embedding_type": "absolute",
        "pad_token_id": pad_id,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }
