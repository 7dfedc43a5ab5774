"""Train a model: `python train.py --config=configs/NAME.py --workdir=DIR [--config.k=v]`.

With no --config it uses configs/default.py of the source tree (the offline number-translation
corpus). Re-running the same command resumes from DIR's latest checkpoint. `transformer-jax
train` is the same command.

A config file may import the modules beside it as a package (`from configs.common import
...`): the folder above the config's package is put on the import path first. A flag or a
`--config.` override that does not fit (a misspelled field, a value of the wrong type) stops
with one line naming it, exit code 2.
"""

import pathlib
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from transformer_jax.cli.common import UsageError, config_problem, config_root, parse_command_line
from transformer_jax.runs.lock import WorkdirBusyError
from transformer_jax.training import train_and_evaluate
from transformer_jax.training.nonfinite import NonFiniteError

SOURCE_TREE = pathlib.Path(__file__).resolve().parents[2]  # Holds configs/ in a source checkout.
DEFAULT_CONFIG = SOURCE_TREE / "configs" / "default.py"
USAGE = "usage: python train.py --config=configs/NAME.py --workdir=DIR [--config.key=value ...]"

if DEFAULT_CONFIG.is_file() and str(SOURCE_TREE) not in sys.path:
    # The default config is read when its flag is defined, just below; it imports configs.common.
    sys.path.append(str(SOURCE_TREE))


def define_flags(fv: flags.FlagValues) -> None:
    """train.py's flags, defined on `fv` (absl's global FLAGS for the command itself)."""
    config_flags.DEFINE_config_file(
        "config",
        str(DEFAULT_CONFIG) if DEFAULT_CONFIG.is_file() else None,
        "Training config file (a Python file with get_config()).",
        flag_values=fv,
        lock_config=True,
    )
    flags.DEFINE_string(
        "workdir", None, "Directory for checkpoints, logs and the tokenizer.", flag_values=fv
    )
    flags.DEFINE_bool(
        "multi_process",
        False,
        "Call jax.distributed.initialize() (TPU pods and GPU clusters auto-detect their peers).",
        flag_values=fv,
    )
    flags.DEFINE_string(
        "coordinator_address", None, "host:port of process 0 (multi_process only).",
        flag_values=fv,
    )  # fmt: skip
    flags.DEFINE_integer(
        "num_processes", None, "Number of processes (multi_process only).", flag_values=fv
    )
    flags.DEFINE_integer(
        "process_id", None, "This process's index (multi_process only).", flag_values=fv
    )
    flags.mark_flag_as_required("workdir", flag_values=fv)


def check_command_line(argv: list[str]) -> None:
    """Parses train.py's `argv` (without the program name) on fresh flags; nothing runs.

    Raises:
      UsageError: a flag train.py lacks, a bad value, a positional argument, or a `--config.`
        override that does not fit the config.
    """
    _, args = parse_command_line("train.py", define_flags, argv, DEFAULT_CONFIG)
    if args:
        raise UsageError(f"unexpected arguments {args}: every input is a --flag=value.")


define_flags(flags.FLAGS)
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if FLAGS.config is None:
        raise app.UsageError("--config=configs/NAME.py is required (no default config here).")
    if not FLAGS["verbosity"].present:
        logging.set_verbosity(logging.WARNING)  # library INFO chatter off; --verbosity=0 for it
    import jax

    if FLAGS.multi_process:
        # CPU processes exchange gradients over gloo (accelerators use their own collectives).
        # Nothing may touch a backend before initialize(), not even jax.default_backend().
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            coordinator_address=FLAGS.coordinator_address,
            num_processes=FLAGS.num_processes,
            process_id=FLAGS.process_id,
        )
    try:
        train_and_evaluate(FLAGS.config, FLAGS.workdir)
    except (ValueError, OSError, ImportError, WorkdirBusyError, NonFiniteError) as e:
        # A bad config, workdir or input (CheckpointError is a ValueError), a busy or
        # unwritable workdir, an optional package not installed (its extra named), a diverged
        # run: each message says what to do. One line, no traceback unless --verbosity.
        if FLAGS["verbosity"].present:
            raise
        sys.exit(f"error: {e}\n(With --verbosity=0 the traceback is shown too.)")


def parse_flags(argv: list[str]) -> list[str]:
    """absl's parse, with a bad flag or `--config.` override told in one line (exit code 2)."""
    try:
        return FLAGS(argv)
    except flags.Error as e:
        problem = str(e)
    except (AttributeError, KeyError, TypeError, ValueError) as e:  # ml_collections' refusals
        problem = f"a --config override does not fit the config: {config_problem(e)}"
    print(f"error: {problem}\n{USAGE}  (--helpfull lists the flags)", file=sys.stderr)
    sys.exit(2)


def run(argv: list[str] | None = None) -> None:
    """Parses `argv` (default: the process's, without the program name) and trains."""
    argv = list(sys.argv[1:] if argv is None else argv)
    root = config_root(argv, DEFAULT_CONFIG)
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    app.run(main, argv=["train.py", *argv], flags_parser=parse_flags)


if __name__ == "__main__":
    run()
