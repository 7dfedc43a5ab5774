"""Translate lines of text with a trained run.

    echo "three hundred and four" | python -m transformer_jax.translate --workdir=runs/default
    python -m transformer_jax.translate --workdir=runs/default --input=in.txt --output=out.txt \
        [--beam_size=4] [--alpha=0.6] [--step=N] [--average_last=N] [--batch_size=64] \
        [--mesh=fsdp=4,tensor=2]

Reads one sentence per line (stdin by default) and writes one translation per line (stdout by
default), in the same order: an empty line gives an empty line, and a line break the model
writes inside a translation becomes a space. The input must be UTF-8 (see
`transformer_jax.cli_lines`: a byte-order mark is dropped, CRLF line ends work, undecodable
bytes are an error naming the line). A progress bar goes to stderr when reading a file.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from transformer_jax.cli_lines import one_line, quiet_logs, read_input_lines, write_lines
from transformer_jax.inference.mesh import FLAG_HELP as MESH_FLAG_HELP
from transformer_jax.inference.mesh import MeshError
from transformer_jax.inference.translator import Translator
from transformer_jax.workdir import CheckpointError


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that choose the checkpoint and the decoding (shared with `evaluate`)."""
    parser.add_argument("--workdir", required=True, help="The train.py workdir of the run.")
    parser.add_argument(
        "--step", type=int, default=None, help="Checkpoint step to load (default: the latest)."
    )
    parser.add_argument(
        "--average_last",
        type=int,
        default=0,
        help="Average the parameters of the last N checkpoints up to --step (paper §6.1: 5).",
    )
    parser.add_argument(
        "--beam_size", type=int, default=4, help="Beam size K (paper: 4); 1 decodes greedily."
    )
    parser.add_argument(
        "--alpha", type=float, default=0.6, help="Length-penalty exponent (paper: 0.6)."
    )
    parser.add_argument("--batch_size", type=int, default=64, help="Sentences per batch.")
    parser.add_argument(
        "--max_len",
        type=int,
        default=None,
        help="Most output tokens (default: source length + 50, at most the model's max_len).",
    )
    parser.add_argument("--mesh", default=None, help=MESH_FLAG_HELP)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_jax.translate", description=__doc__.split("\n\n")[0]
    )
    add_model_flags(parser)
    parser.add_argument("--input", default=None, help="Text file, one sentence per line.")
    parser.add_argument("--output", default=None, help="File for the translations.")
    args = parser.parse_args(argv)
    quiet_logs()

    try:
        # Load first: a wrong --workdir is reported before anyone types a sentence.
        translator = Translator.from_checkpoint(
            args.workdir, args.step, args.average_last, mesh=args.mesh
        )
        lines = read_input_lines(args.input)
        with contextlib.ExitStack() as stack:
            # Opened first: an unwritable --output is reported before the work, not after.
            out = None if args.output is None else stack.enter_context(open(args.output, "wb"))
            outputs = translator.translate(
                lines,
                beam_size=args.beam_size,
                alpha=args.alpha,
                batch_size=args.batch_size,
                max_len=args.max_len,
                progress=args.input is not None,
            )
            # One output line per input line, whatever the tokenizer decodes.
            write_lines([one_line(text) for text in outputs], out)
    except MeshError as e:
        print(f"error: --mesh={args.mesh}: {e}", file=sys.stderr)
        return 1
    except (CheckpointError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
