"""Read a training workdir for inference: its config, tokenizer and (averaged) parameters.

The workdir layout is the one `transformer_jax.checkpointing` writes:
  config.json          the resolved training config (gives the model's shape)
  tokenizer.model      the SentencePiece model (gives the vocabulary size)
  checkpoints/<step>/  Orbax steps; only the `params` of their `state` item are read here

Every problem a user can meet (a wrong path, a missing or damaged file, a step that is not
there, a checkpoint whose shapes do not match config.json) raises `CheckpointError`, whose
message names the file, what is wrong with it, and what to do.
"""

from __future__ import annotations

import functools
import json
import pathlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding

from transformer_jax.config import TransformerConfig


class CheckpointError(ValueError):
    """A workdir, config, tokenizer or checkpoint that cannot be used for inference."""


def _brief(error: Exception) -> str:
    """The gist of an Orbax/TensorStore error (without its pages of TensorStore spec)."""
    text = f"{type(error).__name__}: {error}".split(" [tensorstore_spec")[0]
    return text if len(text) <= 400 else text[:400] + " ..."


def _key_name(key) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _flat_shapes(tree) -> dict[str, tuple[tuple[int, ...], str]]:
    """`"decoder/layers/0/ffn/w1/value" -> (shape, dtype)` for every array leaf of `tree`."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {
        "/".join(_key_name(k) for k in path): (tuple(leaf.shape), str(np.dtype(leaf.dtype)))
        for path, leaf in leaves
    }


# ---------------------------------------------------------------------------- workdir files
def check_workdir(workdir: str | pathlib.Path) -> pathlib.Path:
    """The workdir as an absolute path; `CheckpointError` if it is not a directory."""
    path = pathlib.Path(workdir).expanduser().resolve()
    if not path.is_dir():
        raise CheckpointError(
            f"{path}: workdir does not exist (or is not a directory). Pass the --workdir that "
            f"train.py wrote, e.g. runs/default."
        )
    return path


def load_config(workdir: pathlib.Path) -> ml_collections.ConfigDict:
    """The run's config from `workdir/config.json`."""
    path = workdir / "config.json"
    if not path.is_file():
        raise CheckpointError(
            f"{path}: config.json is missing, so the model's shape is unknown. Is {workdir} a "
            f"train.py workdir? Training writes config.json before its first step."
        )
    try:
        fields = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(
            f"{path}: config.json is not readable JSON ({e}). Restore it from the run's "
            f"config file (train.py writes it on start)."
        ) from e
    if not isinstance(fields, dict) or not isinstance(fields.get("model"), dict):
        raise CheckpointError(
            f"{path}: config.json has no `model` section; it is not a run config."
        )
    return ml_collections.ConfigDict(fields)


def load_tokenizer(workdir: pathlib.Path, config: ml_collections.ConfigDict):
    """The tokenizer of the run: `workdir/tokenizer.model`, else `data.spm_model_path`."""
    from transformer_jax.data.tokenizer import Tokenizer

    path = workdir / "tokenizer.model"
    external = config.get("data", {}).get("spm_model_path")
    if not path.is_file() and external:
        path = pathlib.Path(external)
    if not path.is_file():
        raise CheckpointError(
            f"{path}: tokenizer.model is missing. Copy the SentencePiece model the run was "
            f"trained with into the workdir (train.py writes it there)."
        )
    try:
        return Tokenizer(path.read_bytes(), origin=str(path))
    except (OSError, RuntimeError, ValueError, TypeError) as e:
        raise CheckpointError(
            f"{path}: tokenizer.model is not a usable SentencePiece model ({e}). Copy the "
            f"tokenizer.model the run was trained with back into the workdir."
        ) from e


def load_model_config(
    workdir: pathlib.Path, config: ml_collections.ConfigDict, vocab_size: int
) -> TransformerConfig:
    """`TransformerConfig` from config.json's `model` fields and the tokenizer's vocabulary."""
    from transformer_jax.train import model_config

    try:
        return model_config(config, vocab_size)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise CheckpointError(
            f"{workdir / 'config.json'}: its model section does not make a valid "
            f"TransformerConfig ({e}). Fix the field named above."
        ) from e


@functools.lru_cache(maxsize=4)
def abstract_model(cfg: TransformerConfig):
    """(graphdef, abstract parameters) of `Transformer(cfg)`, traced once per config."""
    from transformer_jax.train_step import abstract_model as trace

    return trace(cfg)


# ---------------------------------------------------------------------------- checkpoints
def checkpoint_steps(workdir: pathlib.Path) -> list[int]:
    """The saved steps under `workdir/checkpoints`, ascending.

    Orbax writes a step into a temporary directory and renames it to `<step>` when complete,
    so only all-digit names count.
    """
    root = workdir / "checkpoints"
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


def select_steps(
    workdir: pathlib.Path, step: int | None = None, average_last: int = 0
) -> list[int]:
    """The steps to load: `[step]` (default the latest), or the `average_last` ending there."""
    if not isinstance(average_last, int) or isinstance(average_last, bool) or average_last < 0:
        raise CheckpointError(f"average_last must be an integer >= 0, got {average_last!r}.")
    steps = checkpoint_steps(workdir)
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise CheckpointError(
            f"{workdir / 'checkpoints' / str(step)}: step {step} does not exist; the saved "
            f"steps are {steps}. Pass one of them (or no step for the latest)."
        )
    upto = [s for s in steps if s <= step]
    count = max(average_last, 1)
    if count > len(upto):
        raise CheckpointError(
            f"{workdir / 'checkpoints'}: average_last={average_last} needs {count} checkpoints "
            f"up to step {step}, but only {upto} are saved (config.keep_checkpoints keeps "
            f"that many). Average fewer."
        )
    return upto[-count:]


def _state_dir(workdir: pathlib.Path, step: int) -> pathlib.Path:
    step_dir = workdir / "checkpoints" / str(step)
    state_dir = step_dir / "state"
    if not state_dir.is_dir():
        raise CheckpointError(
            f"{state_dir}: the checkpoint of step {step} has no `state` item (a partial or "
            f"interrupted save). Pass another --step, or delete {step_dir}."
        )
    return state_dir


def _check_shapes(state_dir: pathlib.Path, handler, abstract_params) -> None:
    """Compare the saved parameter shapes with the model config.json describes."""
    try:
        saved_tree = handler.metadata(state_dir).tree
        saved = _flat_shapes(saved_tree["params"])
    except Exception as e:  # Orbax raises many types for unreadable metadata.
        raise CheckpointError(
            f"{state_dir}: cannot read the checkpoint's metadata ({_brief(e)}). "
            f"The save is damaged; pass another --step or delete it."
        ) from e
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


def restore_params(
    workdir: pathlib.Path, step: int, abstract_params: nnx.State, sharding: NamedSharding
) -> nnx.State:
    """The parameters of one step, placed with `sharding`; the optimizer state is not read.

    Orbax restores into `jax.ShapeDtypeStruct(..., sharding=sharding)` targets with
    `partial_restore=True`, so only the leaves under `params` are read from disk.
    """
    import orbax.checkpoint as ocp

    state_dir = _state_dir(workdir, step)
    handler = ocp.PyTreeCheckpointHandler()
    try:
        _check_shapes(state_dir, handler, abstract_params)
        target = {
            "params": jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding),
                abstract_params,
            )
        }
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
    return restored["params"]


def average_params(trees: list[nnx.State]) -> nnx.State:
    """Element-wise mean of parameter trees, accumulated in float32 (§6.1: "we used a single
    model obtained by averaging the last 5 checkpoints")."""
    total = jax.tree.map(lambda x: x.astype(jnp.float32), trees[0])
    for tree in trees[1:]:
        total = jax.tree.map(lambda a, b: a + b.astype(jnp.float32), total, tree)
    return jax.tree.map(lambda s, x: (s / len(trees)).astype(x.dtype), total, trees[0])
