"""BERT fine-tuned to tell which standard-library package a documentation sentence is from.

    python train.py --config=configs/bert_stdlib_pretrain.py --workdir=runs/bert   # first
    python train.py --config=configs/bert_stdlib_classify.py --workdir=runs/bert_stdlib

Five balanced classes (asyncio, email, http, unittest, xml), modules split apart between train,
validation and test. The encoder starts from the pretraining run (`init_from`, its tokenizer
too) with a new head. At the end it prints test accuracy, macro-F1 and the confusion matrix
beside TF-IDF (word n-grams) + logistic regression on the same split. From scratch, at the same
budget and with the same tokenizer:
`--config.init_from='' --config.data.spm_model_path=runs/bert/tokenizer.model`.
Note: the pretraining corpus holds these sentences (not their labels).
Measured (2-core CPU, about 4 minutes; benchmarks/bert_finetune.py): test accuracy 41.0% from
the ten-minute pretraining run, 56.2% from scratch, TF-IDF + logistic regression 51.4%.
"""

from configs.common import classify_base_config


def get_config():
    c = classify_base_config("cpu")  # The model section of configs/bert_stdlib_pretrain.py:
    c.model.norm = "pre"  # same preset, same overrides (only dropout and num_labels may differ).
    c.init_from = "runs/bert"  # The pretraining workdir.

    c.data.source = "stdlib_packages"
    c.data.max_len = 128
    c.data.batch_size = 32

    c.num_train_steps = 300  # About 20 epochs of the 460 training sentences.
    c.warmup_steps = 30
    c.lr_factor = 0.025  # Peak 2.9e-4 at step 30, then Noam.
    c.grad_clip_norm = 1.0
    c.log_every = 25
    c.eval_every = 50
    c.checkpoint_every = 50
    c.baseline_analyzer = "word"  # Word n-grams for the sentence task.
    return c
