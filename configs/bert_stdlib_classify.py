"""BERT fine-tuned to tell which standard-library package a documentation sentence is from.

    python train.py --config=configs/bert_stdlib_pretrain.py --workdir=runs/bert   # first
    python train.py --config=configs/bert_stdlib_classify.py --workdir=runs/bert_stdlib

Five balanced classes (asyncio, email, http, unittest, xml), modules split apart between train,
validation and test. The encoder starts from the pretraining run (`init_from`, its tokenizer
too) with a new head on the mean of the tokens' outputs. At the end it prints test accuracy,
macro-F1 and the confusion matrix beside TF-IDF (word n-grams) + logistic regression on the
same split. From scratch, at the same budget and with the same tokenizer:
`--config.init_from='' --config.data.spm_model_path=runs/bert/tokenizer.model`; on a tenth of
the training labels: `--config.data.train_fraction=0.1 --config.num_train_steps=150`.
The pretraining corpus holds these sentences (not their labels). Its test accuracy from the
pretrained run and from scratch, on all and on a tenth of the labels, for 3 seeds, is in
docs/bert.md (Fine-tuning).
"""

from configs.common import classify_base_config


def get_config():
    c = classify_base_config("cpu")  # The model section of configs/bert_stdlib_pretrain.py:
    c.model.norm = "pre"  # same preset, same overrides (only dropout and num_labels may differ).
    c.init_from = "runs/bert"  # The pretraining workdir.

    # The mean of the tokens' outputs, not the [CLS] pooler: pretraining trains [CLS] only
    # through next-sentence prediction, and linear probes of the pretraining run's frozen
    # features find more of the package in the mean than in [CLS].
    c.model.pool = "mean"

    c.data.source = "stdlib_packages"
    c.data.max_len = 128
    c.data.batch_size = 32

    c.num_train_steps = 300  # About 20 epochs of the 460 training sentences.
    c.warmup_steps = 30
    c.lr_factor = 0.1  # Peak 1.1e-3 at step 30, then Noam (at 2.9e-4 pretraining barely moves).
    c.grad_clip_norm = 1.0
    c.log_every = 25
    c.eval_every = 25  # The best validation step comes early from a pretrained start.
    c.checkpoint_every = 25
    c.baseline_analyzer = "word"  # Word n-grams for the sentence task.
    return c
