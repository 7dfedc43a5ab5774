"""Train a Transformer: `python train.py --config=configs/NAME.py --workdir=DIR [--config.k=v]`.

With no --config it uses configs/default.py (the offline number-translation corpus).
Re-running the same command resumes from DIR's latest checkpoint.
"""

import pathlib
import sys

from absl import app, flags, logging
from ml_collections import config_flags

_HERE = pathlib.Path(__file__).resolve().parent
config_flags.DEFINE_config_file(
    "config", str(_HERE / "configs" / "default.py"), "Training config file.", lock_config=True
)
flags.DEFINE_string("workdir", None, "Directory for checkpoints, logs and the tokenizer.")
flags.DEFINE_bool(
    "multi_process",
    False,
    "Call jax.distributed.initialize() (TPU pods and GPU clusters auto-detect their peers).",
)
flags.DEFINE_string("coordinator_address", None, "host:port of process 0 (multi_process only).")
flags.DEFINE_integer("num_processes", None, "Number of processes (multi_process only).")
flags.DEFINE_integer("process_id", None, "This process's index (multi_process only).")
flags.mark_flag_as_required("workdir")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
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
    from transformer_jax.training import train_and_evaluate
    from transformer_jax.training.nonfinite import NonFiniteError
    from transformer_jax.training.run_lock import WorkdirBusyError

    try:
        train_and_evaluate(FLAGS.config, FLAGS.workdir)
    except (ValueError, OSError, WorkdirBusyError, NonFiniteError) as e:
        # A bad config, workdir or input (CheckpointError is a ValueError), a busy or
        # unwritable workdir, a diverged run: each message says what to do. One line, no
        # traceback unless --verbosity is given.
        if FLAGS["verbosity"].present:
            raise
        sys.exit(f"error: {e}\n(With --verbosity=0 the traceback is shown too.)")


if __name__ == "__main__":
    app.run(main)
