"""Translate lines of text with a trained run.

    echo "three hundred and four" | python -m transformer_jax translate --workdir=runs/default
    python -m transformer_jax translate --workdir=runs/default --input=in.txt --output=out.txt \\
        [--beam_size=4] [--alpha=0.6] [--step=N] [--average_last=N] [--batch_size=64] \\
        [--max_len=N] [--mesh=fsdp=4,tensor=2]

Reads one sentence per line (stdin by default) and writes one translation per line (stdout by
default), in the same order: an empty line gives an empty line, and a line break the model
writes inside a translation becomes a space. The input must be UTF-8 (see
`transformer_jax.cli.common`: a byte-order mark is dropped, CRLF line ends work, undecodable
bytes are an error naming the line). A progress bar goes to stderr when reading a file.
"""

from __future__ import annotations

import contextlib
import sys

from absl import flags

from transformer_jax.cli import common
from transformer_jax.inference.translator import Translator


def define_flags(fv: flags.FlagValues) -> None:
    common.workdir_flag(fv)
    common.checkpoint_flags(fv, average=True)
    common.decoding_flags(fv)
    common.batch_size_flag(fv, 64, "Sentences")
    common.mesh_flag(fv)
    flags.DEFINE_string("input", None, "Text file, one sentence per line.", flag_values=fv)
    flags.DEFINE_string("output", None, "File for the translations.", flag_values=fv)


def translate(fv: flags.FlagValues, args: list[str]) -> int:
    common.at_least(fv.batch_size, 1, "batch_size")
    # Load first: a wrong --workdir is reported before anyone types a sentence.
    translator = Translator.from_checkpoint(fv.workdir, fv.step, fv.average_last, mesh=fv.mesh)
    translator.check_max_len(fv.max_len, name="--max_len")  # before reading a long input
    lines = common.read_input_lines(fv.input)
    with contextlib.ExitStack() as stack:
        # Opened first: an unwritable --output is reported before the work, not after.
        out = None if fv.output is None else stack.enter_context(open(fv.output, "wb"))
        outputs = translator.translate(
            lines,
            beam_size=fv.beam_size,
            alpha=fv.alpha,
            batch_size=fv.batch_size,
            max_len=fv.max_len,
            progress=fv.input is not None,
        )
        # One output line per input line, whatever the tokenizer decodes.
        common.write_lines([common.one_line(text) for text in outputs], out)
    return 0


COMMAND = common.Command("python -m transformer_jax translate", __doc__, define_flags, translate)

main = COMMAND.run  # main(argv=None) -> exit code


if __name__ == "__main__":
    sys.exit(main())
