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
# # 1. Attention from the paper
#
# [![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-jax/transformer_jax/blob/main/notebooks/01_attention.ipynb)
#
# > "An attention function can be described as mapping a query and a set of key-value pairs to an
# > output, where the query, keys, values, and output are all vectors. The output is computed as a
# > weighted sum of the values, where the weight assigned to each value is computed by a
# > compatibility function of the query with the corresponding key."
# > (Vaswani et al., 2017, *Attention Is All You Need*, §3.2)
#
# This notebook follows §3.2 and §3.5 of the paper from a query, a key and a value to multi-head
# attention, with the functions `transformer_jax` itself trains with: nothing here re-implements the
# library, every step calls it and checks it against a computation you can follow by hand.
#
# 1. Scaled dot-product attention on a two-word toy example, by hand and by the library.
# 2. Why the logits are divided by $\sqrt{d_k}$: the variance of $q \cdot k$ and the softmax's
#    saturation, measured.
# 3. Multi-head attention: the shapes of the split, the heads and the concatenation.
# 4. Padding and causal masks, drawn.
# 5. The sinusoidal positional encoding and its rotation property, checked numerically.
# 6. Self-attention against a recurrent layer (Table 1): cost per layer and sequential steps, timed.
#
# It runs on a CPU in a few minutes (Colab: Runtime > Run all).

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
# ## 1. Scaled dot-product attention (§3.2.1)
#
# > "We call our particular attention 'Scaled Dot-Product Attention'. The input consists of
# > queries and keys of dimension $d_k$, and values of dimension $d_v$. We compute the dot products
# > of the query with all keys, divide each by $\sqrt{d_k}$, and apply a softmax function to obtain
# > the weights on the values."
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\left(\frac{QK^T}{\sqrt{d_k}}\right)V \qquad (1)$$
#
# Take a two-word input, *Thinking Machines*, with 4-dimensional embeddings, and projections
# $W^Q, W^K, W^V$ to $d_k = d_v = 3$. Small integers keep every number readable.

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

words = ["Thinking", "Machines"]
x = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 2.0]])  # [T=2, d_model=4]
w_q = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=float)  # [4, d_k=3]
w_k = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=float)
w_v = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=float)

q, k, v = x @ w_q, x @ w_k, x @ w_v
print("queries\n", q, "\nkeys\n", k, "\nvalues\n", v)

# %% [markdown]
# By hand, for the query of *Thinking*: one score per key, divided by $\sqrt{d_k}$, a softmax, and
# the weighted sum of the values.

# %%
d_k = q.shape[-1]
scores = np.array([q[0] @ k[0], q[0] @ k[1]])
scaled = scores / np.sqrt(d_k)
weights_by_hand = np.exp(scaled) / np.exp(scaled).sum()
output_by_hand = weights_by_hand @ v
print(f"scores q1.k1 = {scores[0]:.0f}, q1.k2 = {scores[1]:.0f}")
print(f"divided by sqrt(d_k) = {np.sqrt(d_k):.3f}: {scaled.round(3)}")
print(f"softmax: {weights_by_hand.round(4)}  (sum {weights_by_hand.sum():.1f})")
print(f"output for '{words[0]}': {output_by_hand.round(4)}")

# %% [markdown]
# The library computes all queries, all heads and all batch rows at once. Its arrays are laid out
# `[batch, length, heads, head_dim]` (letters B, T, N, H in its einsum strings), so the toy example
# becomes one batch row with one head.

# %%
from transformer_jax import dot_product_attention

as_library = lambda a: jnp.asarray(a, jnp.float32)[None, :, None, :]  # [T, H] -> [1, T, 1, H]
out, weights = dot_product_attention(
    as_library(q), as_library(k), as_library(v), return_weights=True
)
print("library weights [B, N, T, S]:\n", np.asarray(weights[0, 0]).round(4))
print("library output for the first word:", np.asarray(out[0, 0, 0]).round(4))
difference = np.max(np.abs(np.asarray(out[0, 0, 0]) - output_by_hand))
print(f"largest difference from the hand computation: {difference:.2e}")
np.testing.assert_allclose(np.asarray(out[0, 0, 0]), output_by_hand, rtol=1e-5)

# %% [markdown]
# ## 2. Why divide by $\sqrt{d_k}$?
#
# > "We suspect that for large values of $d_k$, the dot products grow large in magnitude, pushing
# > the softmax function into regions where it has extremely small gradients. To illustrate why the
# > dot products get large, assume that the components of $q$ and $k$ are independent random
# > variables with mean 0 and variance 1. Then their dot product, $q \cdot k = \sum_{i=1}^{d_k}
# > q_i k_i$, has mean 0 and variance $d_k$." (§3.2.1 and its footnote 4)
#
# Measure it: draw such queries and keys, and look at the variance of $q \cdot k$ with and without
# the scaling, then at what the softmax over 64 keys does with those logits: the largest weight
# (1 means all attention on one key: saturated) and the size of the softmax's gradient.

# %%
from transformer_jax.notebook import choose


def softmax_jacobian_norm(logits):
    """Mean Frobenius norm of d softmax / d logits over rows: how much gradient flows back."""
    p = jax.nn.softmax(logits, axis=-1)
    jac = jax.vmap(lambda row: jnp.diag(row) - jnp.outer(row, row))(p)
    return float(jnp.mean(jnp.sqrt(jnp.sum(jac**2, axis=(-2, -1)))))


rows, num_keys = choose(full=4096, fast=512), 64
depths = choose(full=[4, 16, 64, 256, 1024], fast=[4, 1024])
table = []
for depth in depths:
    kq, kk = jax.random.split(jax.random.key(depth))
    queries = jax.random.normal(kq, (rows, depth))
    keys = jax.random.normal(kk, (rows, num_keys, depth))
    logits = jnp.einsum("rd,rsd->rs", queries, keys)
    for name, z in [("q.k", logits), ("q.k / sqrt(d_k)", logits / jnp.sqrt(depth))]:
        max_weight = float(jnp.mean(jnp.max(jax.nn.softmax(z, axis=-1), axis=-1)))
        table.append((depth, name, float(jnp.var(z)), max_weight, softmax_jacobian_norm(z)))

print(f"{'d_k':>5}  {'logits':<16} {'variance':>9} {'max weight':>11} {'|grad softmax|':>15}")
for depth, name, var, max_weight, grad in table:
    print(f"{depth:>5}  {name:<16} {var:>9.2f} {max_weight:>11.3f} {grad:>15.4f}")

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
for name, style in [("q.k", "o-"), ("q.k / sqrt(d_k)", "s--")]:
    rows_of = [r for r in table if r[1] == name]
    for ax, column in zip(axes, (2, 3, 4), strict=True):
        ax.plot(depths, [r[column] for r in rows_of], style, label=name)
for ax, title in zip(
    axes,
    ["variance of the logits", "largest softmax weight", "softmax gradient (Frobenius norm)"],
    strict=True,
):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("$d_k$")
    ax.set_title(title)
axes[0].set_yscale("log")
axes[0].legend()
plt.tight_layout()
plt.show()
unscaled = [r for r in table if r[1] == "q.k"]
print(
    f"Unscaled, from d_k={depths[0]} to d_k={depths[-1]} the largest weight goes from "
    f"{unscaled[0][3]:.2f} to {unscaled[-1][3]:.2f} and the gradient norm from "
    f"{unscaled[0][4]:.3f} to {unscaled[-1][4]:.4f}; scaled, the variance stays near 1."
)

# %% [markdown]
# Without the scaling, the variance of the logits grows like $d_k$, the softmax puts nearly all its
# weight on one key, and its Jacobian $\mathrm{diag}(p) - pp^T$ vanishes: almost no gradient reaches
# the queries and keys. Dividing by $\sqrt{d_k}$ keeps the variance at 1 whatever the depth.
#
# ## 3. Multi-head attention (§3.2.2)
#
# > "Instead of performing a single attention function with $d_{model}$-dimensional keys, values and
# > queries, we found it beneficial to linearly project the queries, keys and values $h$ times with
# > different, learned linear projections to $d_k$, $d_k$ and $d_v$ dimensions, respectively."
#
# $$\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)W^O,
# \quad \mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_i^K, VW_i^V)$$
#
# `transformer_jax.nn.MultiHeadAttention` stores the $h$ projections $W_i^Q$ together as one
# `[d_model, heads, head_dim]` kernel, so "split into heads" is an einsum, not a reshape. With the
# paper's $d_{model} = 512$ and $h = 8$, each head works in $d_k = 64$ dimensions:

# %%
from flax import nnx

from transformer_jax.nn import MultiHeadAttention

d_model, num_heads, batch, length = 512, 8, 2, 5
mha = MultiHeadAttention(d_model, num_heads, rngs=nnx.Rngs(0))
for name in ("query", "key", "value", "out"):
    print(
        f"W^{name[0].upper() if name != 'out' else 'O'} ({name}): {getattr(mha, name)[...].shape}"
    )
xs = jax.random.normal(jax.random.key(1), (batch, length, d_model))
print("input x:", xs.shape)

# %% [markdown]
# Each step with its shape, using the module's own weights and the library's attention function,
# then the module in one call: the two agree.

# %%
q_heads = jnp.einsum("BTD,DNH->BTNH", xs, mha.query[...]) + mha.query_bias[...]
k_heads = jnp.einsum("BTD,DNH->BTNH", xs, mha.key[...])  # Keys have no bias: see the docstring.
v_heads = jnp.einsum("BTD,DNH->BTNH", xs, mha.value[...]) + mha.value_bias[...]
heads, head_weights = dot_product_attention(q_heads, k_heads, v_heads, return_weights=True)
concat = heads.reshape(batch, length, num_heads * (d_model // num_heads))
by_steps = concat @ mha.out[...].reshape(d_model, d_model) + mha.out_bias[...]
for name, a in [
    ("Q per head", q_heads),
    ("attention weights", head_weights),
    ("head outputs", heads),
    ("Concat(heads)", concat),
    ("times W^O", by_steps),
]:
    print(f"{name:<18} {str(a.shape):<18}")
by_module, _ = mha(xs, xs)
print(f"module vs steps: max difference {float(jnp.max(jnp.abs(by_module - by_steps))):.2e}")
params = sum(p.size for p in jax.tree.leaves(nnx.state(mha, nnx.Param)))
print(
    f"parameters: {params:,} = 4 * d_model^2 + biases "
    f"({4 * d_model**2:,} + {params - 4 * d_model**2:,})"
)

# %% [markdown]
# > "Due to the reduced dimension of each head, the total computational cost is similar to that of
# > single-head attention with full dimensionality."
#
# ## 4. Masks: padding and causal
#
# Masks in `transformer_jax` are boolean, True where a query may attend to a key, and broadcast to
# `[B, N, T, S]`. A padding mask hides the pad tokens (id 0) of shorter rows; the decoder's causal
# mask keeps position $t$ from seeing positions after $t$:
#
# > "We need to prevent leftward information flow in the decoder to preserve the auto-regressive
# > property. We implement this inside of scaled dot-product attention by masking out (setting to
# > $-\infty$) all values in the input of the softmax which correspond to illegal connections."
# > (§3.2.3)

# %%
from transformer_jax import causal_mask, combine_masks, padding_mask

tokens = jnp.array([[5, 8, 13, 21, 34, 55], [7, 9, 11, 0, 0, 0]])  # row 2: 3 tokens, 3 pads
masks = {
    "padding (row 2)": padding_mask(tokens)[1, 0],
    "causal": causal_mask(tokens.shape[1])[0, 0],
    "padding & causal (row 2)": combine_masks(padding_mask(tokens), causal_mask(6))[1, 0],
}
fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
for ax, (title, mask) in zip(axes, masks.items(), strict=True):
    ax.imshow(np.broadcast_to(np.asarray(mask), (6, 6)), cmap="Greens", vmin=0, vmax=1)
    ax.set_title(title)
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
plt.tight_layout()
plt.show()

# %% [markdown]
# The masked logits get the most negative float32 before the softmax, so their weights are exactly
# zero, and every row still sums to one:

# %%
rng_q, rng_k = jax.random.split(jax.random.key(2))
qs = jax.random.normal(rng_q, (2, 6, 1, 8))
ks = jax.random.normal(rng_k, (2, 6, 1, 8))
mask = combine_masks(padding_mask(tokens), causal_mask(6))
_, w = dot_product_attention(qs, ks, ks, mask, return_weights=True)
print("weights of row 2 (queries down, keys across):\n", np.asarray(w[1, 0]).round(3))
print("weight on masked keys:", float(jnp.max(jnp.where(mask, 0.0, w))))
print("row sums:", np.asarray(w[1, 0].sum(-1)).round(6))

# %% [markdown]
# ## 5. Positional encoding (§3.5)
#
# > "Since our model contains no recurrence and no convolution, in order for the model to make use
# > of the order of the sequence, we must inject some information about the relative or absolute
# > position of the tokens in the sequence."
#
# $$PE_{(pos, 2i)} = \sin(pos / 10000^{2i/d_{model}}), \qquad
# PE_{(pos, 2i+1)} = \cos(pos / 10000^{2i/d_{model}})$$

# %%
from transformer_jax import sinusoidal_encoding

pe = np.asarray(sinusoidal_encoding(100, 128))  # [positions, d_model]
plt.figure(figsize=(10, 3.6))
plt.imshow(pe.T, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
plt.xlabel("position")
plt.ylabel("feature (sin at even, cos at odd)")
plt.colorbar()
plt.title("sinusoidal_encoding(100, 128)")
plt.show()

# %% [markdown]
# > "We chose this function because we hypothesized it would allow the model to easily learn to
# > attend by relative positions, since for any fixed offset $k$, $PE_{pos+k}$ can be represented
# > as a linear function of $PE_{pos}$."
#
# The linear function is a rotation: each (sin, cos) pair at frequency $\omega_i$ turns by the
# angle $k\omega_i$, whatever $pos$. Build that block-diagonal rotation $R_k$ and check
# $PE_{pos+k} = R_k PE_{pos}$ for every position; the dot product $PE_{pos} \cdot PE_{pos+k}$
# depends on $k$ only.

# %%
d = 128
omega = 10000.0 ** (-np.arange(0, d, 2) / d)  # one frequency per (sin, cos) pair


def rotation(offset: int) -> np.ndarray:
    """R_k: [d, d], block-diagonal 2x2 rotations by offset * omega_i."""
    r = np.zeros((d, d))
    for i, w in enumerate(omega):
        c, s = np.cos(offset * w), np.sin(offset * w)
        # [sin(a + b), cos(a + b)] = [[cos b, sin b], [-sin b, cos b]] @ [sin a, cos a]
        r[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]
    return r


pe = np.asarray(sinusoidal_encoding(200, d), dtype=np.float64)
for offset in (1, 7, 50):
    predicted = pe[:-offset] @ rotation(offset).T  # R_k PE_pos for every pos at once
    error = np.max(np.abs(predicted - pe[offset:]))
    dots = np.einsum("pd,pd->p", pe[:-offset], pe[offset:])
    print(
        f"k={offset:>2}: max |R_k PE_pos - PE_pos+k| = {error:.1e} "
        f"over {len(predicted)} positions; "
        f"PE_pos . PE_pos+k = {dots.mean():.4f} +- {dots.std():.1e}"
    )

# %% [markdown]
# (The errors are float32 rounding of the library's encoding.)
#
# ## 6. Why self-attention: Table 1, measured
#
# | layer type | complexity per layer | sequential operations | maximum path length |
# |---|---|---|---|
# | self-attention | $O(n^2 \cdot d)$ | $O(1)$ | $O(1)$ |
# | recurrent | $O(n \cdot d^2)$ | $O(n)$ | $O(n)$ |
#
# > "In terms of computational complexity, self-attention layers are faster than recurrent layers
# > when the sequence length $n$ is smaller than the representation dimensionality $d$." (§4)
#
# Table 1 counts the work of the layer itself; the projections $W^Q, W^K, W^V$ that self-attention
# adds cost $O(n d^2)$ like a recurrent layer's. So time the attention of eq. (1) with $h = 8$
# heads, $Q = K = V$ = the input, against a plain recurrent layer
# $h_t = \tanh(W h_{t-1} + U x_t)$ written with `jax.lax.scan`, which must take its $n$ steps one
# after the other. Per batch row, attention does about $4n^2d$ floating-point operations (the
# $QK^T$ and weights-times-$V$ products), the recurrent layer $4nd^2$: by the count, attention is
# cheaper exactly when $n < d$. Both are jit-compiled; times are medians of several calls after
# compilation, and the GFLOP/s columns show how well each uses the machine.

# %%
import time


def median_time(fn, *args, repeats: int) -> float:
    """Median wall time of fn(*args) in seconds, after one call that compiles it."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


@jax.jit
def self_attention(x):  # x: [B, n, d] -> [B, n, d], 8 heads, Q = K = V = x
    heads = x.reshape(*x.shape[:2], 8, x.shape[-1] // 8)
    return dot_product_attention(heads, heads, heads).reshape(x.shape)


def recurrent_layer(depth: int):
    w, u = (jax.random.normal(jax.random.key(i), (depth, depth)) / np.sqrt(depth) for i in (0, 1))

    def run(x):  # x: [B, n, d] -> [B, n, d], one step per position
        step = lambda h, x_t: (jnp.tanh(h @ w + x_t @ u),) * 2
        _, hs = jax.lax.scan(step, jnp.zeros((x.shape[0], depth)), jnp.swapaxes(x, 0, 1))
        return jnp.swapaxes(hs, 0, 1)

    return jax.jit(run)


def measure(batch: int, n: int, depth: int, repeats: int) -> dict:
    x_in = jax.random.normal(jax.random.key(3), (batch, n, depth))
    t_att = median_time(self_attention, x_in, repeats=repeats)
    t_rnn = median_time(recurrent_layer(depth), x_in, repeats=repeats)
    flops_att, flops_rnn = 4 * batch * n * n * depth, 4 * batch * n * depth * depth
    return dict(
        n=n,
        d=depth,
        t_att=t_att,
        t_rnn=t_rnn,
        gflops_att=flops_att / t_att / 1e9,
        gflops_rnn=flops_rnn / t_rnn / 1e9,
    )


repeats, batch = choose(full=5, fast=2), 8
fixed_depth, fixed_length = 256, 256
lengths = choose(full=[16, 32, 64, 128, 256, 512, 1024, 2048], fast=[64, 256])
depths = choose(full=[64, 128, 256, 512, 1024], fast=[64, 256])
by_length = [measure(batch, n, fixed_depth, repeats) for n in lengths]
by_depth = [measure(batch, fixed_length, depth, repeats) for depth in depths]


def show(rows_):
    print(f"{'n':>6} {'d':>5} {'attention':>11} {'recurrent':>11} {'GFLOP/s att':>12} {'rnn':>6}")
    for r in rows_:
        print(
            f"{r['n']:>6} {r['d']:>5} {r['t_att'] * 1e3:>8.2f} ms {r['t_rnn'] * 1e3:>8.2f} ms "
            f"{r['gflops_att']:>12.1f} {r['gflops_rnn']:>6.1f}"
        )


print(f"growing n, d = {fixed_depth}, batch {batch}:")
show(by_length)
print(f"growing d, n = {fixed_length}, batch {batch}:")
show(by_depth)

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for ax, rows_, key, label in [
    (axes[0], by_length, "n", f"sequence length n (d = {fixed_depth})"),
    (axes[1], by_depth, "d", f"model dimension d (n = {fixed_length})"),
]:
    sizes = [r[key] for r in rows_]
    ax.loglog(sizes, [r["t_att"] * 1e3 for r in rows_], "o-", label="self-attention, eq. (1)")
    ax.loglog(sizes, [r["t_rnn"] * 1e3 for r in rows_], "s-", label="recurrent (lax.scan)")
    ax.axvline(fixed_depth if key == "n" else fixed_length, color="gray", ls=":", label="n = d")
    ax.set_xlabel(label)
    ax.set_ylabel("ms per layer call")
    ax.legend()
plt.tight_layout()
plt.show()


def growth(rows_, key, column):
    """Exponent of a power law through the two largest sizes: time ~ size^exponent."""
    a, b = rows_[-2], rows_[-1]
    return np.log(b[column] / a[column]) / np.log(b[key] / a[key])


print(
    f"growth at the largest lengths: attention ~ n^{growth(by_length, 'n', 't_att'):.2f}, "
    f"recurrent ~ n^{growth(by_length, 'n', 't_rnn'):.2f}"
)
print(
    f"growth at the largest widths: attention ~ d^{growth(by_depth, 'd', 't_att'):.2f}, "
    f"recurrent ~ d^{growth(by_depth, 'd', 't_rnn'):.2f}"
)
rows_all = by_length + by_depth
cheaper = [(r["n"], r["d"]) for r in rows_all if r["n"] < r["d"]]
faster = [(r["n"], r["d"]) for r in rows_all if r["t_att"] < r["t_rnn"]]
print(f"(n, d) where attention does fewer operations: {cheaper}")
print(f"(n, d) where attention ran faster here:        {faster}")
agree = sum((r["n"] < r["d"]) == (r["t_att"] < r["t_rnn"]) for r in rows_all)
print(f"the operation count predicted the faster layer in {agree} of {len(rows_all)} cases")
ratio = np.median([r["gflops_att"] / r["gflops_rnn"] for r in rows_all])
print(f"attention ran at {ratio:.2f}x the recurrent layer's GFLOP/s (median over all sizes)")

# %% [markdown]
# What to read in these numbers. The operation counts predict the slopes: attention's time grows
# faster than linearly in $n$ and slowly in $d$, the recurrent layer's the other way round, and the
# count predicts which layer wins at a given $(n, d)$ (printed above: how often it did here).
# The GFLOP/s columns show what the counts leave out. Attention's weights are an array of
# $B \cdot h \cdot n^2$ numbers that the softmax writes to memory and reads back, so at long
# sequences it is limited by memory, not arithmetic; fused kernels (flash attention) avoid storing
# it. The recurrent layer's cost is Table 1's *sequential operations* column: its $n$ steps each
# wait for the previous one. A 2-core CPU has little parallelism to waste, so that hardly shows
# here; a GPU or TPU, with thousands of parallel units, idles through each small step, while it
# runs attention's few large matrix products at full rate. Attention's quadratic growth is also
# why its advantage is stated for $n < d$, "which is most often the case with sentence
# representations used by state-of-the-art models" (§4).
#
# Next: [notebook 2](02_translator.ipynb) trains the whole encoder-decoder on a translation task.
