"""Classify texts or text pairs with a fine-tuned BERT (a `configs/bert_*` fine-tuning run).

    python -m transformer_jax.classify --workdir=runs/bert_numbers \
        --text=$'four hundred and two\tquatre cent deux'
    printf 'The event loop runs tasks.\n' | python -m transformer_jax.classify \
        --workdir=runs/bert_stdlib

Inputs come from `--text` (repeatable) or stdin, one per line (UTF-8; see
`transformer_jax.cli_lines`); for a pair classifier a line is `text_a<TAB>text_b`, and a line
without exactly one tab or with an empty text_b is an error naming it. Each line out answers
the line in: `label<TAB>probability`, or with `--json` one JSON object per line ({"label",
"probabilities": {label: p}}).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from transformer_jax.cli_lines import (
    check_arguments,
    input_name,
    one_line,
    quiet_logs,
    read_input_lines,
    write_lines,
)
from transformer_jax.inference.classifier import Classifier
from transformer_jax.inference.mesh import FLAG_HELP as MESH_FLAG_HELP
from transformer_jax.inference.mesh import MeshError
from transformer_jax.workdir import CheckpointError


def parse_line(line: str, pair: bool, where: str) -> str | tuple[str, str]:
    """A text, or for a pair classifier the two texts of `text_a<TAB>text_b`.

    Args:
      line: one input line.
      pair: whether the classifier reads pairs.
      where: how an error names the line, e.g. "<stdin>:3".
    """
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_jax.classify", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--workdir", required=True, help="The train.py workdir of a fine-tuning.")
    parser.add_argument("--text", action="append", default=None, help="An input (repeatable).")
    parser.add_argument("--json", action="store_true", help="One JSON object per line.")
    parser.add_argument("--step", type=int, default=None, help="Checkpoint step (default: latest).")
    parser.add_argument("--batch_size", type=int, default=32, help="Inputs per model call.")
    parser.add_argument("--mesh", default=None, help=MESH_FLAG_HELP)
    args = parser.parse_args(argv)
    quiet_logs()
    try:
        if args.batch_size < 1:
            raise ValueError(f"--batch_size must be >= 1, got {args.batch_size}.")
        classifier = Classifier.from_checkpoint(args.workdir, args.step, mesh=args.mesh)
        flag = None if args.text is None else "--text"
        lines = read_input_lines() if flag is None else check_arguments(args.text, flag)
        inputs = [
            parse_line(line, classifier.pair, input_name(number, flag))
            for number, line in enumerate(lines, start=1)
        ]
        predictions = classifier.predict(inputs, batch_size=args.batch_size) if inputs else []
        out = []
        for p in predictions:
            if args.json:
                out.append(json.dumps(dataclasses.asdict(p), ensure_ascii=False))
            else:
                out.append(f"{one_line(p.label)}\t{p.probabilities[p.label]:.4f}")
        write_lines(out)
    except MeshError as e:
        print(f"error: --mesh={args.mesh}: {e}", file=sys.stderr)
        return 1
    except (CheckpointError, ValueError, TypeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
