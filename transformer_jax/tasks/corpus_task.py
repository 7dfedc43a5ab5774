"""What the tasks that read documents through the language-model data config share (GPT's next
token, BERT's masked LM and next sentence): their paths made absolute, the data fields that
define the model, its vocabulary before the data is read, and the rows of a split's batch."""

from __future__ import annotations

from typing import Any

import ml_collections

from transformer_jax.data.byte_tokenizer import ByteTokenizer
from transformer_jax.data.lm import config as lm_config
from transformer_jax.data.tokenizer import configured_vocab_size
from transformer_jax.tasks import pretrained
from transformer_jax.tasks.base import Task


class CorpusTask(Task):
    """A task whose `config.data` is the language-model data config."""

    absolute_data_paths = staticmethod(lm_config.with_absolute_paths)
    model_defining_data_fields = lm_config.MODEL_DEFINING_FIELDS

    @staticmethod
    def batch_rows(data: ml_collections.ConfigDict, split: str) -> int:
        """Rows of a batch of `split`: the training batch's from its tokens, else eval's."""
        return lm_config.rows_per_batch(data) if split == "train" else data.eval_batch_size

    @classmethod
    def abstract_data_values(cls, config: ml_collections.ConfigDict) -> dict[str, Any]:
        """vocab_size: with init_from the pretrained model's; 260 for byte tokens; the pieces of
        `data.spm_model_path` when set; else `data.vocab_size`, an upper bound (a small corpus
        trains fewer pieces)."""
        data = config.data
        if from_pretrained := pretrained.init_from_vocab_size(config, cls.name):
            return from_pretrained
        if data.get("tokenizer") == "byte":
            return {"vocab_size": ByteTokenizer.vocab_size}
        return {"vocab_size": configured_vocab_size(data.vocab_size, data.spm_model_path)}
