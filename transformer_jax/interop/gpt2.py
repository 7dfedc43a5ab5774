"""GPT-2 (`GPT2LMHeadModel`, `GPT2Model`) <-> the decoder-only model.

The architectures agree: pre-LN blocks with a final LayerNorm, learned positions, the tanh GELU,
biases on every projection, the output tied to the token embedding. GPT-2's `Conv1D` weights
are `[in, out]` (x @ W) and `c_attn` packs the query, key and value projections along its output
axis, heads major inside each. GPT-2's key bias is dropped: it adds the same q.b_k to every score
of a query, which the softmax cancels, so the outputs are unchanged (exported as zeros).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from transformer_jax.interop.files import ConversionError
from transformer_jax.interop.tables import Dims, Row, heads_out, norm, read, repeat, same, write
from transformer_jax.interop.tensors import Source
from transformer_jax.models.decoder_only.config import DecoderOnlyConfig

ARCHITECTURES = ("GPT2LMHeadModel", "GPT2Model")
PREFIXES = ("transformer.", "")  # GPT2LMHeadModel saves "transformer.h.0...", GPT2Model "h.0...".
IGNORED = (".attn.bias", ".attn.masked_bias")  # Causal-mask buffers of older checkpoints.

_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
                "relu": "relu"}  # fmt: skip
_EXPORTED_ACTIVATIONS = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}


def _refuse(where: str, field: str, value: Any, why: str) -> ConversionError:
    return ConversionError(f"{where}: {field}={value!r} {why}; transformer_jax cannot express it.")


def model_config(hf: dict[str, Any], where: str) -> DecoderOnlyConfig:
    """The decoder-only config of a GPT-2 config.json (`where` names the file for errors)."""
    if hf.get("scale_attn_by_inverse_layer_idx"):
        raise _refuse(
            where, "scale_attn_by_inverse_layer_idx", True, "scales layer i's scores by 1/(i+1)"
        )
    if hf.get("scale_attn_weights", True) is False:
        raise _refuse(where, "scale_attn_weights", False, "leaves scores unscaled by 1/sqrt(d_k)")
    if hf.get("add_cross_attention"):
        raise _refuse(where, "add_cross_attention", True, "adds cross-attention to every block")
    activation = hf.get("activation_function", "gelu_new")
    if activation not in _ACTIVATIONS:
        raise _refuse(
            where, "activation_function", activation, f"is not one of {sorted(_ACTIVATIONS)}"
        )
    d_model = int(hf["n_embd"])
    return DecoderOnlyConfig(
        vocab_size=int(hf["vocab_size"]),
        num_layers=int(hf["n_layer"]),
        d_model=d_model,
        num_heads=int(hf["n_head"]),
        d_ff=int(hf.get("n_inner") or 4 * d_model),
        dropout_rate=float(hf.get("resid_pdrop", 0.1)),
        attention_dropout_rate=float(hf.get("attn_pdrop", 0.1)),
        norm="pre",
        activation=_ACTIVATIONS[activation],
        positional="learned",
        max_len=int(hf["n_positions"]),
        use_bias=True,
        layer_norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
        pad_id=int(hf.get("eos_token_id") or 0),
    )


def dims(cfg: DecoderOnlyConfig) -> Dims:
    return {"d": cfg.d_model, "d3": 3 * cfg.d_model, "n": cfg.num_heads, "h": cfg.head_dim,
            "f": cfg.d_ff, "v": cfg.vocab_size, "p": cfg.max_len}  # fmt: skip


def _split_qkv(x: np.ndarray, dims: Dims) -> tuple[np.ndarray, ...]:
    """`[..., 3D]` -> three `[..., N, H]` (the last axis: query, key, value)."""
    d = dims["d"]
    return tuple(
        x[..., j * d : (j + 1) * d].reshape(*x.shape[:-1], dims["n"], dims["h"]) for j in range(3)
    )


def _join_qkv(parts: tuple[np.ndarray, ...], dims: Dims) -> np.ndarray:
    lead = parts[0].shape[:-2]
    return np.concatenate([p.reshape(*lead, dims["d"]) for p in parts], axis=-1)


QKV = ("self_attn/query", "self_attn/key", "self_attn/value")
# A GPT-2 block (Conv1D weights are stored `[in, out]`), relative to `h.{i}.` and to our
# `decoder/layers/{i}/`. One `[D, 3D]` matrix holds the query, key and value projections.
BLOCK = [
    Row(QKV, "attn.c_attn.weight", lambda x: (x["d"], x["d3"]),
        (lambda x: (x["d"], x["n"], x["h"]),) * 3, _split_qkv, _join_qkv),
    Row(("self_attn/query_bias", "", "self_attn/value_bias"), "attn.c_attn.bias",
        lambda x: (x["d3"],), (lambda x: (x["n"], x["h"]),) * 3, _split_qkv, _join_qkv),
    heads_out("self_attn/out", "attn.c_proj.weight", transposed=False),
    same("self_attn/out_bias", "attn.c_proj.bias", "d"),
    *norm("self_attn_norm", "ln_1"),
    *norm("ffn_norm", "ln_2"),
    same("ffn/w1", "mlp.c_fc.weight", "d", "f"),
    same("ffn/b1", "mlp.c_fc.bias", "f"),
    same("ffn/w2", "mlp.c_proj.weight", "f", "d"),
    same("ffn/b2", "mlp.c_proj.bias", "d"),
]  # fmt: skip


def body(cfg: DecoderOnlyConfig) -> list[Row]:
    """Every tensor but the positions (under `transformer.` in GPT2LMHeadModel)."""
    return [
        same("embed/embedding", "wte.weight", "v", "d"),
        *repeat(BLOCK, "decoder/layers/{i}/", "h.{i}.", cfg.num_layers),
        *norm("decoder/final_norm", "ln_f"),
    ]


def params_from_hf(source: Source, cfg: DecoderOnlyConfig) -> dict[str, np.ndarray]:
    """The model's parameters by path from the checkpoint's tensors."""
    out = read(source, [*body(cfg), same("pos_embed", "wpe.weight", "p", "d")], dims(cfg))
    lm_head = source.name("lm_head.weight")  # Present when saved untied (older checkpoints).
    if lm_head is not None:
        source.used.add(lm_head)
        if not np.array_equal(source.tensors[lm_head], source.tensors[source.name("wte.weight")]):
            raise ConversionError(
                f"{source.where}: lm_head.weight differs from wte.weight; transformer_jax ties "
                f"the output projection to the token embedding (GPT-2 does), so an untied head "
                f"cannot be expressed."
            )
    return out


def check_exportable(cfg: DecoderOnlyConfig, where: str) -> None:
    """Raises naming the field a GPT-2 checkpoint cannot hold."""
    if cfg.norm != "pre":
        raise ConversionError(f"{where}: norm={cfg.norm!r}; GPT-2 blocks are pre-LN ('pre').")
    if cfg.activation not in _EXPORTED_ACTIVATIONS:
        raise ConversionError(
            f"{where}: activation={cfg.activation!r} has no GPT-2 activation_function "
            f"(exportable: {sorted(_EXPORTED_ACTIVATIONS)})."
        )


def params_to_hf(
    flat: dict[str, np.ndarray], cfg: DecoderOnlyConfig, positions: np.ndarray
) -> dict[str, np.ndarray]:
    """GPT2LMHeadModel's tensors; `positions` is the `[max_len, D]` table the model adds
    (learned, or the sinusoidal one written out)."""
    out = write(flat, [row.prefixed("", "transformer.") for row in body(cfg)], dims(cfg))
    out["transformer.wpe.weight"] = positions
    return out


def config_to_hf(cfg: DecoderOnlyConfig, bos_id: int, eos_id: int) -> dict[str, Any]:
    """A GPT-2 config.json for `cfg`."""
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": cfg.vocab_size,
        "n_positions": cfg.max_len,
        "n_embd": cfg.d_model,
        "n_layer": cfg.num_layers,
        "n_head": cfg.num_heads,
        "n_inner": cfg.d_ff,
        "activation_function": _EXPORTED_ACTIVATIONS[cfg.activation],
        "layer_norm_epsilon": cfg.layer_norm_eps,
        "resid_pdrop": cfg.dropout_rate,
        "embd_pdrop": cfg.dropout_rate,
        "attn_pdrop": cfg.attention_dropout_rate,
        "scale_attn_weights": True,
        "tie_word_embeddings": True,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "torch_dtype": "float32",
    }
