"""Weight interpolation between two checkpoints of one run (WiSE-FT, Wortsman et al. 2022),
scored on its validation and test splits.

    python benchmarks/interpolate_weights.py --workdir=runs/minilm_stdlib \
        --from_step=150 --to_step=300 --alphas=0,0.25,0.5,0.75,1 \
        --out=benchmarks/results/minilm_stdlib_interpolation.json

For each alpha the model with parameters (1 - alpha) * theta_from + alpha * theta_to is scored
by the run's own task (`evaluate`'s figures, without baselines). With an LP-FT run
(`head_only_steps`), `--from_step` at the end of the head-only phase is the linear probe on
the pretrained body, so alpha 0 is the probe and 1 the fine-tuned model. Both steps must be
among the run's saved checkpoints (`keep_checkpoints` large enough). Choose alpha by the
validation column: the test column is for reporting.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
from flax import nnx  # noqa: E402

from transformer_jax import tasks  # noqa: E402
from transformer_jax.cli.evaluate import load_task  # noqa: E402
from transformer_jax.runs.layout import Workdir  # noqa: E402
from transformer_jax.runs.load import load_run  # noqa: E402
from transformer_jax.sharding import make_mesh  # noqa: E402


def interpolate(theta_from: nnx.State, theta_to: nnx.State, alpha: float) -> nnx.State:
    """(1 - alpha) * theta_from + alpha * theta_to, leaf by leaf, in each leaf's dtype."""
    return jax.tree.map(
        lambda a, b: ((1.0 - alpha) * a + alpha * b).astype(a.dtype), theta_from, theta_to
    )


def parse_alphas(text: str) -> list[float]:
    try:
        alphas = [float(x) for x in text.split(",")]
    except ValueError as e:
        raise SystemExit(f"--alphas={text!r}: give comma-separated numbers, e.g. 0,0.5,1.") from e
    if not all(0.0 <= a <= 1.0 for a in alphas):
        raise SystemExit(f"--alphas={text!r}: each must lie in [0, 1].")
    return alphas


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True, help="a finished train.py run")
    parser.add_argument("--from_step", type=int, required=True, help="alpha 0's checkpoint")
    parser.add_argument("--to_step", type=int, required=True, help="alpha 1's checkpoint")
    parser.add_argument("--alphas", default="0,0.25,0.5,0.75,1")
    parser.add_argument("--out", default=None, help="a JSON file for the figures")
    args = parser.parse_args(argv)
    alphas = parse_alphas(args.alphas)

    workdir = Workdir.at(args.workdir).require()
    config = workdir.read_config()
    text = "vocab_size" in config.get("data", {})
    graphdef, theta_from = nnx.split(load_run(workdir, args.from_step, 0, tokenizer=text).model)
    _, theta_to = nnx.split(load_run(workdir, args.to_step, 0, tokenizer=text).model)
    task = load_task(workdir, config)
    mesh = make_mesh({"data": -1})
    options = tasks.ScoreOptions(baselines=False)
    rows = []
    for alpha in alphas:
        model = nnx.merge(graphdef, interpolate(theta_from, theta_to, alpha))
        row = {"alpha": alpha}
        for split in ("eval", "test"):
            scores = task.score_split(model, split, mesh=mesh, options=options)
            if scores is not None:
                row[split] = {k: v for k, v in scores.metrics.items() if k != "confusion"}
        rows.append(row)
        figures = ", ".join(
            f"{split} {row[split]['accuracy']:.2%}" for split in ("eval", "test") if split in row
        )
        print(f"alpha {alpha:g}: {figures}", flush=True)
    record = {
        "workdir": str(workdir),
        "from_step": args.from_step,
        "to_step": args.to_step,
        "seed": config.get("seed"),
        "rows": rows,
    }
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
