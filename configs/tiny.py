"""Tiny: seconds-long runs for tests and smoke checks (one layer a side, 32 wide).

    python train.py --config=configs/tiny.py --workdir=/tmp/tiny

The loss falls over its 60 steps; no quality is expected.
"""

from configs.common import base_config
from transformer_jax import models


def get_config():
    c = base_config()
    c.model = models.config_section("encoder_decoder", "tiny")  # d_model 32.
    # One layer a side: a run takes every path a deeper model takes, and compiles in about
    # half the time of the preset's 2+2 (compiling is most of a tiny run).
    c.model.num_encoder_layers = 1
    c.model.num_decoder_layers = 1
    c.model.dropout_rate = 0.1  # Dropout on, so that tests exercise its keys.

    c.data.source = "embedded"
    c.data.embedded_train_size = 2000  # Small corpus: generated and tokenized in a second.
    c.data.embedded_eval_size = 64
    c.data.embedded_test_size = 64
    c.data.vocab_size = 200
    c.data.spm_sample_size = 4000
    c.data.max_len = 32
    c.data.tokens_per_batch = 512
    c.data.eval_batch_size = 32
    c.data.pack = True  # One batch shape: one compilation of the train step.

    c.num_train_steps = 60
    c.warmup_steps = 20
    c.lr_factor = 2.0
    c.log_every = 1  # Per-step losses (the resume test compares them).
    c.eval_every = 30
    c.eval_bleu_sentences = 16
    c.decode_batch_size = 16
    c.checkpoint_every = 10
    c.keep_checkpoints = 2
    c.test_sentences = 16
    return c
