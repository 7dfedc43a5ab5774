"""The command lines, one module each, and `transformer-jax`, the console command over them.

    transformer-jax train --config=configs/gpt_tiny.py --workdir=runs/gpt_tiny
    transformer-jax translate --workdir=runs/default < sentences.txt
    transformer-jax --help

`python -m transformer_jax SUBCOMMAND [flags]` is the same command (`transformer_jax/__main__.py`)
where the console script is not on the PATH; `python train.py` is `train`. Flags are absl flags
(see `transformer_jax.cli.common`).
"""

from __future__ import annotations

import dataclasses
import importlib
import sys

# Subcommand -> (module, what it does). Modules load only when their command runs.
COMMANDS = {
    "train": ("train", "train a model from a config into a workdir (or resume it)"),
    "translate": ("translate", "translate lines of text with a translation run"),
    "generate": ("generate", "continue prompts with a language-model run"),
    "fill-mask": ("fill_mask", "guess the [MASK]s of texts with a BERT run"),
    "classify": ("classify", "classify texts or text pairs with a fine-tuned BERT run"),
    "embed": ("embed", "embed texts as unit vectors with a BERT run, or rank them by a query"),
    "classify-image": ("classify_image", "classify image files with a ViT run"),
    "evaluate": ("evaluate", "score a split of a run's data with its task's measures"),
    "plot": ("plot", "draw a workdir's loss and validation curves"),
    "compile": ("compile", "compile a config's programs for TPUs/GPUs here; memory, FLOPs"),
    "convert": ("convert", "import Hugging Face checkpoints; export to them, or to CTranslate2"),
    "serve": ("serve", "serve runs over HTTP: OpenAI-style completions, translation, ..."),
}
PROG = "transformer-jax"
# The same command where the console script is not on the PATH (transformer_jax/__main__.py).
MODULE_PROG = "python -m transformer_jax"


def usage(prog: str = PROG) -> str:
    width = max(map(len, COMMANDS))
    lines = [f"usage: {prog} SUBCOMMAND [flags]   ({prog} SUBCOMMAND --help for its flags)", ""]
    lines += [f"  {name.ljust(width)}  {what}" for name, (_, what) in COMMANDS.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """Runs `transformer-jax SUBCOMMAND [flags]`; returns the exit code. `prog` is how the usage
    lines name the command (`python -m transformer_jax` runs this with MODULE_PROG)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        sys.stderr.write(usage(prog))
        return 2
    if argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(usage(prog))
        return 0
    name = argv[0].replace("_", "-")
    if name not in COMMANDS:
        sys.stderr.write(f"error: {argv[0]!r} is not a subcommand.\n{usage(prog)}")
        return 2
    module = importlib.import_module(f"transformer_jax.cli.{COMMANDS[name][0]}")
    if name == "train":
        module.run(argv[1:])  # absl's app.run: exits with the run's status
        return 0
    command = dataclasses.replace(module.COMMAND, prog=f"{prog} {name}")
    return command.run(argv[1:])
