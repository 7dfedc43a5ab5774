"""Does pretraining help? BERT fine-tuned from a pretraining run vs from scratch, beside
TF-IDF + logistic regression, on both offline tasks, at the same fine-tuning budget.

For each of configs/bert_numbers_pair.py and configs/bert_stdlib_classify.py, and each seed,
two runs with the same config, steps, seed and tokenizer (the pretraining run's):
`init_from=<pretrained>` and from scratch; with `--fractions=1,0.1` also on a tenth of the
training labels (`data.train_fraction`, for `--fraction_steps` steps). The seed sets
`config.seed` (initialisation, dropout) and `data.shuffle_seed`. Each run's test figures
(and the baseline's, fitted on the same training examples and scored on the same test split)
come from its metrics.jsonl; a run whose workdir already holds a test record is read, not
trained again, so an interrupted benchmark resumes where it stopped. A numbers_pair run also
reports its test accuracy on each kind of pair (translation, near miss, random), from its
best checkpoint.

  python train.py --config=configs/bert_stdlib_pretrain.py --workdir=runs/bert   # first
  PYTHONPATH=. python benchmarks/bert_finetune.py --pretrained=runs/bert --seeds=0,1,2 \
      --fractions=1,0.1 --tasks=stdlib_packages  # the 10%-labels comparison too
  python train.py --config=configs/bert_bilingual_pretrain.py --workdir=runs/bert_bilingual
  PYTHONPATH=. python benchmarks/bert_finetune.py --pretrained=runs/bert_bilingual \
      --root=runs/bert_finetune_bilingual --seeds=0,1,2 --tasks=numbers_pair

`--steps` sets the steps of the full-label runs (default: the config's); a finished workdir
that ran another number of steps is refused, not read back under the wrong budget.

Writes a table (mean and range over the seeds) to stdout and JSON to
`benchmarks/results/bert_finetune.json` (see `--out`).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import sys

import jax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.finished_runs import last_test, train_or_read  # noqa: E402
from configs import bert_numbers_pair, bert_stdlib_classify  # noqa: E402
from transformer_jax.data.classify.numbers_pair import (  # noqa: E402
    NEAR_MISS,
    POSITIVE,
    RANDOM,
    numbers_pair_dataset,
    pair_integers,
)
from transformer_jax.inference.classifier import Classifier  # noqa: E402

TASKS = {"numbers_pair": bert_numbers_pair, "stdlib_packages": bert_stdlib_classify}


def accuracy_by_kind(workdir: pathlib.Path, step: int, data) -> dict:
    """numbers_pair test accuracy of the checkpoint at `step` on each kind of pair: B the
    translation, a near miss (one digit changed) or another test number."""
    sizes = {"test": data.numbers_test}
    examples = numbers_pair_dataset(sizes, data.numbers_seed, data.numbers_lang).splits["test"]
    _, _, kind = pair_integers("test", data.numbers_test, data.numbers_seed)
    predictions = Classifier.from_checkpoint(workdir, step).predict(
        [(e.text_a, e.text_b) for e in examples], batch_size=128
    )
    right = [
        (p.label == "translation") == bool(e.label)
        for p, e in zip(predictions, examples, strict=True)
    ]
    return {
        name: statistics.fmean(r for r, k in zip(right, kind, strict=True) if k == code)
        for name, code in (("translation", POSITIVE), ("near_miss", NEAR_MISS), ("random", RANDOM))
    }


def run(
    name: str, pretrained: pathlib.Path, root: pathlib.Path, scratch: bool, seed: int,
    fraction: float, steps: int | None = None,
) -> dict:  # fmt: skip
    """One fine-tuning run (or its finished workdir); returns its test figures."""
    config = TASKS[name].get_config()
    if scratch:
        config.init_from = ""
        config.data.spm_model_path = str(pretrained / "tokenizer.model")
    else:
        config.init_from = str(pretrained)
    config.seed = config.data.shuffle_seed = seed
    config.data.train_fraction = fraction
    if steps:
        config.num_train_steps = steps
    labels = "" if fraction == 1 else f"-f{fraction:g}"
    workdir = root / f"{name}-{'scratch' if scratch else 'pretrained'}{labels}-s{seed}"
    hint = "pass --steps (--fraction_steps for a part of the labels) to read it back, or "
    test, seconds = train_or_read(config, workdir, hint=hint + "another --root.")
    return {
        "workdir": str(workdir),
        "steps": config.num_train_steps,
        "seconds": seconds,
        "test_step": test["step"],
        "accuracy": test["accuracy"],
        "macro_f1": test["macro_f1"],
        "baseline_accuracy": test["baseline_accuracy"],
        "baseline_macro_f1": test["baseline_macro_f1"],
        "test_examples": test["examples"],
        **(
            {"accuracy_by_kind": accuracy_by_kind(workdir, test["step"], config.data)}
            if name == "numbers_pair"
            else {}
        ),
    }


def summary(runs: list[dict], key: str) -> dict:
    """Mean, minimum and maximum of `key` over the seeds' runs."""
    values = [r[key] for r in runs]
    return {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrained", required=True, help="A bert_pretrain workdir.")
    parser.add_argument("--root", default="runs/bert_finetune", help="Where the runs go.")
    parser.add_argument("--tasks", default=",".join(TASKS), help="Comma-separated task names.")
    parser.add_argument("--seeds", default="0", help="Comma-separated seeds, e.g. 0,1,2.")
    parser.add_argument(
        "--fractions", default="1", help="Comma-separated shares of the training labels."
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="Steps of full-label runs (default: the config's)."
    )
    parser.add_argument(
        "--fraction_steps", type=int, default=150, help="Steps of the runs on a part of the labels."
    )
    parser.add_argument(
        "--out", default=str(pathlib.Path(__file__).parent / "results" / "bert_finetune.json")
    )
    args = parser.parse_args()
    pretrained, root = pathlib.Path(args.pretrained).resolve(), pathlib.Path(args.root)
    seeds = [int(s) for s in args.seeds.split(",")]
    results = {}
    for name in args.tasks.split(","):
        for fraction in (float(f) for f in args.fractions.split(",")):
            key = name if fraction == 1 else f"{name} ({fraction:.0%} of the labels)"
            arms = {}
            for variant in ("pretrained", "scratch"):
                steps = args.steps if fraction == 1 else args.fraction_steps
                runs = [
                    run(name, pretrained, root, variant == "scratch", seed, fraction, steps)
                    for seed in seeds
                ]
                arms[variant] = {
                    "accuracy": summary(runs, "accuracy"),
                    "macro_f1": summary(runs, "macro_f1"),
                    "runs": runs,
                }
            arms["tfidf"] = {
                "accuracy": summary(arms["scratch"]["runs"], "baseline_accuracy"),
                "macro_f1": summary(arms["scratch"]["runs"], "baseline_macro_f1"),
            }
            results[key] = arms
    print(f"\nseeds {seeds}: test accuracy, mean (min-max)")
    print(f"{'task':<38} {'pretrained':>20} {'scratch':>20} {'TF-IDF':>8}")
    for key, arms in results.items():
        cells = [
            "{mean:.1%} ({min:.1%}-{max:.1%})".format(**arms[v]["accuracy"])
            for v in ("pretrained", "scratch")
        ]
        print(f"{key:<38} {cells[0]:>20} {cells[1]:>20} {arms['tfidf']['accuracy']['mean']:>8.1%}")
    record = {
        "machine": f"{platform.processor() or platform.machine()}, {jax.device_count()} "
        f"{jax.default_backend()} device(s)",
        "pretrained": str(pretrained),
        "pretrained_test": _pretrained_test(pretrained),
        "seeds": seeds,
        "tasks": results,
    }
    pathlib.Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"written: {args.out}")


def _pretrained_test(pretrained: pathlib.Path) -> dict:
    """The pretraining run's test figures (masked LM, next sentence), if it reached its end (a
    converted checkpoint has none)."""
    return last_test(pretrained) or {}


if __name__ == "__main__":
    main()
