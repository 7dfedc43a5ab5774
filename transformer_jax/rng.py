"""Which pseudo-random generator makes the dropout bits of a run (`config.rng_impl`).

"threefry" (JAX's default key, threefry2x32) computes every random bit with a counter-based
hash: identical on every backend, and split over a mesh (each device draws only the bits of
its own shard). "rbg" derives keys with threefry (the step's `fold_in`, the split per layer)
and draws the bits with XLA's `RngBitGenerator` (Philox on GPUs, the TPU's hardware
generator), cheaper per bit; "unsafe_rbg" derives the keys with it too. XLA's SPMD partitioner
does not split `RngBitGenerator`: on a mesh of N devices each one draws the bits of the whole
global batch and keeps its shard (the compiled program of tests/training/test_rng_impl.py
shows it), so rbg pays off only where the mesh's batch is one device's. All three are
deterministic for a given program, so a resumed run repeats an uninterrupted one bit for bit;
rbg's bits differ from threefry's and may differ between backends and meshes.

Parameter initialisation always uses threefry, so every choice starts from the same weights.
"""

from __future__ import annotations

import jax

# Config values -> JAX's implementation names.
RNG_IMPLS = {"threefry": "threefry2x32", "rbg": "rbg", "unsafe_rbg": "unsafe_rbg"}


def check_rng_impl(name) -> str:
    """`name` if it is one of `RNG_IMPLS`, else a ValueError naming them."""
    if not isinstance(name, str) or name not in RNG_IMPLS:
        raise ValueError(
            f"config.rng_impl must be one of {tuple(RNG_IMPLS)} (the generator of the dropout "
            f"bits), got {name!r}."
        )
    return name


def dropout_key(seed: int, name: str = "threefry") -> jax.Array:
    """The run's dropout key: `seed` + 1 (parameters use `seed`) with the generator `name`;
    the train step folds the step number into it."""
    return jax.random.key(seed + 1, impl=RNG_IMPLS[check_rng_impl(name)])


def dropout_key_spec(name: str = "threefry", sharding=None) -> jax.ShapeDtypeStruct:
    """The abstract dropout key of `dropout_key` (for compiling ahead of time)."""
    key = dropout_key(0, name)
    return jax.ShapeDtypeStruct(key.shape, key.dtype, sharding=sharding)
