"""The optimizer, from a config: Adam (§5.3: beta1=0.9, beta2=0.98, eps=1e-9) or AdamW with a
weight-decay mask, on the Noam, linear, cosine or constant schedule, with optional global-norm
clipping, layer-wise learning-rate decay, and a first phase that trains only the task's new head
(linear probing, then fine-tuning: LP-FT, Kumar et al. 2022).

`adam` on `noam` (the defaults) is `optax.adam` exactly, so the optimizer state of runs saved
before the other choices existed restores as it was.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from transformer_jax.training.schedules import (
    constant_schedule,
    cosine_schedule,
    linear_schedule,
    noam_schedule,
)

OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("noam", "linear", "cosine", "constant")
# The fields whose change alters the optimizer state's layout: a resumed run must keep them.
LAYOUT_FIELDS = (
    "optimizer",
    "grad_clip_norm",
    "layer_decay",
    "head_only_steps",
    "head_lr_factor",
    "head_l2",
)
_DEFAULTS = {
    "optimizer": "adam",
    "schedule": "noam",
    "learning_rate": 1e-4,
    "final_lr_ratio": 0.0,
    "weight_decay": 0.0,
    "weight_decay_embeddings": True,
    "layer_decay": 1.0,
    "head_only_steps": 0,
    "head_lr_factor": 1.0,
    "head_l2": 0.0,
}


def _names(path) -> list[str]:
    out = []
    for key in path:
        for attr in ("key", "name", "idx"):
            if hasattr(key, attr):
                out.append(str(getattr(key, attr)))
                break
    return [n for n in out if n != "value"]


def _is_embedding(names: list[str]) -> bool:
    return any("embed" in n for n in names) or "cls_token" in names


def decay_mask(params, decay_embeddings: bool = True):
    """True for the leaves weight decay shrinks: weight matrices and kernels; never biases
    (also the per-head `[N, H]` ones) or LayerNorm parameters (vectors); embeddings (token,
    position, segment, [CLS]) by `decay_embeddings`."""

    def decays(path, leaf):
        names = _names(path)
        if _is_embedding(names):
            return decay_embeddings
        last = names[-1] if names else ""
        return not (last.endswith("bias") or jnp.ndim(leaf) <= 1)

    return jax.tree_util.tree_map_with_path(decays, params)


def layer_factor(names: list[str], num_layers: int, decay: float, leading: int | None):
    """The learning-rate factor of one leaf under layer-wise decay (ELECTRA's): block i of L gets
    decay^(L - i), the embeddings decay^(L + 1), everything above the blocks 1. A stacked leaf
    (`scan_layers`) gets one factor per block along its leading axis (`leading` = L)."""
    if "layers" in names:
        position = names.index("layers") + 1
        if position < len(names) and names[position].isdigit():
            return decay ** (num_layers - int(names[position]))
        blocks = jnp.arange(leading or num_layers, dtype=jnp.float32)
        return decay ** (num_layers - blocks)
    if _is_embedding(names) or names[:1] in (["patch_kernel"], ["patch_bias"]):
        return decay ** (num_layers + 1)
    return 1.0


def _num_layers(updates) -> int:
    """The blocks of the model: numbered ones (`layers/<i>`), or a stack's leading axis."""
    found = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(updates)[0]:
        names = _names(path)
        if "layers" in names:
            position = names.index("layers") + 1
            nxt = names[position] if position < len(names) else ""
            found.append(int(nxt) + 1 if nxt.isdigit() else leaf.shape[0])
    if not found:
        raise ValueError(
            "config.layer_decay needs a model of numbered blocks (parameters under "
            "`layers/<i>`); this one has none. Set config.layer_decay=1.0."
        )
    return max(found)


def scale_by_layer(decay: float) -> optax.GradientTransformation:
    """Multiplies each update by its leaf's `layer_factor` (stateless)."""

    def update(updates, state, params=None):
        del params
        num_layers = _num_layers(updates)

        def scale(path, u):
            factor = layer_factor(_names(path), num_layers, decay, u.shape[0] if u.ndim else None)
            factor = jnp.asarray(factor, u.dtype)
            return u * factor.reshape(factor.shape + (1,) * (u.ndim - factor.ndim))

        return jax.tree_util.tree_map_with_path(scale, updates), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def head_l2_penalty(head: tuple[str, ...], strength: float) -> optax.GradientTransformation:
    """Adds `strength * W` to the gradient of every weight matrix under the top-level names
    `head`: the gradient of `strength / 2 * ||W||^2` added to the loss, a coupled L2 penalty as
    in a logistic regression (biases are not penalised). Unlike decoupled weight decay it does
    not scale with the learning rate, so a head trained alone on frozen features
    (`heads_first`) solves the same problem as a regularised linear probe."""

    def mask(params):
        def penalised(path, decays):
            names = _names(path)
            return bool(decays) and bool(names) and names[0] in head

        return jax.tree_util.tree_map_with_path(penalised, decay_mask(params))

    return optax.add_decayed_weights(strength, mask=mask)


def heads_first(
    head: tuple[str, ...], steps: int, ramp: int, head_factor: float = 1.0
) -> optax.GradientTransformation:
    """Holds every leaf but the head's still for the first `steps` updates, then lets them in
    with a factor rising linearly from 1/ramp to 1 over `ramp` updates (LP-FT: the new head
    learns on the pretrained features before they move, so they move less).

    Args:
      head: top-level parameter names of the head (`Task.fresh_params`); their leaves always
        move, their updates multiplied by `head_factor` (a new head starts from zero and may
        learn faster than pretrained weights should).
      steps: updates of the head alone (0: none).
      ramp: updates over which the rest reaches its full learning rate (>= 1).
    """
    ramp = max(int(ramp), 1)

    def init(params):
        del params
        return optax.ScaleByScheduleState(count=jnp.zeros([], jnp.int32))

    def update(updates, state, params=None):
        del params
        factor = jnp.clip((state.count - steps + 1) / ramp, 0.0, 1.0)

        def scale(path, u):
            names = _names(path)
            if names[:1] and names[0] in head:
                return u * jnp.asarray(head_factor, u.dtype)
            return u * factor.astype(u.dtype)

        scaled = jax.tree_util.tree_map_with_path(scale, updates)
        return scaled, optax.ScaleByScheduleState(optax.safe_int32_increment(state.count))

    return optax.GradientTransformation(init, update)


def make_schedule(
    name: str,
    *,
    d_model: int,
    warmup_steps: int,
    lr_factor: float = 1.0,
    learning_rate: float = 1e-4,
    total_steps: int = 1,
    final_lr_ratio: float = 0.0,
) -> optax.Schedule:
    """The schedule `name` of SCHEDULES: noam (lr_factor x §5.3) or one peaking at
    `learning_rate` after `warmup_steps` (linear and cosine decay to `final_lr_ratio` of it at
    `total_steps`)."""
    if name == "noam":
        return noam_schedule(d_model, warmup_steps, lr_factor)
    if name == "constant":
        return constant_schedule(learning_rate, warmup_steps)
    if name == "linear":
        return linear_schedule(learning_rate, warmup_steps, total_steps, final_lr_ratio)
    if name == "cosine":
        return cosine_schedule(learning_rate, warmup_steps, total_steps, final_lr_ratio)
    raise ValueError(f"config.schedule={name!r} is not one of {list(SCHEDULES)}.")


def make_optimizer(
    d_model: int,
    *,
    warmup_steps: int = 4000,
    lr_factor: float = 1.0,
    b1: float = 0.9,
    b2: float = 0.98,
    eps: float = 1e-9,
    grad_clip_norm: float = 0.0,
    optimizer: str = "adam",
    schedule: str = "noam",
    learning_rate: float = 1e-4,
    total_steps: int = 1,
    final_lr_ratio: float = 0.0,
    weight_decay: float = 0.0,
    weight_decay_embeddings: bool = True,
    layer_decay: float = 1.0,
    head_only_steps: int = 0,
    head_lr_factor: float = 1.0,
    head_l2: float = 0.0,
    head: tuple[str, ...] = (),
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """The optimizer and its schedule (see the module doc and `check_fields`). With
    `head_only_steps`, only the leaves under the top-level names `head` move at first
    (`heads_first`, ramping the rest in over `warmup_steps`); `head_lr_factor` multiplies the
    head's learning rate; `head_l2` adds an L2 penalty on the head's weight matrices to the
    loss (`head_l2_penalty`).

    Returns:
      (the optax transformation, the schedule `count -> learning rate`).
    """
    lr = make_schedule(
        schedule, d_model=d_model, warmup_steps=warmup_steps, lr_factor=lr_factor,
        learning_rate=learning_rate, total_steps=total_steps, final_lr_ratio=final_lr_ratio,
    )  # fmt: skip
    heads = bool(head_only_steps) or head_lr_factor != 1.0 or head_l2 > 0
    if heads and not head:
        raise ValueError(
            "config.head_only_steps, head_lr_factor and head_l2 need a task with a new head "
            "(one that declares fresh_params, started from config.init_from). Set them to 0, 1 "
            "and 0."
        )
    parts = [head_l2_penalty(tuple(head), head_l2)] if head_l2 > 0 else []  # Part of the loss.
    if grad_clip_norm > 0:
        parts.append(optax.clip_by_global_norm(grad_clip_norm))
    if optimizer == "adam" and layer_decay == 1.0 and not heads:
        parts.append(optax.adam(lr, b1=b1, b2=b2, eps=eps))  # The layout of every older run.
        return optax.chain(*parts), lr
    parts.append(optax.scale_by_adam(b1=b1, b2=b2, eps=eps))
    if optimizer == "adamw":

        def mask(params):
            return decay_mask(params, weight_decay_embeddings)

        parts.append(optax.add_decayed_weights(weight_decay, mask=mask))
    if layer_decay != 1.0:
        parts.append(scale_by_layer(layer_decay))
    if head_only_steps or head_lr_factor != 1.0:
        parts.append(heads_first(tuple(head), head_only_steps, warmup_steps, head_lr_factor))
    parts.append(optax.scale_by_learning_rate(lr))
    return optax.chain(*parts), lr


def fields(config) -> dict[str, Any]:
    """The optimizer fields of a training config, defaults for those it lacks (older runs)."""
    return {name: config.get(name, default) for name, default in _DEFAULTS.items()}


def check_fields(config) -> None:
    """Raises ValueError naming the optimizer field that is wrong and what to set."""
    f = fields(config)
    if f["optimizer"] not in OPTIMIZERS:
        raise ValueError(f"config.optimizer={f['optimizer']!r} is not one of {list(OPTIMIZERS)}.")
    if f["schedule"] not in SCHEDULES:
        raise ValueError(f"config.schedule={f['schedule']!r} is not one of {list(SCHEDULES)}.")
    if f["weight_decay"] < 0:
        raise ValueError(f"config.weight_decay must be >= 0, got {f['weight_decay']}.")
    if f["weight_decay"] > 0 and f["optimizer"] != "adamw":
        raise ValueError(
            f"config.weight_decay={f['weight_decay']} but config.optimizer="
            f"{f['optimizer']!r} has no weight decay: set config.optimizer='adamw' (decoupled "
            f"decay), or config.weight_decay=0."
        )
    if not 0 < f["layer_decay"] <= 1:
        raise ValueError(f"config.layer_decay must be in (0, 1] (1 = off), got {f['layer_decay']}.")
    if f["schedule"] != "noam" and not f["learning_rate"] > 0:
        raise ValueError(
            f"config.learning_rate must be > 0 for schedule {f['schedule']!r}, got "
            f"{f['learning_rate']}."
        )
    if not 0 <= f["final_lr_ratio"] <= 1:
        raise ValueError(f"config.final_lr_ratio must be in [0, 1], got {f['final_lr_ratio']}.")
    head_only = f["head_only_steps"]
    if isinstance(head_only, bool) or not isinstance(head_only, int) or head_only < 0:
        raise ValueError(f"config.head_only_steps must be an integer >= 0, got {head_only!r}.")
    factor = f["head_lr_factor"]
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0:
        raise ValueError(f"config.head_lr_factor must be a number > 0, got {factor!r}.")
    l2 = f["head_l2"]
    if isinstance(l2, bool) or not isinstance(l2, (int, float)) or not l2 >= 0:
        raise ValueError(f"config.head_l2 must be a number >= 0, got {l2!r}.")
    if (head_only or factor != 1 or l2) and not config.get("init_from"):
        raise ValueError(
            f"config.head_only_steps={head_only}, config.head_lr_factor={factor} and "
            f"config.head_l2={l2} concern a pretrained model's new head, but config.init_from "
            f"is not set: set it to the pretrained workdir, or leave them at 0, 1 and 0."
        )


def layout(config) -> dict[str, Any]:
    """What decides the optimizer state's layout: a resumed run must keep it."""
    f = fields(config)
    return {
        "optimizer": f["optimizer"],
        "grad_clip_norm": "on" if config.get("grad_clip_norm", 0.0) > 0 else "off",
        "layer_decay": "on" if f["layer_decay"] != 1.0 else "off",
        "head_first": "on" if f["head_only_steps"] or f["head_lr_factor"] != 1 else "off",
        "head_l2": "on" if f["head_l2"] else "off",
    }


def optimizer_from_config(config, d_model: int, head: tuple[str, ...] = ()):
    """`make_optimizer` with a training config's fields; `head`: the task's fresh_params."""
    f = fields(config)
    return make_optimizer(
        d_model,
        head=tuple(head),
        warmup_steps=config.warmup_steps,
        lr_factor=config.lr_factor,
        b1=config.adam_b1,
        b2=config.adam_b2,
        eps=config.adam_eps,
        grad_clip_norm=config.grad_clip_norm,
        total_steps=config.num_train_steps,
        **f,
    )
