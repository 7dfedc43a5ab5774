"""Fields every training config shares, with the paper's values (§5.3, §5.4) as defaults.

Each config file calls `base_config()` (translation) or `lm_base_config()` (language model) and
changes what differs; every field has a comment.
"""

import ml_collections
from ml_collections.config_dict import placeholder

from transformer_jax import models
from transformer_jax.data.bert.config import default_bert_data_config
from transformer_jax.data.classify.config import default_classify_data_config
from transformer_jax.data.images.config import default_image_data_config
from transformer_jax.data.lm.config import default_lm_data_config
from transformer_jax.data.translation.config import default_data_config


def training_fields(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Adds the fields of the training loop, whatever the task, to `c`."""
    c.seed = 0  # Parameter initialisation; dropout keys use seed + 1 folded with the step.

    # Optimisation (§5.3).
    c.num_train_steps = 100_000  # Updates to run.
    c.warmup_steps = 4000  # Noam warm-up.
    c.lr_factor = 1.0  # Multiplies the Noam learning rate.
    c.adam_b1 = 0.9  # Adam beta1.
    c.adam_b2 = 0.98  # Adam beta2.
    c.adam_eps = 1e-9  # Adam epsilon.
    c.grad_clip_norm = 0.0  # Global-norm gradient clipping; 0 = off (the paper has none).
    c.label_smoothing = 0.1  # epsilon_ls (§5.4).
    c.grad_accum_steps = 1  # Micro-batches per update (same update, less activation memory).

    # Parallelism: mesh axis sizes; -1 takes the remaining devices. data only = data parallel.
    c.mesh = ml_collections.ConfigDict({"data": -1, "fsdp": 1, "tensor": 1})  # Axis sizes.

    # Logging, evaluation, checkpoints.
    c.log_every = 100  # Steps between train-metric lines.
    c.eval_every = 2000  # Steps between validation metrics.
    c.checkpoint_every = 1000  # Steps between checkpoints (also on the last step and SIGTERM).
    c.keep_checkpoints = 3  # Latest checkpoints kept for resumption (the best is kept apart).
    c.max_nonfinite_steps = 10  # NaN/Inf steps in a row (each skipped) that stop the run.
    return c


def base_config() -> ml_collections.ConfigDict:
    """Translation with the encoder-decoder (the paper's task)."""
    c = ml_collections.ConfigDict()
    c.task = "translation"  # What is learned: a name from transformer_jax.tasks.

    # Model: `name` (from transformer_jax.models) and every field of its config dataclass, from
    # the Table 3 "base" preset; each field is commented in EncoderDecoderConfig. vocab_size and
    # max_len stay None: the tokenizer and data.max_len decide them.
    c.model = models.config_section("encoder_decoder", "base")  # Table 3 "base" (§6.2).

    # Data: see transformer_jax/data/translation/config.py for every field.
    c.data = default_data_config()  # Sources, tokenizer, batching: see that function.
    training_fields(c)
    c.eval_bleu_sentences = 500  # Validation sentences greedily decoded for BLEU at each eval.
    c.decode_batch_size = 64  # Rows per decoding batch.
    c.test_sentences = 0  # Test sentences decoded after the last step; -1 = all, 0 = none.
    return c


def lm_base_config(preset: str = "cpu") -> ml_collections.ConfigDict:
    """Causal language modelling with the decoder-only model (GPT)."""
    c = ml_collections.ConfigDict()
    c.task = "language_model"  # Next-token prediction over packed documents.

    # Model: every field of DecoderOnlyConfig from a preset (gpt2_small, gpt1, cpu, tiny);
    # vocab_size stays None: the tokenizer decides it.
    c.model = models.config_section("decoder_only", preset)  # GPT; "cpu" by default.

    # Data: see transformer_jax/data/lm/config.py for every field.
    c.data = default_lm_data_config()  # The stdlib documentation corpus, SentencePiece.
    training_fields(c)
    c.label_smoothing = 0.0  # Plain likelihood: perplexity and bits per byte are its measures.
    c.samples = 3  # Held-out prompts continued at the final test (1 at each evaluation).
    c.sample_tokens = 48  # Tokens generated per sample.
    c.sample_temperature = 0.8  # Sampling temperature of the samples (0 = greedy).
    c.sample_top_p = 0.95  # Nucleus of the samples.
    c.baselines = True  # Test bits per byte of lzma, zlib and a char bigram beside the model's.
    return c


def bert_base_config(preset: str = "cpu") -> ml_collections.ConfigDict:
    """BERT pretraining (masked LM + next sentence) with the encoder-only model."""
    c = ml_collections.ConfigDict()
    c.task = "bert_pretrain"  # Masked LM + next-sentence prediction over sentence pairs.

    # Model: every field of EncoderOnlyConfig from a preset (bert_base, cpu, tiny); vocab_size
    # stays None: the tokenizer decides it.
    c.model = models.config_section("encoder_only", preset)  # BERT; "cpu" by default.

    # Data: see transformer_jax/data/bert/config.py (and data/lm/config.py) for every field.
    c.data = default_bert_data_config()  # The stdlib documentation corpus, SentencePiece.
    training_fields(c)
    c.label_smoothing = 0.0  # Unused: BERT's losses are plain likelihoods.
    return c


def classify_base_config(preset: str = "cpu") -> ml_collections.ConfigDict:
    """Fine-tuning the encoder-only model (BERT) to classify texts or text pairs."""
    c = ml_collections.ConfigDict()
    c.task = "classify"  # A linear head on the pooled [CLS] output.

    # Model: the pretrained run's section (same preset and overrides): only num_labels (from the
    # data) and the dropout rates may differ from it.
    c.model = models.config_section("encoder_only", preset)  # The pretrained run's preset.

    # Data: see transformer_jax/data/classify/config.py for every field.
    c.data = default_classify_data_config()  # The number-pair task by default.
    training_fields(c)
    c.init_from = placeholder(str)  # Pretraining workdir to start from; unset or '' = scratch.
    c.label_smoothing = 0.0  # Unused: plain cross-entropy.
    c.baselines = True  # At the test, TF-IDF + logistic regression on the same split.
    c.baseline_analyzer = "char"  # Its n-grams: "char" (1-4 within words) or "word" (1-2).
    return c


def vit_base_config(preset: str = "cpu") -> ml_collections.ConfigDict:
    """Image classification with the Vision Transformer."""
    c = ml_collections.ConfigDict()
    c.task = "image_classify"  # Cross-entropy over the classes of whole images.

    # Model: every field of VitConfig from a preset (vit_b16, cpu, tiny); the classes, image
    # size and channels stay None: the data decides them.
    c.model = models.config_section("vit", preset)  # ViT; "cpu" (small images) by default.

    # Data: see transformer_jax/data/images/config.py for every field.
    c.data = default_image_data_config()  # scikit-learn's 8x8 digits by default.
    training_fields(c)
    c.label_smoothing = 0.0  # epsilon of the label-smoothed cross-entropy (0 = plain).
    c.baselines = True  # At the test, an RBF SVC and logistic regression on the same pixels.
    c.baseline_max_train = 10_000  # Training images the baselines fit on (SVC grows as N^2).
    return c
