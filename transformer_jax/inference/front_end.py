"""What the front ends that serve a whole run share: `from_checkpoint`, through `load_run`.

A front end declares the runs it serves (`EXPECT`) and how it is built from a loaded run
(`from_run`); loading, checking and placing the run are `transformer_jax.runs`' job.
"""

from __future__ import annotations

import os
from typing import ClassVar, TypeVar

from transformer_jax.runs.load import Expect, Run, load_run
from transformer_jax.serving_mesh import MeshLike

FrontEnd = TypeVar("FrontEnd", bound="FromCheckpoint")


class FromCheckpoint:
    """Mixin: `from_checkpoint(workdir, step, average_last, mesh=)` for a front end."""

    EXPECT: ClassVar[Expect]  # The tasks and models it serves, and its refusal of others.

    @classmethod
    def from_run(cls: type[FrontEnd], run: Run) -> FrontEnd:
        """The front end of a loaded run."""
        raise NotImplementedError(f"{cls.__name__} must define from_run")

    @classmethod
    def from_checkpoint(
        cls: type[FrontEnd],
        workdir: str | os.PathLike,
        step: int | None = None,
        average_last: int = 0,
        *,
        mesh: MeshLike | None = None,
    ) -> FrontEnd:
        """Loads a workdir written by train.py (or by `transformer-jax convert`).

        Args:
          workdir: the run's directory (local or `gs://`).
          step: the checkpoint step to load; default the latest.
          average_last: if > 1, the element-wise mean of the parameters of the last
            `average_last` checkpoints up to `step` (§6.1 averages the last 5 for base models).
          mesh: serve on this mesh, each parameter restored straight into its shard: axis
            sizes (`{"fsdp": 4, "tensor": 2}` or `"fsdp=4,tensor=2"`) or a `Mesh`. Default:
            replicated on this host's devices.

        Raises:
          MeshError: `mesh` does not fit the devices or the model (a ValueError).
          CheckpointError: the workdir, one of its files or the checkpoint cannot be used, or
            the run is not one this front end serves; the message names the file and what to
            do.
        """
        return cls.from_run(load_run(workdir, step, average_last, mesh=mesh, expect=cls.EXPECT))
