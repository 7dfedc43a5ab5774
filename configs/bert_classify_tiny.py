"""BERT fine-tuning tiny: seconds-long classification runs for tests and smoke checks.

    python train.py --config=configs/bert_classify_tiny.py --workdir=/tmp/cls_tiny
    python train.py --config=configs/bert_classify_tiny.py --workdir=/tmp/cls_tiny2 \
        --config.init_from=/tmp/bert_tiny   # a configs/bert_tiny.py run

The number-pair task, a few hundred examples; the model section is configs/bert_tiny.py's, so
that run can be its `init_from`. No quality is expected.
"""

from configs.common import classify_base_config


def get_config():
    c = classify_base_config("tiny")  # d_model 32.
    c.model.num_layers = 1  # As configs/bert_tiny.py: that run can be this one's init_from.
    c.model.max_len = 64  # As configs/bert_tiny.py.

    c.data.source = "numbers_pair"
    c.data.numbers_train = 512
    c.data.numbers_eval = 64
    c.data.numbers_test = 64
    c.data.vocab_size = 512  # A tokenizer of the number words (without init_from).
    c.data.max_len = 64
    c.data.batch_size = 32
    c.data.eval_batch_size = 32

    c.num_train_steps = 20
    c.warmup_steps = 10
    c.lr_factor = 2.0
    c.log_every = 1
    c.eval_every = 20
    c.checkpoint_every = 10
    c.keep_checkpoints = 2
    c.baselines = False  # Tests call the baseline themselves.
    return c
