# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 2. Train a translator in minutes
#
# [![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-jax/transformer_jax/blob/main/notebooks/02_translator.ipynb)
#
# > "The Transformer follows this overall architecture using stacked self-attention and point-wise,
# > fully connected layers for both the encoder and decoder." (Vaswani et al., 2017, §3)
#
# This notebook trains the paper's encoder-decoder, through the same function `train.py` calls,
# on a corpus that needs no download: English number phrases and their French translations,
# generated on the spot. French counts partly in twenties (*quatre-vingt-dix-sept* is
# "four-twenty-ten-seven", 97), so the model has something to learn beyond word-for-word lookup.
#
# 1. The corpus and the config (`configs/default.py`).
# 2. The two training details of §5: the learning-rate schedule and label smoothing, plotted.
# 3. Training, with its loss and BLEU curves.
# 4. `Translator` from the checkpoint: greedy decoding against beam search (§6.1), scored with
#    sacreBLEU on sentences the model never saw.
# 5. Attention maps of the trained model.
# 6. What changes for WMT'14 on a Colab GPU or TPU (not executed here).
#
# In the full mode the training takes about 5 minutes on a 2-core CPU (Colab's free CPU runtime);
# everything else about a minute.

# %%
# Setup: run this cell first. In a clone of the repository (or wherever transformer_jax is
# importable) it installs nothing; on Colab it clones SOURCE and installs it with its extras.
import os
import pathlib
import subprocess
import sys

CPU_DEVICES = 1  # Devices to simulate on a CPU runtime (notebook 6 needs 8); GPUs/TPUs ignore it.
SOURCE = os.environ.get(
    "TRANSFORMER_JAX_SOURCE", "https://github.com/transformer-jax/transformer_jax"
)  # The repository to install from on Colab: a git URL or a local folder.


def find_checkout() -> pathlib.Path | None:
    """The repository folder: above the working directory or on sys.path, else None."""
    here = pathlib.Path.cwd().resolve()
    for folder in (here, *here.parents, *(pathlib.Path(p).resolve() for p in sys.path if p)):
        if (folder / "configs" / "common.py").is_file() and (folder / "transformer_jax").is_dir():
            return folder
    return None


ROOT = find_checkout()
if ROOT is None:
    ROOT = pathlib.Path("transformer_jax_repo").resolve()
    if not ROOT.exists():
        subprocess.run(["git", "clone", "--quiet", "--depth=1", SOURCE, str(ROOT)], check=True)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the configs/ folder (and the library) import from here
try:
    import transformer_jax  # noqa: F401
except ImportError:  # its dependencies are missing: install the checkout with its extras
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[vision]"]
    subprocess.run(pip, check=True)
    import transformer_jax  # noqa: F401

from transformer_jax.notebook import environment_report, simulate_cpu_devices  # noqa: E402

simulate_cpu_devices(CPU_DEVICES)
# JAX runs on the runtime it finds (Colab's CPU, GPU or TPU; nothing here forces one): the
# report's `backend` line names it and the devices this notebook uses.
print(environment_report())

# %% [markdown]
# ## 1. The corpus and the config
#
# Integers are split into train, validation and test sets by a hash, so every test sentence says a
# number the model never saw during training. The phrases come from `num2words`.

# %%
from transformer_jax.data.translation.embedded import embedded_pairs

for english, french in embedded_pairs("test", 6, seed=0, target_lang="fr"):
    print(f"{english:<60} -> {french}")

# %% [markdown]
# `configs/default.py` is the config `python train.py --workdir=...` uses without `--config`: a
# 2+2-layer model of width 128 (the paper's base model has 6+6 layers of width 512), a shared
# SentencePiece vocabulary trained on the corpus, and packed batches of about 4,096 tokens. A config
# is a plain `ml_collections.ConfigDict`: change a field here as `--config.FIELD=...` would.

# %%
from configs import default
from transformer_jax.notebook import choose, fast_mode

config = default.get_config()
if fast_mode():  # CI's short run: a small corpus, a 1+1-layer model and a few steps.
    config.model.num_encoder_layers = config.model.num_decoder_layers = 1  # compiles faster
    config.model.d_model = 64
    config.model.d_ff = 128
    config.data.embedded_train_size = 2000
    config.data.embedded_eval_size = 16
    config.data.embedded_test_size = 16
    config.data.tokens_per_batch = 512
    config.num_train_steps = 20
    config.warmup_steps = 10
    config.log_every = 5
    config.eval_every = 20
    config.checkpoint_every = 20
    config.eval_bleu_sentences = 16
workdir = f"runs/nb02_translator_{'fast' if fast_mode() else 'full'}"
print(config.model)
print(
    f"steps {config.num_train_steps}, tokens per batch {config.data.tokens_per_batch}, "
    f"workdir {workdir}"
)

# %% [markdown]
# ## 2. Two training details of §5
#
# **The learning rate** (§5.3):
#
# > $lrate = d_{model}^{-0.5} \cdot \min(step\_num^{-0.5}, step\_num \cdot warmup\_steps^{-1.5})$
# > "This corresponds to increasing the learning rate linearly for the first $warmup\_steps$
# > training steps, and decreasing it thereafter proportionally to the inverse square root of the
# > step number."
#
# `noam_schedule` is that formula (with a `factor` in front); the peak is at `warmup_steps`.

# %%
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from transformer_jax.training.schedules import noam_schedule

schedules = {
    "paper: d_model 512, warm-up 4000": (noam_schedule(512, 4000), 100_000),
    f"this run: d_model {config.model.d_model}, warm-up {config.warmup_steps}, "
    f"factor {config.lr_factor}": (
        noam_schedule(config.model.d_model, config.warmup_steps, config.lr_factor),
        config.num_train_steps,
    ),
}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
for ax, (name, (schedule, steps)) in zip(axes, schedules.items(), strict=True):
    counts = np.arange(steps)
    rates = np.asarray(schedule(counts))
    ax.plot(counts + 1, rates)
    ax.set_title(name, fontsize=10)
    ax.set_xlabel("step")
    peak = int(np.argmax(rates))
    print(f"{name}: peak {rates[peak]:.2e} at step {peak + 1}, {rates[-1]:.2e} at step {steps}")
axes[0].set_ylabel("learning rate")
plt.tight_layout()
plt.show()

# %% [markdown]
# **Label smoothing** (§5.4):
#
# > "During training, we employed label smoothing of value $\epsilon_{ls} = 0.1$. This hurts
# > perplexity, as the model learns to be more unsure, but improves accuracy and BLEU score."
#
# `label_smoothed_cross_entropy` compares the prediction with a target distribution that keeps
# $1 - \epsilon$ on the right token and spreads $\epsilon$ over the others. Vary the probability the
# model gives the right token (the rest shared evenly) and watch where each loss is smallest:

# %%
from transformer_jax.tasks.losses import label_smoothed_cross_entropy

vocab = 10
p_target = np.linspace(0.05, 0.999, 400)
rest = (1 - p_target) / (vocab - 1)
probs = np.concatenate([p_target[:, None], np.repeat(rest[:, None], vocab - 1, axis=1)], axis=1)
logits = jnp.log(jnp.asarray(probs))[None]  # [1, 400, V]: one "sentence" of 400 predictions
targets = jnp.zeros((1, len(p_target)), jnp.int32)  # the right token is token 0
plt.figure(figsize=(6, 3.4))
for epsilon in (0.0, 0.1):
    loss = np.asarray(label_smoothed_cross_entropy(logits, targets, epsilon)[0])
    best = p_target[np.argmin(loss)]
    plt.plot(p_target, loss, label=f"epsilon = {epsilon}: smallest at p = {best:.3f}")
    print(f"epsilon {epsilon}: the loss is smallest when the right token gets p = {best:.3f}")
plt.xlabel("probability of the right token")
plt.ylabel("loss")
plt.yscale("log")
plt.legend()
plt.show()

# %% [markdown]
# With smoothing, certainty is penalised: the best prediction gives the right token $1 - \epsilon$
# and keeps the rest for the others. The library's loss subtracts the smoothed distribution's own
# entropy, so its minimum is 0 (a KL divergence); `nll` in the logs is the plain negative
# log-likelihood.
#
# ## 3. Train
#
# `train_and_evaluate(config, workdir)` is what `python train.py --config=... --workdir=...` runs:
# it writes the config, trains the tokenizer, trains with periodic validation and checkpoints,
# and decodes the test split at the end. Running this cell again resumes from the last checkpoint
# (and does nothing once the run is finished).

# %%
import time

from transformer_jax.training import train_and_evaluate

start = time.time()
result = train_and_evaluate(config, workdir)
minutes = (time.time() - start) / 60
print(
    f"{minutes:.1f} min; last validation: BLEU {result['bleu']:.2f}, "
    f"exact match {result['exact_match']:.1%}"
)
if "test" in result:
    test = result["test"]
    print(f"test split: BLEU {test['bleu']:.2f}, exact match {test['exact_match']:.1%}")

# %% [markdown]
# The run logged every metric to `metrics.jsonl` in its workdir (and to TensorBoard):

# %%
from transformer_jax.runs import read_metrics

metrics = read_metrics(workdir)
train_rows, eval_rows = metrics["train"], metrics["eval"]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
axes[0].plot([r["step"] for r in train_rows], [r["loss"] for r in train_rows], label="train loss")
axes[0].plot([r["step"] for r in train_rows], [r["nll"] for r in train_rows], label="train nll")
axes[0].plot(
    [r["step"] for r in eval_rows], [r["nll"] for r in eval_rows], "o-", label="validation nll"
)
axes[0].set_yscale("log")
axes[0].set_xlabel("step")
axes[0].legend()
axes[1].plot([r["step"] for r in eval_rows], [r["bleu"] for r in eval_rows], "o-")
axes[1].set_xlabel("step")
axes[1].set_ylabel("validation BLEU (greedy)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 4. Translate from the checkpoint: greedy against beam search
#
# > "We used beam search with a beam size of 4 and length penalty $\alpha = 0.6$." (§6.1)
#
# `Translator.from_checkpoint` reads the workdir (config, tokenizer, latest checkpoint); every
# decoding step runs on the KV cache inside one compiled loop. Score both searches with sacreBLEU
# on test sentences:

# %%
from transformer_jax import Translator
from transformer_jax.inference.scoring import corpus_scores

translator = Translator.from_checkpoint(workdir)
test_pairs = embedded_pairs("test", choose(full=1000, fast=8), seed=0, target_lang="fr")
sources = [s for s, _ in test_pairs]
references = [t for _, t in test_pairs]
timed = sources[: choose(full=256, fast=8)]
searches = {}
for name, beam_size in [("greedy", 1), ("beam 4, alpha 0.6", 4)]:
    hypotheses = translator.translate(sources, beam_size=beam_size)  # compiles each batch shape
    start = time.time()
    translator.translate(timed, beam_size=beam_size)  # timed again, compiled: the search only
    speed = len(timed) / (time.time() - start)
    scores = corpus_scores(hypotheses, references)
    searches[name] = hypotheses
    print(
        f"{name:<18} BLEU {scores['bleu']:6.2f}  chrF {scores['chrf']:6.2f}  exact match "
        f"{scores['exact_match']:6.1%}  {speed:7.1f} sentences/s"
    )
print(scores["bleu_signature"])

# %% [markdown]
# Where the two searches disagree (if they do), beam search kept a hypothesis whose first tokens
# looked worse to greedy decoding:

# %%
greedy_out, beam_out = searches["greedy"], searches["beam 4, alpha 0.6"]
differ = [i for i in range(len(sources)) if greedy_out[i] != beam_out[i]]
print(f"{len(differ)} of {len(sources)} translations differ")
for i in differ[:5]:
    print(
        f"source    {sources[i]}\nreference {references[i]}\ngreedy    {greedy_out[i]}\n"
        f"beam      {beam_out[i]}\n"
    )

# %% [markdown]
# ## 5. Attention maps
#
# `Translator.attention` runs the model once on a sentence pair and returns every layer's and
# head's weights: encoder self-attention, decoder self-attention (causal) and encoder-decoder
# attention. In the encoder-decoder attention each French piece (rows) looks at English pieces
# (columns); watch where *quatre-vingt* and *dix* look for "ninety" and "seven".

# %%
sentence = "three hundred and ninety-seven thousand and seventy-one"
print(sentence, "->", translator.translate([sentence])[0])
maps = translator.attention(sentence)
cross = maps.weights("decoder_cross")
queries, keys = maps.labels("decoder_cross")
layer = len(cross) - 1
heads = cross[layer].shape[0]
fig, axes = plt.subplots(1, heads, figsize=(4.2 * heads, 4.8))
for head, ax in enumerate(np.atleast_1d(axes)):
    ax.imshow(cross[layer][head], cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=8)
    ax.set_yticks(range(len(queries)), maps.output_tokens, fontsize=8)
    ax.set_title(f"layer {layer}, head {head}")
fig.suptitle("encoder-decoder attention: French output piece (rows) over English pieces")
plt.tight_layout()
plt.show()

# %% [markdown]
# Each row is the decoder position that *predicts* the row's label, so it looks at the English it
# must say next. The same maps as PNG files, from Python or after training from the command line:
# `from transformer_jax.inference.attention_plot import plot_attention`;
# `plot_attention(maps, "decoder_cross", layer=1, head=0, path="cross.png")`.
#
# Beside these, the command-line tools read the same workdir:
#
# ```bash
# WORKDIR=runs/nb02_translator_full
# echo "three hundred and forty-two" | python -m transformer_jax translate --workdir=$WORKDIR
# python -m transformer_jax evaluate --workdir=$WORKDIR --split=test
# ```
#
# ## 6. WMT'14 on a Colab GPU or TPU (not executed here)
#
# The paper's base model on WMT'14 English-German is `configs/wmt14_en_de_base.py`: the Table 3
# base preset (6+6 layers, $d_{model}$ 512, 8 heads), a shared 37k BPE vocabulary, about 25,000
# source and 25,000 target tokens per step, Adam(0.9, 0.98, $10^{-9}$), warm-up 4,000, 100k steps.
# The data is read through TFDS as ArrayRecord, without TensorFlow; prepare it once where there is
# network and disk (about 4.5M sentence pairs):
#
# ```python
# !tfds build wmt14_translate/de-en --file_format=array_record --data_dir=/content/tfds
# ```
#
# Then the same call as above, with the config changes a single GPU or a TPU needs:
#
# ```python
# from configs import wmt14_en_de_base
#
# config = wmt14_en_de_base.get_config()
# config.data.tfds_data_dir = "/content/tfds"   # or gs://BUCKET/tfds
# config.model.dtype = "bfloat16"              # bf16 matmuls; parameters stay float32
# config.data.tokens_per_batch = 8192           # what one 16 GB GPU holds ...
# config.grad_accum_steps = 3                   # ... three of them make the paper's ~25k tokens
# config.mesh.data = -1                         # data parallel over every device (8 TPU cores)
# train_and_evaluate(config, "gs://BUCKET/runs/wmt14_base")  # Cloud Storage survives the runtime
# ```
#
# A Colab runtime is recycled after some hours: with the workdir in Cloud Storage, running the same
# cell again on a new runtime resumes from the last checkpoint. [Notebook 6](06_scaling_out.ipynb)
# shows how the mesh places every parameter.
