"""Reading a run's checkpoints: its model config, the saved steps, and their (averaged)
parameters, each restored straight into its shard.

The layout is `transformer_jax.runs.layout`'s: model.json gives the model (name and fields; for a
0.1 workdir without it, config.json and tokenizer.model do), and only the `params` of the
`state` item of `checkpoints/<step>/` are read, once its `meta` item's run id and model hash
agree with run.json and config.json (`runs.identity.check_checkpoint` refuses a checkpoint of
another run or model). Nothing here imports the training code.

Every problem a user can meet (a wrong path, a missing or damaged file, a step that is not
there, a checkpoint whose shapes do not match config.json) raises `CheckpointError`, whose
message names the file, what is wrong with it, and what to do.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from etils import epath
from flax import nnx
from jax.sharding import NamedSharding

from transformer_jax import models
from transformer_jax import sharding as shd
from transformer_jax.nn.stacked import relayout, stacked_layout, to_layout
from transformer_jax.runs.identity import check_checkpoint
from transformer_jax.runs.layout import CheckpointError, Workdir
from transformer_jax.runs.tokenizer import AnyTokenizer
from transformer_jax.serving_mesh import MeshLike, check_fits, serving_mesh


def _brief(error: Exception) -> str:
    """The gist of an Orbax/TensorStore error (without its pages of TensorStore spec)."""
    text = f"{type(error).__name__}: {error}".split(" [tensorstore_spec")[0]
    return text if len(text) <= 400 else text[:400] + " ..."


def key_name(key) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _flat_shapes(tree) -> dict[str, tuple[tuple[int, ...], str]]:
    """`"decoder/layers/0/ffn/w1/value" -> (shape, dtype)` for every array leaf of `tree`."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {
        "/".join(key_name(k) for k in path): (tuple(leaf.shape), str(np.dtype(leaf.dtype)))
        for path, leaf in leaves
    }


# ---------------------------------------------------------------------------- model config
def load_model_config(
    workdir: Workdir,
    config: ml_collections.ConfigDict,
    tokenizer: AnyTokenizer | None,
) -> Any:
    """The model's config dataclass: from model.json, or for a 0.1 workdir from config.json's
    model section with the tokenizer's vocabulary and `data.max_len` (what training used)."""
    fields = workdir.read_model()
    source = workdir.model_json
    if fields is None:
        source = workdir.config_json
        fields = dict(config.model)
        if tokenizer is not None:
            fields.setdefault("vocab_size", tokenizer.vocab_size)
        fields.setdefault("max_len", config.get("data", {}).get("max_len"))
    try:
        if source == workdir.model_json:  # Written whole by train.py: nothing may fall back.
            missing = [k for k, v in models.canonical_fields(fields).items() if v is None]
            if missing:
                raise ValueError(
                    f"fields {missing} are missing or null; model.json has every field"
                )
        return models.build_config(fields)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise CheckpointError(
            f"{source}: its model section does not make a valid model config ({e}). Fix the "
            f"field named above."
        ) from e


@functools.lru_cache(maxsize=4)
def abstract_model(cfg: Any):
    """(graphdef, abstract parameters) of the model of `cfg`, traced once per config."""
    return models.abstract_model(cfg)


# ---------------------------------------------------------------------------- checkpoints
def checkpoint_steps(workdir: Workdir) -> list[int]:
    """The saved steps under `workdir/checkpoints`, ascending.

    Orbax writes a step into a temporary directory and renames it to `<step>` when complete,
    so only all-digit names count.
    """
    root = workdir.checkpoints
    if not root.is_dir():
        raise CheckpointError(
            f"{root}: no checkpoints directory. Train first (python train.py "
            f"--workdir={workdir}); checkpoints appear every config.checkpoint_every steps."
        )
    steps = sorted(int(p.name) for p in root.iterdir() if p.name.isdigit() and p.is_dir())
    if not steps:
        raise CheckpointError(
            f"{root}: no checkpoints. Train first (python train.py --workdir={workdir}), or "
            f"wait for the first save (config.checkpoint_every steps)."
        )
    return steps


def select_steps(workdir: Workdir, step: int | None = None, average_last: int = 0) -> list[int]:
    """The steps to load: `[step]` (default the latest), or the `average_last` ending there."""
    if not isinstance(average_last, int) or isinstance(average_last, bool) or average_last < 0:
        raise CheckpointError(f"average_last must be an integer >= 0, got {average_last!r}.")
    steps = checkpoint_steps(workdir)
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise CheckpointError(
            f"{workdir.checkpoints / str(step)}: step {step} does not exist; the saved "
            f"steps are {steps}. Pass one of them (or no step for the latest)."
        )
    upto = [s for s in steps if s <= step]
    count = max(average_last, 1)
    if count > len(upto):
        raise CheckpointError(
            f"{workdir.checkpoints}: average_last={average_last} needs {count} checkpoints "
            f"up to step {step}, but only {upto} are saved (config.keep_checkpoints keeps "
            f"that many). Average fewer."
        )
    return upto[-count:]


def _state_dir(workdir: Workdir, step: int, best: bool = False) -> epath.Path:
    step_dir = (workdir.best if best else workdir.checkpoints) / str(step)
    state_dir = step_dir / "state"
    if not state_dir.is_dir():
        raise CheckpointError(
            f"{state_dir}: the checkpoint of step {step} has no `state` item (a partial or "
            f"interrupted save). Pass another --step, or delete {step_dir}."
        )
    return state_dir


def _saved_layout(state_dir: epath.Path, handler, abstract_params):
    """`abstract_params` in the layer layout the checkpoint was saved in (stacked or per
    layer, see `transformer_jax.nn.stacked`), after comparing the saved parameter shapes with
    the model config.json describes."""
    try:
        saved_tree = handler.metadata(state_dir).tree
        saved = _flat_shapes(saved_tree["params"])
    except Exception as e:  # Orbax raises many types for unreadable metadata.
        raise CheckpointError(
            f"{state_dir}: cannot read the checkpoint's metadata ({_brief(e)}). "
            f"The save is damaged; pass another --step or delete it."
        ) from e
    stacked = stacked_layout(saved_tree["params"])
    if stacked is not None:
        abstract_params = to_layout(abstract_params, stacked)
    wanted = _flat_shapes(abstract_params)
    problems = [f"{k}: missing from the checkpoint" for k in sorted(set(wanted) - set(saved))]
    problems += [
        f"{k}: in the checkpoint but not in the model" for k in sorted(set(saved) - set(wanted))
    ]
    problems += [
        f"{k}: checkpoint shape {saved[k][0]} but config.json gives {wanted[k][0]}"
        for k in sorted(set(saved) & set(wanted))
        if saved[k][0] != wanted[k][0]
    ]
    if problems:
        shown = problems[:8] + ([f"... and {len(problems) - 8} more"] if len(problems) > 8 else [])
        raise CheckpointError(
            f"{state_dir}: the checkpoint does not fit the model of config.json and "
            f"tokenizer.model (incompatible parameter shapes):\n  "
            + "\n  ".join(shown)
            + "\nUse the config.json and tokenizer.model the checkpoint was trained with."
        )
    return abstract_params


def restore_params(
    workdir: Workdir, step: int, abstract_params: nnx.State, shardings, *, best: bool = False
) -> nnx.State:
    """The parameters of one step, each leaf placed with its sharding; the optimizer state is
    not read. A checkpoint of another run or model is refused (`ForeignCheckpointError`).

    Args:
      shardings: one NamedSharding for every leaf, or a tree of them like `abstract_params`.
      best: read the save `step` of `best/` (the best by validation), not of `checkpoints/`.

    Orbax restores into `jax.ShapeDtypeStruct(..., sharding=...)` targets with
    `partial_restore=True`, so only the leaves under `params` are read from disk, and each
    device reads only its own shard.
    """
    import orbax.checkpoint as ocp

    state_dir = _state_dir(workdir, step, best)
    handler = ocp.PyTreeCheckpointHandler()
    if isinstance(shardings, NamedSharding):
        shardings = jax.tree.map(lambda _: shardings, abstract_params)
    wanted = jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract_params, shardings
    )
    try:
        target = {"params": _saved_layout(state_dir, handler, wanted)}
        check_checkpoint(workdir, state_dir.parent)  # After the shapes: their error says more.
        try:
            restored = handler.restore(
                state_dir,
                args=ocp.args.PyTreeRestore(
                    item=target,
                    restore_args=ocp.checkpoint_utils.construct_restore_args(target),
                    partial_restore=True,
                ),
            )
        except Exception as e:  # Orbax/TensorStore errors for missing or damaged array files.
            raise CheckpointError(
                f"{state_dir}: cannot read the parameters of step {step} ({_brief(e)}). The save "
                f"is damaged; pass another --step or delete it."
            ) from e
    finally:
        handler.close()
    params = restored["params"]
    if jax.tree.structure(params) != jax.tree.structure(wanted):
        params = relayout(params, wanted)  # saved with the other `scan_layers`
    return params


def average_params(trees: list[nnx.State]) -> nnx.State:
    """Element-wise mean of parameter trees, accumulated in float32 (§6.1: "we used a single
    model obtained by averaging the last 5 checkpoints")."""
    total = jax.tree.map(lambda x: x.astype(jnp.float32), trees[0])
    for tree in trees[1:]:
        total = jax.tree.map(lambda a, b: a + b.astype(jnp.float32), total, tree)
    return jax.tree.map(lambda s, x: (s / len(trees)).astype(x.dtype), total, trees[0])


def load_model(
    workdir: Workdir,
    config: ml_collections.ConfigDict,
    tokenizer: AnyTokenizer | None,
    step: int | None = None,
    average_last: int = 0,
    *,
    mesh: MeshLike | None = None,
) -> tuple[nnx.Module, list[int]]:
    """Any registered model with the parameters of `step` (or the mean of `average_last`
    checkpoints): replicated on this host's devices, or with `mesh` each parameter restored
    straight into its shard of that mesh (as training shards it, by logical axes).

    Raises:
      MeshError: `mesh` does not fit the devices or the model (see `transformer_jax.serving_mesh`).
      CheckpointError: a file of the workdir cannot be used.

    Returns:
      (the model, the steps whose parameters were loaded).
    """
    mesh = serving_mesh(mesh)
    cfg = load_model_config(workdir, config, tokenizer)
    steps = select_steps(workdir, step, average_last)
    graphdef, abstract_params = abstract_model(cfg)
    if mesh is None:
        local = jax.sharding.Mesh(np.asarray(jax.local_devices()), ("data",))
        shardings = NamedSharding(local, jax.sharding.PartitionSpec())
    else:
        check_fits(abstract_params, mesh)
        shardings = shd.param_shardings(abstract_params, mesh)
    trees = [restore_params(workdir, s, abstract_params, shardings) for s in steps]
    params = trees[0] if len(trees) == 1 else average_params(trees)
    return nnx.merge(graphdef, params), steps
