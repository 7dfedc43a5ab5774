"""Checks of the config fields every run has, whatever its task: the training loop's
(`configs/common.py` `training_fields`: seed, optimiser, mesh) and the model section; and the
number checks the tasks' own fields use.

Each task's `validate` calls `check_shared_fields` first, so `validate_train_config` refuses a
bad value, naming the field, before any data is read or a tokenizer trained. (The loop's step
counts are checked by `validate_train_config` itself.) The model section is checked after its
name, so a section of the wrong model is reported as that, not as its fields.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import ml_collections

from transformer_jax import models
from transformer_jax.nn.attention import check_dropout_kernel
from transformer_jax.rng import check_rng_impl
from transformer_jax.sharding import mesh_sizes
from transformer_jax.tasks.base import check_model_name

SEED_LIMIT = 2**32 - 1  # JAX keys hold 32 bits (2**32 is seed 0 again); dropout uses seed + 1.


class Range(NamedTuple):
    """The numbers a field takes: from `low` to `high`, each end included or not."""

    low: float
    low_in: bool
    high: float
    high_in: bool
    meaning: str  # What the field does, for the error.

    def __contains__(self, x: float) -> bool:
        return (x >= self.low if self.low_in else x > self.low) and (
            x <= self.high if self.high_in else x < self.high
        )

    def __str__(self) -> str:
        if self.high == math.inf:
            return f"a finite number {'>=' if self.low_in else '>'} {self.low:g}"
        return (
            f"a number in {'[' if self.low_in else '('}{self.low:g}, "
            f"{self.high:g}{']' if self.high_in else ')'}"
        )


TRAINING_NUMBERS = {  # The optimiser's numbers (configs/common.py).
    "lr_factor": Range(0.0, False, math.inf, False, "multiplies the Noam learning rate"),
    "adam_b1": Range(0.0, True, 1.0, False, "Adam's first-moment decay"),
    "adam_b2": Range(0.0, True, 1.0, False, "Adam's second-moment decay"),
    "adam_eps": Range(0.0, False, math.inf, False, "Adam's epsilon; 0 divides by zero"),
    "grad_clip_norm": Range(0.0, True, math.inf, False, "0 = no clipping"),
}
# `config.label_smoothing`, a field of the tasks whose loss is a smoothed cross-entropy.
LABEL_SMOOTHING = Range(0.0, True, 1.0, False, "epsilon_ls; 1 would ignore the labels")
# A beam's length-penalty exponent (GNMT's alpha; 0 = none).
LENGTH_PENALTY = Range(0.0, True, math.inf, False, "the beam's length-penalty exponent")


def check_number(config: ml_collections.ConfigDict, name: str, allowed: Range) -> None:
    """Raises unless `config[name]` is a finite number (not a bool) in `allowed`."""
    value = config.get(name)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and value in allowed):
        raise ValueError(f"config.{name} must be {allowed} ({allowed.meaning}), got {value!r}.")


def check_shared_fields(config: ml_collections.ConfigDict, task: str, model: str) -> None:
    """Raises ValueError naming the first bad field among the seed, the optimiser's numbers,
    the mesh (against this process's view of the devices) and the model
    section: `model` (the one `task` trains), then its fields (see
    `transformer_jax.models.check_section`)."""
    seed = config.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(
            f"config.seed must be an integer in [0, {SEED_LIMIT - 1}] (JAX keys hold 32 bits), "
            f"got {seed!r}."
        )
    check_rng_impl(config.get("rng_impl", "threefry"))  # Configs older than the field: threefry.
    for name, allowed in TRAINING_NUMBERS.items():
        check_number(config, name, allowed)
    mesh = config.get("mesh")
    if not isinstance(mesh, (dict, ml_collections.ConfigDict)):
        raise ValueError(f"config.mesh must map axis names to sizes, got {mesh!r}.")
    try:
        mesh_sizes(dict(mesh), jax.device_count())
    except ValueError as e:
        raise ValueError(f"config.mesh: {e}") from None
    check_model_name(config, task, model)
    models.check_section(config.model)
    check_dropout_kernel(
        config.model.get("attention_kernel", "auto"),
        config.model.get("attention_dropout_rate", 0.0),
    )
