"""GPT-2 small (124M) pretrained from scratch on one GPU, with llm.c's GPT-2 recipe.

    python train.py --config=configs/gpt2_small.py --workdir=runs/gpt2_small

0.5M tokens per step (32 rows of 1,024 per micro-batch, 16 micro-batches), AdamW (beta2 0.95,
weight decay 0.1, clipping at 1.0), a peak rate of 6e-4 after 700 warm-up steps and a cosine
decay to 0, no dropout (pretraining on more text than it sees twice), bfloat16 computation
with float32 parameters: llm.c's reproduction of GPT-2 (124M) on 10B tokens (19,073 steps).
Without attention dropout, attention runs as cuDNN's fused kernel. The data defaults to TFDS
`lm1b` (downloaded and prepared on first use); your own text files instead:

    --config.data.source=text --config.data.text_train=DIR --config.data.text_eval=FILE

The tokenizer is a 50,257-piece SentencePiece BPE trained on the training text (the size of
GPT-2's vocabulary); docs/gpu.md says how to compile the config before renting a GPU, what the
log shows, and how to export the result to transformers.
"""

from configs.common import lm_base_config


def get_config():
    c = lm_base_config("gpt2_small")  # 12 layers, d_model 768, 12 heads, 1,024 positions.
    c.model.dtype = "bfloat16"  # Computation in bfloat16; parameters and Adam stay float32.
    c.model.dropout_rate = 0.0  # No dropout in pretraining (nanoGPT, llm.c).
    c.model.attention_dropout_rate = 0.0  # And none on the attention weights: fused attention.

    c.data.source = "tfds"  # Or "text" with text_train / text_eval (your own files).
    c.data.tfds_name = "lm1b"  # One Billion Word: 30M sentences of news.
    c.data.eval_split = "test"  # lm1b has no validation split: its test split validates.
    c.data.test_split = "test"
    c.data.tokenizer = "sentencepiece"
    c.data.spm_model_type = "bpe"
    c.data.vocab_size = 50257  # GPT-2's vocabulary size; padded to 50,304 for the products.
    c.data.spm_sample_size = 200_000  # Documents sampled to train the tokenizer.
    c.data.max_len = 1024  # Context length.
    c.data.tokens_per_batch = 524_288  # 512 rows of 1,024: 0.5M tokens per step.
    c.data.batch_multiple = 16  # Whole micro-batches (raised to a multiple of the devices).
    c.data.eval_batch_size = 32

    c.grad_accum_steps = 16  # 32 rows of 1,024 per micro-batch on one 80 GB GPU.
    c.optimizer = "adamw"
    c.schedule = "cosine"
    c.learning_rate = 6e-4  # Peak rate.
    c.final_lr_ratio = 0.0  # Cosine to 0 at the last step.
    c.warmup_steps = 700
    c.num_train_steps = 19_073  # 10B tokens.
    c.weight_decay = 0.1  # Decoupled; never on biases or LayerNorms.
    c.adam_b1 = 0.9
    c.adam_b2 = 0.95
    c.adam_eps = 1e-8
    c.grad_clip_norm = 1.0
    c.log_every = 50
    c.eval_every = 250
    c.checkpoint_every = 1000
    c.samples = 2
    c.baselines = False  # The bigram and compressors over 30M sentences take minutes.
    return c
