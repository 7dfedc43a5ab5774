"""Ahead-of-time compilation for accelerators this machine does not have.

    from transformer_jax.aot import compile_config
    print(compile_config(config, "v5e-8").text)

`targets` names the chips and gives compile-only devices for them, `programs` lowers a
config's train, eval and serving programs from shapes, `report` compiles them and says what
they need. The command line is `python -m transformer_jax compile` (docs/performance.md).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Collection

import jax
import ml_collections

from transformer_jax import sharding as shd
from transformer_jax.aot.programs import Plan, plan
from transformer_jax.aot.report import (
    Compiled,
    OutOfMemoryError,
    check_fits,
    compile_program,
    table,
)
from transformer_jax.aot.targets import Target, parse_target, target_devices, target_mesh
from transformer_jax.training.validation import fit_batch_multiple

__all__ = [
    "CompileReport",
    "Compiled",
    "OutOfMemoryError",
    "Plan",
    "Target",
    "compile_config",
    "fit_config",
    "parse_target",
    "plan",
    "target_devices",
    "target_mesh",
]


@dataclasses.dataclass(frozen=True)
class CompileReport:
    """What `compile_config` found: the table to print, each program's figures, and the
    programs that do not fit (one error each, saying by how much and what to change)."""

    text: str
    plan: Plan
    target: Target
    results: list[Compiled]
    problems: list[OutOfMemoryError]


def compile_config(
    config: ml_collections.ConfigDict,
    target: str | Target,
    *,
    inference: bool = True,
    only: Collection[str] | None = None,
    measured_step_s: float | None = None,
    progress: Callable[[str], None] | None = None,
    top_hbm: int = 0,
) -> CompileReport:
    """Compiles `config`'s programs (those named in `only`, if given) for `target` on its
    `config.mesh` and reports them (with each program's `top_hbm` largest HBM consumers).

    Raises:
      ValueError: an unknown target, a mesh that does not divide it, a config the training
        loop would refuse.
      ImportError: the target's compiler is not installed (names the extra).
    """
    target = parse_target(target) if isinstance(target, str) else target
    mesh = target_mesh(target, dict(config.mesh))
    config = fit_batch_multiple(config, mesh.size)  # The batches train.py would start with.
    the_plan = plan(config, mesh, inference=inference)
    estimates = None
    results, problems = [], []
    for program in the_plan.programs:
        if only is not None and program.name not in only:
            continue
        if progress:
            progress(f"compiling the {program.name} for {target.name} ...")
        try:
            result = compile_program(program, target, the_plan.kernel, top_hbm)
        except OutOfMemoryError as e:
            problems.append(e)
            continue
        # No cost analysis (GPUs), or one that counts a loop body once (scanned layers,
        # micro-batches): XLA's analysis of the same step, unrolled, lowered on the host.
        if result.flops is None or (result.loops and program.name in UNROLLABLE):
            estimates = estimates or _host_plan(config, inference)
            result = _with_host_cost(result, estimates, target)
        try:
            check_fits(result, target)
        except OutOfMemoryError as e:
            problems.append(e)
        results.append(result)
    text = table(the_plan, target, results, measured_step_s)
    return CompileReport(text, the_plan, target, results, problems)


# Programs whose loops (scanned layers, micro-batches) the host estimate unrolls.
UNROLLABLE = ("train step", "eval step")

# What `fit_config` tries, in order: each spreads or shrinks the train step more than the last.
FIT_SETTINGS = (
    ("data parallel", {"mesh": {"data": -1, "fsdp": 1, "tensor": 1}}),
    ("fsdp", {"mesh": {"data": 1, "fsdp": -1, "tensor": 1}}),
    ("fsdp + remat", {"mesh": {"data": 1, "fsdp": -1, "tensor": 1}, "model.remat": "full"}),
    *(
        (f"fsdp + remat + {n} micro-batches",
         {"mesh": {"data": 1, "fsdp": -1, "tensor": 1}, "model.remat": "full",
          "grad_accum_steps": n})
        for n in (4, 16)
    ),
)  # fmt: skip


def fit_config(
    config: ml_collections.ConfigDict,
    target: str | Target,
    *,
    progress: Callable[[str], None] | None = None,
    top_hbm: int = 0,
) -> tuple[str, dict, CompileReport]:
    """The first of `FIT_SETTINGS` whose train step fits `target`'s memory.

    Returns:
      (its name, the overrides as config fields, the report of its train step).

    Raises:
      OutOfMemoryError: none fits (the last one's error).
    """
    target = parse_target(target) if isinstance(target, str) else target
    report = None
    for name, overrides in FIT_SETTINGS:
        candidate = with_overrides(config, overrides)
        if progress:
            progress(f"trying {name} ...")
        report = compile_config(candidate, target, inference=False, only=("train step",),
                                progress=progress, top_hbm=top_hbm)  # fmt: skip
        if not report.problems:
            return name, overrides, report
    raise report.problems[0]


def with_overrides(config: ml_collections.ConfigDict, overrides: dict) -> ml_collections.ConfigDict:
    """A copy of `config` with `overrides` ("model.remat": "full", "mesh": {...}) applied; a
    micro-batch count also makes `data.batch_multiple` a multiple of it."""
    config = copy.deepcopy(config)
    for path, value in overrides.items():
        *parents, leaf = path.split(".")
        section = config
        for name in parents:
            section = section[name]
        section[leaf] = ml_collections.ConfigDict(value) if isinstance(value, dict) else value
    steps = overrides.get("grad_accum_steps")
    if steps:
        config.data.batch_multiple = math.lcm(config.data.batch_multiple, steps)
    return config


def _host_plan(config, inference: bool) -> Plan:
    """The same programs on one host CPU device (to count their FLOPs before partitioning),
    with the layers unrolled and the batch in one piece: the same work, without the loops
    that the cost analysis counts once."""
    one = dict.fromkeys(shd.MESH_AXES, 1)
    config = copy.deepcopy(config)
    config.mesh = ml_collections.ConfigDict(one)
    config.grad_accum_steps = 1
    config.model.scan_layers = False
    return plan(config, shd.make_mesh(one, devices=jax.devices("cpu")[:1]), inference=inference)


def _with_host_cost(result: Compiled, host: Plan, target: Target) -> Compiled:
    """`result` with FLOPs per device estimated as the whole program's (from XLA's analysis of
    its unpartitioned form on the host) over the target's devices."""
    program = next(p for p in host.programs if p.name == result.name)
    cost = program.lower().cost_analysis() or {}
    if isinstance(cost, list):
        cost = cost[0] if cost else {}
    if not cost.get("flops"):
        return result
    return dataclasses.replace(
        result,
        flops=float(cost["flops"]) / target.num_devices,
        custom_call_flops=0.0,  # The host program's attention is XLA's, already counted.
        # Unfused, the host program reads and writes far more than the compiled one: its bytes
        # would not bound the step from below. The bound is then FLOPs / peak alone.
        bytes_accessed=None,
        hbm_estimate_bytes=0,  # Counts the loop bodies once too.
        cost_estimated=True,
        loops=result.loops and result.name not in UNROLLABLE,
    )
