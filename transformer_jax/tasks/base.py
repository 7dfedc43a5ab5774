"""The task interface: everything the training loop needs to know about one kind of problem.

A task owns its data (sources, tokenizer, batches), its loss, its evaluation and what "best"
means. The loop (`transformer_jax.training.loop`) trains any registered model on any task
through this interface only: a new task is a new subclass registered in `tasks/__init__.py`.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import jax
import ml_collections
from flax import nnx
from jax.sharding import Mesh

from transformer_jax.workdir import Workdir


@runtime_checkable
class ResumableIterator(Protocol):
    """An infinite iterator of host-local numpy batches whose position is JSON."""

    def __next__(self) -> dict[str, Any]: ...

    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...


def check_model_name(config: ml_collections.ConfigDict, task: str, model: str) -> None:
    """Raises unless `config.model.name` is the model `task` trains."""
    if config.model.name != model:
        raise ValueError(
            f"config.task={task!r} trains the {model!r} model, but config.model.name="
            f"{config.model.name!r}. Use models.config_section({model!r}, ...)."
        )


def check_positions(config: ml_collections.ConfigDict) -> None:
    """Raises when data rows are longer than the model's learned positions."""
    if config.data.max_len > config.model.max_len:
        raise ValueError(
            f"config.data.max_len={config.data.max_len} exceeds the model's learned "
            f"positions config.model.max_len={config.model.max_len}. Lower the first or raise "
            f"the second."
        )


class Task(abc.ABC):
    """One kind of problem.

    Class attributes:
      name: the registry key, as written in `config.task`.
      normalizer: the key of the metric sums the loss is averaged over (e.g. target tokens).
      best_metric, best_mode: the validation metric that picks the best checkpoint, and
        whether higher ("max") or lower ("min") is better.
      model_defining_data_fields: `config.data` fields that fix the parameters' shapes or the
        meaning of the inputs (e.g. the vocabulary): a workdir trained with other values is
        refused rather than resumed.
      fresh_params: top-level parameter names that `config.init_from` leaves newly initialised
        (a fine-tuning task's heads).
    """

    name: ClassVar[str]
    normalizer: ClassVar[str]
    best_metric: ClassVar[str]
    best_mode: ClassVar[str]
    model_defining_data_fields: ClassVar[tuple[str, ...]] = ()
    fresh_params: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: ml_collections.ConfigDict, workdir: Workdir):
        """Prepares the data (e.g. trains or loads the tokenizer into the workdir)."""
        self.config = config
        self.workdir = workdir

    @classmethod
    @abc.abstractmethod
    def validate(cls, config: ml_collections.ConfigDict) -> None:
        """Raises ValueError naming the first bad field of the config this task reads."""

    @classmethod
    def resolve_config(cls, config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
        """The config as the workdir should record it (e.g. data paths made absolute)."""
        return config

    @abc.abstractmethod
    def data_values(self) -> Mapping[str, Any]:
        """The model fields the data decides (e.g. `vocab_size` from the tokenizer)."""

    @abc.abstractmethod
    def train_iterator(self) -> ResumableIterator | Iterator[dict[str, Any]]:
        """This host's infinite training batches (numpy), resumable with get/set_state."""

    @abc.abstractmethod
    def eval_batches(self) -> Sequence[dict[str, Any]]:
        """This host's fixed-shape validation batches for `loss_fn`."""

    @abc.abstractmethod
    def loss_fn(
        self,
        model: nnx.Module,
        batch: dict[str, jax.Array],
        rng: jax.Array | None,
        deterministic: bool,
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """(summed loss, metric sums) of one batch: pure JAX, traced inside the jitted step.

        Sums, not means, so that micro-batches, devices and batches add up exactly; the sums
        include the count under `normalizer`.
        """

    @abc.abstractmethod
    def summarize(self, sums: Mapping[str, Any]) -> dict[str, float]:
        """Means (loss, accuracy, ...) from metric sums added over batches."""

    def evaluate(
        self, model: nnx.Module, split: str, *, mesh: Mesh
    ) -> tuple[dict[str, Any], str | None]:
        """Metrics that need more than the loss (e.g. decoding and BLEU) on "eval" or "test".

        Returns the metrics (empty when the config asks for none) and a line to print.
        """
        del model, split, mesh
        return {}, None
