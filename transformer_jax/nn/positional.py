"""Sinusoidal positional encoding (§3.5), a pure function."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float, Int

# Where the sines and cosines of `sinusoidal_encoding` sit in the feature axis.
LAYOUTS = ("interleaved", "halves")


def sinusoidal_encoding(
    length_or_positions: int | Int[Array, "*batch L"], d_model: int, *, layout: str = "interleaved"
) -> Float[Array, "*batch L D"]:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) (§3.5).

    The same D/2 frequencies in either layout: "interleaved" puts the sines at even feature
    indices and the cosines at odd ones, as the paper writes them; "halves" puts every sine in
    features [0, D/2) and every cosine in [D/2, D), i.e. PE(pos, i) = sin(pos / 10000^(2i/d))
    and PE(pos, D/2 + i) = cos(pos / 10000^(2i/d)) (Marian, OPUS-MT).

    Args:
      length_or_positions: an int L (positions 0..L-1) or an integer array of explicit positions
        `[*batch, L]`, e.g. per-segment positions of a packed row that restart at 0.
      d_model: feature size D; must be even.
      layout: one of `LAYOUTS`.

    Returns:
      float32 `[L, D]` for an int, `[*batch, L, D]` for positions.
    """
    if d_model <= 0 or d_model % 2:
        raise ValueError(
            f"sinusoidal_encoding needs a positive even d_model, got {d_model}: each frequency "
            "fills a (sin, cos) pair of features."
        )
    if layout not in LAYOUTS:
        raise ValueError(f"sinusoidal_encoding layout must be one of {LAYOUTS}, got {layout!r}.")
    if isinstance(length_or_positions, int):
        positions = jnp.arange(length_or_positions)
    else:
        positions = jnp.asarray(length_or_positions)
    two_i = jnp.arange(0, d_model, 2, dtype=jnp.float32)  # [D/2]: 0, 2, 4, ...
    inv_freq = jnp.power(10000.0, -two_i / d_model)
    angles = positions.astype(jnp.float32)[..., None] * inv_freq  # [*batch, L, D/2]
    if layout == "halves":  # [s0, s1, ..., c0, c1, ...]
        return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)
    # Stack (sin, cos) on a new last axis then flatten: [s0, c0, s1, c1, ...].
    pe = jnp.stack([jnp.sin(angles), jnp.cos(angles)], axis=-1)
    return pe.reshape(*angles.shape[:-1], d_model)
