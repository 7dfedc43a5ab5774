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

from transformer_jax.interop.blocks import BERT_LAYER, encoder_fields, hf_encoder_fields
from transformer_jax.interop.files import ConversionError
from transformer_jax.interop.tables import Dims, Row, dense, norm, read, repeat, same, write
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
        **encoder_fields(hf, default_dropout=0.1),
        norm="post",
        activation=_ACTIVATIONS[activation],
        max_len=int(hf["max_position_embeddings"]),
        type_vocab_size=int(hf.get("type_vocab_size", 2)),
        use_bias=True,
        layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
        num_labels=int(hf.get("num_labels") or len(labels) or 2),
        pad_id=int(hf.get("pad_token_id") or 0),
    )


def dims(cfg: EncoderOnlyConfig) -> Dims:
    return {"d": cfg.d_model, "n": cfg.num_heads, "h": cfg.head_dim, "f": cfg.d_ff,
            "v": cfg.vocab_size, "p": cfg.max_len, "t": cfg.type_vocab_size, "two": 2,
            "labels": cfg.num_labels}  # fmt: skip


def body(num_layers: int) -> list[Row]:
    """The encoder: embeddings and layers (under `bert.` in a full checkpoint)."""
    return [
        same("embed/embedding", "embeddings.word_embeddings.weight", "v", "d"),
        same("pos_embed", "embeddings.position_embeddings.weight", "p", "d"),
        same("type_embed", "embeddings.token_type_embeddings.weight", "t", "d"),
        *norm("embed_norm", "embeddings.LayerNorm", older=True),
        *repeat(BERT_LAYER, "encoder/layers/{i}/", "encoder.layer.{i}.", num_layers),
    ]


# The heads, each read when the checkpoint has it (its first tensor), by the name the
# conversion gives a head it leaves at its initial values.
POOLER = dense("pooler/kernel", "pooler/bias", "pooler.dense", "d", "d")
MLM = [
    *dense(
        "mlm_transform/kernel", "mlm_transform/bias", "cls.predictions.transform.dense", "d", "d"
    ),  # fmt: skip
    *norm("mlm_norm", "cls.predictions.transform.LayerNorm", older=True),
    same("mlm_bias", "cls.predictions.bias", "v", alternatives=("cls.predictions.decoder.bias",)),
]
NSP = dense("nsp_head/kernel", "nsp_head/bias", "cls.seq_relationship", "d", "two")
CLASSIFIER = dense("sequence_head/kernel", "sequence_head/bias", "classifier", "d", "labels")
HEADS = {"pooler": POOLER, "masked-LM head": MLM, "next-sentence head": NSP,
         "sequence classifier": CLASSIFIER}  # fmt: skip


def params_from_hf(
    source: Source, cfg: EncoderOnlyConfig, fresh: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], list[str]]:
    """(the parameters by path, the heads left at their `fresh` initial values)."""
    out = dict(fresh) | read(source, body(cfg.num_layers), dims(cfg))
    left = []
    for name, rows in HEADS.items():
        if source.has(rows[0].theirs):
            out |= read(source, rows, dims(cfg))
        else:
            left.append(name)
    for tied in ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias"):
        if source.has(tied):  # The output projection is the token embedding.
            source.used.add(source.name(tied))
    return out, left


def params_to_hf(
    flat: dict[str, np.ndarray], cfg: EncoderOnlyConfig, classifier: bool = False
) -> dict[str, np.ndarray]:
    """BertForPreTraining's tensors; with `classifier`, BertForSequenceClassification's (the
    encoder, the pooler and the sequence head as `classifier`)."""
    encoder = [row.prefixed("", "bert.") for row in (*body(cfg.num_layers), *POOLER)]
    heads = CLASSIFIER if classifier else [*MLM, *NSP]
    return write(flat, [*encoder, *heads], dims(cfg))


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
        **hf_encoder_fields(cfg),
        "hidden_act": _EXPORTED[cfg.activation],
        "max_position_embeddings": cfg.max_len,
        "type_vocab_size": cfg.type_vocab_size,
        "layer_norm_eps": cfg.layer_norm_eps,
        "position_embedding_type": "absolute",
        "pad_token_id": pad_id,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }
