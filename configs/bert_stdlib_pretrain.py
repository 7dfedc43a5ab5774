"""BERT pretraining on the Python standard library's documentation: offline, about 27 minutes.

    python train.py --config=configs/bert_stdlib_pretrain.py --workdir=runs/bert

needs no data and no network: the corpus is gathered from the running Python's own docstrings,
split by module, cut into sentences and paired (half IsNext); 40% of the tokens are masked,
with new pairs and masks every epoch. At the end it prints the test split's masked-LM accuracy
beside always predicting the most frequent token, and next-sentence accuracy beside chance.
The workdir then serves `fill_mask` and is the `init_from` of bert_stdlib_classify.py
(bert_numbers_pair.py starts from bert_bilingual_pretrain.py, this run with numbers mixed in).
Measured (2-core CPU, Python 3.11.7's corpus; 26 min 44 s alone, the command to the end): test
masked-LM accuracy 37.1% against 19.6% for the most frequent token (perplexity 43.8), next
sentence 74.5% against chance's 50%. At 900 steps with 15% masked: 25.3% and 67.0%, and
fine-tuning from that run did worse than from scratch (docs/bert.md).
"""

from configs.common import bert_base_config


def get_config():
    c = bert_base_config("cpu")  # 4 layers, d_model 256, 4 heads, d_ff 1024, 128 positions.
    c.model.dropout_rate = 0.0  # A few epochs at most: no overfitting to fight.
    c.model.attention_dropout_rate = 0.0
    # Pre-LN, not BERT's post-LN: measured here, post-LN stays at the unigram plateau (masked-LM
    # accuracy 13.5%, always the most frequent token) for 200+ of this budget's steps at peak
    # rates of 2e-3 down to 6e-4, while pre-LN learns from the first 100 steps.
    c.model.norm = "pre"

    c.data.source = "stdlib"  # Docstrings of the standard library + pydoc topics.
    # 40% of the tokens masked, not BERT's 15%: measured here, more predictions per step learn
    # faster on a small budget (test masked-LM accuracy 28.3% vs 25.8% after 900 steps).
    c.data.mask_rate = 0.4
    c.data.vocab_size = 4096  # SentencePiece unigram with byte fallback and [CLS] [SEP] [MASK].
    c.data.max_len = 128  # Tokens per pair (BERT's first phase).
    c.data.tokens_per_batch = 4096  # 32 pairs of 128.

    # 2,100 steps, about 15 epochs of pairs (about 142 batches each), the most that fits in 30
    # minutes here: the 900-step run's features were worse than a random encoder's for
    # fine-tuning (see docs/bert.md).
    c.num_train_steps = 2100
    c.warmup_steps = 200
    c.lr_factor = 0.226  # Peak 1e-3 at step 200, then the Noam decay (1/sqrt(step)).
    c.grad_clip_norm = 1.0  # As BERT.
    c.log_every = 25
    c.eval_every = 300
    c.checkpoint_every = 300
    return c
