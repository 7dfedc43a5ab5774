"""Score a split of a run's dataset: BLEU for translation, bits per byte for language models.

    python -m transformer_jax.evaluate --workdir=runs/default --split=test \
        [--beam_size=4] [--alpha=0.6] [--max_sentences=N] [--step=N] [--average_last=N] \
        [--mesh=fsdp=4,tensor=2]
    python -m transformer_jax.evaluate --workdir=runs/gpt --split=test [--step=N]
    python -m transformer_jax.evaluate --workdir=runs/bert_numbers --split=test
    python -m transformer_jax.evaluate --workdir=runs/vit --split=test

Language-model workdirs (config.task == "language_model") get the split's loss, perplexity,
token accuracy and bits per byte beside lzma, zlib and a character bigram on the same text,
and a few samples; the figures go to `<workdir>/eval/<split>.step<S>.lm.json`. BERT
pretraining workdirs get masked-LM and next-sentence accuracy (`.bert.json`); fine-tuned
classifiers accuracy, macro-F1 and the confusion matrix beside TF-IDF + logistic regression
(`.classify.json`); ViT image classifiers accuracy (top-5 beyond five classes), macro-F1 and
the confusion matrix beside an RBF SVC and logistic regression on the same pixels
(`.image.json`). Classifiers also get the confusion matrix as a picture (`.confusion.png`).

Translation:
The pairs come from the run's own data config (config.json), so the split is the one the run
held out. BLEU is sacreBLEU's corpus BLEU on detokenized, cased text, printed with its signature.
The hypotheses are written one per line, in the split's order, to
`<workdir>/eval/<split>.step<S>[.avg<N>].beam<K>.txt` (S the last step loaded, N the number of
averaged checkpoints), with the scores and settings in the `.json` file of the same name.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from transformer_jax import tasks
from transformer_jax.cli_lines import quiet_logs
from transformer_jax.data.translation import get_pairs
from transformer_jax.inference import loading
from transformer_jax.inference.mesh import MeshError, serving_mesh
from transformer_jax.inference.scoring import corpus_scores
from transformer_jax.inference.translator import Translator
from transformer_jax.plot import plot_confusion
from transformer_jax.sharding import make_mesh
from transformer_jax.translate import add_model_flags
from transformer_jax.workdir import CheckpointError, Workdir

# Tasks scored by their own `score_split`, and the suffix of their figures' file.
SCORED_TASKS = {
    "language_model": "lm",
    "bert_pretrain": "bert",
    "classify": "classify",
    "image_classify": "image",
}


def output_stem(split: str, steps: tuple[int, ...], beam_size: int) -> str:
    """`test.step900.beam4`, or `test.step900.avg5.beam4` for an average of 5 checkpoints."""
    average = f".avg{len(steps)}" if len(steps) > 1 else ""
    return f"{split}.step{steps[-1]}{average}.beam{beam_size}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_jax.evaluate", description=__doc__.split("\n\n")[0]
    )
    add_model_flags(parser)
    parser.add_argument(
        "--split", default="test", choices=("train", "eval", "test"), help="Split to decode."
    )
    parser.add_argument(
        "--max_sentences", type=int, default=0, help="Decode only the first N pairs (0: all)."
    )
    args = parser.parse_args(argv)
    quiet_logs()
    if args.max_sentences < 0:
        parser.error(f"--max_sentences must be >= 0, got {args.max_sentences}.")

    try:
        workdir = Workdir.at(args.workdir).require()
        if workdir.read_config().get("task") in SCORED_TASKS:
            return evaluate_task(workdir, args)
        translator = Translator.from_checkpoint(
            args.workdir, args.step, args.average_last, mesh=args.mesh
        )
        workdir = translator.workdir
        pairs = get_pairs(translator.config.data, args.split, cache_dir=workdir.cache)
        if args.max_sentences:
            pairs = pairs[: args.max_sentences]
        if not pairs:
            raise ValueError(f"the {args.split} split of {workdir} has no sentence pairs.")
        started = time.time()
        hyps = translator.translate(
            [src for src, _ in pairs],
            beam_size=args.beam_size,
            alpha=args.alpha,
            batch_size=args.batch_size,
            max_len=args.max_len,
            progress=True,
        )
        seconds = time.time() - started
    except MeshError as e:
        print(f"error: --mesh={args.mesh}: {e}", file=sys.stderr)
        return 1
    except (CheckpointError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

    refs = [tgt for _, tgt in pairs]
    scores = corpus_scores(hyps, refs)
    matches = sum(h == r for h, r in zip(hyps, refs, strict=True))
    steps = translator.steps
    out_dir = workdir.eval
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = output_stem(args.split, steps, args.beam_size)
    hyp_path = out_dir / f"{stem}.txt"
    hyp_path.write_text("".join(h.replace("\n", " ") + "\n" for h in hyps), encoding="utf-8")
    record = {
        "split": args.split,
        "sentences": len(pairs),
        "steps": list(steps),
        "beam_size": args.beam_size,
        "alpha": args.alpha,
        "decode_seconds": round(seconds, 3),
        **scores,
    }
    (out_dir / f"{stem}.json").write_text(json.dumps(record, indent=2) + "\n")

    loaded = f"step {steps[-1]}" + (f" (average of steps {list(steps)})" if len(steps) > 1 else "")
    decoding = "greedy" if args.beam_size == 1 else f"beam {args.beam_size}, alpha {args.alpha}"
    print(f"{args.split}: {len(pairs)} sentences, {loaded}, {decoding}, {seconds:.1f} s")
    print(f"BLEU {scores['bleu']:.2f}  {scores['bleu_signature']}")
    print(f"chrF {scores['chrf']:.2f}")
    print(f"exact match {100 * scores['exact_match']:.1f}% ({matches}/{len(pairs)})")
    print(f"hypotheses: {hyp_path}")
    return 0


def evaluate_task(workdir: Workdir, args: argparse.Namespace) -> int:
    """A language model's, BERT's or a classifier's figures on a split (`score_split`)."""
    config = workdir.read_config()
    task = tasks.get(config.task)(config, workdir)
    tokenizer = getattr(task, "tokenizer", None)  # image tasks have none
    mesh = serving_mesh(args.mesh)
    model, steps = loading.load_model(
        workdir, config, tokenizer, args.step, args.average_last, mesh=mesh
    )
    mesh = mesh or make_mesh({"data": -1})  # Without --mesh: batches split over every device.
    metrics, line = task.score_split(model, args.split, mesh=mesh, baselines=True)
    if not metrics:
        raise ValueError(f"the {args.split} split of {workdir} has no documents to score.")
    out_dir = workdir.eval
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{args.split}.step{steps[-1]}.{SCORED_TASKS[config.task]}.json"
    record = {"split": args.split, "steps": list(steps), **metrics}
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"step {steps[-1]}, {line}")
    print(f"figures: {path}")
    if "confusion" in metrics:
        picture = path.parent / (path.name.removesuffix(".json") + ".confusion.png")
        plot_confusion(
            metrics["confusion"], task.dataset.label_names, picture, title=line.split("\n")[0]
        )
        print(f"confusion matrix: {picture}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
