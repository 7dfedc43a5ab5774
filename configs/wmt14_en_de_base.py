"""WMT'14 English -> German, Transformer base (Table 3), as trained in the paper (§5).

On a TPU VM (or GPU host) with the TFDS data prepared as ArrayRecord:

    python train.py --config=configs/wmt14_en_de_base.py --workdir=gs://BUCKET/runs/base \
        --config.data.tfds_data_dir=gs://BUCKET/tfds

100k steps of about 25k source + 25k target tokens. The paper reports 27.3 BLEU on
newstest2014 for this model (checkpoint averaging and beam 4 included; see
`python -m transformer_jax evaluate`).

The mesh as given (data parallel over every chip) fits a v5e-8, 16 GiB per chip: the train step
(bfloat16 computation, float32 parameters) needs
<!--fig aot_targets.json:5/shown/total_gib:.1f-->2.2<!--/fig--> GiB per chip, checked without a
TPU by `python -m transformer_jax compile --config=configs/wmt14_en_de_base.py --target=v5e-8`.
"""

from configs.common import base_config


def get_config():
    c = base_config()  # The model: Table 3 "base" (EncoderDecoderConfig.base).
    c.model.dtype = "bfloat16"  # Computation in bfloat16; parameters and Adam stay float32.
    c.data.source = "tfds"
    c.data.tfds_name = "wmt14_translate/de-en"
    c.data.source_lang = "en"  # en -> de, although TFDS's supervised keys are de -> en.
    c.data.target_lang = "de"
    c.data.train_split = "train"
    c.data.eval_split = "validation"  # newstest2013.
    c.data.test_split = "test"  # newstest2014.
    c.data.vocab_size = 37_000  # One shared SentencePiece vocabulary (§5.1).
    c.data.spm_model_type = "bpe"  # Byte-pair encoding as in the paper.
    c.data.spm_sample_size = 10_000_000
    c.data.max_len = 256
    c.data.tokens_per_batch = 25_000  # ~25k source and ~25k target tokens per step (§5.1).
    c.data.batch_multiple = 8
    c.data.eval_batch_size = 128

    c.num_train_steps = 100_000  # §5.2.
    c.warmup_steps = 4000
    c.label_smoothing = 0.1
    c.eval_every = 5000
    c.eval_bleu_sentences = 1000
    c.checkpoint_every = 2000
    c.test_sentences = -1
    return c
