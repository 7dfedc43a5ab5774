"""Does pretraining help? BERT fine-tuned from a pretraining run vs from scratch, beside
TF-IDF + logistic regression, on both offline tasks, at the same fine-tuning budget.

For each of configs/bert_numbers_pair.py and configs/bert_stdlib_classify.py, two runs with the
same config, steps, seed and tokenizer (the pretraining run's): `init_from=<pretrained>` and
from scratch. Each run's test figures (and the baseline's, fitted on the same training split
and scored on the same test split) are collected from its metrics.jsonl.

  python train.py --config=configs/bert_stdlib_pretrain.py --workdir=runs/bert   # first
  PYTHONPATH=. python benchmarks/bert_finetune.py --pretrained=runs/bert   # ~15 min, 2 cores

Writes a table to stdout and JSON to `benchmarks/results/bert_finetune.json` (see `--out`).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import time

import jax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from configs import bert_numbers_pair, bert_stdlib_classify  # noqa: E402
from transformer_jax.training.loop import train_and_evaluate  # noqa: E402

TASKS = {"numbers_pair": bert_numbers_pair, "stdlib_packages": bert_stdlib_classify}


def run(name: str, pretrained: pathlib.Path, root: pathlib.Path, from_scratch: bool) -> dict:
    """One fine-tuning run; returns its test figures and wall time."""
    config = TASKS[name].get_config()
    if from_scratch:
        config.init_from = ""
        config.data.spm_model_path = str(pretrained / "tokenizer.model")
    else:
        config.init_from = str(pretrained)
    workdir = root / f"{name}-{'scratch' if from_scratch else 'pretrained'}"
    started = time.time()
    result = train_and_evaluate(config, str(workdir))
    test = result["test"]
    return {
        "workdir": str(workdir),
        "steps": config.num_train_steps,
        "seconds": round(time.time() - started, 1),
        "accuracy": test["accuracy"],
        "macro_f1": test["macro_f1"],
        "baseline_accuracy": test["baseline_accuracy"],
        "baseline_macro_f1": test["baseline_macro_f1"],
        "test_examples": test["examples"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrained", required=True, help="A bert_stdlib_pretrain workdir.")
    parser.add_argument("--root", default="runs/bert_finetune", help="Where the runs go.")
    parser.add_argument("--tasks", default=",".join(TASKS), help="Comma-separated task names.")
    parser.add_argument(
        "--variants", default="pretrained,scratch", help="Which starts: pretrained, scratch."
    )
    parser.add_argument(
        "--out", default=str(pathlib.Path(__file__).parent / "results" / "bert_finetune.json")
    )
    args = parser.parse_args()
    pretrained, root = pathlib.Path(args.pretrained).resolve(), pathlib.Path(args.root)
    results = {}
    variants = args.variants.split(",")
    for name in args.tasks.split(","):
        results[name] = {v: run(name, pretrained, root, v == "scratch") for v in variants}
    print(f"\n{'task':<16} {'model':<22} {'accuracy':>9} {'macro-F1':>9}")
    for name, runs in results.items():
        rows = [(f"BERT {v}", r["accuracy"], r["macro_f1"]) for v, r in runs.items()]
        first = next(iter(runs.values()))
        rows.append(
            ("TF-IDF + logistic reg.", first["baseline_accuracy"], first["baseline_macro_f1"])
        )
        for model, acc, f1 in rows:
            print(f"{name:<16} {model:<22} {100 * acc:>8.1f}% {100 * f1:>8.1f}%")
    record = {
        "machine": f"{platform.processor() or platform.machine()}, {jax.device_count()} "
        f"{jax.default_backend()} device(s)",
        "pretrained": str(pretrained),
        "pretrained_test": _pretrained_test(pretrained),
        "tasks": results,
    }
    pathlib.Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"written: {args.out}")


def _pretrained_test(pretrained: pathlib.Path) -> dict:
    """The pretraining run's test figures (masked LM, next sentence), if it reached its end."""
    rows = [json.loads(line) for line in (pretrained / "metrics.jsonl").read_text().splitlines()]
    tests = [r for r in rows if r["split"] == "test"]
    return tests[-1] if tests else {}


if __name__ == "__main__":
    main()
