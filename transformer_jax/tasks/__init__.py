"""Tasks: what differs between translation, language modelling, BERT pretraining, text and image
classification.

A training config names its task (`config.task = "translation"`); `get(name)` gives its class.
"""

from transformer_jax.tasks.base import ResumableIterator, Task
from transformer_jax.tasks.bert_pretrain import BertPretrainTask
from transformer_jax.tasks.classify import ClassificationTask
from transformer_jax.tasks.image_classify import ImageClassificationTask
from transformer_jax.tasks.language_model import LanguageModelTask
from transformer_jax.tasks.translation import TranslationTask

_TASKS: dict[str, type[Task]] = {
    cls.name: cls
    for cls in (
        TranslationTask,
        LanguageModelTask,
        BertPretrainTask,
        ClassificationTask,
        ImageClassificationTask,
    )
}


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
    "LanguageModelTask",
    "ResumableIterator",
    "Task",
    "TranslationTask",
    "get",
]
