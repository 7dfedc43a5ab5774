"""The task interface: everything the training loop and the evaluate command need to know
about one kind of problem.

A task owns its config fields (beside the model, data and loop fields every config has), its
data (sources, tokenizer, batches), its loss, its evaluation and what "best" means. The loop
(`transformer_jax.training.loop`) trains any registered model on any task, and
`python -m transformer_jax evaluate` scores any run, through this interface only: a new task is
a new subclass registered with `transformer_jax.tasks.register`.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import jax
import ml_collections
from flax import nnx
from jax.sharding import Mesh

from transformer_jax import storage
from transformer_jax.runs.layout import Workdir
from transformer_jax.tasks.split_scores import split_sums

SPLITS = ("train", "eval", "test")  # "test" batches have the shape of "eval" batches.


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


def check_split(split: str) -> None:
    """Raises unless `split` names a split whose batches a task can describe."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}.")


def check_positions(config: ml_collections.ConfigDict) -> None:
    """Raises when data rows are longer than the model's learned positions."""
    if config.data.max_len > config.model.max_len:
        raise ValueError(
            f"config.data.max_len={config.data.max_len} exceeds the model's learned "
            f"positions config.model.max_len={config.model.max_len}. Lower the first or raise "
            f"the second."
        )


@dataclasses.dataclass(frozen=True)
class ScoreOptions:
    """How `Task.score_split` scores a split: the evaluate command's flags. Each task reads the
    options that apply to it; the defaults are what the loop's final test uses."""

    baselines: bool | None = None  # The task's baselines too; None: the config's choice.
    max_examples: int = 0  # Score only the first N examples where the task can (0: all).
    beam_size: int = 1  # Decoding tasks: beam size (1: greedy).
    alpha: float = 0.6  # Decoding tasks: length-penalty exponent.
    batch_size: int | None = None  # Decoding tasks: rows per batch (None: the config's).
    max_len: int | None = None  # Decoding tasks: most output tokens (None: the default).
    progress: bool = False  # A progress bar on stderr where the task has one.


@dataclasses.dataclass(frozen=True)
class SplitScores:
    """A whole split's figures, as `Task.score_split` returns them."""

    metrics: dict[str, Any]  # JSON-able figures, e.g. {"bleu": 27.3, ...}.
    report: str  # What to print: a line, or a few (baselines, a confusion table).
    kind: str  # Names the evaluate command's files: eval/<split>.step<S>.<kind>.json.
    outputs: list[str] | None = None  # One output per example (hypotheses), if the task has.
    label_names: tuple[str, ...] | None = None  # With metrics["confusion"]: the classes.


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
      fresh_fields: model fields that size the fresh parameters or choose what they read
        (e.g. the number of labels, the pooling): they may differ from the pretrained model's.
      init_from_hints: for model fields the data decides, what to set so that they match the
        pretrained model's (shown when they differ; "{value}" is the pretrained value).
      score_kind: names the evaluate command's files for this task (`SplitScores.kind`).
      tokenizer: the task's tokenizer once constructed (None for tasks without text).
    """

    name: ClassVar[str]
    normalizer: ClassVar[str]
    best_metric: ClassVar[str]
    best_mode: ClassVar[str]
    model_defining_data_fields: ClassVar[tuple[str, ...]] = ()
    fresh_params: ClassVar[tuple[str, ...]] = ()
    fresh_fields: ClassVar[tuple[str, ...]] = ()
    init_from_hints: ClassVar[Mapping[str, str]] = {}
    score_kind: ClassVar[str] = "scores"
    tokenizer: Any = None

    @classmethod
    def add_config_fields(cls, config: ml_collections.ConfigDict) -> None:
        """Adds this task's own fields, with their defaults, to the top level of `config`
        (configs/common.py calls it); each field has a one-line comment saying what it does.
        A task without fields of its own adds nothing."""
        del config

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
        """The config as the workdir should record it: a copy with the data section's paths
        (`absolute_data_paths`) and `init_from` made absolute, so that the run reads the same
        files from wherever it is resumed or served."""
        config = copy.deepcopy(config)
        config.data = cls.absolute_data_paths(config.data)
        if config.get("init_from"):
            config.init_from = str(storage.as_path(config.init_from))
        return config

    @staticmethod
    def absolute_data_paths(data: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
        """The data section with its file paths made absolute (none by default)."""
        return data

    @classmethod
    def without_data(cls, config: ml_collections.ConfigDict) -> Task:
        """The task with its config and no data: `loss_fn`, `normalizer` and
        `inference_programs` work, nothing that reads data does. What compiling ahead of time
        (`transformer_jax.aot`) uses, where the data may not exist."""
        task = cls.__new__(cls)
        task.config, task.workdir = config, None
        return task

    def inference_programs(
        self, graphdef: nnx.GraphDef, params: nnx.State, mesh: Mesh
    ) -> dict[str, tuple[Callable[[], Any], int, str]]:
        """The task's serving programs, to compile ahead of time from shapes: name ->
        (lower() -> jax Lowered, items per call, unit). `params` are ShapeDtypeStructs with
        their shardings on `mesh`; inputs take the config's serving batch. None by default."""
        del graphdef, params, mesh
        return {}

    @abc.abstractmethod
    def data_values(self) -> Mapping[str, Any]:
        """The model fields the data decides (e.g. `vocab_size` from the tokenizer)."""

    @classmethod
    def abstract_data_values(cls, config: ml_collections.ConfigDict) -> dict[str, Any]:
        """What `data_values()` would return, from the config alone: nothing is read but a
        file the config names for the purpose (a tokenizer model); where only the data can
        tell, each task says what it gives instead (an upper bound, or a stated default)."""
        raise NotImplementedError(
            f"task {cls.name!r} does not give its data values from the config "
            f"({cls.__qualname__}.abstract_data_values)."
        )

    @classmethod
    def batch_spec(
        cls, config: ml_collections.ConfigDict, split: str = "train", *, process_count: int = 1
    ) -> dict[str, jax.ShapeDtypeStruct]:
        """The global shapes and dtypes of one batch of `split` ("train" or "eval"; "test" has
        eval's) as `loss_fn` receives it, from the config alone (no data read, nothing
        allocated).

        Global: the rows of all processes together (each host yields its share, which
        `global_batch` joins). Where training batches come in several shapes, the one that
        needs the most memory: the worst case to compile.

        Args:
          config: a config of this task.
          split: "train", "eval" or "test".
          process_count: the hosts the run would have (global rows may be rounded to a
            multiple of it).

        Returns:
          Batch key -> `jax.ShapeDtypeStruct` (no sharding).
        """
        raise NotImplementedError(
            f"task {cls.name!r} does not give its batch shapes from the config "
            f"({cls.__qualname__}.batch_spec)."
        )

    @abc.abstractmethod
    def train_iterator(self) -> ResumableIterator | Iterator[dict[str, Any]]:
        """This host's infinite training batches (numpy), resumable with get/set_state."""

    @abc.abstractmethod
    def eval_batches(self, split: str = "eval") -> Sequence[dict[str, Any]]:
        """This host's fixed-shape batches of a split ("eval" = validation) for `loss_fn`."""

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
        """What the loop reports beyond the loss: at each evaluation ("eval"; nothing by default,
        the loop has the validation metrics already) and at the end ("test": `score_split`).

        Returns the metrics (empty when there are none) and a line to print (or None).
        """
        if split == "eval":
            return {}, None
        scores = self.score_split(model, split, mesh=mesh)
        return ({}, None) if scores is None else (scores.metrics, scores.report)

    def score_split(
        self, model: nnx.Module, split: str, *, mesh: Mesh, options: ScoreOptions | None = None
    ) -> SplitScores | None:
        """A whole split's figures, or None when the split is empty. By default the summarized
        loss metrics over `eval_batches(split)`; tasks add their own measures and baselines."""
        del options
        sums = split_sums(self.loss_fn, model, self.eval_batches(split), mesh)
        if sums is None:
            return None
        metrics = self.summarize(sums)
        report = f"{split}: " + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())
        return SplitScores(metrics, report, self.score_kind)
