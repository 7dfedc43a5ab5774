"""Guess the `[MASK]`s of texts with a pretrained BERT (a `configs/bert_*.py` run).

    python -m transformer_jax.fill_mask --workdir=runs/bert --text="The [MASK] module reads JSON."
    printf 'Return the [MASK] of x.\\n' | python -m transformer_jax.fill_mask --workdir=runs/bert

Texts come from `--text` (repeatable) or stdin, one per line (UTF-8; see
`transformer_jax.cli_lines`); a text without a `[MASK]` (an empty line too), or whose masks all
lie beyond the model's positions, is an error naming it. Each line out answers the line in:
per mask, its `--top_k` guesses with their probabilities (`len 0.214, list 0.102, ...`), masks
separated by ` | `; with `--json`, one JSON list per line (per mask, a list of
{"token", "probability", "text"}).
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
from transformer_jax.inference.fill_mask import MaskFiller
from transformer_jax.inference.mesh import FLAG_HELP as MESH_FLAG_HELP
from transformer_jax.inference.mesh import MeshError
from transformer_jax.workdir import CheckpointError


def format_line(masks, as_json: bool) -> str:
    """One output line for one text's guesses."""
    if as_json:
        return json.dumps([[dataclasses.asdict(c) for c in m] for m in masks], ensure_ascii=False)
    return " | ".join(
        ", ".join(f"{one_line(c.token)} {c.probability:.3f}" for c in m) for m in masks
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_jax.fill_mask", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--workdir", required=True, help="The train.py workdir of a BERT run.")
    parser.add_argument("--text", action="append", default=None, help="A text with [MASK]s.")
    parser.add_argument("--top_k", type=int, default=5, help="Guesses per mask.")
    parser.add_argument("--json", action="store_true", help="One JSON list per line.")
    parser.add_argument("--step", type=int, default=None, help="Checkpoint step (default: latest).")
    parser.add_argument("--mesh", default=None, help=MESH_FLAG_HELP)
    args = parser.parse_args(argv)
    quiet_logs()
    try:
        if not 1 <= args.top_k <= 100:
            raise ValueError(f"--top_k must be in [1, 100], got {args.top_k}.")
        filler = MaskFiller.from_checkpoint(
            args.workdir, args.step, mesh=args.mesh
        )  # a wrong path fails first
        flag = None if args.text is None else "--text"
        texts = read_input_lines() if flag is None else check_arguments(args.text, flag)
        for number, text in enumerate(texts, start=1):
            problem = filler.problem(text)
            if problem is not None:
                raise ValueError(f"{input_name(number, flag)}: the text {problem}")
        results = filler.fill_mask(texts, args.top_k) if texts else []
        write_lines([format_line(masks, args.json) for masks in results])
    except MeshError as e:
        print(f"error: --mesh={args.mesh}: {e}", file=sys.stderr)
        return 1
    except (CheckpointError, ValueError, TypeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
