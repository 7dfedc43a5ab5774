"""One call from a workdir to a loaded run: its config, model, tokenizer and steps.

    run = load_run("runs/default", average_last=5)
    run.model, run.tokenizer, run.steps

Every front end's `from_checkpoint`, `evaluate`, `init_from` and the interop exporters load
through here, so a workdir is checked the same way everywhere: the mesh before anything is read,
the folder, config.json, the task and model the caller can use, then the tokenizer (see
`transformer_jax.runs.tokenizer`) and the parameters (see `transformer_jax.runs.reading`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import ml_collections
from flax import nnx

from transformer_jax.runs.layout import LEGACY_TASK, CheckpointError, Workdir
from transformer_jax.runs.reading import load_model
from transformer_jax.runs.tokenizer import AnyTokenizer, load_tokenizer
from transformer_jax.serving_mesh import MeshLike, serving_mesh


@dataclasses.dataclass(frozen=True)
class Expect:
    """What a caller can load: the tasks and models it serves (empty: any), and its refusal.

    Attributes:
      user: who loads, as the refusal names it ("Translator", "embed").
      tasks: the `config.task` values it serves (a 0.1 workdir's task is "translation").
      models: the `config.model.name` values it serves.
      needs: what it needs and what to use instead, the end of the refusal ("an
        'encoder_decoder'.").
    """

    user: str
    tasks: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    needs: str = ""

    def check(self, workdir: Workdir, config: ml_collections.ConfigDict) -> None:
        """Raises `CheckpointError` naming the run's task and model and what `user` needs."""
        task, name = config.get("task", LEGACY_TASK), config.model.get("name")
        if (not self.tasks or task in self.tasks) and (not self.models or name in self.models):
            return
        raise CheckpointError(
            f"{workdir.config_json}: the run is a {task!r} task with a {name!r} model; "
            f"{self.user} needs {self.needs}"
        )


@dataclasses.dataclass(frozen=True)
class Run:
    """A loaded run.

    Attributes:
      workdir: its folder.
      config: config.json, migrated to today's fields.
      model: the model with the parameters of `steps` (their mean when there are several).
      tokenizer: the run's tokenizer; None for an image model or when not asked for.
      steps: the checkpoint steps whose parameters were loaded.
      mesh: the serving mesh the parameters are sharded over; None: replicated on this host.
    """

    workdir: Workdir
    config: ml_collections.ConfigDict
    model: nnx.Module
    tokenizer: AnyTokenizer | None
    steps: list[int]
    mesh: Any = None


def open_run(
    workdir: str | os.PathLike | Workdir, expect: Expect | None = None
) -> tuple[Workdir, ml_collections.ConfigDict]:
    """The workdir and its config, after checking that `expect`'s caller can use the run.

    Raises:
      CheckpointError: no such folder, an unusable config.json, or another task or model.
    """
    if not isinstance(workdir, Workdir):
        workdir = Workdir.at(workdir)
    workdir.require()
    config = workdir.read_config()
    if expect is not None:
        expect.check(workdir, config)
    return workdir, config


def load_run(
    workdir: str | os.PathLike | Workdir,
    step: int | None = None,
    average_last: int = 0,
    *,
    mesh: MeshLike | None = None,
    expect: Expect | None = None,
    tokenizer: bool = True,
) -> Run:
    """Loads a workdir written by train.py or by `transformer-jax convert`.

    Args:
      workdir: the run's folder (local or `gs://`), or its `Workdir`.
      step: the checkpoint to load; default the latest.
      average_last: with 2 or more, the element-wise mean of the parameters of the last that
        many checkpoints up to `step` (the paper's §6.1 averages the last 5).
      mesh: serve on this mesh, each parameter restored straight into its shard (axis sizes
        such as `{"fsdp": 4, "tensor": 2}`, `"fsdp=4,tensor=2"`, or a `Mesh`); default
        replicated on this host's devices.
      expect: the tasks and models the caller serves; checked before anything else is read.
      tokenizer: load the run's tokenizer (image models have none: skipped for them).

    Raises:
      MeshError: `mesh` does not fit the devices or the model (a ValueError).
      CheckpointError: the workdir, one of its files or a checkpoint cannot be used, or the
        run is not one `expect` allows; the message names the file and what to do.
    """
    mesh = serving_mesh(mesh)  # A bad mesh fails before anything is read.
    workdir, config = open_run(workdir, expect)
    text = tokenizer and config.model.get("name") != "vit"
    tok = load_tokenizer(workdir, config) if text else None
    model, steps = load_model(workdir, config, tok, step, average_last, mesh=mesh)
    return Run(workdir, config, model, tok, steps, mesh)
