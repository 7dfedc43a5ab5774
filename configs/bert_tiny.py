"""BERT tiny: seconds-long pretraining runs for tests and smoke checks.

    python train.py --config=configs/bert_tiny.py --workdir=/tmp/bert_tiny

A small SentencePiece vocabulary on the stdlib documentation corpus; no quality is expected.
"""

from configs.common import bert_base_config


def get_config():
    c = bert_base_config("tiny")  # d_model 32.
    c.model.num_layers = 1  # One layer: configs/tiny.py says why.
    c.model.max_len = 64  # Positions: data.max_len.

    c.data.vocab_size = 512  # A small tokenizer trains in about a second.
    c.data.spm_sample_size = 300  # Documents it is trained on.
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
    return c
