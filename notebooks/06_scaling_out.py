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
# # 6. Scaling out: one train step on 8 devices
#
# [![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/transformer-jax/transformer_jax/blob/main/notebooks/06_scaling_out.ipynb)
#
# > "We trained our models on one machine with 8 NVIDIA P100 GPUs."
# > (Vaswani et al., 2017, *Attention Is All You Need*, §5.2)
#
# The paper's models were trained on 8 devices at once, each step on batches of "approximately
# 25000 source tokens and 25000 target tokens" (§5.1). This notebook shows how `transformer_jax`
# spreads one train step over 8 devices, and checks that spreading it changes nothing but where
# the numbers live. The train step is one `jax.jit` with explicit shardings over a
# `("data", "fsdp", "tensor")` device mesh; every parameter carries logical axis names, and one
# table of rules in `transformer_jax/sharding.py` maps them to mesh axes. Nothing here
# re-implements the library: every step calls it.
#
# 1. The device mesh `make_mesh` builds for several shapes of 8 devices.
# 2. The logical axis rules, and how a parameter's axis names become a `PartitionSpec`.
# 3. Every parameter of a small encoder-decoder under data-parallel, FSDP and tensor-parallel
#    meshes: its spec and the shard each device holds, the memory per device for the paper's
#    base and big models, and a picture of which device holds which block.
# 4. Which rows of a batch each device reads.
# 5. The sharded train step against the same step on one device: the losses and the updated
#    parameters compared, and the collectives XLA inserted for each mesh.
# 6. `train_and_evaluate` with `config.mesh` set for FSDP, as `train.py` runs it.
# 7. What changes on a multi-host TPU VM (not executed here).
#
# **Devices.** The setup cell sets `CPU_DEVICES = 8`: on a CPU runtime (Colab's default, and
# CI) JAX then shows 8 simulated CPU devices. They share the machine's cores, so every sharding
# path runs but nothing gets faster. The count is fixed when JAX starts: if this runtime has
# already run another notebook, restart it (Runtime > Restart session) and run from the top. On
# a runtime with 8 or more accelerators (a TPU v2-8, for instance) the notebook uses 8 of those
# instead. It runs in a few minutes on a 2-core CPU (Colab: Runtime > Run all); with
# `TRANSFORMER_JAX_FAST=1` (what CI runs) it compares one mesh instead of five and skips the
# training run of section 6.

# %%
# Setup: run this cell first. In a clone of the repository (or wherever transformer_jax is
# importable) it installs nothing; on Colab it clones SOURCE and installs it with its extras.
import os
import pathlib
import subprocess
import sys

CPU_DEVICES = 8  # Devices to simulate on a CPU runtime (notebook 6 needs 8); GPUs/TPUs ignore it.
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
# ## 0. The devices
#
# Eight devices of one kind: the accelerators when there are at least 8 of them, else the 8
# simulated CPU devices the setup cell asked for.

# %%
import functools
import math
import re
import time

import jax
import matplotlib.pyplot as plt
import numpy as np
from flax import nnx
from IPython.display import Markdown, display

from transformer_jax import models
from transformer_jax import sharding as shd
from transformer_jax.models.encoder_decoder import EncoderDecoderConfig
from transformer_jax.notebook import choose, fast_mode

accelerators = jax.devices()
DEVICES = accelerators[:8] if len(accelerators) >= 8 else jax.devices("cpu")[:8]
if len(DEVICES) < 8:
    raise RuntimeError(
        f"This notebook needs 8 devices and found {len(DEVICES)}: set CPU_DEVICES = 8 in the "
        "setup cell, restart the runtime and run from the top."
    )
print(f"{len(DEVICES)} {DEVICES[0].platform.upper()} devices, ids {[d.id for d in DEVICES]}")

# %% [markdown]
# ## 1. The device mesh
#
# > "Compiler-based automatic sharding is where you program as if using a single “global view”
# > machine, and the compiler chooses how to shard data (with some user-provided constraints via
# > `with_sharding_constraint`) and how to partition computation into per-device programs with
# > collectives." (JAX documentation, *Distributed arrays and automatic parallelization*)
#
# That is how `transformer_jax` parallelises: the train step is written for one big device, its
# inputs and outputs are given `NamedSharding`s, and XLA's partitioner (GSPMD) writes the
# per-device program and its communication. A mesh arranges the devices in an array with one
# named axis per kind of parallelism:
#
# - `data` splits the batch; every device holds the whole model (data parallelism).
# - `fsdp` also splits the batch, and in addition every parameter's model dimension (fully
#   sharded data parallelism).
# - `tensor` splits attention heads, the feed-forward width and the vocabulary (tensor, or
#   Megatron-style model parallelism).
#
# `make_mesh` takes the size of each axis (a missing axis has size 1; one axis may be -1, "all
# the remaining devices") and always builds all three axes, so that one set of rules serves
# every shape. Here is where each device sits in five shapes of the same 8 devices:

# %%
MESHES = {  # The shapes used below: name -> axis sizes, as `config.mesh` would give them.
    "data 8": {"data": -1},
    "data 2 x fsdp 4": {"data": 2, "fsdp": 4},
    "data 2 x tensor 4": {"data": 2, "tensor": 4},
    "fsdp 2 x tensor 4": {"fsdp": 2, "tensor": 4},
    "data 2 x fsdp 2 x tensor 2": {"data": 2, "fsdp": 2, "tensor": 2},
}
meshes = {name: shd.make_mesh(shape, devices=DEVICES) for name, shape in MESHES.items()}


def describe(mesh) -> str:
    """Device ids by mesh position: one line per `data` index, fsdp groups of tensor ids."""
    lines = []
    for d, plane in enumerate(mesh.device_ids):  # [data, fsdp, tensor] array of device ids
        groups = " | ".join(f"fsdp {f}: tensor {ids.tolist()}" for f, ids in enumerate(plane))
        lines.append(f"    data {d}: {groups}")
    return "\n".join(lines)


for name, mesh in meshes.items():
    print(f"{name}: {dict(mesh.shape)}\n{describe(mesh)}")

# %% [markdown]
# On a TPU, `jax.make_mesh` (which `make_mesh` calls) orders the devices by the chips' physical
# layout, so that neighbours on the mesh are neighbours on the interconnect; simulated CPU devices
# have no layout and keep their id order. A shape that does not fit the devices is refused with a
# message that says what to do:

# %%
for bad in ({"data": 3, "fsdp": 2}, {"data": -1, "fsdp": 3}, {"data": -1, "fsdp": -1}, {"pipe": 2}):
    try:
        shd.make_mesh(bad, devices=DEVICES)
    except ValueError as error:
        print(f"{bad}: {error}")

# %% [markdown]
# ## 2. Logical axis rules
#
# No parameter names a mesh axis. Each one is created with *logical* axis names for its
# dimensions (`param(init, key, shape, axes)` in `transformer_jax/nn/layers.py`): a token
# embedding is `("vocab", "embed")`, a query projection `("embed", "heads", "kv")`, the first
# feed-forward matrix `("embed", "mlp")`. One table, `LOGICAL_RULES` in
# `transformer_jax/sharding.py`, maps each name to mesh axes; `batch` is the leading axis of
# inputs and activations. The model below is a small encoder-decoder (one layer each side, the
# `tiny` preset's widths), built abstractly: shapes and metadata, nothing allocated.

# %%
CFG = EncoderDecoderConfig.tiny(
    vocab_size=64, num_encoder_layers=1, num_decoder_layers=1, dropout_rate=0.1
)
graphdef, abstract = models.abstract_model(CFG)  # nnx.State of ShapeDtypeStructs
PARAMS = {  # "encoder/layers/0/ffn/w1" -> (shape, logical axes)
    "/".join(map(str, path)): (v.shape, v.get_metadata()["logical_axes"])
    for path, v in nnx.to_flat_state(abstract)
}
print(
    f"d_model {CFG.d_model}, {CFG.num_heads} heads, d_ff {CFG.d_ff}, vocabulary "
    f"{CFG.vocab_size}, {CFG.num_encoder_layers}+{CFG.num_decoder_layers} layers: "
    f"{len(PARAMS)} parameter arrays, {sum(math.prod(s) for s, _ in PARAMS.values()):,} numbers"
)

rows = [
    "| logical name | mesh axes | parameter arrays with it | for example |",
    "|---|---|---|---|",
]
for name, axes in shd.LOGICAL_RULES.items():
    users = [p for p, (_, logical) in PARAMS.items() if name in logical]
    examples = ", ".join(f"`{p}`" for p in users[:2]) if users else "inputs and activations"
    rows.append(f"| `{name}` | `{axes}` | {len(users)} of {len(PARAMS)} | {examples} |")
display(Markdown("\n".join(rows)))

# %% [markdown]
# `logical_to_spec` turns an array's names into a `PartitionSpec` for one mesh. A name's mesh
# axes are used only where the axis has more than one device, is not already used by another
# dimension of the same array, and divides the dimension; otherwise that dimension stays whole
# (replicated). A vocabulary of 50 over `tensor 4` therefore stays whole instead of failing;
# `kv`, the width of one attention head, maps to no mesh axis at all: a head is never cut.

# %%
EXAMPLES = [  # (logical axes, shape, mesh)
    (("vocab", "embed"), (64, 32), "data 2 x tensor 4"),
    (("vocab", "embed"), (50, 32), "data 2 x tensor 4"),
    (("embed", "mlp"), (32, 64), "data 2 x fsdp 4"),
    (("embed", "mlp"), (32, 64), "data 2 x fsdp 2 x tensor 2"),
    (("embed", "heads", "kv"), (32, 4, 8), "fsdp 2 x tensor 4"),
    (("batch", None), (16, 9), "data 2 x fsdp 4"),
    (("batch", None), (16, 9), "data 2 x tensor 4"),
]
for logical, shape, mesh_name in EXAMPLES:
    mesh = meshes[mesh_name]
    spec = shd.logical_to_spec(logical, shape, mesh)
    shard = jax.sharding.NamedSharding(mesh, spec).shard_shape(shape)
    print(f"{str(logical):28} {str(shape):11} on {mesh_name:27} -> {spec}, shard {shard}")

# %% [markdown]
# ## 3. Where every parameter lives
#
# Data parallelism copies the whole model to every device. The two other axes cut it up:
#
# > "ZeRO-DP removes the memory state redundancies across data-parallel processes by
# > partitioning the model states instead of replicating them, and it retains the
# > compute/communication efficiency by retaining the computational granularity and
# > communication volume of DP using a dynamic communication schedule during training."
# > (Rajbhandari et al., 2020, *ZeRO: Memory Optimizations Toward Training Trillion Parameter
# > Models*, §1)
#
# `fsdp` is that partitioning: every parameter that has an `embed` dimension (most of them, as
# the table of section 2 counts) is split along it, with its Adam moments, and XLA gathers a
# parameter's pieces when a step needs it whole.
#
# > "This approach splits both GEMMs in the MLP block across GPUs and requires only a single
# > all-reduce operation in the forward pass (g operator) and a single all-reduce in the backward
# > pass (f operator)." (Shoeybi et al., 2019, *Megatron-LM*, §3)
#
# `tensor` is that split: the first feed-forward matrix by its columns (`mlp`), the second by
# its rows, the attention projections by heads, the embedding by vocabulary. `param_shardings`
# applies the rules to every parameter of the model; here are all of them on the three basic
# meshes, as `PartitionSpec` and the shape of the shard each device holds:

# %%
TABLE_MESHES = ["data 8", "data 2 x fsdp 4", "data 2 x tensor 4"]


def placements(abstract_params, mesh) -> dict:
    """Parameter path -> NamedSharding, as create_train_state shards the parameters."""
    flat = nnx.to_flat_state(shd.param_shardings(abstract_params, mesh))
    return {"/".join(map(str, path)): v.get_value() for path, v in flat}


placed = {name: placements(abstract, meshes[name]) for name in TABLE_MESHES}
header = "| parameter | shape | logical axes | " + " | ".join(TABLE_MESHES) + " |"
rows = [header, "|---" * (3 + len(TABLE_MESHES)) + "|"]
for path, (shape, logical) in PARAMS.items():
    cells = []
    for name in TABLE_MESHES:
        sharding = placed[name][path]
        cells.append(f"`{tuple(sharding.spec)}` {sharding.shard_shape(shape)}")
    rows.append(f"| `{path}` | {shape} | `{logical}` | " + " | ".join(cells) + " |")
display(Markdown("\n".join(rows)))

total = sum(math.prod(shape) for shape, _ in PARAMS.values())
for name in TABLE_MESHES:
    per_device = sum(math.prod(placed[name][p].shard_shape(s)) for p, (s, _) in PARAMS.items())
    print(f"{name:18}: {per_device:6,} of {total:,} numbers per device ({per_device / total:.0%})")

# %% [markdown]
# The same rules at the paper's sizes. `create_train_state` places the Adam moments like their
# parameters, so a device holds three float32 numbers for each parameter number it holds
# (gradients and activations come on top). Computed from abstract shapes only, for the base and
# big models of Table 3 with a 37,000-token vocabulary:

# %%
MEMORY_MESHES = {
    "data 8": {"data": -1},
    "fsdp 8": {"fsdp": -1},
    "tensor 8": {"tensor": -1},
    "data 2 x fsdp 4": {"data": 2, "fsdp": 4},
    "data 2 x tensor 4": {"data": 2, "tensor": 4},
    "fsdp 2 x tensor 4": {"fsdp": 2, "tensor": 4},
}
paper = {"base": EncoderDecoderConfig.base(), "big": EncoderDecoderConfig.big()}
BYTES_PER_NUMBER = 3 * 4  # the parameter and Adam's two moments, float32
mib = {}  # (model, mesh) -> MiB of parameters and optimizer state on each device
for model_name, cfg in paper.items():
    _, abstract_paper = models.abstract_model(cfg)
    leaves = {"/".join(map(str, p)): v.shape for p, v in nnx.to_flat_state(abstract_paper)}
    whole = sum(math.prod(s) for s in leaves.values())
    print(f"{model_name}: {whole:,} parameters, {whole * BYTES_PER_NUMBER / 2**20:,.0f} MiB whole")
    for mesh_name, shape in MEMORY_MESHES.items():
        sharding = placements(abstract_paper, shd.make_mesh(shape, devices=DEVICES))
        held = sum(math.prod(sharding[p].shard_shape(s)) for p, s in leaves.items())
        mib[model_name, mesh_name] = held * BYTES_PER_NUMBER / 2**20
        print(f"    {mesh_name:18}: {mib[model_name, mesh_name]:7,.1f} MiB per device")

fig, ax = plt.subplots(figsize=(9, 3.6))
x = np.arange(len(MEMORY_MESHES))
for i, model_name in enumerate(paper):
    values = [mib[model_name, m] for m in MEMORY_MESHES]
    ax.bar(x + (i - 0.5) * 0.4, values, 0.4, label=f"{model_name} model")
ax.set_xticks(x, list(MEMORY_MESHES), rotation=15)
ax.set(ylabel="MiB per device", title="parameters + Adam moments on each of 8 devices")
ax.legend()
plt.show()

# %% [markdown]
# ### Which device holds which block
#
# `jax.debug.visualize_array_sharding` draws a 2-D array's shards with the devices that hold
# them. Here is the encoder's first feed-forward matrix $W_1$ (`[d_model, d_ff]`, logical axes
# `("embed", "mlp")`), placed as the train state places it, on four meshes:

# %%
W1 = "encoder/layers/0/ffn/w1"
w1_shape = PARAMS[W1][0]
for name in ["data 8", "data 2 x fsdp 4", "data 2 x tensor 4", "data 2 x fsdp 2 x tensor 2"]:
    sharding = placements(abstract, meshes[name])[W1]
    print(f"{name}: {sharding.spec}")
    jax.debug.visualize_array_sharding(jax.device_put(np.zeros(w1_shape, np.float32), sharding))

# %% [markdown]
# The same from each device's side: one small picture per device, the whole matrix in light
# blue and the block that device holds in dark blue. With FSDP each device holds a band of rows
# (`embed`), with tensor parallelism a band of columns (`mlp`), and with both, a tile; every
# block is held by as many devices as the mesh axes that do not split it have in total (the
# `data` axis here).

# %%
FIGURE_MESHES = ["data 8", "data 2 x fsdp 4", "data 2 x tensor 4", "data 2 x fsdp 2 x tensor 2"]
fig, axes = plt.subplots(len(FIGURE_MESHES), len(DEVICES), figsize=(13, 1.2 * len(FIGURE_MESHES)))
for row, name in enumerate(FIGURE_MESHES):
    index = placements(abstract, meshes[name])[W1].devices_indices_map(w1_shape)
    for col, device in enumerate(DEVICES):
        held = np.zeros(w1_shape)
        held[index[device]] = 1.0
        ax = axes[row, col]
        ax.imshow(held, cmap="Blues", vmin=-0.3, vmax=1.0, aspect="auto")
        ax.set(xticks=[], yticks=[])
        if row == 0:
            ax.set_title(f"device {device.id}", fontsize=9)
        if col == 0:
            ax.set_ylabel(name.replace(" x ", "\nx "), fontsize=8, rotation=0, ha="right")
fig.suptitle(f"{W1} {w1_shape}: rows = embed, columns = mlp", y=1.02)
plt.show()

# %% [markdown]
# ## 4. Which rows of a batch each device reads
#
# Batches are split along their rows over `data` and `fsdp` together (`batch_sharding`); the
# devices of one `tensor` group read the same rows, because they split the model, not the
# batch. For a batch of 16 rows:

# %%
ROWS = 16
for name, mesh in meshes.items():
    index = shd.batch_sharding(mesh).devices_indices_map((ROWS, 9))
    reads = ", ".join(f"{d.id}: {s[0].start}-{s[0].stop - 1}" for d, s in index.items())
    print(f"{name:27} device: rows  {reads}")

# %% [markdown]
# ## 5. The sharded step equals the step on one device
#
# The train step is one pure function, `train_step(state, batch, rng)`, and `compile_steps` jits
# it with the state's shardings in and out, the batch split over `("data", "fsdp")` and the state
# donated. The partitioned program must compute what the one-device program computes: the same
# loss, the same gradients, the same Adam update. Only the order of floating-point sums may
# differ, by float32 rounding.
#
# The check below follows `train_and_evaluate` (and `tests/training/test_parallel.py`):
# `create_train_state` initialises the parameters directly in their shards, `compile_steps`
# compiles the step once, and each step gets a batch of random token ids with some padding (its
# content does not matter for the comparison). Dropout is on: the keys are the same, and JAX's
# partitionable random numbers do not depend on how an array is split, so the dropout masks
# are the same too. Each step's metrics are fetched before the next step starts; a loop that
# runs far ahead of 8 simulated devices can stall XLA's CPU all-reduce (see docs/training.md).

# %%
from transformer_jax.tasks.translation import translation_loss
from transformer_jax.training.optimizer import make_optimizer
from transformer_jax.training.state import create_train_state
from transformer_jax.training.step import compile_steps, global_batch

STEPS = choose(full=5, fast=2)
LOSS = functools.partial(translation_loss, label_smoothing=0.1)
tx, schedule = make_optimizer(CFG.d_model, warmup_steps=10)
RNG = jax.random.key(7)  # dropout; train_step folds in the step number
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
print(f"jax_threefry_partitionable = {jax.config.jax_threefry_partitionable}")


def random_batch(seed: int, src_len: int = 9, tgt_len: int = 7) -> dict[str, np.ndarray]:
    """ROWS rows of random token ids, some of them padded, in the translation task's layout."""
    rng = np.random.default_rng(seed)
    src = rng.integers(4, CFG.vocab_size, (ROWS, src_len)).astype(np.int32)
    tgt = rng.integers(4, CFG.vocab_size, (ROWS, tgt_len)).astype(np.int32)
    src[::3, 6:] = 0  # padding (PAD_ID is 0)
    tgt[::2, 5:] = 0
    tgt_in = np.concatenate([np.full((ROWS, 1), 2, np.int32), tgt[:, :-1]], 1)  # BOS, shifted
    return {"src": src, "tgt_in": tgt_in, "tgt_out": tgt, "weights": (tgt != 0).astype(np.float32)}


BATCHES = [random_batch(seed) for seed in range(STEPS)]


def train(mesh) -> dict:
    """STEPS updates on `mesh` as train_and_evaluate makes them; what the comparison needs."""
    started = time.time()
    graphdef, state, shardings = create_train_state(CFG, tx, mesh, seed=0)
    init = jax.device_get(state.params)  # before the step donates (and so deletes) the state
    train_fn, _ = compile_steps(graphdef, tx, shardings, mesh, loss_fn=LOSS)
    with jax.set_mesh(mesh):  # compile once (the calls below reuse it) and keep XLA's program
        compiled = train_fn.jitted.lower(state, global_batch(BATCHES[0], mesh), RNG).compile()
    losses = []
    for batch in BATCHES:
        state, metrics = train_fn(state, global_batch(batch, mesh), RNG)
        sums = jax.device_get(metrics)  # waits for this step before the next is dispatched
        losses.append(float(sums["loss_sum"] / sums["tokens"]))
    text = compiled.as_text()  # the optimised, partitioned HLO
    return {
        "init": init,
        "params": jax.device_get(state.params),
        "losses": np.array(losses),
        "collectives": {op: len(re.findall(rf"\s{op}(?:-start)?\(", text)) for op in COLLECTIVES},
        "seconds": time.time() - started,
    }


one = train(shd.make_mesh({"data": 1}, devices=DEVICES[:1]))
print(f"one device, {STEPS} steps ({one['seconds']:.0f} s): losses {np.round(one['losses'], 6)}")

# %% [markdown]
# Now the same steps on 8 devices, on every mesh of section 1 (in the fast mode on the mesh that
# uses all three axes at once). For each: the largest difference from the one-device run in the
# initial parameters, in the losses, and in every parameter after the last update.
#
# While compiling for meshes with an `fsdp` axis, XLA may print "Involuntary full
# rematerialization" warnings: for a few activations it found no cheap way from one sharding to
# another and replicated the array in between. That costs time and memory on real devices, not
# correctness, as the comparison shows.

# %%
COMPARE = choose(full=list(MESHES), fast=["data 2 x fsdp 2 x tensor 2"])


def max_abs_diff(a, b) -> float:
    """Largest |a - b| over all leaves of two trees of the same structure."""
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return max(float(np.abs(x - y).max()) for x, y in pairs)


sharded = {}
for name in COMPARE:
    sharded[name] = train(meshes[name])
    print(
        f"{name}: {sharded[name]['seconds']:.0f} s, losses {np.round(sharded[name]['losses'], 6)}"
    )

rows = [
    "| mesh | max abs. diff. initial params | max rel. diff. loss | max abs. diff. params after "
    f"{STEPS} steps |",
    "|---|---|---|---|",
]
for name, run in sharded.items():
    loss_diff = float(np.abs(run["losses"] - one["losses"]).max() / one["losses"].max())
    rows.append(
        f"| {name} | {max_abs_diff(run['init'], one['init']):.1e} | {loss_diff:.1e} | "
        f"{max_abs_diff(run['params'], one['params']):.1e} |"
    )
display(Markdown("\n".join(rows)))

moved = max_abs_diff(one["params"], one["init"])
worst = max(max_abs_diff(run["params"], one["params"]) for run in sharded.values())
lr = max(float(schedule(i)) for i in range(STEPS))
same_init = all(max_abs_diff(run["init"], one["init"]) == 0.0 for run in sharded.values())
print(f"initial parameters identical on every mesh: {same_init}")
print(f"{STEPS} steps (learning rate up to {lr:.1e}) moved the parameters by up to {moved:.1e};")
print(f"the largest sharded - one-device difference, {worst:.1e}, is {worst / moved:.0e} of that")
print(f"(float32 epsilon: {np.finfo(np.float32).eps:.1e}).")

# %% [markdown]
# Born in their shards from the same key, the initial parameters are the very same numbers. After
# the updates, the losses and parameters differ only by float32 rounding (sums taken in another
# order), a tiny fraction of how far the steps moved the parameters: the sharded step is the
# one-device step.
#
# ### What XLA added
#
# The compiled programs differ in their communication. Counting the collective operations in
# each program (static counts in the compiled HLO, not bytes moved):

# %%
rows = ["| mesh | " + " | ".join(COLLECTIVES) + " |", "|---" * (1 + len(COLLECTIVES)) + "|"]
for name, run in {"one device": one, **sharded}.items():
    rows.append(
        f"| {name} | " + " | ".join(str(run["collectives"][op]) for op in COLLECTIVES) + " |"
    )
display(Markdown("\n".join(rows)))

# %% [markdown]
# On one device there is nothing to communicate. Pure data parallelism needs only the gradient
# sum over the replicas (`all-reduce`; XLA may merge the per-parameter sums into a few large
# ones). FSDP adds `all-gather`s: a parameter's shards are collected before the layer that uses
# it (forward and backward), and the summed gradients are cut back into shards. Tensor
# parallelism adds the `all-reduce`s of Megatron's $f$ and $g$ on activations inside every
# block. Which of these a mesh pays for, and how large they are, is what the choice of mesh
# trades against memory per device.


# %% [markdown]
# ## 6. `train_and_evaluate` with `config.mesh`
#
# `python train.py --config=configs/tiny.py --workdir=DIR --config.mesh.data=-1
# --config.mesh.fsdp=4` makes the call below: the mesh is the only change, and nothing else in
# the config, the model or the loop knows about it. The loop builds the mesh from `config.mesh`
# over `jax.devices()` (the default backend's: on a runtime with one GPU, `fsdp` falls back to
# 1 here), creates the state in its shards, feeds `global_batch`es, waits for step $n-1$ once
# step $n$ is dispatched, evaluates, and writes Orbax checkpoints shard by shard.
#
# `configs/tiny.py` is a seconds-long smoke run, not a translator (notebook 2 trains one), so
# nothing is decoded: the losses are what to look at. The fast mode (CI) runs 4 steps of it, with
# one layer a side.

# %%
from configs import tiny
from transformer_jax.runs import read_metrics
from transformer_jax.training.loop import train_and_evaluate

config = tiny.get_config()
config.mesh.data = -1  # the remaining devices
config.mesh.fsdp = math.gcd(4, jax.device_count())  # 4 when there are 8 devices
config.num_train_steps = choose(full=config.num_train_steps, fast=4)
if fast_mode():  # CI: one layer a side, which compiles faster
    config.model.num_encoder_layers = config.model.num_decoder_layers = 1
config.eval_every = config.checkpoint_every = choose(full=config.eval_every, fast=4)
config.log_every = choose(full=5, fast=1)
config.eval_bleu_sentences = 0  # no greedy decoding at evaluations
config.test_sentences = 0  # nor at the end
workdir = "runs/nb06_fsdp"
loop_mesh = shd.make_mesh(dict(config.mesh))  # what train_and_evaluate builds first
print(
    f"config.mesh {dict(config.mesh)} -> mesh {dict(loop_mesh.shape)} of {loop_mesh.size} devices"
)

started = time.time()
result = train_and_evaluate(config, workdir)
print(f"\n{config.num_train_steps} steps in {time.time() - started:.0f} s (workdir {workdir})")
print(", ".join(f"{k} {v:.4g}" for k, v in result.items() if isinstance(v, int | float)))

# %% [markdown]
# Its `metrics.jsonl` is what any run writes, whatever the mesh:

# %%
metrics = read_metrics(workdir)
fig, ax = plt.subplots(figsize=(6, 3.2))
for split, style in (("train", "-"), ("eval", "o")):
    rows = metrics[split]
    ax.plot([r["step"] for r in rows], [r["loss"] for r in rows], style, label=split)
title = f"configs/tiny.py on mesh {dict(loop_mesh.shape)}"
ax.set(xlabel="step", ylabel="label-smoothed loss", title=title)
ax.legend()
plt.show()

# %% [markdown]
# ## 7. On a TPU VM (not executed here)
#
# > "except for array creation, you can write your JAX code as if there were one giant machine
# > with all devices attached to it." (JAX documentation, *Introduction to multi-controller JAX*)
#
# A TPU slice larger than one host (a v4-32, a v5e-64, ...) runs one Python process per host,
# each attached to a few chips. Nothing in the model, the step or the rules changes; what
# changes is how the job is started and where it reads and writes.
#
# **Launch.** Start the same command on every worker. `--multi_process` makes `train.py` call
# `jax.distributed.initialize()` before anything else, which on Cloud TPU finds its peers by
# itself; `jax.devices()` then lists every chip of every host, and `make_mesh` builds the mesh
# over all of them (`jax.local_devices()` are this host's).
#
# **Data.** The hosts cannot share a Python iterator. The data must be prepared once as
# ArrayRecord (which TFDS reads without TensorFlow, by index), each host reads its own shard of
# the examples, and `global_batch` assembles the hosts' local rows into one global array with
# `jax.make_array_from_process_local_data`.
#
# **Workdir.** Every host must see the same checkpoints, so the workdir is a Cloud Storage path:
# `--workdir=gs://BUCKET/runs/NAME` keeps the config, tokenizer, logs, TensorBoard events and
# Orbax checkpoints there (each host writes the shards it holds), with the VM's service account
# as credentials. Only process 0 writes logs and metrics. A preempted VM gets SIGTERM, saves a
# checkpoint, and re-running the same command resumes.
#
# The same meshes from the command line (docs/training.md, "Parallelism and TPU VMs"):
#
# ```bash
# python train.py --config=configs/wmt14_en_de_base.py --workdir=DIR   # data parallel
# python train.py ... --config.mesh.data=-1 --config.mesh.fsdp=8        # + FSDP
# python train.py ... --config.mesh.data=-1 --config.mesh.tensor=4      # + tensor parallel
# ```
#
# The launch on a slice is one recipe, in
# [docs/tpu.md, "A slice over several hosts"](../docs/tpu.md#a-slice-over-several-hosts): it
# creates the slice, installs the project into the same virtual environment on every worker,
# checks that each process sees every chip, and starts the same `train.py ... --multi_process`
# on all workers at once, with the data and the workdir in a Cloud Storage bucket.
#
# On GPU clusters without auto-detection add `--coordinator_address=HOST:PORT
# --num_processes=N --process_id=I`. The test suite runs two processes on one machine (CPU
# collectives over gloo) and checks that they train exactly as one process does
# (`tests/training/test_multiprocess.py`), and runs the whole loop against a local Cloud Storage
# emulator (`tests/training/test_gcs_workdir.py`).
#
# Which mesh to choose is a matter of sizes: data parallelism while the model, its gradients and
# Adam's moments fit on one chip; `fsdp` when they do not (it divides that memory by the axis
# size, at the price of gathering the parameters every step); `tensor` when even one layer's
# activations are too large, or to keep the per-device batch from becoming too small, usually
# within a host where the interconnect is fastest.
