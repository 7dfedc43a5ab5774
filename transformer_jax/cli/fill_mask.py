"""Guess the `[MASK]`s of texts with a pretrained BERT (a `configs/bert_*.py` run).

    python -m transformer_jax fill-mask --workdir=runs/bert --text="The [MASK] module reads JSON."
    printf 'Return the [MASK] of x.\\n' | python -m transformer_jax fill-mask --workdir=runs/bert

Texts come from `--text` (repeatable) or stdin, one per line (UTF-8; see
`transformer_jax.cli.common`); a text without a `[MASK]` (an empty line too), or whose masks
all lie beyond the model's positions, is an error naming it. Each line out answers the line in:
per mask, its `--top_k` guesses with their probabilities (`len 0.214, list 0.102, ...`), masks
separated by ` | `; with `--json`, one JSON list per line (per mask, a list of
{"token", "probability", "text"}).
"""

from __future__ import annotations

import dataclasses
import json
import sys

from absl import flags

from transformer_jax.cli import common
from transformer_jax.inference.fill_mask import MaskFiller


def format_line(masks, as_json: bool) -> str:
    """One output line for one text's guesses."""
    if as_json:
        return json.dumps([[dataclasses.asdict(c) for c in m] for m in masks], ensure_ascii=False)
    return " | ".join(
        ", ".join(f"{common.one_line(c.token)} {c.probability:.3f}" for c in m) for m in masks
    )


def define_flags(fv: flags.FlagValues) -> None:
    common.workdir_flag(fv, "BERT run")
    common.checkpoint_flags(fv)
    common.mesh_flag(fv)
    flags.DEFINE_multi_string("text", None, "A text with [MASK]s (repeatable).", flag_values=fv)
    flags.DEFINE_integer("top_k", 5, "Guesses per mask, 1 to 100.", flag_values=fv)
    flags.DEFINE_boolean("json", False, "One JSON list per line.", flag_values=fv)


def fill_mask(fv: flags.FlagValues, args: list[str]) -> int:
    if not 1 <= fv.top_k <= 100:
        raise ValueError(f"--top_k must be in [1, 100], got {fv.top_k}.")
    filler = MaskFiller.from_checkpoint(fv.workdir, fv.step, mesh=fv.mesh)  # a wrong path first
    texts, flag = common.texts_or_stdin(fv.text, "--text")
    for number, text in enumerate(texts, start=1):
        problem = filler.problem(text)
        if problem is not None:
            raise ValueError(f"{common.input_name(number, flag)}: the text {problem}")
    results = filler.fill_mask(texts, fv.top_k) if texts else []
    common.write_lines([format_line(masks, fv.json) for masks in results])
    return 0


COMMAND = common.Command("python -m transformer_jax fill-mask", __doc__, define_flags, fill_mask)

main = COMMAND.run  # main(argv=None) -> exit code


if __name__ == "__main__":
    sys.exit(main())
