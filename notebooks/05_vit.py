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
# # 5. The Vision Transformer: a digit read as a sequence of patches
#
# [![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-jax/transformer_jax/blob/main/notebooks/05_vit.ipynb)
#
# > "Inspired by the Transformer scaling successes in NLP, we experiment with applying a standard
# > Transformer directly to images, with the fewest possible modifications. To do so, we split an
# > image into patches and provide the sequence of linear embeddings of these patches as an input
# > to a Transformer. Image patches are treated the same way as tokens (words) in an NLP
# > application." (Dosovitskiy et al., 2020, *An Image is Worth 16x16 Words*, §1)
#
# This notebook follows that recipe on scikit-learn's 8x8 handwritten digits with the library's
# own `VisionTransformer`, trained exactly as `train.py` trains it. Nothing is re-implemented:
# every step calls `transformer_jax` and checks it against a computation you can follow.
#
# 1. A digit cut into 2x2 patches, drawn, and flattened into a sequence (`patchify`).
# 2. Eq. 1: the patch projection computed two ways (reshape-and-project, strided convolution),
#    the `[CLS]` token and the position embeddings, checked against the model's own input.
# 3. Training `configs/vit_digits.py` through `train_and_evaluate`, with its curves.
# 4. Test accuracy and macro-F1 beside an RBF SVC and logistic regression on the same split,
#    and the confusion matrix.
# 5. The trained `ImageClassifier` on test digits, the `[CLS]` token's attention over the
#    patches in every layer, and attention rollout drawn over the digit.
# 6. What the learned position embeddings became (the paper's Figure 7).
#
# The full run trains for a few minutes on a 2-core CPU (Colab: Runtime > Run all). With
# `TRANSFORMER_JAX_FAST=1` (what CI runs) it trains for twenty steps only: every cell still
# runs, but the model is then barely better than chance and its figures show the pipeline, not a
# trained ViT.

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
# ## The digits and the run's config
#
# The run is the repository's ViT main job, `configs/vit_digits.py`: the same `get_config()` that
# `python train.py --config=configs/vit_digits.py` reads. Its data section picks scikit-learn's
# 1,797 digits, split by class into training, validation and test images with a fixed seed; the
# library's loader gives the same split here as in training.

# %%
import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from flax import nnx
from IPython.display import Image, Markdown, display

from configs import vit_digits
from transformer_jax import ImageClassifier, models
from transformer_jax.data.images.pipeline import load_image_dataset
from transformer_jax.nn.patches import embed_patches_conv, embed_patches_dense, patchify, sincos_2d
from transformer_jax.notebook import choose, fast_mode

config = vit_digits.get_config()
# The fast mode's few steps cannot train a model anyway; 1 layer compiles faster than 4.
config.model.num_layers = choose(full=config.model.num_layers, fast=1)
digits = load_image_dataset(config.data)
names = digits.label_names
for split, images in digits.splits.items():
    print(f"{split:>5}: {len(images):4d} images of shape {images.image_shape}")
print(f"model preset: {dict(config.model)}")

# %% [markdown]
# ## 1. An image is a sequence of patches (§3.1)
#
# > "The standard Transformer receives as input a 1D sequence of token embeddings. To handle 2D
# > images, we reshape the image $\mathbf{x} \in \mathbb{R}^{H \times W \times C}$ into a sequence
# > of flattened 2D patches $\mathbf{x}_p \in \mathbb{R}^{N \times (P^2 \cdot C)}$, where $(H, W)$
# > is the resolution of the original image, $C$ is the number of channels, $(P, P)$ is the
# > resolution of each image patch, and $N = HW/P^2$ is the resulting number of patches, which
# > also serves as the effective input sequence length for the Transformer."
#
# ViT-B/16 cuts a 224x224 RGB image into 16x16 patches: $N = 196$ patches of $16 \cdot 16 \cdot 3
# = 768$ values. A digit here is 8x8 grayscale and the `cpu` preset's patch is 2x2, so the grid
# is 4x4: $N = 16$ patches of 4 values. The patches are numbered row by row.

# %%
P = config.model.patch_size
digit, digit_label = digits.splits["test"].images[0], int(digits.splits["test"].labels[0])
height, width, channels = digit.shape
rows, cols = height // P, width // P

fig, ax = plt.subplots(figsize=(4, 4))
ax.imshow(digit[..., 0], cmap="gray", vmin=0, vmax=1)
for line in np.arange(P, height, P) - 0.5:
    ax.axhline(line, color="tab:orange", lw=2)
for line in np.arange(P, width, P) - 0.5:
    ax.axvline(line, color="tab:orange", lw=2)
for n in range(rows * cols):
    r, c = divmod(n, cols)
    ax.text(
        c * P + P / 2 - 0.5,
        r * P + P / 2 - 0.5,
        str(n),
        color="tab:orange",
        fontsize=12,
        ha="center",
        va="center",
        fontweight="bold",
    )
ax.set(
    xticks=[], yticks=[], title=f"a test digit ({digit_label}): {rows}x{cols} patches of {P}x{P}"
)
plt.show()

# %% [markdown]
# `patchify` does the reshape: `[B, H, W, C]` becomes `[B, N, P*P*C]`, patch $n$ being grid cell
# `(n // cols, n % cols)`. Laid out in a row, the sequence the Transformer reads is this:

# %%
sequence = patchify(jnp.asarray(digit)[None], P)  # [1, N, P*P*C]
print(
    f"image {digit.shape} -> sequence {sequence.shape}: {sequence.shape[1]} patches of "
    f"{sequence.shape[2]} values"
)

fig, axes = plt.subplots(1, rows * cols, figsize=(rows * cols * 0.75, 1.2))
for n, ax in enumerate(axes):
    ax.imshow(np.asarray(sequence[0, n]).reshape(P, P), cmap="gray", vmin=0, vmax=1)
    ax.set(xticks=[], yticks=[], title=str(n))
plt.show()
print("patch 5 flattened (row, column, channel order):", np.asarray(sequence[0, 5]).round(3))

# %% [markdown]
# ## 2. The patch embedding, eq. 1
#
# > "The Transformer uses constant latent vector size $D$ through all of its layers, so we flatten
# > the patches and map to $D$ dimensions with a trainable linear projection (Eq. 1). We refer to
# > the output of this projection as the patch embeddings."
#
# $$\mathbf{z}_0 = [\mathbf{x}_\text{class};\, \mathbf{x}^1_p\mathbf{E};\, \mathbf{x}^2_p\mathbf{E};
# \,\cdots;\, \mathbf{x}^N_p\mathbf{E}] + \mathbf{E}_{pos}, \qquad
# \mathbf{E} \in \mathbb{R}^{(P^2 \cdot C) \times D},\ \mathbf{E}_{pos} \in \mathbb{R}^{(N+1)
# \times D} \qquad (1)$$
#
# The library writes the projection as $x_n = W p_n + b$ (with a bias, as ViT's released code
# has) and holds $W$ as a `[P, P, C, D]` kernel. Flattening the patches and multiplying
# (`embed_patches_dense`) is the same linear map as a $P \times P$ convolution with stride $P$
# (`embed_patches_conv`, what the model runs): each output position of the convolution sees
# exactly one patch. With a random kernel of the model's width, both, and one patch by hand:

# %%
D = config.model.d_model
rng = np.random.default_rng(0)
kernel = jnp.asarray(rng.normal(size=(P, P, channels, D)) / P, jnp.float32)  # W as [P, P, C, D]
bias = jnp.asarray(rng.normal(size=D), jnp.float32)

dense = embed_patches_dense(jnp.asarray(digit)[None], kernel, bias)  # [1, N, D]
conv = embed_patches_conv(jnp.asarray(digit)[None], kernel, bias)
by_hand = sequence[0, 5] @ kernel.reshape(P * P * channels, D) + bias  # x_5 = W p_5 + b
print(f"dense {dense.shape}, conv {conv.shape}")
print(f"max |dense - conv|            = {float(jnp.abs(dense - conv).max()):.2e}")
print(f"max |dense[5] - W p_5 - b|    = {float(jnp.abs(dense[0, 5] - by_hand).max()):.2e}")

# %% [markdown]
# ### `[CLS]` and position embeddings
#
# > "Similar to BERT's [class] token, we prepend a learnable embedding to the sequence of embedded
# > patches ($\mathbf{z}^0_0 = \mathbf{x}_\text{class}$), whose state at the output of the
# > Transformer encoder ($\mathbf{z}^0_L$) serves as the image representation $\mathbf{y}$
# > (Eq. 4). [...] Position embeddings are added to the patch embeddings to retain positional
# > information. We use standard learnable 1D position embeddings, since we have not observed
# > significant performance gains from using more advanced 2D-aware position embeddings."
#
# Build the run's model (the `cpu` preset, sized by the data) and check eq. 1 against its own
# input: `model.embed` must equal `[CLS]` followed by the dense projection with the model's
# $W$ and $b$, plus $\mathbf{E}_{pos}$, one row per token.

# %%
model_cfg = models.build_config(
    config.model,
    {"num_classes": len(names), "image_height": height, "image_width": width, "channels": channels},
)
model = models.build_model(model_cfg, rngs=nnx.Rngs(config.seed))
num_params = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
print(
    f"{type(model).__name__}: {num_params:,} parameters, "
    f"{model_cfg.num_layers} layers, d_model {model_cfg.d_model}, {model_cfg.num_heads} heads"
)

z0 = model.embed(jnp.asarray(digit)[None])  # [1, 1 + N, D]
patches_e = embed_patches_dense(
    jnp.asarray(digit)[None], model.patch_kernel[...], model.patch_bias[...]
)
z0_by_hand = (
    jnp.concatenate([model.cls_token[...][None, None], patches_e], 1) + model.pos_embed[...]
)
print(f"z_0 {z0.shape}: [CLS] + {z0.shape[1] - 1} patches, D = {z0.shape[2]}")
print(f"max |model.embed - eq. 1 by hand| = {float(jnp.abs(z0 - z0_by_hand).max()):.2e}")

# %% [markdown]
# The classification head starts at zero, as in ViT: before training every logit is 0 whatever
# the image, so every class has probability 1/10.

# %%
head = np.abs(np.concatenate([model.head_kernel[...].ravel(), model.head_bias[...]]))
print(f"head {model.head_kernel.shape} + bias: largest |value| {head.max():g}")

# %% [markdown]
# ### What a position embedding says about the grid
#
# The learned $\mathbf{E}_{pos}$ starts as random numbers: nothing in it knows that patch 5 is
# next to patch 6. As the paper puts it, "the position embeddings at initialization time carry no
# information about the 2D positions of the patches and all spatial relations between the
# patches have to be learned from scratch" (§3.1). The alternative the library offers,
# `position_embedding="sincos2d"`, is fixed: `sincos_2d` gives a quarter of the features to sin
# and a quarter to cos of the column, the other half to the row, at the frequencies of the
# original Transformer's encoding.
#
# The paper's Figure 7 (centre) draws a table of position embeddings as tiles: "Tiles show the
# cosine similarity between the position embedding of the patch with the indicated row and column
# and the position embeddings of all other patches." The same picture for the fixed 2-D table and
# for the untrained learned one, with one number each: the mean similarity of grid neighbours
# (distance 1) against patches far apart (Manhattan distance 4 or more).


# %%
def cosine_similarity(table):
    """[N, D] position embeddings -> [N, N] cosine similarities."""
    table = np.asarray(table, np.float64)
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    return unit @ unit.T


cells = np.stack(np.divmod(np.arange(rows * cols), cols), axis=1)  # [N, 2]: (row, column)
grid_distance = np.abs(cells[:, None] - cells[None]).sum(-1)  # [N, N] Manhattan distance


def near_and_far(similarity):
    """(mean similarity of grid neighbours, of patches at Manhattan distance >= 4)."""
    return similarity[grid_distance == 1].mean(), similarity[grid_distance >= 4].mean()


def show_tiles(similarity, title):
    """Figure 7 (centre): tile (r, c) is patch (r, c)'s similarity to every patch; the colours
    span this table's own range."""
    fig, axes = plt.subplots(rows, cols, figsize=(3.6, 3.6))
    low = similarity.min()
    for n, ax in enumerate(axes.flat):
        shown = ax.imshow(similarity[n].reshape(rows, cols), cmap="viridis", vmin=low, vmax=1)
        ax.set(xticks=[], yticks=[])
    for r in range(rows):
        axes[r, 0].set_ylabel(str(r), rotation=0, labelpad=8)
    for c in range(cols):
        axes[-1, c].set_xlabel(str(c))
    fig.suptitle(title, fontsize=10)
    fig.colorbar(shown, ax=axes, shrink=0.8, label="cosine similarity")
    plt.show()
    near, far = near_and_far(similarity)
    print(f"{title}: neighbours {near:+.3f}, far apart {far:+.3f}")


show_tiles(cosine_similarity(sincos_2d(rows, cols, D)), "fixed 2-D sin-cos")
show_tiles(cosine_similarity(model.pos_embed[...][1:]), "learned, untrained")

# %% [markdown]
# ## 3. Training, as `train.py` does it
#
# The same call `python train.py --config=configs/vit_digits.py --workdir=...` makes:
# `train_and_evaluate(config, workdir)`. The config file's values stay, except for a denser
# validation curve (and, in the fast mode, twenty steps). The workdir's name carries the
# mode, because the loop refuses a workdir written with another model config, and re-running
# this cell resumes from the last checkpoint instead of starting again. The run logs a line per
# `log_every` steps, validates every `eval_every` steps, and at the end scores the test split
# (with the mean of the last checkpoints' parameters, as the config says) beside the two pixel
# baselines.

# %%
from transformer_jax.training.loop import train_and_evaluate

config.num_train_steps = choose(full=config.num_train_steps, fast=20)
config.warmup_steps = choose(full=config.warmup_steps, fast=10)
config.log_every = choose(full=config.log_every, fast=5)
config.eval_every = choose(full=250, fast=20)
config.checkpoint_every = choose(full=config.checkpoint_every, fast=10)
# The test scores the mean of the last 20 checkpoints' parameters (fast: the last 2).
config.test_average_last = choose(full=config.test_average_last, fast=2)
workdir = f"runs/nb05_vit_{'fast' if fast_mode() else 'full'}"

started = time.time()
result = train_and_evaluate(config, workdir)
print(f"\n{config.num_train_steps} steps in {time.time() - started:.0f} s (workdir {workdir})")

# %% [markdown]
# Every logged line is in `metrics.jsonl`; `read_metrics` groups it by split. Left the
# label-smoothed loss, right the accuracy on training batches (shifted by up to a pixel) and on the
# validation digits.

# %%
from transformer_jax.runs import read_metrics

metrics = read_metrics(workdir)
train_rows, eval_rows = metrics["train"], metrics["eval"]
fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 3.6))
ax_loss.plot([r["step"] for r in train_rows], [r["loss"] for r in train_rows], label="train")
ax_loss.plot(
    [r["step"] for r in eval_rows], [r["loss"] for r in eval_rows], "o-", label="validation"
)
ax_loss.set(xlabel="step", ylabel="label-smoothed cross-entropy", title="loss")
ax_acc.plot(
    [r["step"] for r in train_rows], [r["accuracy"] for r in train_rows], label="train batches"
)
ax_acc.plot(
    [r["step"] for r in eval_rows], [r["accuracy"] for r in eval_rows], "o-", label="validation"
)
ax_acc.axhline(1 / len(names), color="gray", ls=":", label="chance")
ax_acc.set(xlabel="step", ylabel="accuracy", ylim=(0, 1.02), title="accuracy")
for ax in (ax_loss, ax_acc):
    ax.legend()
plt.tight_layout()
plt.show()
best = max(eval_rows, key=lambda r: r["accuracy"])
print(
    f"validation accuracy: {eval_rows[-1]['accuracy']:.2%} at the last step "
    f"({eval_rows[-1]['step']}), best {best['accuracy']:.2%} at step {best['step']}"
)

# %% [markdown]
# ## 4. Test accuracy beside the baselines
#
# A ViT has to learn from the data what a convolution or a kernel method is given by design. The
# paper says so of mid-sized data already:
#
# > "Transformers lack some of the inductive biases inherent to CNNs, such as translation
# > equivariance and locality, and therefore do not generalize well when trained on insufficient
# > amounts of data." (§1)
#
# With about 1,250 training digits the data here are tiny. At the end of training the loop fits
# two classifiers on the same training images' raw pixels and scores them on the same test
# digits: an SVC with an RBF kernel (scikit-learn's defaults: a strong prior that nearby pixel
# vectors share a class) and multinomial logistic regression (a linear classifier). Both sit in
# `result["test"]`.

# %%
test = result["test"]
scores = {
    f"ViT ({num_params:,} parameters, {config.num_train_steps} steps)": (
        test["accuracy"],
        test["macro_f1"],
    ),
    "SVC, RBF kernel, raw pixels": (test["svc_rbf_accuracy"], test["svc_rbf_macro_f1"]),
    "logistic regression, raw pixels": (
        test["logistic_regression_accuracy"],
        test["logistic_regression_macro_f1"],
    ),
}
table = [f"| {test['examples']:.0f} test digits | accuracy | macro-F1 |", "|---|---|---|"]
table += [f"| {name} | {acc:.2%} | {f1:.2%} |" for name, (acc, f1) in scores.items()]
display(Markdown("\n".join(table)))

errors = {name: round((1 - acc) * test["examples"]) for name, (acc, _) in scores.items()}
vit, svc, logistic = errors.values()
print(f"test errors: ViT {vit}, SVC {svc}, logistic regression {logistic}")
print(
    f"the ViT {'beats' if vit < svc else 'does not beat'} the RBF SVC and "
    f"{'beats' if vit < logistic else 'does not beat'} logistic regression"
)

# %% [markdown]
# The confusion matrix of the ViT's test predictions (rows the true digit, columns the predicted
# one), drawn by `transformer_jax.plotting.plot_confusion`, the function `evaluate` uses:

# %%
from transformer_jax.plotting import plot_confusion

confusion = np.asarray(test["confusion"])
png = plot_confusion(confusion, names, f"{workdir}/confusion_test.png", title=f"ViT, {workdir}")
display(Image(filename=str(png), width=420))
off_diagonal = confusion - np.diag(np.diag(confusion))
true, predicted = np.unravel_index(off_diagonal.argmax(), confusion.shape)
print(
    f"most frequent mistake: {names[true]} read as {names[predicted]} "
    f"({off_diagonal[true, predicted]} of {confusion[true].sum()} test {names[true]}s)"
)

# %% [markdown]
# ## 5. The trained classifier
#
# `ImageClassifier` is the inference side: it reads the workdir (model config, label names, the
# latest checkpoint) and takes images as arrays in $[0, 1]$, `uint8` arrays or files. Here, the
# first test digits:

# %%
classifier = ImageClassifier.from_checkpoint(workdir)
print(f"loaded step {classifier.steps[0]} of {workdir}; images of shape {classifier.image_shape}")
shown = choose(full=12, fast=6)
test_split = digits.splits["test"]
predictions = classifier.predict(test_split.images[:shown])

fig, axes = plt.subplots(1, shown, figsize=(1.3 * shown, 1.8))
first = zip(test_split.images[:shown], test_split.labels[:shown], predictions, strict=True)
for ax, (image, label, prediction) in zip(axes, first, strict=True):
    ax.imshow(image[..., 0], cmap="gray", vmin=0, vmax=1)
    ok = prediction.label == names[label]
    color = "tab:green" if ok else "tab:red"
    p = prediction.probabilities[prediction.label]
    ax.set_title(f"{prediction.label} ({p:.2f})", color=color, fontsize=9)
    ax.set(xticks=[], yticks=[], xlabel=f"true {names[label]}")
plt.show()
right = sum(
    p.label == names[y] for p, y in zip(predictions, test_split.labels[:shown], strict=True)
)
print(f"{right} of {shown} right")

# %% [markdown]
# ### Where `[CLS]` looks
#
# `[CLS]` gathers the image into one vector by attending to the patches; row 0 of each layer's
# attention matrix says how much of each patch it takes, per head. One layer alone is not the
# whole story, since every patch token has mixed with the others in the layers below. The paper
# (Appendix D.8) follows Abnar & Zuidema (2020):
#
# > "we used Attention Rollout [...]. Briefly, we averaged attention weights of ViT-L/16 across
# > all heads and then recursively multiplied the weight matrices of all layers. This accounts for
# > the mixing of attention across tokens through all layers."
#
# `classifier.attention(image)` returns both: `per_head[layer, head]` is the `[CLS]` row over the
# patch grid, and `rollout` the product through the layers (with the residual counted as
# $0.5A + 0.5I$). For the digit of section 1, each layer's heads averaged and the rollout, as heat
# maps over the patch grid (bright: attended) with the digit's strokes outlined:

# %%
prediction, maps = classifier.attention(digit)
layers, heads = maps.per_head.shape[:2]
print(
    f"prediction {prediction.label} (p = {prediction.probabilities[prediction.label]:.2f}), "
    f"true {names[digit_label]}; per_head {maps.per_head.shape}, rollout {maps.rollout.shape}"
)


def draw_attention(ax, image, attention, title):
    """A [rows, cols] map over the patches (bright = more), the digit's strokes outlined."""
    extent = (-0.5, width - 0.5, height - 0.5, -0.5)  # each patch's value over its P x P pixels
    ax.imshow(attention, cmap="inferno", vmin=0, extent=extent)
    ax.contour(image[..., 0], levels=[0.4], colors="cyan", linewidths=1.2)
    ax.set(xticks=[], yticks=[])
    ax.set_title(title, fontsize=9)


fig, axes = plt.subplots(1, layers + 2, figsize=(2.1 * (layers + 2), 2.5))
axes[0].imshow(digit[..., 0], cmap="gray", vmin=0, vmax=1)
axes[0].set(xticks=[], yticks=[], title="image")
for layer in range(layers):
    draw_attention(axes[layer + 1], digit, maps.per_head[layer].mean(0), f"layer {layer}")
draw_attention(axes[-1], digit, maps.rollout, "rollout")
plt.show()

# %% [markdown]
# Each head separately (rows layers, columns heads): heads of the same layer may look at different
# strokes.

# %%
fig, axes = plt.subplots(layers, heads, figsize=(1.8 * heads, 1.8 * layers), squeeze=False)
for (layer, head), ax in np.ndenumerate(axes):
    draw_attention(ax, digit, maps.per_head[layer, head], f"layer {layer} head {head}")
plt.tight_layout()
plt.show()

# %% [markdown]
# Do the maps follow the strokes? A number to go with the pictures, over the test digits: the
# share of each layer's `[CLS]` attention to the patches (heads averaged), and of the rollout,
# that falls on patches holding ink (mean pixel above 0.1), against the share such patches have
# of the grid. Attention that prefers the strokes puts more than that share there; attention
# blind to them puts about that share.

# %%
count = choose(full=len(test_split), fast=24)
layer_on_ink, rollout_on_ink, ink_share = [], [], []
for image in test_split.images[:count]:
    inked = np.asarray(patchify(jnp.asarray(image)[None], P))[0].mean(-1) > 0.1  # [N]
    image_maps = classifier.attention(image)[1]
    to_patches = image_maps.per_head.mean(1).reshape(layers, -1)  # [L, N], heads averaged
    layer_on_ink.append(to_patches[:, inked].sum(1) / to_patches.sum(1))
    rollout_on_ink.append(image_maps.rollout.reshape(-1)[inked].sum())
    ink_share.append(inked.mean())
print(f"{count} test digits; inked patches are {np.mean(ink_share):.1%} of the grid")
for layer, share in enumerate(np.mean(layer_on_ink, axis=0)):
    print(f"  layer {layer}: {share:.1%} of [CLS]'s attention to patches lands on ink")
print(f"  rollout: {np.mean(rollout_on_ink):.1%}")

# %% [markdown]
# The rollout of more test digits:

# %%
drawn = choose(full=8, fast=4)
fig, axes = plt.subplots(2, drawn, figsize=(1.6 * drawn, 3.4))
for i in range(drawn):
    image = test_split.images[i + 1]
    guess, image_maps = classifier.attention(image)
    axes[0, i].imshow(image[..., 0], cmap="gray", vmin=0, vmax=1)
    axes[0, i].set_title(f"read {guess.label}", fontsize=9)
    axes[0, i].set(xticks=[], yticks=[])
    draw_attention(axes[1, i], image, image_maps.rollout, "rollout")
plt.show()

# %% [markdown]
# ## 6. What the position embeddings learned (Figure 7)
#
# > "We see that the model learns to encode distance within the image in the similarity of
# > position embeddings, i.e. closer patches tend to have more similar position embeddings.
# > Further, the row-column structure appears; patches in the same row/column have similar
# > embeddings." (§4.5)
#
# The trained $\mathbf{E}_{pos}$ (without the `[CLS]` row), drawn as in section 2. If the model
# learned the grid, neighbours come out more similar than patches far apart, where the untrained
# table showed no such difference; the printed difference says how far it got (the fast mode's
# twenty steps are not the paper's long pre-training).

# %%
learned = cosine_similarity(classifier.model.pos_embed[...][1:])
show_tiles(learned, f"learned, after {classifier.steps[0]} steps")
near, far = near_and_far(learned)
near0, far0 = near_and_far(cosine_similarity(model.pos_embed[...][1:]))
print(f"neighbours minus far apart: {near - far:+.3f} trained, {near0 - far0:+.3f} untrained")

# %% [markdown]
# ## Try next
#
# Each is one line on the config before `train_and_evaluate` (use a new workdir):
#
# - `config.model.position_embedding = "sincos2d"`: the fixed table of section 2 instead of a
#   learned one, or `"none"`, and the model can no longer tell where a patch is.
# - `config.model.pool = "gap"`: classify the mean of the patch outputs instead of `[CLS]`.
# - `config.model.patch_size = 4`: four patches of 16 values, or `1`: 64 one-pixel patches.
# - `config.data.random_shift = 0`: no augmentation; compare the gap between the training and
#   validation curves.
#
# The command-line tools read the same workdir: `python -m transformer_jax evaluate
# --workdir=runs/nb05_vit_full --split=test` and `python -m transformer_jax classify-image
# --workdir=runs/nb05_vit_full --test_images=3 --attention_dir=attention`.
