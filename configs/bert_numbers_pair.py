"""BERT fine-tuned on "is B the translation of A?" (English / French numbers): a pair task.

    python train.py --config=configs/bert_bilingual_pretrain.py --workdir=runs/bert_bilingual
    python train.py --config=configs/bert_numbers_pair.py --workdir=runs/bert_numbers

Half the pairs are translations, a quarter near misses (B says a number one digit away from
A's), a quarter random; the splits share no number. The encoder starts from the bilingual
pretraining run (documentation plus English / French numbers; `init_from`, its tokenizer too)
with a new head on the [CLS] pooler. At the end it prints test accuracy, macro-F1 and the
confusion matrix beside TF-IDF (character n-grams) + logistic regression on the same split.
From scratch, at the same budget and with the same tokenizer: `--config.init_from=''
--config.data.spm_model_path=runs/bert_bilingual/tokenizer.model`. Its test accuracy from the
pretrained run and from scratch, for 3 seeds, is in docs/bert.md (Fine-tuning).
"""

from configs.common import classify_base_config


def get_config():
    c = classify_base_config("cpu")  # The model section of configs/bert_stdlib_pretrain.py:
    c.model.norm = "pre"  # same preset, same overrides (only dropout and num_labels may differ).
    c.init_from = "runs/bert_bilingual"  # The pretraining workdir.
    # The [CLS] pooler (BERT's head; the config default): the mean of the tokens at a peak of
    # 1.1e-3 trained worse from either start.

    c.data.source = "numbers_pair"
    c.data.numbers_train = 20_000
    c.data.numbers_eval = 2_000
    c.data.numbers_test = 2_000
    # Tokens per pair: with the stdlib tokenizer about 16% of pairs exceed 96 (French and
    # English number words split into many pieces) and 16 of the 20,000 training pairs exceed
    # 128; a cut pair may lose the digit a near miss changes.
    c.data.max_len = 128
    c.data.batch_size = 32

    # Half an epoch of the training pairs: where the pretrained start is ahead in every seed
    # (validation at steps 100-300); by one epoch (600) scratch catches up (docstring).
    c.num_train_steps = 300
    c.warmup_steps = 60
    c.lr_factor = 0.025  # Peak 2e-4 at step 60, then Noam (at 1.1e-3 neither start learned).
    c.grad_clip_norm = 1.0
    c.log_every = 50
    c.eval_every = 100
    c.checkpoint_every = 100
    c.baseline_analyzer = "char"  # Character n-grams for the pair task.
    return c
