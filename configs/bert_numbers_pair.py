"""BERT fine-tuned on "is B the translation of A?" (English / French numbers): a pair task.

    python train.py --config=configs/bert_stdlib_pretrain.py --workdir=runs/bert   # first
    python train.py --config=configs/bert_numbers_pair.py --workdir=runs/bert_numbers

Half the pairs are translations, a quarter near misses (B says a number one digit away from
A's), a quarter random; the splits share no number. The encoder starts from the pretraining
run (`init_from`, its tokenizer too) with a new head on the mean of the tokens' outputs. At the
end it prints test accuracy, macro-F1 and the confusion matrix beside TF-IDF (character
n-grams) + logistic regression on the same split. From scratch, at the same budget and with the
same tokenizer: `--config.init_from='' --config.data.spm_model_path=runs/bert/tokenizer.model`.
Measured (2-core CPU, about 5 minutes alone; benchmarks/bert_finetune.py; seeds 0, 1): test
accuracy 61.20% and 57.75% from the pretraining run, 58.85% and 59.15% from scratch, TF-IDF +
logistic regression 63.70%. Pretraining on English documentation does not help this task yet
(docs/bert.md); with 600 steps at a peak of 2e-4 on [CLS], scratch reached 71.4%.
"""

from configs.common import classify_base_config


def get_config():
    c = classify_base_config("cpu")  # The model section of configs/bert_stdlib_pretrain.py:
    c.model.norm = "pre"  # same preset, same overrides (only dropout and num_labels may differ).
    c.init_from = "runs/bert"  # The pretraining workdir.
    c.model.pool = "mean"  # The mean of the tokens' outputs, not the [CLS] pooler (see docs).

    c.data.source = "numbers_pair"
    c.data.numbers_train = 20_000
    c.data.numbers_eval = 2_000
    c.data.numbers_test = 2_000
    c.data.max_len = 96  # Tokens per pair; with the stdlib tokenizer about 16% of pairs are cut.
    c.data.batch_size = 32

    c.num_train_steps = 300  # About half an epoch of the training pairs.
    c.warmup_steps = 30
    c.lr_factor = 0.1  # Peak 1.1e-3 at step 30, then Noam (at 2e-4 pretraining barely moves).
    c.grad_clip_norm = 1.0
    c.log_every = 50
    c.eval_every = 50
    c.checkpoint_every = 50
    c.baseline_analyzer = "char"  # Character n-grams for the pair task.
    return c
