"""Score a split of a run's dataset with the run's own task: BLEU for translation, bits per byte
for language models, masked-LM and next-sentence accuracy for BERT, accuracy and macro-F1 for
classifiers.

    python -m transformer_jax evaluate --workdir=runs/default --split=test \\
        [--beam_size=4] [--alpha=0.6] [--max_sentences=N] [--step=N] [--average_last=N] \\
        [--mesh=fsdp=4,tensor=2]
    python -m transformer_jax evaluate --workdir=runs/gpt --split=test
    python -m transformer_jax evaluate --workdir=runs/bert_numbers --split=test
    python -m transformer_jax evaluate --workdir=runs/vit --split=test

The examples come from the run's own data config (config.json), so the split is the one the
run held out. Each task scores a split with its `score_split` (the one its training run uses
for the final test), here with the baselines on: compressors and a character bigram beside a
language model, the most frequent token beside BERT's masked LM, TF-IDF + logistic regression
beside a text classifier, an RBF SVC and logistic regression beside the ViT. The figures go to
`<workdir>/eval/<split>.step<S>[.avg<N>][.first<M>].<kind>.json` (S the last step loaded, N the
number of averaged checkpoints, M `--max_sentences`, kind e.g. `beam4`, `beam4.alpha1`
(a length penalty other than 0.6), `lm`, `classify`), a translation run's hypotheses one
per line, in the split's order, to the `.txt` file of the same name, and a classifier's
confusion matrix to a `.confusion.png` picture.
"""

from __future__ import annotations

import json
import sys

from absl import flags

from transformer_jax import tasks
from transformer_jax.cli import common
from transformer_jax.plotting import plot_confusion
from transformer_jax.runs.layout import CheckpointError, Workdir
from transformer_jax.runs.load import load_run
from transformer_jax.sharding import make_mesh


def define_flags(fv: flags.FlagValues) -> None:
    common.workdir_flag(fv)
    common.checkpoint_flags(fv, average=True)
    common.decoding_flags(fv)
    common.batch_size_flag(fv, 64, "Sentences decoded")
    common.mesh_flag(fv)
    flags.DEFINE_enum("split", "test", ["train", "eval", "test"], "Split to score.", flag_values=fv)
    flags.DEFINE_integer(
        "max_sentences", 0, "Score only the first N examples (0: all).", flag_values=fv
    )
    flags.DEFINE_boolean(
        "baselines", True, "The task's baselines beside the model's figures.", flag_values=fv
    )


def load_task(workdir: Workdir, config) -> tasks.Task:
    """The run's task, set up from its config.json as training set it up (its data, its
    tokenizer from the workdir)."""
    task_cls = tasks.get(config.get("task"))
    try:
        return task_cls(config, workdir)
    except (AttributeError, KeyError) as e:  # a field the task reads is missing
        raise CheckpointError(
            f"{workdir.config_json}: the {task_cls.name} task cannot read this config (no "
            f"field {common.config_problem(e)}). Use the config.json train.py wrote for the run."
        ) from e


def output_stem(
    split: str, steps: tuple[int, ...] | list[int], kind: str, max_examples: int = 0
) -> str:
    """`test.step900.beam4`, `test.step900.avg5.beam4` for an average of 5 checkpoints,
    `test.step900.first100.beam4` for the first 100 examples (`--max_sentences`): each
    scoring its own file, so that one never overwrites another's."""
    average = f".avg{len(steps)}" if len(steps) > 1 else ""
    first = f".first{max_examples}" if max_examples else ""
    return f"{split}.step{steps[-1]}{average}{first}.{kind}"


def evaluate(fv: flags.FlagValues, args: list[str]) -> int:
    common.at_least(fv.max_sentences, 0, "max_sentences")
    common.at_least(fv.batch_size, 1, "batch_size")
    workdir = Workdir.at(fv.workdir).require()
    config = workdir.read_config()
    imported = config.get("imported", {}).get("architecture")
    if imported and config.get("task") != "translation":
        raise CheckpointError(
            f"{workdir}: converted from a Hugging Face {imported}; it has no dataset here to "
            f"score. Fine-tune it into a run with --config.init_from={workdir} (evaluate scores "
            f"that run's splits), or use its front end on your data (docs/interop.md)."
        )
    # The model first: a bad --mesh, --step or checkpoint fails before the task reads its data.
    # A text run's own tokenizer must be there (the task would otherwise train a new one).
    text = "vocab_size" in config.get("data", {})
    run = load_run(workdir, fv.step, fv.average_last, mesh=fv.mesh, tokenizer=text)
    model, steps, mesh = run.model, run.steps, run.mesh
    task = load_task(workdir, config)
    options = tasks.ScoreOptions(
        baselines=fv.baselines,
        max_examples=fv.max_sentences,
        beam_size=fv.beam_size,
        alpha=fv.alpha,
        batch_size=fv.batch_size,
        max_len=fv.max_len,
    )
    mesh = mesh or make_mesh({"data": -1})  # Without --mesh: batches split over every device.
    scores = task.score_split(model, fv.split, mesh=mesh, options=options)
    if scores is None:
        raise ValueError(f"the {fv.split} split of {workdir} has nothing to score.")

    out_dir = workdir.eval
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = output_stem(fv.split, steps, scores.kind, fv.max_sentences)
    path = out_dir / f"{stem}.json"
    record = {"split": fv.split, "steps": list(steps), **scores.metrics}
    path.write_text(json.dumps(record, indent=2) + "\n")
    average = f" (average of steps {list(steps)})" if len(steps) > 1 else ""
    print(f"step {steps[-1]}{average}, {scores.report}")
    print(f"figures: {path}")
    if scores.outputs is not None:
        outputs = out_dir / f"{stem}.txt"
        outputs.write_text(
            "".join(common.one_line(o) + "\n" for o in scores.outputs), encoding="utf-8"
        )
        print(f"hypotheses: {outputs}")
    if scores.label_names is not None:
        picture = out_dir / f"{stem}.confusion.png"
        title = scores.report.split("\n")[0]
        plot_confusion(scores.metrics["confusion"], scores.label_names, picture, title=title)
        print(f"confusion matrix: {picture}")
    return 0


COMMAND = common.Command("python -m transformer_jax evaluate", __doc__, define_flags, evaluate)

main = COMMAND.run  # main(argv=None) -> exit code


if __name__ == "__main__":
    sys.exit(main())
