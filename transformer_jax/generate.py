"""Continue text with a trained language model (a `configs/gpt_*.py` run).

    python -m transformer_jax.generate --workdir=runs/gpt --prompt="The json module"
    printf 'Return the\\nclass Path\\n' | python -m transformer_jax.generate --workdir=runs/gpt

With one `--prompt`, the prompt is printed and the continuation streams after it as tokens are
produced. With several `--prompt`s, or prompts read from stdin (one per line), each prompt's
continuation is written on one line, in order, its own line ends written as the two characters
`\\n` (and a backslash as `\\\\`) so that line i answers prompt i. Stdin must be UTF-8 (see
`transformer_jax.cli_lines`: a byte-order mark is dropped, CRLF line ends work, undecodable
bytes are an error naming the line). Sampling: `--temperature` (0 = greedy), `--top_k`
(0 = off), `--top_p` (1 = off), `--seed`.
"""

from __future__ import annotations

import argparse
import sys

from transformer_jax.cli_lines import check_arguments, quiet_logs, read_input_lines, write_lines
from transformer_jax.inference.generator import Generator, check_sampling
from transformer_jax.inference.mesh import FLAG_HELP as MESH_FLAG_HELP
from transformer_jax.inference.mesh import MeshError
from transformer_jax.workdir import CheckpointError


def escape(text: str) -> str:
    """One line per continuation: backslashes and line ends escaped."""
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_jax.generate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--workdir", required=True, help="The train.py workdir of the run.")
    parser.add_argument(
        "--prompt", action="append", default=None, help="Text to continue (repeatable)."
    )
    parser.add_argument("--max_new_tokens", type=int, default=100, help="Most tokens per prompt.")
    parser.add_argument("--temperature", type=float, default=0.8, help="0 = greedy.")
    parser.add_argument("--top_k", type=int, default=0, help="Sample among the k best (0 = off).")
    parser.add_argument("--top_p", type=float, default=0.95, help="Nucleus mass (1 = off).")
    parser.add_argument("--seed", type=int, default=0, help="Sampling seed.")
    parser.add_argument(
        "--step", type=int, default=None, help="Checkpoint step to load (default: the latest)."
    )
    parser.add_argument("--batch_size", type=int, default=32, help="Prompts per batch.")
    parser.add_argument("--mesh", default=None, help=MESH_FLAG_HELP)
    args = parser.parse_args(argv)
    quiet_logs()
    try:
        check_sampling(args.max_new_tokens, args.temperature, args.top_k, args.top_p, args.seed)
        if args.batch_size < 1:
            raise ValueError(f"--batch_size must be >= 1, got {args.batch_size}.")
        # Load first: a wrong --workdir is reported before anyone types a prompt.
        generator = Generator.from_checkpoint(args.workdir, args.step, mesh=args.mesh)
        settings = dict(
            temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed
        )
        prompts = None if args.prompt is None else check_arguments(args.prompt, "--prompt")
        if prompts is not None and len(prompts) == 1:
            prompt = prompts[0]
            pieces = generator.stream(prompt, args.max_new_tokens, **settings)  # checks first
            sys.stdout.write(prompt)
            sys.stdout.flush()
            for piece in pieces:
                sys.stdout.write(piece)
                sys.stdout.flush()
            sys.stdout.write("\n")
            return 0
        if prompts is None:
            prompts = read_input_lines()
        outputs = generator.generate(
            prompts, args.max_new_tokens, batch_size=args.batch_size, **settings
        )
        write_lines([escape(o) for o in outputs])
    except MeshError as e:
        print(f"error: --mesh={args.mesh}: {e}", file=sys.stderr)
        return 1
    except (CheckpointError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
