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
