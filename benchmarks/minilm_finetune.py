"""A real pretrained encoder against the project's own: all-MiniLM-L6-v2 fine-tuned on the two
offline classification tasks, beside a logistic regression on its frozen embeddings, the
project's own pretraining, scratch and TF-IDF.

For each task (configs/minilm_stdlib_classify.py, configs/minilm_numbers_pair.py) and seed, one
fine-tuning run from the converted MiniLM (`--minilm`, made by benchmarks/minilm.py); the seed
sets `config.seed` and `data.shuffle_seed`, as benchmarks/bert_finetune.py does for the
project's own runs, whose figures (same splits, steps and batch) are read from
`--own_results`. The probe: MiniLM's sentence embeddings (its mean pooling, unit length), frozen;
for a pair task the features of (u, v) are [u, v, |u - v|, u * v]; scikit-learn's logistic
regression with C picked on the validation split from PROBE_CS, and its test accuracy at every
C. A run whose workdir already holds a test record is read back, not trained again.

  python benchmarks/minilm.py --workdir=runs/minilm
  PYTHONPATH=. python benchmarks/minilm_finetune.py --minilm=runs/minilm --seeds=0,1,2

Writes a table to stdout and JSON to benchmarks/results/minilm_finetune.json (see `--out`).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import sys
import time

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.finished_runs import train_or_read  # noqa: E402
from configs import minilm_numbers_pair, minilm_stdlib_classify  # noqa: E402
from transformer_jax.data.classify.pipeline import load_dataset  # noqa: E402
from transformer_jax.inference.embedder import Embedder  # noqa: E402

TASKS = {"stdlib_packages": minilm_stdlib_classify, "numbers_pair": minilm_numbers_pair}
# A finished run is read back only if it ran with the recipe's values of these.
RECIPE_KEYS = (
    "num_train_steps", "learning_rate", "head_only_steps", "head_lr_factor", "head_l2",
    "data.max_len",
)  # fmt: skip
PROBE_CS = (0.01, 0.1, 1.0, 10.0, 100.0)  # Inverse L2 strengths the probe chooses from.
_RESULTS = pathlib.Path(__file__).parent / "results"


def finetune(name: str, minilm: pathlib.Path, root: pathlib.Path, seed: int) -> dict:
    """One fine-tuning run from MiniLM (or its finished workdir); its test figures."""
    config = TASKS[name].get_config()
    config.init_from = str(minilm)
    config.seed = config.data.shuffle_seed = seed
    workdir = root / f"{name}-minilm-s{seed}"
    test, seconds = train_or_read(config, workdir, RECIPE_KEYS)
    return {
        "workdir": str(workdir),
        "steps": config.num_train_steps,
        "seconds": seconds,
        "test_step": test["step"],
        "accuracy": test["accuracy"],
        "macro_f1": test["macro_f1"],
        "tfidf_accuracy": test["baseline_accuracy"],
    }


def _features(embedder: Embedder, examples) -> np.ndarray:
    """[N, F]: the embedding of each text, or [u, v, |u - v|, u * v] of each pair."""
    u = embedder.embed([e.text_a for e in examples])
    if examples[0].text_b is None:
        return u
    v = embedder.embed([e.text_b for e in examples])
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


def probe(name: str, embedder: Embedder) -> dict:
    """Logistic regression on frozen MiniLM embeddings: C picked on validation."""
    from sklearn.linear_model import LogisticRegression

    dataset = load_dataset(TASKS[name].get_config().data)
    x = {s: _features(embedder, dataset.splits[s]) for s in ("train", "eval", "test")}
    y = {s: np.array([e.label for e in dataset.splits[s]]) for s in x}
    by_c = {}
    for c in PROBE_CS:
        model = LogisticRegression(C=c, max_iter=5000).fit(x["train"], y["train"])
        by_c[c] = {s: float((model.predict(x[s]) == y[s]).mean()) for s in ("eval", "test")}
    chosen = max(PROBE_CS, key=lambda c: (by_c[c]["eval"], -c))  # ties: the stronger L2
    return {
        "chosen_c": chosen,
        "accuracy": by_c[chosen]["test"],
        "by_c": {str(c): v for c, v in by_c.items()},
    }


def _own(results_path: pathlib.Path, name: str) -> dict:
    """The project's own pretrained and scratch figures on `name` (benchmarks/bert_finetune.py
    at the same steps), or {} when that file lacks them."""
    if not results_path.is_file():
        return {}
    tasks = json.loads(results_path.read_text()).get("tasks", {})
    arms = tasks.get(name, {})
    return {k: arms[k]["accuracy"]["mean"] for k in ("pretrained", "scratch") if k in arms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minilm", default="runs/minilm", help="The converted MiniLM workdir.")
    parser.add_argument("--root", default="runs/minilm_finetune", help="Where the runs go.")
    parser.add_argument("--tasks", default=",".join(TASKS), help="Comma-separated task names.")
    parser.add_argument("--seeds", default="0,1,2", help="Comma-separated seeds.")
    parser.add_argument(
        "--own_results",
        default=",".join(
            str(_RESULTS / f) for f in ("bert_finetune.json", "bert_finetune_bilingual_pair.json")
        ),
        help="benchmarks/bert_finetune.py's JSON files with the project's own runs.",
    )
    parser.add_argument("--out", default=str(_RESULTS / "minilm_finetune.json"))
    args = parser.parse_args()
    minilm, root = pathlib.Path(args.minilm).resolve(), pathlib.Path(args.root)
    seeds = [int(s) for s in args.seeds.split(",")]
    embedder = Embedder.from_checkpoint(minilm)
    results = {}
    for name in args.tasks.split(","):
        runs = [finetune(name, minilm, root, seed) for seed in seeds]
        accuracies = [r["accuracy"] for r in runs]
        own = {}
        for path in args.own_results.split(","):
            own = own or _own(pathlib.Path(path), name)
        results[name] = {
            "minilm_finetuned": {
                "mean": statistics.fmean(accuracies),
                "min": min(accuracies),
                "max": max(accuracies),
                "runs": runs,
            },
            "minilm_probe": probe(name, embedder),
            "tfidf": runs[0]["tfidf_accuracy"],
            "own_pretrained": own.get("pretrained"),
            "own_scratch": own.get("scratch"),
        }
    print(f"\nseeds {seeds}: test accuracy")
    header = ("task", "MiniLM fine-tuned", "MiniLM probe", "own pretrain", "scratch", "TF-IDF")
    print("{:<16} {:>24} {:>13} {:>13} {:>8} {:>7}".format(*header))
    for name, r in results.items():
        tuned = "{mean:.2%} ({min:.2%}-{max:.2%})".format(**r["minilm_finetuned"])
        cells = [r["own_pretrained"], r["own_scratch"]]
        own_cells = [f"{c:.2%}" if c is not None else "-" for c in cells]
        print(
            f"{name:<16} {tuned:>24} {r['minilm_probe']['accuracy']:>13.2%} "
            f"{own_cells[0]:>13} {own_cells[1]:>8} {r['tfidf']:>7.2%}"
        )
    record = {
        "command": "PYTHONPATH=. python benchmarks/minilm_finetune.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.processor() or platform.machine()}, {jax.device_count()} "
        f"{jax.default_backend()} device(s)",
        "date": time.strftime("%Y-%m-%d"),
        "seeds": seeds,
        "tasks": results,
    }
    pathlib.Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
