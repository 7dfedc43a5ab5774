"""Compile a training config's programs for TPUs or GPUs on this machine, and report what they
need: `python -m transformer_jax compile --config=configs/NAME.py --target=v5e-8`.

    transformer-jax compile --config=configs/wmt14_en_de_base.py --target=v5e-8 \\
        --config.mesh.fsdp=4 --config.model.remat=full
    transformer-jax compile --config=configs/gpt_tiny.py --target=h100x8 --mesh=data=4,tensor=2

The train step, the eval step and the task's serving programs (greedy and beam decoding,
sampling, the classifiers' forward pass) are compiled by the real TPU compiler (libtpu, the
`aot` extra) or XLA's GPU compiler (the `gpu-aot` extra) from shapes alone: no accelerator,
no data, nothing allocated. The table gives per device the parameter, optimizer, temporary
and code memory against the chip's HBM, FLOPs per step and per token, the collectives, the
attention implementation the program runs and the compile time, then the roofline bound's two
terms, FLOP time and HBM time (the bound, a lower bound on the step time, not a measurement, is
the larger), and the MFU ceiling they imply; `--top_hbm=N` lists each program's N instructions
that move the most HBM bytes, with the JAX op each came from. A program that does not fit is an
error saying by how much and which config fields to change; `--fit` searches the settings that
fit. `--config.` overrides work as in train.py; `--mesh` replaces `config.mesh`.
"""

from __future__ import annotations

import os
import sys

import jax
from absl import flags
from ml_collections import config_flags

from transformer_jax.aot import compile_config, fit_config
from transformer_jax.cli import common
from transformer_jax.serving_mesh import parse_mesh

DOC = __doc__.split("\n\n", 2)[2]


def define(fv: flags.FlagValues) -> None:
    config_flags.DEFINE_config_file(
        "config",
        None,
        "Training config file (a Python file with get_config()), as for train.py.",
        flag_values=fv,
        lock_config=True,
    )
    flags.DEFINE_string(
        "target", None, "Accelerators to compile for, e.g. v5e-8, v4-8, v5p-8, v6e-8, "
        "v5e-256, v5e-16x2 (two slices), h100x8, h200x8.", flag_values=fv,
    )  # fmt: skip
    flags.DEFINE_string(
        "mesh", None, "Mesh axis sizes as 'fsdp=4,tensor=2' (data takes the devices the "
        "others leave); default: the config's mesh.", flag_values=fv,
    )  # fmt: skip
    flags.DEFINE_bool(
        "inference", True, "Also compile the task's serving programs.", flag_values=fv
    )
    flags.DEFINE_bool(
        "fit", False, "Search the settings whose train step fits the target (data parallel, "
        "then fsdp, remat, micro-batches) and report the first that does.", flag_values=fv,
    )  # fmt: skip
    flags.DEFINE_integer(
        "top_hbm", 0, "List each program's N largest HBM consumers (instructions of the "
        "optimised program, by estimated bytes read and written, with their JAX op).",
        lower_bound=0, flag_values=fv,
    )  # fmt: skip
    flags.DEFINE_float(
        "measured_step_s", None, "A train step time measured on the target, in seconds: "
        "prints the FLOPs utilisation it means.", flag_values=fv,
    )  # fmt: skip
    flags.mark_flag_as_required("config", flag_values=fv)
    flags.mark_flag_as_required("target", flag_values=fv)


def body(fv: flags.FlagValues, args: list[str]) -> int:
    del args
    if not os.environ.get("JAX_PLATFORMS"):
        # The targets are compile-only devices; the host itself computes on its CPU (without
        # this, an installed libtpu or CUDA plugin would try to start a device it lacks).
        jax.config.update("jax_platforms", "cpu")
    config = fv["config"].value
    if fv["mesh"].value is not None:
        shape = parse_mesh(fv["mesh"].value)
        if "data" not in shape and -1 not in shape.values():
            shape["data"] = -1
        with config.unlocked():
            config.mesh = {"data": 1, "fsdp": 1, "tensor": 1, **shape}
    if fv["measured_step_s"].value is not None and fv["measured_step_s"].value <= 0:
        raise ValueError(f"--measured_step_s must be > 0, got {fv['measured_step_s'].value}.")
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if fv["fit"].value:
        name, overrides, report = fit_config(
            config, fv["target"].value, progress=progress, top_hbm=fv["top_hbm"].value
        )
        flags_text = " ".join(f"--config.{k}={v}" for k, v in overrides.items() if k != "mesh")
        mesh = ",".join(f"{k}={v}" for k, v in overrides["mesh"].items())
        print(f"fits with {name}: --mesh={mesh} {flags_text}".rstrip(), flush=True)
    else:
        report = compile_config(
            config,
            fv["target"].value,
            inference=fv["inference"].value,
            measured_step_s=fv["measured_step_s"].value,
            progress=progress,
            top_hbm=fv["top_hbm"].value,
        )
    print(report.text, flush=True)
    for problem in report.problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if report.problems else 0


COMMAND = common.Command(
    "python -m transformer_jax compile", DOC, define, body, usage_flags="--config=FILE --target=T"
)
main = COMMAND.run

if __name__ == "__main__":
    sys.exit(main())
