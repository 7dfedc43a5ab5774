"""The starting points of every training config: the task, the model section, the data section,
the training loop's fields with the paper's values (§5.3) as defaults, and the task's own fields.

Each config file calls one of `base_config()` (translation), `lm_base_config()` (language
model), `bert_base_config()`, `classify_base_config()` or `vit_base_config()` and changes what
differs. Every field has a comment: the loop's below, the task's own where the task defines them
(`add_config_fields` in transformer_jax/tasks/), the data's in transformer_jax/data/*/config.py,
the model's in its config dataclass.
"""

import ml_collections

from transformer_jax import models, tasks
from transformer_jax.data.bert.config import default_bert_data_config
from transformer_jax.data.classify.config import default_classify_data_config
from transformer_jax.data.images.config import default_image_data_config
from transformer_jax.data.lm.config import default_lm_data_config
from transformer_jax.data.translation.config import default_data_config


def training_fields(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Adds the fields of the training loop, whatever the task, to `c`."""
    c.seed = 0  # Parameter initialisation; dropout keys use seed + 1 folded with the step.
    c.rng_impl = "threefry"  # Dropout bits: "threefry", "rbg", "unsafe_rbg" (transformer_jax/rng).

    # Optimisation (§5.3).
    c.num_train_steps = 100_000  # Updates to run.
    c.warmup_steps = 4000  # Noam warm-up.
    c.lr_factor = 1.0  # Multiplies the Noam learning rate.
    c.adam_b1 = 0.9  # Adam beta1.
    c.adam_b2 = 0.98  # Adam beta2.
    c.adam_eps = 1e-9  # Adam epsilon.
    c.grad_clip_norm = 0.0  # Global-norm gradient clipping; 0 = off (the paper has none).
    c.optimizer = "adam"  # "adam" (§5.3) or "adamw" (decoupled weight decay, masked).
    c.schedule = "noam"  # "noam" (§5.3, lr_factor), or "linear", "cosine", "constant" (lr).
    c.learning_rate = 1e-4  # Peak of the linear, cosine and constant schedules (not noam's).
    c.final_lr_ratio = 0.0  # Where linear and cosine end, as a share of the peak.
    c.weight_decay = 0.0  # AdamW's decay; never on biases or LayerNorms.
    c.weight_decay_embeddings = True  # Whether the embeddings decay too.
    c.layer_decay = 1.0  # Layer-wise learning-rate decay (block i of L: x decay^(L-i)); 1 = off.
    c.head_only_steps = 0  # With init_from: steps that train the new head alone first (LP-FT).
    c.head_lr_factor = 1.0  # With init_from: multiplies the new head's learning rate.
    c.head_l2 = 0.0  # With init_from: L2 penalty (strength / 2 * ||W||^2) on the head's weights.
    c.grad_accum_steps = 1  # Micro-batches per update (same update, less activation memory).

    # Parallelism: mesh axis sizes; -1 takes the remaining devices. data only = data parallel.
    c.mesh = ml_collections.ConfigDict({"data": -1, "fsdp": 1, "tensor": 1})  # Axis sizes.

    # Logging, evaluation, checkpoints.
    c.log_every = 100  # Steps between train-metric lines.
    c.eval_every = 2000  # Steps between validation metrics.
    c.checkpoint_every = 1000  # Steps between checkpoints (also on the last step and SIGTERM).
    c.keep_checkpoints = 3  # Latest checkpoints kept for resumption (the best is kept apart).
    c.test_checkpoint = "best"  # Final test on "best" (by validation), "last" or "average".
    c.test_average_last = 0  # With "average": how many last checkpoints to average (2 or more).
    c.max_nonfinite_steps = 10  # NaN/Inf steps in a row (each skipped) that stop the run.
    c.profile_steps = (0, 0)  # (first step, count) to trace into workdir/profile; (0, 0) = off.
    c.chip_peak_flops = 0.0  # One device's peak FLOP/s for the logged mfu; 0 = the chip table's.
    return c


def run_config(
    task: str, model: ml_collections.ConfigDict, data: ml_collections.ConfigDict
) -> ml_collections.ConfigDict:
    """A config of `task` (a name from transformer_jax.tasks) training the `model` section on
    the `data` section: the loop's fields, then the task's own."""
    c = ml_collections.ConfigDict()
    c.task = task  # What is learned: a name from transformer_jax.tasks.
    c.model = model  # `name` (from transformer_jax.models) and every field of its config.
    c.data = data  # Sources, tokenizer, batching: see the data section's config module.
    training_fields(c)
    tasks.get(task).add_config_fields(c)
    return c


def base_config() -> ml_collections.ConfigDict:
    """Translation with the encoder-decoder (the paper's task): Table 3 "base" (§6.2), whose
    vocab_size and max_len stay None for the tokenizer and data.max_len to decide; data fields in
    transformer_jax/data/translation/config.py."""
    model = models.config_section("encoder_decoder", "base")
    return run_config("translation", model, default_data_config())


def lm_base_config(preset: str = "cpu") -> ml_collections.ConfigDict:
    """Causal language modelling with the decoder-only model (GPT) from a preset (gpt2_small,
    gpt1, cpu, tiny) on the stdlib documentation corpus (transformer_jax/data/lm/config.py)."""
    model = models.config_section("decoder_only", preset)
    return run_config("language_model", model, default_lm_data_config())


def bert_base_config(preset: str = "cpu") -> ml_collections.ConfigDict:
    """BERT pretraining (masked LM + next sentence) with the encoder-only model from a preset
    (bert_base, cpu, tiny) on the stdlib documentation (transformer_jax/data/bert/config.py)."""
    model = models.config_section("encoder_only", preset)
    return run_config("bert_pretrain", model, default_bert_data_config())


def classify_base_config(preset: str = "cpu") -> ml_collections.ConfigDict:
    """Fine-tuning the encoder-only model (BERT) to classify texts or text pairs; the model
    section must be the pretrained run's (same preset and overrides: only num_labels, from the
    data, and the dropout rates may differ). Data: transformer_jax/data/classify/config.py."""
    model = models.config_section("encoder_only", preset)
    return run_config("classify", model, default_classify_data_config())


def vit_base_config(preset: str = "cpu") -> ml_collections.ConfigDict:
    """Image classification with the Vision Transformer from a preset (vit_b16, cpu, tiny); the
    classes, image size and channels are left to the data (transformer_jax/data/images)."""
    model = models.config_section("vit", preset)
    return run_config("image_classify", model, default_image_data_config())


def minilm_finetune(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """Turns a classify config into fine-tuning sentence-transformers' all-MiniLM-L6-v2,
    converted into `runs/minilm` (docs/interop.md): its model section (6 post-LN layers, d 384,
    12 heads), a new head on the mean of the tokens' outputs (the model's own pooling), and
    AdamW at the small, linearly decayed learning rate pretrained BERTs are fine-tuned with."""
    c.init_from = "runs/minilm"  # The converted workdir (its WordPiece tokenizer comes too).
    c.model.num_layers = 6  # MiniLM's model section (runs/minilm/model.json) ...
    c.model.d_model = 384  # ...
    c.model.num_heads = 12  # ...
    c.model.d_ff = 1536  # ...
    c.model.norm = "post"  # ... (BERT's post-LN)
    c.model.max_len = 512  # ... its positions.
    c.model.pool = "mean"  # The head reads the mean of the tokens' outputs, as MiniLM pools.
    c.optimizer = "adamw"  # BERT's fine-tuning recipe: AdamW, ...
    c.schedule = "linear"  # ... warm-up then linear decay to 0, ...
    c.learning_rate = 1e-4  # ... at a small peak, ...
    c.weight_decay = 0.01  # ... a little decay, ...
    c.adam_b2 = 0.999  # ... and Adam's usual betas ...
    c.adam_eps = 1e-6  # ... and epsilon.
    return c
