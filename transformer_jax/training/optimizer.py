"""The optimizer of §5.3: Adam(beta1=0.9, beta2=0.98, eps=1e-9) on the Noam schedule."""

from __future__ import annotations

import optax

from transformer_jax.training.schedules import noam_schedule


def make_optimizer(
    d_model: int,
    *,
    warmup_steps: int = 4000,
    lr_factor: float = 1.0,
    b1: float = 0.9,
    b2: float = 0.98,
    eps: float = 1e-9,
    grad_clip_norm: float = 0.0,
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Adam with the Noam schedule (§5.3) and optional global-norm clipping.

    Returns:
      (the optax transformation, the schedule `count -> learning rate`).
    """
    schedule = noam_schedule(d_model, warmup_steps, lr_factor)
    parts = [optax.clip_by_global_norm(grad_clip_norm)] if grad_clip_norm > 0 else []
    parts.append(optax.adam(schedule, b1=b1, b2=b2, eps=eps))
    return optax.chain(*parts), schedule


def optimizer_from_config(config, d_model: int):
    """`make_optimizer` with a training config's fields."""
    return make_optimizer(
        d_model,
        warmup_steps=config.warmup_steps,
        lr_factor=config.lr_factor,
        b1=config.adam_b1,
        b2=config.adam_b2,
        eps=config.adam_eps,
        grad_clip_norm=config.grad_clip_norm,
    )
