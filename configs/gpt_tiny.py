"""GPT tiny: seconds-long language-model runs for tests and smoke checks.

    python train.py --config=configs/gpt_tiny.py --workdir=/tmp/gpt_tiny

Byte tokens (nothing to train) on the stdlib documentation corpus; no quality is expected.
"""

from configs.common import lm_base_config


def get_config():
    c = lm_base_config("tiny")  # d_model 32.
    c.model.num_layers = 1  # One layer: configs/tiny.py says why.
    c.model.max_len = 64  # Positions: the context of data.max_len.
    c.model.dropout_rate = 0.1  # Dropout on, so that tests exercise its keys.

    c.data.tokenizer = "byte"  # 260 ids; no tokenizer to train.
    c.data.max_len = 64
    c.data.tokens_per_batch = 1024  # 16 rows of 64.
    c.data.eval_batch_size = 64

    c.num_train_steps = 20
    c.warmup_steps = 10
    c.lr_factor = 2.0
    c.log_every = 1  # Per-step losses (resume tests compare them).
    c.eval_every = 20
    c.checkpoint_every = 10
    c.keep_checkpoints = 2
    c.samples = 1
    c.sample_tokens = 8
    c.baselines = False  # The bigram over the whole corpus takes seconds.
    return c
