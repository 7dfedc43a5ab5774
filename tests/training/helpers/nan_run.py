"""train_and_evaluate on the tiny config with every loss made NaN (a stand-in for a bad batch
or a diverged step): `python nan_run.py WORKDIR STEPS`. Exits 3 with the error on stderr."""

import sys

import jax.numpy as jnp

from configs import tiny
from transformer_jax.tasks.translation import TranslationTask
from transformer_jax.training import train_and_evaluate
from transformer_jax.training.nonfinite import NonFiniteError

_clean = TranslationTask.loss_fn


def _nan_loss(self, model, batch, rng, deterministic):
    loss, sums = _clean(self, model, batch, rng, deterministic)
    return loss * jnp.nan, sums | {"loss_sum": sums["loss_sum"] * jnp.nan}


TranslationTask.loss_fn = _nan_loss
config = tiny.get_config()
config.num_train_steps = int(sys.argv[2])
config.max_nonfinite_steps = 3
config.eval_bleu_sentences = config.test_sentences = 0
config.checkpoint_every = 4
try:
    train_and_evaluate(config, sys.argv[1])
except NonFiniteError as e:
    print(f"NonFiniteError: {e}", file=sys.stderr)
    sys.exit(3)
