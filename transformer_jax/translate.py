"""Translate lines of text with a trained run.

    echo "three hundred and four" | python -m transformer_jax.translate --workdir=runs/default
    python -m transformer_jax.translate --workdir=runs/default --input=in.txt --output=out.txt \
        [--beam_size=4] [--alpha=0.6] [--step=N] [--average_last=N] [--batch_size=64]

Reads one sentence per line (stdin by default) and writes one translation per line (stdout by
default), in the same order: an empty line gives an empty line. A progress bar goes to stderr
when reading a file.
"""

from __future__ import annotations

import argparse
import logging
import sys

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


def quiet_logs() -> None:
    """Keep stderr for warnings and the progress bar (Orbax logs every restore at INFO)."""
    logging.getLogger("absl").setLevel(logging.WARNING)


def read_lines(text: str) -> list[str]:
    """Lines split on "\\n" only (a trailing newline ends the last line, "\\r\\n" is fine)."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


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
        translator = Translator.from_checkpoint(args.workdir, args.step, args.average_last)
        if args.input is None:
            text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
        else:
            with open(args.input, encoding="utf-8", errors="replace", newline="") as f:
                text = f.read()
        outputs = translator.translate(
            read_lines(text),
            beam_size=args.beam_size,
            alpha=args.alpha,
            batch_size=args.batch_size,
            max_len=args.max_len,
            progress=args.input is not None,
        )
    except (CheckpointError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    # One output line per input line, whatever the tokenizer decodes.
    result = "".join(out.replace("\r", " ").replace("\n", " ") + "\n" for out in outputs)
    if args.output is None:
        sys.stdout.flush()
        sys.stdout.buffer.write(result.encode("utf-8"))
        sys.stdout.flush()
    else:
        with open(args.output, "w", encoding="utf-8", newline="") as f:
            f.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
