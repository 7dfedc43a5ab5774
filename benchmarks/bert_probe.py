"""What does BERT pretraining put in the encoder? Linear probes of frozen features, pretrained
encoder against the same encoder at its random initialisation, on both offline tasks.

For each task (configs/bert_numbers_pair.py, configs/bert_stdlib_classify.py; the pretraining
run's tokenizer), three features of every example are computed with the encoder frozen: the
final `[CLS]` vector, the pooler's tanh output (what the classification head reads), and the
mean of the final vectors over the real tokens. Logistic regression (scikit-learn, standardised
features) is fitted on the training split and scored on the test split. A probe of pretrained
features above the random encoder's says the pretraining learned something the task can use;
below it says the features lost information a random projection keeps.

Also reported per encoder: the share of pooler outputs saturated (|tanh| > 0.95) and the mean
cosine similarity between the token embeddings of the vocabulary. With `--finetuned=DIR,...`
(fine-tuning runs started from the pretraining run), the relative change ||after - before|| /
||before|| of each part of the encoder (embeddings, each block, the pooler) in each of them.

  python train.py --config=configs/bert_stdlib_pretrain.py --workdir=runs/bert   # first
  PYTHONPATH=. python benchmarks/bert_probe.py --pretrained=runs/bert   # ~2 min, 2 cores

Writes a table to stdout and JSON to `benchmarks/results/bert_probe.json` (see `--out`).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from configs import bert_numbers_pair, bert_stdlib_classify  # noqa: E402
from transformer_jax import models  # noqa: E402
from transformer_jax.data.bert.inputs import real_tokens  # noqa: E402
from transformer_jax.runs import reading
from transformer_jax.runs.layout import Workdir  # noqa: E402
from transformer_jax.runs.tokenizer import load_tokenizer  # noqa: E402
from transformer_jax.tasks.classify import ClassificationTask  # noqa: E402

TASKS = {"numbers_pair": bert_numbers_pair, "stdlib_packages": bert_stdlib_classify}
FEATURES = ("cls", "pooled", "mean")


def features(model, split, batch: int = 256) -> dict[str, np.ndarray]:
    """The frozen encoder's `cls`, `pooled` and `mean` vectors [N, D] of a split's rows."""

    @nnx.jit
    def run(model, tokens, segments):
        mask = real_tokens(tokens)
        hidden = model(tokens, segments, attention_mask=mask, deterministic=True)  # [B, T, D]
        weights = mask.astype(hidden.dtype)[..., None]
        mean = (hidden * weights).sum(1) / jnp.maximum(weights.sum(1), 1)
        return hidden[:, 0], model.pool(hidden), mean

    out = {k: [] for k in FEATURES}
    for start in range(0, len(split), batch):
        rows = slice(start, start + batch)
        values = run(model, split.tokens[rows], split.segments[rows])
        for key, value in zip(FEATURES, values, strict=True):
            out[key].append(np.asarray(value))
    return {k: np.concatenate(v) for k, v in out.items()}


def probe(train: np.ndarray, train_y, test: np.ndarray, test_y) -> float:
    """Test accuracy of logistic regression fitted on standardised training features."""
    fit = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, C=1.0))
    fit.fit(train, train_y)
    return float(fit.score(test, test_y))


def embedding_similarity(model) -> float:
    """Mean cosine similarity between distinct token embeddings."""
    table = np.asarray(model.embed.embedding[...], np.float64)
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    sims = unit @ unit.T
    n = len(unit)
    return float((sims.sum() - n) / (n * (n - 1)))


def part_of(name: str) -> str:
    """The part a parameter belongs to: `encoder/layers/<i>` for a block, else its top name."""
    keys = name.split("/")
    if keys[0] == "encoder" and len(keys) > 2 and keys[1] == "layers" and keys[2].isdigit():
        return "/".join(keys[:3])
    return keys[0]


def relative_changes(before, after) -> dict[str, float]:
    """||after - before|| / ||before|| per part, over the parameters both models have."""
    flat = lambda tree: {  # noqa: E731
        "/".join(map(reading.key_name, p)): np.asarray(v, np.float64)
        for p, v in jax.tree_util.tree_flatten_with_path(nnx.state(tree))[0]
    }
    a, b = flat(before), flat(after)
    diff, norm = {}, {}
    for name in sorted(set(a) & set(b)):
        if a[name].shape != b[name].shape:
            continue
        part = part_of(name)
        diff[part] = diff.get(part, 0.0) + float(np.sum((b[name] - a[name]) ** 2))
        norm[part] = norm.get(part, 0.0) + float(np.sum(a[name] ** 2))
    return {k: (diff[k] / norm[k]) ** 0.5 for k in diff if norm[k] > 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrained", required=True, help="A bert_stdlib_pretrain workdir.")
    parser.add_argument("--seed", type=int, default=0, help="The random encoder's seed.")
    parser.add_argument("--tasks", default=",".join(TASKS), help="Comma-separated task names.")
    parser.add_argument("--finetuned", default="", help="Comma-separated fine-tuning workdirs.")
    parser.add_argument("--out", default="benchmarks/results/bert_probe.json")
    args = parser.parse_args()

    pretrained_dir = Workdir.at(args.pretrained)
    config = pretrained_dir.read_config()
    tokenizer = load_tokenizer(pretrained_dir, config)
    pretrained, steps = reading.load_model(pretrained_dir, config, tokenizer)
    model_cfg = models.build_config(config.model, {"vocab_size": tokenizer.vocab_size})
    encoders = {
        "pretrained": pretrained,
        "random": models.build_model(model_cfg, rngs=nnx.Rngs(args.seed)),
    }
    results = {
        "pretrained": str(pretrained_dir),
        "pretrained_step": steps[-1],
        "machine": f"{jax.devices()[0].platform}",
        "embedding_cosine": {k: embedding_similarity(m) for k, m in encoders.items()},
        "tasks": {},
    }
    for run in filter(None, args.finetuned.split(",")):
        workdir = Workdir.at(run)
        tuned, _ = reading.load_model(workdir, workdir.read_config(), None)
        changes = relative_changes(pretrained, tuned)
        results.setdefault("relative_change", {})[run] = changes
        print(f"relative change in {run}:")
        for part, value in changes.items():
            if part not in ("mlm_transform", "mlm_norm", "mlm_bias", "nsp_head", "token_head"):
                print(f"  {part:20s} {value:.4f}")
    for name in filter(None, args.tasks.split(",")):
        module = TASKS[name]
        task_config = module.get_config()
        task_config.init_from = str(pretrained_dir.path)
        with tempfile.TemporaryDirectory() as tmp:
            task = ClassificationTask(task_config, Workdir.at(tmp))
            train, test = task.encoded("train"), task.encoded("test")
        row = {}
        for kind, model in encoders.items():
            started = time.time()
            a, b = features(model, train), features(model, test)
            row[kind] = {f: probe(a[f], train.labels, b[f], test.labels) for f in FEATURES}
            row[kind]["pooled_saturated"] = float(np.mean(np.abs(b["pooled"]) > 0.95))
            row[kind]["seconds"] = round(time.time() - started, 1)
        results["tasks"][name] = row
        for kind in encoders:
            cells = "  ".join(f"{f} {row[kind][f]:.1%}" for f in FEATURES)
            print(
                f"{name:16s} {kind:10s} {cells}  saturated pooler "
                f"{row[kind]['pooled_saturated']:.1%}"
            )
    for kind, value in results["embedding_cosine"].items():
        print(f"mean cosine between token embeddings, {kind}: {value:.3f}")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
