"""Checks shared by the models' config dataclasses: each error names the class and the field."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from transformer_jax.nn.attention import ATTENTION_KERNELS
from transformer_jax.nn.blocks import REMAT, BlockSpec
from transformer_jax.nn.layers import ACTIVATIONS

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
# Fields that say how a model runs, not what it computes (same parameters, same function): a
# run may change them when it resumes.
EXECUTION_FIELDS = ("attention_kernel", "scan_layers", "remat")
# The widths of every model's `tiny` preset (tests and smoke runs), with its depth added.
TINY = dict(d_model=32, num_heads=4, d_ff=64, dropout_rate=0.0, max_len=64)
# The fixed positional encodings by `positional` value: the `sinusoidal_encoding` layout of each.
# "sinusoidal" is the paper's (§3.5); "sinusoidal_halves" Marian's (sines, then cosines).
SINUSOIDAL = {"sinusoidal": "interleaved", "sinusoidal_halves": "halves"}
CHOICES = {  # Fields every model that has them restricts to these values.
    "norm": ("post", "pre"),
    "activation": tuple(ACTIVATIONS),
    "positional": (*SINUSOIDAL, "learned"),
    "dtype": tuple(DTYPES),
    "attention_kernel": ATTENTION_KERNELS,
    "remat": tuple(REMAT),
}


class TransformerFields:
    """Derived values and `replace` for the models' frozen config dataclasses (a mixin)."""

    @property
    def head_dim(self) -> int:
        """d_k = d_v = d_model / h (§3.2.2)."""
        return self.d_model // self.num_heads

    @property
    def compute_dtype(self):
        """The jnp dtype used for activations and matrix products."""
        return DTYPES[self.dtype]

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)


def _name(cfg, field: str) -> str:
    return f"{type(cfg).__name__}.{field}"


def check_transformer_fields(
    cfg, *, positive: tuple[str, ...], non_negative: tuple[str, ...] = ()
) -> None:
    """Validates the fields a Transformer config has in common.

    Args:
      cfg: the dataclass instance (with d_model, num_heads, dropout rates, the `CHOICES` fields
        it has, and vocab_size/pad_id when it has a vocabulary).
      positive: integer fields that must be > 0.
      non_negative: integer fields that may be 0 (e.g. a stack's depth).

    Raises:
      ValueError: naming the class, the field, the value and what is allowed.
    """
    for field in positive:
        value = getattr(cfg, field)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{_name(cfg, field)} must be a positive integer, got {value!r}.")
    for field in non_negative:
        value = getattr(cfg, field)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{_name(cfg, field)} must be a non-negative integer, got {value!r}.")
    if cfg.d_model % cfg.num_heads:
        raise ValueError(
            f"{_name(cfg, 'd_model')}={cfg.d_model} is not divisible by "
            f"num_heads={cfg.num_heads}: pick d_model = num_heads * head_dim."
        )
    if getattr(cfg, "positional", None) in SINUSOIDAL and cfg.d_model % 2:
        raise ValueError(
            f"{_name(cfg, 'd_model')}={cfg.d_model} must be even for sinusoidal positions "
            "(sin and cos come in pairs, §3.5)."
        )
    for field in ("dropout_rate", "attention_dropout_rate"):
        value = getattr(cfg, field)
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{_name(cfg, field)} must be in [0, 1), got {value!r}.")
    eps = getattr(cfg, "layer_norm_eps", 1.0)
    if not 0.0 < eps < 1.0:  # Also NaN. A LayerNorm with eps 0 divides by 0 on a constant row.
        raise ValueError(f"{_name(cfg, 'layer_norm_eps')} must be in (0, 1), got {eps!r}.")
    for field, allowed in CHOICES.items():
        if hasattr(cfg, field) and getattr(cfg, field) not in allowed:
            raise ValueError(
                f"{_name(cfg, field)}={getattr(cfg, field)!r} is not one of {allowed}."
            )
    if hasattr(cfg, "pad_id") and not 0 <= cfg.pad_id < cfg.vocab_size:
        raise ValueError(
            f"{_name(cfg, 'pad_id')}={cfg.pad_id} is outside the vocabulary [0, {cfg.vocab_size})."
        )


def block_spec(cfg, *, causal: bool, cross_attention: bool) -> BlockSpec:
    """The `BlockSpec` of a model config with the common field names (d_model, num_heads, d_ff,
    norm, activation, dropout rates, use_bias, layer_norm_eps, compute_dtype)."""
    return BlockSpec(
        d_model=cfg.d_model,
        num_heads=cfg.num_heads,
        d_ff=cfg.d_ff,
        causal=causal,
        cross_attention=cross_attention,
        norm=cfg.norm,
        activation=cfg.activation,
        dropout_rate=cfg.dropout_rate,
        attention_dropout_rate=cfg.attention_dropout_rate,
        use_bias=cfg.use_bias,
        layer_norm_eps=cfg.layer_norm_eps,
        dtype=cfg.compute_dtype,
        attention_kernel=cfg.attention_kernel,
        scan_layers=cfg.scan_layers,
        remat=cfg.remat,
    )
