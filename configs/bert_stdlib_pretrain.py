"""BERT pretraining on the Python standard library's documentation: the BERT main job, offline.

    python train.py --config=configs/bert_stdlib_pretrain.py --workdir=runs/bert

needs no data and no network: the corpus is gathered from the running Python's own docstrings,
split by module, cut into sentences and paired (half IsNext); 40% of the tokens are masked, with
new pairs and masks every epoch. At the end it prints the test split's masked-LM accuracy beside
always predicting the most frequent token, and next-sentence accuracy beside chance. The workdir
then serves `fill_mask` and is the `init_from` of bert_stdlib_classify.py (bert_numbers_pair.py
starts from bert_bilingual_pretrain.py, this run with numbers mixed in). The recorded run on 2
CPU cores took
<!--fig main_job_bert_stdlib_pretrain.json:runs/0/seconds:min-->29 min 13 s<!--/fig-->; its test
figures are in docs/bert.md (Pretraining) and the README's table of main jobs.
"""

from configs.common import bert_base_config


def get_config():
    c = bert_base_config("cpu")  # 4 layers, d_model 256, 4 heads, d_ff 1024, 128 positions.
    c.model.dropout_rate = 0.0  # A few epochs at most: no overfitting to fight.
    c.model.attention_dropout_rate = 0.0
    # Pre-LN, not BERT's post-LN: at this budget post-LN stays at the unigram plateau (always
    # the most frequent token) for hundreds of steps, pre-LN learns from the first 100
    # (docs/bert.md).
    c.model.norm = "pre"

    c.data.source = "stdlib"  # Docstrings of the standard library + pydoc topics.
    # 40% of the tokens masked, not BERT's 15%: more predictions per step learn faster on a
    # small budget (docs/bert.md).
    c.data.mask_rate = 0.4
    c.data.vocab_size = 4096  # SentencePiece unigram with byte fallback and [CLS] [SEP] [MASK].
    c.data.max_len = 128  # Tokens per pair (BERT's first phase).
    c.data.tokens_per_batch = 4096  # 32 pairs of 128.

    # 2,100 steps, about 15 epochs of pairs (about 142 batches each), the most that fits in 30
    # minutes here: a shorter run's features fine-tune worse than a random encoder's
    # (docs/bert.md).
    c.num_train_steps = 2100
    c.warmup_steps = 200
    c.lr_factor = 0.226  # Peak 1e-3 at step 200, then the Noam decay (1/sqrt(step)).
    c.grad_clip_norm = 1.0  # As BERT.
    c.log_every = 25
    c.eval_every = 300
    c.checkpoint_every = 300
    return c
