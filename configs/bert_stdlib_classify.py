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
Note: the pretraining corpus holds these sentences (not their labels).
Measured (2-core CPU, about 5 minutes alone; benchmarks/bert_finetune.py; seeds 0, 1, 2): test
accuracy 58.10%, 63.81%, 57.14% from the pretraining run (mean 59.68%), 50.48%, 51.43%, 54.29%
from scratch (mean 52.06%), TF-IDF + logistic regression 51.43%. On 10% of the labels (150
steps): 37.14%, 36.19%, 35.24% (mean 36.19%) against 29.52%, 29.52%, 20.00% (mean 26.35%), TF-IDF
37.14%.
"""

from configs.common import classify_base_config


def get_config():
    c = classify_base_config("cpu")  # The model section of configs/bert_stdlib_pretrain.py:
    c.model.norm = "pre"  # same preset, same overrides (only dropout and num_labels may differ).
    c.init_from = "runs/bert"  # The pretraining workdir.

    # The mean of the tokens' outputs, not the [CLS] pooler: pretraining trains [CLS] only
    # through next-sentence prediction, and frozen mean features of the pretraining run carry
    # more of the package than [CLS] does (linear probes: 57.1% against 43.8%).
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
