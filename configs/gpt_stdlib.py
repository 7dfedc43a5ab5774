"""GPT on the Python standard library's documentation: the language model's main job, offline.

    python train.py --config=configs/gpt_stdlib.py --workdir=runs/gpt

needs no data and no network: the corpus is gathered from the running Python's own docstrings
and split by module. It trains, then prints the test split's bits per byte beside lzma, zlib and
a character bigram on the same text, and samples. The recorded run on a 2-core CPU took
<!--fig main_job_gpt_stdlib.json:runs/0/seconds:min-->12 min 30 s<!--/fig-->; its measured
figures are in docs/gpt.md.
"""

from configs.common import lm_base_config


def get_config():
    c = lm_base_config("cpu")  # 4 layers, d_model 256, 4 heads, d_ff 1024, 256 positions.
    c.model.dropout_rate = 0.0  # A few epochs at most: no overfitting to fight.
    c.model.attention_dropout_rate = 0.0

    c.data.source = "stdlib"  # Docstrings of the standard library + pydoc topics.
    c.data.vocab_size = 4096  # SentencePiece unigram with byte fallback.
    c.data.max_len = 256  # Context length.
    c.data.tokens_per_batch = 8192  # 32 rows of 256.

    c.num_train_steps = 300  # About 2.4M tokens: 4 to 5 epochs of the training split.
    c.warmup_steps = 60
    c.lr_factor = 0.25  # Peak 2.0e-3 at step 60, then the Noam decay (1/sqrt(step)).
    c.log_every = 25
    c.eval_every = 100
    c.checkpoint_every = 100
    return c
