"""Continue text with a trained language model (a `configs/gpt_*.py` run).

    python -m transformer_jax generate --workdir=runs/gpt --prompt="The json module"
    printf 'Return the\\nclass Path\\n' | python -m transformer_jax generate --workdir=runs/gpt

With one `--prompt`, the prompt is printed and the continuation streams after it as tokens are
produced. With several `--prompt`s, or prompts read from stdin (one per line), each prompt's
continuation is written on one line, in order, its own line ends written as the two characters
`\\n` (and a backslash as `\\\\`) so that line i answers prompt i. Stdin must be UTF-8 (see
`transformer_jax.cli.common`). Sampling: `--temperature` (0 = greedy), `--top_k` (0 = off),
`--top_p` (1 = off), `--seed`.
"""

from __future__ import annotations

import sys

from absl import flags

from transformer_jax.cli import common
from transformer_jax.inference.generator import Generator, check_sampling


def escape(text: str) -> str:
    """One line per continuation: backslashes and line ends escaped."""
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def define_flags(fv: flags.FlagValues) -> None:
    common.workdir_flag(fv)
    common.checkpoint_flags(fv)
    common.batch_size_flag(fv, 32, "Prompts")
    common.mesh_flag(fv)
    flags.DEFINE_multi_string("prompt", None, "Text to continue (repeatable).", flag_values=fv)
    flags.DEFINE_integer("max_new_tokens", 100, "Most tokens per prompt.", flag_values=fv)
    flags.DEFINE_float("temperature", 0.8, "0 = greedy.", flag_values=fv)
    flags.DEFINE_integer("top_k", 0, "Sample among the k best (0 = off).", flag_values=fv)
    flags.DEFINE_float("top_p", 0.95, "Nucleus mass (1 = off).", flag_values=fv)
    flags.DEFINE_integer("seed", 0, "Sampling seed.", flag_values=fv)


def generate(fv: flags.FlagValues, args: list[str]) -> int:
    check_sampling(fv.max_new_tokens, fv.temperature, fv.top_k, fv.top_p, fv.seed)
    common.at_least(fv.batch_size, 1, "batch_size")
    # Load first: a wrong --workdir is reported before anyone types a prompt.
    generator = Generator.from_checkpoint(fv.workdir, fv.step, mesh=fv.mesh)
    settings = dict(temperature=fv.temperature, top_k=fv.top_k, top_p=fv.top_p, seed=fv.seed)
    prompts = None if fv.prompt is None else common.check_arguments(fv.prompt, "--prompt")
    if prompts is not None and len(prompts) == 1:
        prompt = prompts[0]
        pieces = generator.stream(prompt, fv.max_new_tokens, **settings)  # checks first
        sys.stdout.write(prompt)
        sys.stdout.flush()
        for piece in pieces:
            sys.stdout.write(piece)
            sys.stdout.flush()
        sys.stdout.write("\n")
        return 0
    if prompts is None:
        prompts = common.read_input_lines()
    outputs = generator.generate(prompts, fv.max_new_tokens, batch_size=fv.batch_size, **settings)
    common.write_lines([escape(o) for o in outputs])
    return 0


COMMAND = common.Command("python -m transformer_jax generate", __doc__, define_flags, generate)

main = COMMAND.run  # main(argv=None) -> exit code


if __name__ == "__main__":
    sys.exit(main())
