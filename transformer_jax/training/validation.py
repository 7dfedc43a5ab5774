"""The training config checked once, at the boundary, before anything is read or written:
every field the loop reads, the task's own (`Task.validate`), and the mesh against the batch.
Each error names the field and what to set instead.
"""

from __future__ import annotations

import copy
import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from transformer_jax import models, tasks
from transformer_jax.nn.attention import resolve_kernel
from transformer_jax.sharding import BATCH_AXES, MESH_AXES, mesh_sizes
from transformer_jax.training.optimizer import check_fields as check_optimizer_fields

_POSITIVE = (
    "num_train_steps",
    "warmup_steps",
    "log_every",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
    "grad_accum_steps",
    "max_nonfinite_steps",
)
TEST_CHECKPOINTS = ("best", "last", "average")


def validate_train_config(config: ml_collections.ConfigDict) -> type[tasks.Task]:
    """Checks the whole config once, at the boundary; returns the task's class.

    Raises:
      ValueError: naming the first bad field and what to set instead.
    """
    for name in _POSITIVE:
        value = config[name]
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"config.{name} must be a positive integer, got {value!r}.")
    if "task" not in config or "name" not in config.model:
        raise ValueError(
            "config.task and config.model.name must name the task and the model, e.g. "
            'c.task = "translation" and c.model = models.config_section("encoder_decoder", '
            '"base") as configs/common.py does.'
        )
    check_optimizer_fields(config)
    if config.get("test_checkpoint", "best") not in TEST_CHECKPOINTS:
        raise ValueError(
            f"config.test_checkpoint={config.test_checkpoint!r}: use one of "
            f"{', '.join(map(repr, TEST_CHECKPOINTS))} (the final test's parameters: the best "
            f"by the validation metric, the last step's, or the mean of the last "
            f"config.test_average_last checkpoints)."
        )
    if config.get("test_checkpoint") == "average":
        count, keep = config.get("test_average_last", 0), config.keep_checkpoints
        if not isinstance(count, int) or isinstance(count, bool) or not 2 <= count <= keep:
            raise ValueError(
                f"config.test_average_last={count!r}: test_checkpoint='average' needs an integer "
                f"from 2 to config.keep_checkpoints ({keep}), the number of last checkpoints "
                f"whose parameters are averaged; raise keep_checkpoints to average more."
            )
        steps, every = config.num_train_steps, config.checkpoint_every
        saves = steps // every + (steps % every > 0)  # every `every` steps, and the last
        if count > saves:
            raise ValueError(
                f"config.test_average_last={count}: the run saves only {saves} checkpoints "
                f"(num_train_steps={steps}, checkpoint_every={every}). Average at most {saves}, "
                f"or save more often."
            )
    check_profiling_fields(config)
    models.get(config.model.name)
    task_cls = tasks.get(config.task)
    task_cls.validate(config)  # data.batch_multiple is a positive integer or None after this
    rows = config.data.get("batch_multiple")
    if rows is not None and config.grad_accum_steps > 1 and rows % config.grad_accum_steps:
        raise ValueError(
            f"config.grad_accum_steps={config.grad_accum_steps} must divide "
            f"config.data.batch_multiple={rows} so batches split into equal micro-batches."
        )
    check_batch_split(config, jax.device_count())
    # An attention kernel the devices lack ("splash" off a TPU): the devices of the mesh set
    # (a compile target's), else this host's.
    resolve_kernel(config.model.get("attention_kernel", "auto"), jnp.float32)
    return task_cls


def fit_batch_multiple(
    config: ml_collections.ConfigDict, num_devices: int, recorded: int | None = None
) -> ml_collections.ConfigDict:
    """The config with `data.batch_multiple` a multiple of the mesh's batch axes too.

    A new run's global rows become multiples of lcm(data.batch_multiple, data x fsdp), so a
    shipped config (8) runs on a slice of any size; on a mesh whose batch axes divide
    data.batch_multiple already (every mesh of up to 8 devices for the shipped configs)
    nothing changes. A resumed run keeps the batches it started with: `recorded`, the
    multiple its config.json holds, whenever that is a multiple of data.batch_multiple
    (`check_batch_split` then refuses a mesh that cannot split those batches).

    Args:
      config: the training config (not changed).
      num_devices: the devices of the mesh (all processes' together).
      recorded: data.batch_multiple of the workdir's config.json, None for a new run.

    Returns:
      A copy of `config`, or `config` itself where its data has no valid batch_multiple
      (`validate_train_config` names a bad one).
    """
    multiple = config.get("data", {}).get("batch_multiple")
    if not isinstance(multiple, int) or isinstance(multiple, bool) or multiple < 1:
        return config
    try:
        sizes = dict(zip(MESH_AXES, mesh_sizes(dict(config.mesh), num_devices), strict=True))
    except ValueError:  # A mesh that does not fit the devices: make_mesh says why.
        return config
    fitted = math.lcm(multiple, *(sizes[a] for a in BATCH_AXES))
    if isinstance(recorded, int) and recorded % multiple == 0:
        fitted = recorded
    config = copy.deepcopy(config)
    config.data.batch_multiple = fitted
    return config


def check_batch_split(config: ml_collections.ConfigDict, num_devices: int) -> None:
    """Refuses a mesh (over `num_devices`) whose batch axes do not divide every batch.

    Global rows are multiples of `config.data.batch_multiple` (after `fit_batch_multiple`):
    a run resumes with the same batches on another mesh, whose batch axes (data x fsdp) must
    then divide that multiple.
    """
    multiple = config.data.get("batch_multiple")
    if multiple is None:  # A task whose batches are not counted in rows.
        return
    sizes = dict(zip(MESH_AXES, mesh_sizes(dict(config.mesh), num_devices), strict=True))
    ways = int(np.prod([sizes[a] for a in BATCH_AXES]))
    if multiple % ways:
        axes = " x ".join(f"{a}={sizes[a]}" for a in BATCH_AXES)
        raise ValueError(
            f"config.mesh {dict(config.mesh)} on {num_devices} devices splits every "
            f"batch {ways} ways ({axes}), which does not divide "
            f"config.data.batch_multiple={multiple} (global rows per batch are multiples of "
            f"it). Choose config.mesh sizes whose data x fsdp divides {multiple} (e.g. put "
            f"the other devices on config.mesh.tensor): a resumed run keeps the batches it "
            f"started with. A new run may set config.data.batch_multiple to a multiple of "
            f"{ways} (train.py does so itself: `fit_batch_multiple`)."
        )


def profile_window(config: ml_collections.ConfigDict) -> tuple[int, int]:
    """`config.profile_steps` as (first step, count); (0, 0), the default, profiles nothing."""
    first, count = tuple(config.get("profile_steps", (0, 0)))
    return first, count


def check_profiling_fields(config: ml_collections.ConfigDict) -> None:
    """Refuses a profile window outside the run's steps, or a peak that is not a number.

    Raises:
      ValueError: naming the field and what to set instead.
    """
    steps = config.get("profile_steps", (0, 0))
    total = config.num_train_steps
    if (
        not isinstance(steps, (tuple, list))
        or len(steps) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in steps)
    ):
        raise ValueError(
            f"config.profile_steps={steps!r}: give the first step to trace and how many steps, "
            f"e.g. --config.profile_steps=10,5 (steps 10 to 14), or 0,0 to trace nothing."
        )
    first, count = steps
    if (first, count) != (0, 0) and (first < 1 or count < 1 or first + count - 1 > total):
        raise ValueError(
            f"config.profile_steps=({first}, {count}) is outside the run's steps 1 to {total}: "
            f"the first step must be >= 1, the count >= 1 and the last step traced "
            f"({first + count - 1}) <= config.num_train_steps. Use 0,0 to trace nothing."
        )
    peak = config.get("chip_peak_flops", 0.0)
    number = isinstance(peak, (int, float)) and not isinstance(peak, bool)
    if not number or not math.isfinite(peak) or peak < 0:
        raise ValueError(
            f"config.chip_peak_flops={peak!r} must be a finite number >= 0: one device's peak "
            f"FLOP/s for the logged mfu (e.g. 1.97e14 for a TPU v5e), or 0 to take it from the "
            f"chip table (TPUs and GPUs it knows)."
        )
