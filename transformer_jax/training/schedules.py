"""Learning-rate schedules as pure functions of the step."""

from __future__ import annotations

import jax.numpy as jnp
import optax


def noam_schedule(d_model: int, warmup_steps: int, factor: float = 1.0) -> optax.Schedule:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5) (§5.3, eq. 3).

    Linear warm-up for `warmup_steps`, then decay with the inverse square root of the step.
    Optax calls a schedule with the number of updates done so far, 0 for the first update, where
    the formula gives 0; the first update is step 1 here, so every update moves the parameters.

    Args:
      d_model: model width.
      warmup_steps: steps of linear warm-up (4000 in the paper).
      factor: overall multiplier (1.0 in the paper).

    Returns:
      A function `count -> learning rate` (float32 scalar).
    """
    if d_model <= 0 or warmup_steps <= 0 or factor <= 0:
        raise ValueError(
            "noam_schedule needs positive d_model, warmup_steps and factor, got "
            f"d_model={d_model}, warmup_steps={warmup_steps}, factor={factor}."
        )

    def schedule(count):
        step = jnp.asarray(count, jnp.float32) + 1.0
        return factor * d_model**-0.5 * jnp.minimum(step**-0.5, step * warmup_steps**-1.5)

    return schedule


def _check_peak(name: str, peak: float, warmup_steps: int) -> None:
    if not peak > 0 or warmup_steps < 0:
        raise ValueError(
            f"{name} needs a positive peak learning rate and warmup_steps >= 0, got "
            f"peak={peak}, warmup_steps={warmup_steps}."
        )


def _warmup(step, peak: float, warmup_steps: int):
    """peak * step / warmup_steps while step < warmup_steps (steps counted from 1), else peak."""
    return peak * jnp.minimum(1.0, step / max(warmup_steps, 1))


def constant_schedule(peak: float, warmup_steps: int = 0) -> optax.Schedule:
    """lr = peak * min(1, step / warmup_steps): linear warm-up, then constant (steps from 1)."""
    _check_peak("constant_schedule", peak, warmup_steps)

    def schedule(count):
        return _warmup(jnp.asarray(count, jnp.float32) + 1.0, peak, warmup_steps)

    return schedule


def _decay_fraction(step, warmup_steps: int, total_steps: int):
    """How far the decay after the warm-up has come: 0 at the warm-up's end, 1 at total_steps."""
    span = max(total_steps - warmup_steps, 1)
    return jnp.clip((step - warmup_steps) / span, 0.0, 1.0)


def linear_schedule(
    peak: float, warmup_steps: int, total_steps: int, final_ratio: float = 0.0
) -> optax.Schedule:
    """Linear warm-up to `peak`, then linear decay to `final_ratio * peak` at `total_steps`
    (BERT's schedule, with final_ratio 0); steps counted from 1."""
    _check_peak("linear_schedule", peak, warmup_steps)

    def schedule(count):
        step = jnp.asarray(count, jnp.float32) + 1.0
        done = _decay_fraction(step, warmup_steps, total_steps)
        decayed = peak * (1.0 - (1.0 - final_ratio) * done)
        return jnp.where(step < warmup_steps, _warmup(step, peak, warmup_steps), decayed)

    return schedule


def cosine_schedule(
    peak: float, warmup_steps: int, total_steps: int, final_ratio: float = 0.0
) -> optax.Schedule:
    """Linear warm-up to `peak`, then half a cosine down to `final_ratio * peak` at
    `total_steps` (GPT-2's and ViT's); steps counted from 1."""
    _check_peak("cosine_schedule", peak, warmup_steps)

    def schedule(count):
        step = jnp.asarray(count, jnp.float32) + 1.0
        done = _decay_fraction(step, warmup_steps, total_steps)
        cosine = 0.5 * (1.0 + jnp.cos(jnp.pi * done))
        decayed = peak * (final_ratio + (1.0 - final_ratio) * cosine)
        return jnp.where(step < warmup_steps, _warmup(step, peak, warmup_steps), decayed)

    return schedule
