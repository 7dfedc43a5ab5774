"""Classify texts or text pairs with a fine-tuned BERT (a `configs/bert_*` fine-tuning run).

    python -m transformer_jax classify --workdir=runs/bert_numbers \\
        --text=$'four hundred and two\tquatre cent deux'
    printf 'The event loop runs tasks.\n' | python -m transformer_jax classify \\
        --workdir=runs/bert_stdlib

Inputs come from `--text` (repeatable) or stdin, one per line (UTF-8; see
`transformer_jax.cli.common`); for a pair classifier a line is `text_a<TAB>text_b`, and a line
without exactly one tab or with an empty text_b is an error naming it. Each line out answers
the line in: `label<TAB>probability`, or with `--json` one JSON object per line ({"label",
"probabilities": {label: p}}).
"""

from __future__ import annotations

import dataclasses
import json
import sys

from absl import flags

from transformer_jax.cli import common
from transformer_jax.inference.classifier import Classifier


def parse_line(line: str, pair: bool | None, where: str) -> str | tuple[str, str]:
    """A text, or for a pair classifier the two texts of `text_a<TAB>text_b`.

    Args:
      line: one input line.
      pair: whether the classifier reads pairs; None (a converted classifier) reads a line
        with one tab as a pair, any other as one text.
      where: how an error names the line, e.g. "<stdin>:3".
    """
    if pair is None and line.count("\t") == 1 and line.split("\t")[1].strip():
        return tuple(line.split("\t"))
    if not pair:
        return line
    parts = line.split("\t")
    if len(parts) != 2 or not parts[1].strip():
        problem = (
            f"has {len(parts) - 1} tabs" if len(parts) > 2 else "has no second text after a tab"
        )
        raise ValueError(
            f"{where}: this classifier reads pairs, written text_a<TAB>text_b (exactly one "
            f"tab, a non-empty text_b); the line {problem}: {line[:80]!r}."
        )
    return parts[0], parts[1]


def define_flags(fv: flags.FlagValues) -> None:
    common.workdir_flag(fv, "fine-tuning run")
    common.checkpoint_flags(fv)
    common.batch_size_flag(fv, 32, "Inputs")
    common.mesh_flag(fv)
    flags.DEFINE_multi_string("text", None, "An input (repeatable).", flag_values=fv)
    flags.DEFINE_boolean("json", False, "One JSON object per line.", flag_values=fv)


def classify(fv: flags.FlagValues, args: list[str]) -> int:
    common.at_least(fv.batch_size, 1, "batch_size")
    classifier = Classifier.from_checkpoint(fv.workdir, fv.step, mesh=fv.mesh)
    lines, flag = common.texts_or_stdin(fv.text, "--text")
    inputs = [
        parse_line(line, classifier.pair, common.input_name(number, flag))
        for number, line in enumerate(lines, start=1)
    ]
    predictions = classifier.predict(inputs, batch_size=fv.batch_size) if inputs else []
    out = []
    for p in predictions:
        if fv.json:
            out.append(json.dumps(dataclasses.asdict(p), ensure_ascii=False))
        else:
            out.append(f"{common.one_line(p.label)}\t{p.probabilities[p.label]:.4f}")
    common.write_lines(out)
    return 0


COMMAND = common.Command("python -m transformer_jax classify", __doc__, define_flags, classify)

main = COMMAND.run  # main(argv=None) -> exit code


if __name__ == "__main__":
    sys.exit(main())
