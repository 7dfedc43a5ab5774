"""bfloat16 computation against float32: does a short run's loss curve stay within run-to-run noise?

    PYTHONPATH=. python benchmarks/bf16_loss_curve.py            # default config, 300 steps
    PYTHONPATH=. python benchmarks/bf16_loss_curve.py --config=configs/wmt14_en_de_base.py \
        --steps=2000 --workdir_root=gs://bucket/bf16   # on an accelerator

Three runs of `train.py` from empty workdirs: float32 with seed 0, float32 with seed 1 (the
noise: only the initialisation and dropout keys differ) and bfloat16 with seed 0 (parameters,
Adam moments, softmax and LayerNorm statistics stay float32). For each logged step it reads
the training loss from `metrics.jsonl` and reports the mean absolute gap of the last half of
the curve, bfloat16 vs float32 and float32 vs float32. bfloat16 passes when its gap is within
`--tolerance` times the seed gap. Writes JSON (default benchmarks/results/bf16_loss_curve.json).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="configs/default.py")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--log_every", type=int, default=10)
    p.add_argument("--tolerance", type=float, default=1.5, help="allowed gap / seed gap")
    p.add_argument("--workdir_root", default="", help="where the three workdirs go (temp dir)")
    p.add_argument("--out", default="benchmarks/results/bf16_loss_curve.json")
    return p.parse_args()


def _train(args, workdir: str, dtype: str, seed: int) -> dict[int, float]:
    """Runs train.py; returns {step: training loss}."""
    overrides = [
        f"--config.num_train_steps={args.steps}",
        f"--config.log_every={args.log_every}",
        f"--config.eval_every={args.steps}",
        f"--config.checkpoint_every={args.steps}",
        "--config.test_sentences=0",
        f"--config.seed={seed}",
        f"--config.model.dtype={dtype}",
    ]
    command = [sys.executable, "train.py", f"--config={args.config}", f"--workdir={workdir}"]
    started = time.perf_counter()
    subprocess.run(command + overrides, cwd=ROOT, check=True, env={**os.environ})
    print(f"  {dtype} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    losses = {}
    with open(pathlib.Path(workdir) / "metrics.jsonl") as f:
        for line in f:
            row = json.loads(line)
            if row.get("split") == "train" and "loss" in row:
                losses[int(row["step"])] = float(row["loss"])
    return losses


def _gap(a: dict[int, float], b: dict[int, float]) -> float:
    """Mean |a - b| over the last half of the steps both logged."""
    steps = sorted(set(a) & set(b))
    tail = steps[len(steps) // 2 :]
    return sum(abs(a[s] - b[s]) for s in tail) / len(tail)


def main() -> None:
    args = _parse()
    root = args.workdir_root or tempfile.mkdtemp(prefix="bf16_curve_")
    runs = {}
    for name, dtype, seed in [
        ("float32_seed0", "float32", 0),
        ("float32_seed1", "float32", 1),
        ("bfloat16_seed0", "bfloat16", 0),
    ]:
        runs[name] = _train(args, f"{root}/{name}", dtype, seed)
    seed_gap = _gap(runs["float32_seed0"], runs["float32_seed1"])
    bf16_gap = _gap(runs["bfloat16_seed0"], runs["float32_seed0"])
    last = max(runs["float32_seed0"])
    result = {
        "config": args.config,
        "steps": args.steps,
        "final_loss": {name: curve[max(curve)] for name, curve in runs.items()},
        "mean_abs_gap_last_half": {
            "float32 seed 0 vs seed 1": seed_gap,
            "bfloat16 vs float32": bf16_gap,
        },
        "ratio": bf16_gap / seed_gap if seed_gap else None,
        "within_noise": bf16_gap <= args.tolerance * seed_gap,
        "curves": runs,
    }
    for name, curve in runs.items():
        print(f"{name:16s} loss at step {last}: {curve[last]:.4f}")
    print(
        f"mean |gap| over the last half: bfloat16 vs float32 {bf16_gap:.4f}, float32 seed 0 vs 1 "
        f"{seed_gap:.4f} (ratio {result['ratio']:.2f}; within noise: {result['within_noise']})"
    )
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
