"""The WMT'14 train steps on a TPU, compiled on this CPU: where their time goes, and what each
change to the step did to it.

    python benchmarks/tpu_train_step.py                       # base and big on v5e-8
    python benchmarks/tpu_train_step.py --models=base --variants=now,remat_dots

Each variant compiles the train step of `configs/wmt14_en_de_{base,big}.py` (each config's
batch, data parallel) with the real TPU compiler (the `aot` extra) and records its FLOPs per
chip (the attention kernels' included), the bytes it moves through HBM by the compiled
layouts (`aot.hlo.hbm_uses`), the bytes the compiler's cost analysis says it accesses (every
memory, on-chip included), the bound's terms by each count, and the memory per chip. The
variants add the changes one at a time, from the step as it was to the step as it is:

- `before`: float32, XLA's attention, the textbook loss (log_softmax, the target's
  log-probability gathered, a separate argmax for the accuracy);
- `bfloat16`: bfloat16 computation (parameters and Adam stay float32);
- `splash`: splash attention (the TPU default);
- `now`: the fused loss (`tasks.losses.logit_terms`): the step as the configs ship it;
- `remat_dots`, `remat_full`: the step as shipped with a rematerialisation policy.

Writes JSON (default benchmarks/results/tpu_train_step.json) and prints a markdown table. A
base variant takes 2-5 minutes to compile on 2 cores, a big one up to 10.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # The target's devices are compile-only.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # for configs/

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from configs import wmt14_en_de_base, wmt14_en_de_big  # noqa: E402
from transformer_jax.aot import compile_config  # noqa: E402
from transformer_jax.tasks import losses  # noqa: E402

CONFIGS = {"base": wmt14_en_de_base, "big": wmt14_en_de_big}
# Each variant: (model fields, whether the textbook loss replaces the fused one).
VARIANTS = {
    "before": ({"dtype": "float32", "attention_kernel": "xla"}, True),
    "bfloat16": ({"dtype": "bfloat16", "attention_kernel": "xla"}, True),
    "splash": ({"dtype": "bfloat16", "attention_kernel": "auto"}, True),
    "now": ({}, False),
    "remat_dots": ({"remat": "dots"}, False),
    "remat_full": ({"remat": "full"}, False),
}


def textbook_token_metrics(logits, targets, weights, epsilon=0.1):
    """The loss as usually written: log_softmax materialised, the target's log-probability
    gathered (its gradient scatters into a zero [B, T, V] array), an argmax of its own."""
    vocab = logits.shape[-1]
    log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    target = jnp.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
    confidence, other = 1.0 - epsilon, epsilon / (vocab - 1)
    entropy = -(confidence * jnp.log(confidence) + (vocab - 1) * other * jnp.log(other))
    smoothed = -(confidence * target + other * (log_p.sum(-1) - target)) - entropy
    weights = weights.astype(jnp.float32)
    correct = (jnp.argmax(logits, -1) == targets).astype(jnp.float32)
    return {
        "loss_sum": (smoothed * weights).sum(),
        "nll_sum": (-target * weights).sum(),
        "correct_sum": (correct * weights).sum(),
        "tokens": weights.sum(),
    }


def measure(model: str, variant: str, target: str) -> dict:
    fields, textbook = VARIANTS[variant]
    config = CONFIGS[model].get_config()
    config.model.update(fields)
    fused = losses.token_metrics
    if textbook:
        losses.token_metrics = textbook_token_metrics
    try:
        result = compile_config(config, target, inference=False, only=("train step",))
    finally:
        losses.token_metrics = fused
    if result.problems:
        return {"model": model, "variant": variant, "target": target,
                "error": str(result.problems[0])}  # fmt: skip
    step, chip = result.results[0], result.target.chip
    return {
        "model": model,
        "variant": variant,
        "target": target,
        "dtype": result.plan.model_cfg.dtype,
        "attention": step.attention,
        "flops_per_chip": step.flops,
        "custom_call_flops": step.custom_call_flops,
        "bytes_accessed": step.bytes_accessed,
        "hbm_bytes_placed": step.hbm_estimate_bytes,
        "peak_flops": chip.peak_bf16_flops,
        "hbm_bandwidth": chip.hbm_bandwidth,
        "total_bytes": step.total_bytes,
        "compile_s": step.compile_s,
    }


def terms(r: dict) -> dict:
    """FLOP time, the two HBM times, each bound over the FLOP time and the memory per chip, from
    a result's counts, in the units the tables show (stored with each result as `terms`)."""
    flop_s = r["flops_per_chip"] / r["peak_flops"]
    accessed_s = r["bytes_accessed"] / r["hbm_bandwidth"]
    placed_s = r["hbm_bytes_placed"] / r["hbm_bandwidth"]
    return {
        "flop_ms": flop_s * 1e3,
        "placed_gb": r["hbm_bytes_placed"] / 1e9,
        "placed_ms": placed_s * 1e3,
        "placed_ratio": max(flop_s, placed_s) / flop_s,
        "accessed_gb": r["bytes_accessed"] / 1e9,
        "accessed_ms": accessed_s * 1e3,
        "accessed_ratio": max(flop_s, accessed_s) / flop_s,
        "total_gib": r["total_bytes"] / 2**30,
    }


def row(r: dict) -> str:
    if "error" in r:
        return f"| {r['model']} | {r['variant']} | {r['error'][:80]} |"
    t = terms(r)
    return (
        f"| {r['model']} | {r['variant']} | {r['attention']} | {t['flop_ms']:.2f} ms | "
        f"{t['placed_gb']:.2f} GB, {t['placed_ms']:.1f} ms ({t['placed_ratio']:.2f}x) | "
        f"{t['accessed_gb']:.1f} GB, {t['accessed_ms']:.1f} ms ({t['accessed_ratio']:.2f}x) | "
        f"{t['total_gib']:.2f} GiB |"
    )


HEADER = (
    "| model | variant | attention | FLOP time | HBM bytes by the layouts, HBM time (bound / "
    "FLOP time) | bytes accessed by the cost analysis, their time (bound / FLOP time) | memory "
    "per chip |\n|---|---|---|---|---|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="base,big")
    parser.add_argument("--variants", default="before,bfloat16,splash,now,remat_dots")
    parser.add_argument("--target", default="v5e-8")
    parser.add_argument("--out", default="benchmarks/results/tpu_train_step.json")
    parser.add_argument(
        "--table",
        action="store_true",
        help="Measure nothing: derive the saved results' figures (`terms`), save and print them.",
    )
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else []
    for model in [] if args.table else args.models.split(","):
        for variant in args.variants.split(","):
            if variant not in VARIANTS:
                parser.error(f"--variants: {variant!r} is not one of {', '.join(VARIANTS)}")
            print(f"{model}, {variant} ...", file=sys.stderr, flush=True)
            started = time.perf_counter()
            r = measure(model, variant, args.target)
            r["seconds"] = time.perf_counter() - started
            if "error" not in r:
                r["terms"] = terms(r)
            results = [x for x in results if (x["model"], x["variant"], x["target"]) != (
                model, variant, args.target)] + [r]  # fmt: skip
            out.write_text(json.dumps(results, indent=1) + "\n")  # kept as it goes
            print(row(r), flush=True)
    if args.table:  # The derived figures of the saved results, in the units shown.
        results = [r if "error" in r else r | {"terms": terms(r)} for r in results]
        out.write_text(json.dumps(results, indent=1) + "\n")
    print("\n" + HEADER)
    for r in results:
        print(row(r))


if __name__ == "__main__":
    main()
