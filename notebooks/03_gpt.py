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
# # 3. GPT: a language model on the standard library's documentation
#
# [![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-jax/transformer_jax/blob/main/notebooks/03_gpt.ipynb)
#
# > "Language modeling is usually framed as unsupervised distribution estimation from a set of
# > examples $(x_1, x_2, ..., x_n)$ each composed of variable length sequences of symbols
# > $(s_1, s_2, ..., s_n)$. Since language has a natural sequential ordering, it is common to
# > factorize the joint probabilities over symbols as the product of conditional probabilities."
# > (Radford et al., 2019, *Language Models are Unsupervised Multitask Learners* (GPT-2), §2)
#
# $$p(x) = \prod_{i=1}^{n} p(s_i \mid s_1, \ldots, s_{i-1})$$
#
# GPT is the Transformer's decoder used alone: a stack of causal self-attention blocks that
# predicts every next token of a text in one pass. This notebook trains one with
# `transformer_jax`'s own training loop, on a corpus that needs no download, and asks how good it
# is in the unit compressors use, so that "good" has a floor to beat.
#
# 1. The corpus: the Python standard library's docstrings, split by module.
# 2. The model: GPT-1's equations, GPT-2's changes, the parameter count, the causal mask.
# 3. Training through `train_and_evaluate`, as `train.py` does.
# 4. Validation perplexity and bits per byte, step by step, against lzma, zlib and a character
#    bigram model on the same text.
# 5. Inside the trained model: no position sees the future, no document sees another, checked.
# 6. Sampling: what temperature, top-k and top-p (nucleus) do to the next-token distribution.
# 7. Generation from the checkpoint with `Generator`: batched, and streamed.
#
# The full notebook trains for several minutes on a 2-core CPU and runs in under ten (Colab:
# Runtime > Run all). With `TRANSFORMER_JAX_FAST=1` (what CI runs) it trains a byte-level toy for
# twenty steps instead: every cell runs, but do not expect its figures to say much.

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
# ## 1. The corpus
#
# GPT-2 read WebText, 40 GB of web pages. This notebook reads text that every Python carries:
# the docstrings of the standard library's modules, classes and functions, and the language
# reference's topics (`pydoc_data.topics`). The library gathers them in a fresh interpreter,
# cleans and deduplicates them, and splits them **by module** (a hash of the module's name):
# about 90% of the modules for training, 5% for validation, 5% for the test. A test document
# comes from a module the model never read, so the test measures how well it has learned to
# read documentation, not whether it remembers it.
#
# The corpus is cached in the run's workdir (`runs/` under the working directory); the training
# below finds it there.

# %%
import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from transformer_jax.data.lm.stdlib_corpus import load_stdlib_corpus
from transformer_jax.notebook import choose, fast_mode
from transformer_jax.runs import Workdir

WORKDIR = f"runs/nb03_gpt_{'fast' if fast_mode() else 'full'}"  # a finished run is reused
corpus = load_stdlib_corpus(Workdir.at(WORKDIR).cache)
manifest = corpus.manifest()
print(f"Python {manifest['python_version']}'s documentation (corpus {manifest['sha256'][:12]})")
for split in ("train", "eval", "test"):
    m = manifest[split]
    print(
        f"{split:>5}: {m['documents']:>5,} documents from {m['modules']:>3} modules, "
        f"{m['bytes']:>9,} bytes"
    )

# %% [markdown]
# Documents are short and very unequal in length: a one-line function docstring sits beside a
# language-reference topic of many pages. Here is the start of the first validation document.

# %%
doc_bytes = np.array([len(d.encode("utf-8")) for d in corpus.splits["train"]])
print(
    f"training documents: median {np.median(doc_bytes):,.0f} bytes, 90th percentile "
    f"{np.percentile(doc_bytes, 90):,.0f}, longest {doc_bytes.max():,}"
)
first = corpus.splits["eval"][0]
print(f"\nvalidation document 0 (module {corpus.modules['eval'][0]}, {len(first):,} characters):\n")
print(first[:500])

# %% [markdown]
# ## 2. The model
#
# > "Given an unsupervised corpus of tokens $\mathcal{U} = \{u_1, \ldots, u_n\}$, we use a
# > standard language modeling objective to maximize the following likelihood [...] where $k$ is
# > the size of the context window [...]. In our experiments, we use a multi-layer Transformer
# > decoder for the language model, which is a variant of the transformer. This model applies a
# > multi-headed self-attention operation over the input context tokens followed by
# > position-wise feedforward layers to produce an output distribution over target tokens."
# > (Radford et al., 2018, *Improving Language Understanding by Generative Pre-Training*
# > (GPT-1), §3.1)
#
# $$L_1(\mathcal{U}) = \sum_i \log P(u_i \mid u_{i-k}, \ldots, u_{i-1}; \Theta) \qquad (1)$$
#
# $$h_0 = U W_e + W_p, \qquad h_l = \mathrm{transformer\_block}(h_{l-1}),
# \qquad P(u) = \mathrm{softmax}(h_n W_e^T) \qquad (2)$$
#
# $W_e$ is the token embedding, $W_p$ the (learned) position embedding, and the output layer is
# $W_e$ again, transposed: the embedding is *tied*. GPT-2 kept this and moved the LayerNorms:
#
# > "Layer normalization (Ba et al., 2016) was moved to the input of each sub-block, similar to a
# > pre-activation residual network (He et al., 2016) and an additional layer normalization was
# > added after the final self-attention block." (Radford et al., 2019, §2.3)
#
# `DecoderOnly` is that model (`norm="pre"` is GPT-2's, `"post"` GPT-1's). The run takes its
# configuration from `configs/gpt_stdlib.py`, exactly as
# `python train.py --config=configs/gpt_stdlib.py` would, and changes a few fields: fewer
# steps in the full mode, and in the fast mode a byte-level toy (no tokenizer to train, a much
# smaller model).

# %%
from configs import gpt_stdlib

config = gpt_stdlib.get_config()
config.num_train_steps = choose(full=120, fast=20)  # gpt_stdlib.py: 300
config.eval_every = choose(full=20, fast=20)  # one validation point on the curves per this
config.log_every = choose(full=10, fast=5)  # one training point per this
config.checkpoint_every = config.num_train_steps  # one checkpoint, at the end
config.samples = choose(full=config.samples, fast=0)  # held-out prompts continued at evals
config.data.tokenizer = choose(full=config.data.tokenizer, fast="byte")
config.data.max_len = config.model.max_len = choose(full=config.data.max_len, fast=128)
config.data.tokens_per_batch = choose(full=config.data.tokens_per_batch, fast=1024)
config.model.num_layers = choose(full=config.model.num_layers, fast=1)
config.model.d_model = choose(full=config.model.d_model, fast=64)
config.model.d_ff = choose(full=config.model.d_ff, fast=256)
config.warmup_steps = choose(full=config.warmup_steps, fast=10)
print(config.model)
print(
    f"tokenizer {config.data.tokenizer}, context {config.data.max_len} tokens, "
    f"{config.data.tokens_per_batch:,} tokens per step, {config.num_train_steps} steps"
)

# %% [markdown]
# Where the parameters are. The vocabulary decides the size of $W_e$: the byte tokenizer has 260
# ids (256 bytes and four special tokens); SentencePiece is trained on the training split at the
# start of the run, with `data.vocab_size` as its upper bound, so the count below is an upper
# bound in the full mode.

# %%
from flax import nnx

from transformer_jax import count_params, models
from transformer_jax.data.byte_tokenizer import ByteTokenizer

byte_mode = config.data.tokenizer == "byte"
vocab_size = ByteTokenizer.vocab_size if byte_mode else config.data.vocab_size
model_cfg = models.build_config(config.model, {"vocab_size": vocab_size})
abstract = nnx.eval_shape(lambda: models.build_model(model_cfg, rngs=nnx.Rngs(0)))
parts = {}
for path, leaf in jax.tree.leaves_with_path(nnx.state(abstract, nnx.Param)):
    parts[path[0].key] = parts.get(path[0].key, 0) + leaf.size
total = count_params(model_cfg)
assert sum(parts.values()) == total
described = {
    "embed": f"token embedding W_e [{vocab_size}, {model_cfg.d_model}], also the output layer",
    "pos_embed": f"position embedding W_p [{model_cfg.max_len}, {model_cfg.d_model}]",
    "decoder": f"{model_cfg.num_layers} blocks and the final LayerNorm",
}
for name, what in described.items():
    print(f"{what:<64} {parts[name]:>10,}  {100 * parts[name] / total:4.1f}%")
print(f"{'total':<64} {total:>10,}")

# %% [markdown]
# ### The causal mask
#
# > "We need to prevent leftward information flow in the decoder to preserve the auto-regressive
# > property. We implement this inside of scaled dot-product attention by masking out (setting to
# > $-\infty$) all values in the input of the softmax which correspond to illegal connections."
# > (Vaswani et al., 2017, §3.2.3)
#
# This is what lets one pass train every position at once: the output at position $t$ is the
# prediction of token $t + 1$, and it may only look at tokens $0..t$. Training rows are also
# *packed*: several documents share a row of `max_len` tokens, each with its own segment id and
# positions restarting at 0. So a query may attend to a key only if the key is not in its future
# (`causal_mask`) **and** belongs to the same document (`segment_mask`; segment 0 is padding).
# The library's masks for a row of two documents of 5 and 4 tokens and 3 padding slots:

# %%
from transformer_jax import causal_mask, combine_masks, segment_mask

toy_segments = jnp.array([[1] * 5 + [2] * 4 + [0] * 3])  # [B=1, T=12]
toy_masks = {
    "causal_mask: key <= query": causal_mask(12),
    "segment_mask: same document": segment_mask(toy_segments, toy_segments),
    "both: what attention uses": combine_masks(
        causal_mask(12), segment_mask(toy_segments, toy_segments)
    ),
}
fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
for ax, (title, mask) in zip(axes, toy_masks.items(), strict=True):
    ax.imshow(np.asarray(mask[0, 0], float), cmap="Blues", vmin=0, vmax=1)
    ax.set(title=title, xlabel="key position", ylabel="query position")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 3. Training
#
# Maximising (1) is minimising the mean negative log-likelihood of every next token of the
# batch (no label smoothing here: the loss is the measure). `train_and_evaluate` is the whole job
# of `train.py`: it trains the tokenizer if there is one to train, packs the training documents
# into rows (reshuffled every epoch), runs Adam with the Noam schedule of the original paper
# (warm-up, then a decay as $1/\sqrt{\mathrm{step}}$), evaluates every document of the
# validation split every `eval_every` steps, saves a checkpoint, and at the end scores the test
# split beside the compressors. Its progress lines appear below as it runs; a workdir that
# already holds this finished run is not retrained (only the test is scored again).

# %%
from transformer_jax.training.loop import train_and_evaluate

started = time.time()
result = train_and_evaluate(config, WORKDIR)
seconds = time.time() - started

# %%
from transformer_jax.runs import read_metrics

metrics = read_metrics(WORKDIR)
train_rows, eval_rows = metrics["train"], metrics["eval"]
speed = np.median([r["tokens_per_sec"] for r in train_rows])
print(
    f"this call took {seconds / 60:.1f} min; training ran at a median {speed:,.0f} tokens/s, "
    f"{config.data.tokens_per_batch / speed:.2f} s per step of "
    f"{config.data.tokens_per_batch:,} tokens"
)

# %% [markdown]
# ## 4. Perplexity, bits per byte, and the compressors' line
#
# The loop logs two measures of the same likelihood:
#
# - **perplexity** $= \exp(\text{mean NLL per token})$: the number of equally likely tokens the
#   model is, on average, hesitating between. It depends on the tokenizer: a model over bytes
#   and a model over words cannot be compared on it.
# - **bits per byte** $= \frac{\sum \text{NLL}}{\ln 2 \cdot \text{bytes}}$ over the UTF-8 bytes
#   of the text (each document's end counts as one byte): the size, in bits, of the text coded
#   with the model's probabilities (an arithmetic coder gets within a few bits of it). It does
#   not depend on the tokenizer, and a compressor has one too:
#   $8 \times \text{compressed size} / \text{size}$.
#
# So the floor to beat is what general-purpose compressors and a simple statistical model do on
# the same validation text. `text_baselines` computes it: zlib (level 9), lzma (preset 9, extreme)
# and a character bigram model fitted on the training split (Witten-Bell smoothing).

# %%
from transformer_jax.tasks import text_baselines

floors = text_baselines.baselines(corpus.splits["train"], corpus.splits["eval"])
names = {
    "lzma_bits_per_byte": "lzma",
    "zlib_bits_per_byte": "zlib",
    "bigram_bits_per_byte": "char bigram",
}
for key, value in sorted(floors.items(), key=lambda kv: kv[1]):
    print(f"{names[key]:<12} {value:.3f} bits per byte on the validation text")

# %% [markdown]
# The two measures are tied by the number of bytes per token:
# $\text{bits per byte} = \log_2(\text{perplexity}) \times \text{tokens} / \text{bytes}$.
# Checked on the last validation point, and used to place an untrained model, which spreads its
# probability evenly over the $V$ tokens of the vocabulary (perplexity $V$):

# %%
last = eval_rows[-1]
eval_bytes = manifest["eval"]["bytes"] + manifest["eval"]["documents"]  # + one end per document
by_hand = np.log2(last["perplexity"]) * last["tokens"] / eval_bytes
print(
    f"step {last['step']}: {last['tokens']:,.0f} tokens for {eval_bytes:,} bytes "
    f"({eval_bytes / last['tokens']:.2f} bytes per token), perplexity {last['perplexity']:.2f}"
)
print(
    f"log2(perplexity) x tokens / bytes = {by_hand:.4f}; "
    f"logged bits per byte = {last['bits_per_byte']:.4f}"
)
np.testing.assert_allclose(by_hand, last["bits_per_byte"], rtol=1e-4)
trained_vocab = Workdir.at(WORKDIR).read_model()["vocab_size"]  # what the tokenizer gave
uniform = np.log2(trained_vocab) * last["tokens"] / eval_bytes
print(f"uniform over {trained_vocab:,} tokens: {uniform:.3f} bits per byte on the validation text")

# %% [markdown]
# The curves. Perplexity is plotted for the training batches and the validation split; bits per
# byte for the validation split only: a document's bytes are counted at the position that
# predicts its end, so a window of training batches that cuts documents in pieces gets a
# noisy share of bytes, while a whole split counts every byte exactly once.

# %%
fig, (ax_ppl, ax_bpb) = plt.subplots(1, 2, figsize=(13, 4.2))
steps = [r["step"] for r in eval_rows]
ax_ppl.plot([r["step"] for r in train_rows], [r["perplexity"] for r in train_rows], label="train")
ax_ppl.plot(steps, [r["perplexity"] for r in eval_rows], "o-", label="validation")
ax_bpb.plot(steps, [r["bits_per_byte"] for r in eval_rows], "o-", color="C1", label="the model")
for (key, value), color in zip(sorted(floors.items(), key=lambda kv: kv[1]), "rgm", strict=True):
    ax_bpb.axhline(value, color=color, ls="--", lw=1, label=f"{names[key]} ({value:.2f})")
ax_bpb.axhline(uniform, color="grey", ls=":", label=f"uniform over {trained_vocab} ({uniform:.2f})")
ax_ppl.set(xlabel="step", ylabel="perplexity", yscale="log", title="Perplexity (per token)")
ax_bpb.set(xlabel="step", ylabel="bits per byte", title="Bits per byte (validation text)")
ax_bpb.set_ylim(0, 1.15 * max(uniform, *floors.values(), *(r["bits_per_byte"] for r in eval_rows)))
ax_ppl.legend()
ax_bpb.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Read the right panel from the top. The dotted line is where training starts: an untrained
# model, $\log_2 V$ bits per token. The model goes below the bigram's line once it has learned
# which characters follow which and, in the full mode, below zlib's and lzma's lines: it
# predicts documentation from modules it never saw better than the compressors, which can only
# exploit repetitions within the text itself. In the fast mode the toy stops long before that.

# %%
final = last["bits_per_byte"]
print(f"the model at step {last['step']}: {final:.3f} bits per byte")
for key, value in sorted(floors.items(), key=lambda kv: kv[1]):
    side = "below" if final < value else "above"
    print(f"  {abs(final - value):.3f} bits per byte {side} {names[key]}'s line ({value:.3f})")

# %% [markdown]
# The test split, scored once at the end of training: the same measures on the modules held out
# for it, and the compressors on that text too. Its modules differ from the validation ones, and
# so does how well lzma does on them; in the full mode the model ends near lzma's line there, and
# the last line says on which side (the README gives where the whole `gpt_stdlib.py` run, with
# more steps, ends).

# %%
from transformer_jax.tasks.language_model import comparison_table

test = metrics["test"][-1]
print(
    f"test: {manifest['test']['documents']} documents, perplexity {test['perplexity']:.2f}, "
    f"next-token accuracy {100 * test['accuracy']:.1f}%"
)
print(comparison_table(test))
margin = test["bits_per_byte"] - test["lzma_bits_per_byte"]
print(f"the model is {abs(margin):.3f} bits per byte {'below' if margin < 0 else 'above'} lzma")

# %% [markdown]
# ## 5. Inside the trained model
#
# `Generator.from_checkpoint(workdir)` loads what the run saved: its config, its tokenizer and
# the parameters of the last checkpoint. Its `model` is the `DecoderOnly` that was trained; this
# section and the next call it directly, on rows built by the library's own packing
# (`transformer_jax.data.lm.rows`), the way training batches are built: each document is
# `BOS tokens EOS`, the model reads `BOS tokens` and predicts `tokens EOS`. Every call uses a row
# of the full context length, so the model is compiled once.

# %%
from transformer_jax import Generator
from transformer_jax.data.lm import rows

generator = Generator.from_checkpoint(WORKDIR)
tokenizer, lm = generator.tokenizer, generator.model
print(
    f"checkpoint of step {generator.steps[-1]}: {tokenizer.vocab_size:,} tokens, "
    f"{count_params(lm.cfg):,} parameters"
)


def packed_row(texts: list[str]) -> dict[str, np.ndarray]:
    """The first training-style row `[1, max_len]` packing `texts` (inputs, targets, segment
    ids, positions, ...); a text longer than the row is cut as in training."""
    documents = rows.tokenize_documents(tokenizer, texts)
    chunks = rows.chunk_documents(documents, lm.cfg.max_len)
    return rows.PackedEpoch(documents, chunks, np.arange(len(chunks)), lm.cfg.max_len, 1)[0]


@nnx.jit
def forward(model, batch):
    """Log-probabilities `[1, T, V]` of the next token and the attention weights of each layer
    `[1, N, T, T]`, for a packed row."""
    logits, attention = model(
        batch["inputs"],
        segment_ids=batch["segment_ids"],
        positions=batch["positions"],
        return_attention=True,
    )
    return jax.nn.log_softmax(logits, axis=-1), attention


def piece(token: int) -> str:
    """A token as text: SentencePiece's word start shown as '_', a byte as its character."""
    text = tokenizer.id_to_piece(token)
    if text.startswith("<0x") and len(text) == 6 and int(text[3:5], 16) < 128:
        text = chr(int(text[3:5], 16))  # a byte token (or SentencePiece's byte fallback)
    return repr(text.replace("\u2581", "_"))


# %% [markdown]
# The beginnings of three validation documents packed in one row, as a training row holds
# documents: the trained model's attention weights (first layer, first head) next to the mask it
# was given. Every weight outside the mask is zero: no position looks ahead, no document looks
# into another.

# %%
short = [d[: lm.cfg.max_len // 4] for d in corpus.splits["eval"][:3]]  # first characters
row = packed_row(short)
used = int((row["segment_ids"] > 0).sum())  # real tokens; the rest of the row is padding
log_probs, attention = forward(lm, row)
allowed = combine_masks(
    causal_mask(lm.cfg.max_len), segment_mask(row["segment_ids"], row["segment_ids"])
)[0, 0]
weights = np.asarray(attention[0][0, 0])
print(f"documents of {[len(tokenizer.encode(d)) + 1 for d in short]} tokens (BOS included)")
print(f"largest attention weight on a masked key: {np.abs(weights[~np.asarray(allowed)]).max()}")
fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
view = slice(0, used + 4)
axes[0].imshow(np.asarray(allowed, float)[view, view], cmap="Blues", vmin=0, vmax=1)
axes[0].set_title("allowed: causal and same document")
axes[1].imshow(weights[view, view], cmap="Blues", vmin=0, vmax=weights.max())
axes[1].set_title("attention weights, layer 1, head 1")
for ax in axes:
    ax.set(xlabel="key position", ylabel="query position")
plt.tight_layout()
plt.show()

# %% [markdown]
# Zero weights are one thing; the property that matters is on the output: the predictions at a
# position must not change when a later token, or a token of another document, changes. Change
# one token in the middle of the second document and measure how far each position's
# log-probabilities move.

# %%
segment_ids = row["segment_ids"][0]
second = np.flatnonzero(segment_ids == 2)
where = int(second[len(second) // 2])  # a token in the middle of document 2
edited = {k: v.copy() for k, v in row.items()}
edited["inputs"][0, where] = 4 if row["inputs"][0, where] != 4 else 5  # another ordinary token
moved = np.asarray(jnp.abs(forward(lm, edited)[0] - log_probs).max(axis=-1))[0]  # [T]
groups = {
    "document 1": segment_ids == 1,
    f"document 2 before position {where}": (segment_ids == 2) & (np.arange(len(moved)) < where),
    f"document 2 from position {where}": (segment_ids == 2) & (np.arange(len(moved)) >= where),
    "document 3": segment_ids == 3,
    "padding": segment_ids == 0,
}
for name, positions in groups.items():
    print(f"{name:<30} largest change {moved[positions].max():.2e}")
assert moved[~groups[f"document 2 from position {where}"]].max() == 0
assert moved[groups[f"document 2 from position {where}"]].min() > 0

# %% [markdown]
# ## 6. Sampling: temperature, top-k, top-p
#
# The model gives a distribution over the next token; generating text means drawing from it
# again and again. Three knobs reshape it before each draw:
#
# - **temperature** $T$: $p_i \propto \exp(z_i / T)$. $T < 1$ sharpens the distribution (as
#   $T \to 0$, greedy decoding), $T > 1$ flattens it.
# - **top-k** (Fan et al., 2018; the GPT-2 paper samples this way): keep the $k$ most probable
#   tokens, renormalise.
# - **top-p**, nucleus sampling:
#
# > "The key intuition of Nucleus Sampling is that the vast majority of probability mass at each
# > time step is concentrated in the nucleus, a small subset of the vocabulary that tends to range
# > between one and a thousand candidates. Instead of relying on a fixed top-k, or using a
# > temperature parameter to control the shape of the distribution without sufficiently
# > suppressing the unreliable tail, we propose sampling from the top-p portion of the
# > probability mass, expanding and contracting the candidate pool dynamically."
# > (Holtzman et al., 2019, *The Curious Case of Neural Text Degeneration*)
#
# The nucleus $V^{(p)}$ is the smallest set of most probable tokens with
# $\sum_{x \in V^{(p)}} P(x \mid x_{1:i-1}) \ge p$ (their §3.1). `Generator` applies the
# temperature, then top-k, then top-p, with the library's `top_k_filter` and `top_p_filter`;
# here they are called directly on the distribution of the token that follows one prompt.

# %%
from transformer_jax.inference.search import top_k_filter, top_p_filter

prompt = "Return the number of"
prompt_row = packed_row([prompt])  # BOS + the prompt's tokens, as a document starts
prompt_log_probs = forward(lm, prompt_row)[0][0]  # [T, V]: every position of the row
prompt_end = len(tokenizer.encode(prompt))  # the position predicting the token after it
tokens = prompt_row["inputs"][0, 1 : prompt_end + 1]
print(f"prompt {prompt!r}: {len(tokens)} tokens: {' '.join(piece(t) for t in tokens)}")
TOP_K, TOP_P = 40, 0.9


@jax.jit
def reshaped(log_probs, temperature):
    """Probabilities at temperature T and the tokens top-k, top-p and both keep, each `[T, V]`
    (`Generator` samples from the last: temperature, then top-k, then top-p)."""
    scaled = log_probs / temperature
    probs = jax.nn.softmax(scaled, axis=-1)
    keep_k = jnp.isfinite(top_k_filter(scaled, TOP_K))
    keep_p = jnp.isfinite(top_p_filter(scaled, TOP_P))
    keep_both = jnp.isfinite(top_p_filter(top_k_filter(scaled, TOP_K), TOP_P))
    return probs, keep_k, keep_p, keep_both


print(
    f"{'T':>4} {'best token':>20} {'entropy':>12} {'2^H':>7} {'top-k ' + str(TOP_K):>9} "
    f"{'top-p ' + str(TOP_P):>10} {'both':>6}"
)
at = {}  # temperature -> probabilities of the next token
for temperature in (0.5, 0.8, 1.0, 1.5):
    probs, *kept = (np.asarray(x[prompt_end]) for x in reshaped(prompt_log_probs, temperature))
    at[temperature] = probs
    entropy = -(probs * np.log2(np.maximum(probs, 1e-30))).sum()
    best = int(probs.argmax())
    counts = "".join(f"{int(k.sum()):>{w}}" for k, w in zip(kept, (10, 11, 7), strict=True))
    print(
        f"{temperature:>4} {piece(best) + f' {probs[best]:.2f}':>20} {entropy:>7.2f} bits "
        f"{2**entropy:>7.1f}{counts}"
    )

# %% [markdown]
# The entropy $H$ (in bits) and $2^H$ (the number of equally likely tokens with the same
# entropy) grow with the temperature; top-k keeps the same number of candidates whatever the
# shape; the nucleus grows as the temperature flattens the distribution, and the two together
# (what `Generator` does when both are set) keep at most $k$. With SentencePiece, a lone `'_'` is
# a word start on its own: a space before a word the vocabulary spells in several pieces.
#
# Left, the twelve most probable next tokens at three temperatures. Right, the probability held
# by the $n$ most probable tokens against $n$: the nucleus is where a curve crosses $p$, top-k is
# the vertical line.

# %%
order = np.argsort(-at[1.0])
fig, (ax_bars, ax_mass) = plt.subplots(1, 2, figsize=(14, 4), width_ratios=(3, 2))
for offset, temperature in zip((-0.27, 0.0, 0.27), (0.5, 1.0, 1.5), strict=True):
    ax_bars.bar(np.arange(12) + offset, at[temperature][order[:12]], width=0.27,
                label=f"T = {temperature}")  # fmt: skip
ax_bars.set_xticks(range(12), [piece(int(t)) for t in order[:12]], rotation=45)
ax_bars.set(ylabel="probability", title=f"Next token after {prompt!r}")
ax_bars.legend()
ranks = np.arange(1, len(order) + 1)
for temperature, probs in at.items():
    ax_mass.plot(ranks, np.cumsum(np.sort(probs)[::-1]), label=f"T = {temperature}")
ax_mass.axhline(TOP_P, color="grey", ls="--", lw=1, label=f"top-p = {TOP_P}")
ax_mass.axvline(TOP_K, color="r", ls="--", lw=1, label=f"top-k = {TOP_K}")
ax_mass.set(xscale="log", xlabel="n most probable tokens", ylabel="their total probability")
ax_mass.set_title("Probability mass of the best n tokens")
ax_mass.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Holtzman et al.'s argument is that the right number of candidates changes from one position to
# the next. Run the model over a held-out document and count, at every position, the tokens the
# nucleus keeps ($T = 1$): few where the model is sure of the continuation, many where it is
# not. Where the nucleus is smaller than $k$, top-k would also sample tokens the model finds
# unlikely; where it is larger, top-k cuts tokens the model finds plausible.

# %%
document = corpus.splits["test"][0]
doc_row = packed_row([document])
length = int((doc_row["segment_ids"][0] == 1).sum())  # the document's first chunk
nucleus_all = reshaped(forward(lm, doc_row)[0][0], 1.0)[2]  # [T, V]
sizes = np.asarray(nucleus_all.sum(axis=-1))[:length]
quartiles = ", ".join(f"{q:.0f}" for q in np.percentile(sizes, [25, 50, 75]))
print(
    f"{length} positions of test document 0: the nucleus (p = {TOP_P}) holds {sizes.min()} to "
    f"{sizes.max()} tokens (quartiles {quartiles}); {np.mean(sizes < TOP_K):.0%} of the "
    f"positions keep fewer than top-k's {TOP_K}, {np.mean(sizes > TOP_K):.0%} more"
)
fig, ax = plt.subplots(figsize=(12, 3.2))
ax.plot(sizes, ".-", lw=0.6)
ax.axhline(TOP_K, color="r", ls="--", lw=1, label=f"top-k = {TOP_K}")
ax.set(xlabel="position in the document", ylabel="tokens in the nucleus", yscale="log")
ax.set_title(f"Nucleus size along test document 0 ({document[:40]!r}...)")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 7. Generating with `Generator`
#
# `Generator` is also what `python -m transformer_jax generate --workdir=...` uses. Prompts of
# different lengths go in one batch, left-padded; each prompt is fed through the KV cache in one
# pass, then one token per step in one compiled loop; a row stops at the end-of-document token.
# An empty prompt starts a document from nothing. The same prompts under four settings, with the
# same seed:

# %%
prompts = ["Return the number of", "class Path", ""]
settings = {
    "greedy (temperature 0)": dict(temperature=0),
    f"temperature {config.sample_temperature}, top-p {config.sample_top_p} (the config's)": dict(
        temperature=config.sample_temperature, top_p=config.sample_top_p
    ),
    "temperature 1.0, top-k 40": dict(temperature=1.0, top_k=40),
    "temperature 1.5, nothing cut": dict(temperature=1.5),
}
new_tokens = choose(full=48, fast=16)
for name, kwargs in settings.items():
    started = time.time()
    texts = generator.generate(prompts, max_new_tokens=new_tokens, seed=0, **kwargs)
    print(f"--- {name} ({time.time() - started:.1f} s)")
    for prompt_text, text in zip(prompts, texts, strict=True):
        print(f"{prompt_text!r} -> {text!r}")

# %% [markdown]
# What to look for: greedy decoding picks the single most likely continuation and easily falls
# into a loop of the same phrase; the moderate settings read most like documentation; at
# $T = 1.5$ with nothing cut, the unreliable tail of the distribution gets sampled and the text
# falls apart. In the fast mode all of them are noise: the toy has not learned words yet.
#
# `stream` yields the text piece by piece as it is produced, for printing as it comes; with the
# same settings its pieces join to what `generate([prompt])` returns:

# %%
stream_prompt = "The json module"
kwargs = dict(temperature=config.sample_temperature, top_p=config.sample_top_p, seed=1)
print(stream_prompt, end="", flush=True)
pieces = []
for text in generator.stream(stream_prompt, max_new_tokens=new_tokens, **kwargs):
    pieces.append(text)
    print(text, end="", flush=True)
print(f"\n\n{len(pieces)} pieces streamed")

# %% [markdown]
# ## What next
#
# - The whole run: `python train.py --config=configs/gpt_stdlib.py --workdir=runs/gpt` trains
#   for all of the config's 300 steps; the README gives the figures it reaches.
# - `--config.data.tokenizer=byte` trains the same model on bytes: perplexity is then per byte
#   and bits per byte is $\log_2$ of it; compare the curves with this run's on bits per byte, the
#   one measure they share.
# - Your own text: `--config.data.source=text --config.data.text_train=FILE_OR_FOLDER
#   --config.data.text_eval=FILE` (documents are blocks between blank lines).
# - `python -m transformer_jax generate --workdir=runs/gpt --prompt="Return the number of"`
#   streams a continuation from the command line.
