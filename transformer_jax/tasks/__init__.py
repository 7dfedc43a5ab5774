"""Tasks: what differs between translation, language modelling, BERT pretraining, text and image
classification.

A training config names its task (`config.task = "translation"`); `get(name)` gives its class.
A new task is a `Task` subclass made known with `register` (its module, its data under
`transformer_jax/data/`, a config under `configs/`): the training loop and the evaluate
command use it through the `Task` interface alone.
"""

from transformer_jax.tasks.base import ResumableIterator, ScoreOptions, SplitScores, Task
from transformer_jax.tasks.bert_pretrain import BertPretrainTask
from transformer_jax.tasks.classify import ClassificationTask
from transformer_jax.tasks.image_classify import ImageClassificationTask
from transformer_jax.tasks.label_task import LabelTask
from transformer_jax.tasks.language_model import LanguageModelTask
from transformer_jax.tasks.translation import TranslationTask

_TASKS: dict[str, type[Task]] = {}


def register(cls: type) -> type:
    """Makes `cls` known as `cls.name` (usable as a class decorator); returns `cls`.

    Raises:
      ValueError: another class is registered under that name.
    """
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise TypeError(f"register takes a Task subclass, got {cls!r}.")
    known = _TASKS.get(cls.name)
    if known is not None and known is not cls:
        raise ValueError(f"task name {cls.name!r} is taken by {known.__qualname__}.")
    _TASKS[cls.name] = cls
    return cls


for _cls in (
    TranslationTask,
    LanguageModelTask,
    BertPretrainTask,
    ClassificationTask,
    ImageClassificationTask,
):
    register(_cls)


def get(name: object) -> type[Task]:
    """The task class registered as `name` (any value a config holds); the error lists the
    known names."""
    if not isinstance(name, str) or name not in _TASKS:
        raise ValueError(f"config.task={name!r} is not a known task; known: {sorted(_TASKS)}.")
    return _TASKS[name]


__all__ = [
    "BertPretrainTask",
    "ClassificationTask",
    "ImageClassificationTask",
    "LabelTask",
    "LanguageModelTask",
    "ResumableIterator",
    "ScoreOptions",
    "SplitScores",
    "Task",
    "TranslationTask",
    "get",
    "register",
]
