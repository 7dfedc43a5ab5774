"""Read a sentence-transformers folder: where its BERT lies, its pooling, its longest input.

What `SentenceTransformer.save` writes (all-MiniLM-L6-v2's layout):

    modules.json                  the modules in order: Transformer, Pooling, Normalize
    config.json, model.safetensors, tokenizer files    the Transformer (its "path" is "")
    sentence_bert_config.json     `max_seq_length` (older versions), `do_lower_case`
    1_Pooling/config.json         `pooling_mode` ("mean", "cls", ...), or in older versions
                                  one boolean per mode (`pooling_mode_mean_tokens`, ...)
    2_Normalize/                  L2 normalisation (no weights)

Older folders keep the Transformer in a subfolder (`0_Transformer/`), which modules.json names.
The conversion reads the BERT as any Hugging Face folder, and records the pooling and the
longest input in the workdir (`transformer_jax.inference.pooling.EmbeddingSettings`). A
pipeline the embedder cannot reproduce (a Dense layer after pooling, max pooling, several
modes concatenated) is refused by name, so that a converted workdir never embeds differently
from the model it came from without saying so.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from etils import epath

from transformer_jax import storage
from transformer_jax.inference.pooling import POOLINGS, EmbeddingSettings
from transformer_jax.interop.files import ConversionError, read_json

MODULES = "modules.json"
# sentence-transformers' module classes (the last part of modules.json's "type") read here.
TRANSFORMER, POOLING, NORMALIZE = "Transformer", "Pooling", "Normalize"
# Older 1_Pooling/config.json files: one boolean per mode, in sentence-transformers' order.
LEGACY_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """A sentence-transformers folder as read: the Transformer's folder and what follows it."""

    folder: epath.Path  # The Transformer module's folder: config.json, weights, tokenizer.
    pooling: str  # One of `inference.pooling.POOLINGS`.
    max_seq_length: int | None  # The longest input it names (None: the model's positions).
    lowercase: bool  # sentence_bert_config.json's do_lower_case.

    def settings(self, positions: int, tokenizer: Any) -> EmbeddingSettings:
        """What the workdir records, the longest input capped at the model's positions.

        Raises:
          ConversionError: do_lower_case is set but the tokenizer keeps capitals (the
            embedder would not lower-case as sentence-transformers does).
        """
        if self.lowercase and tokenizer.encode("HELLO World") != tokenizer.encode("hello world"):
            raise ConversionError(
                f"{self.folder / 'sentence_bert_config.json'}: do_lower_case is true but the "
                f"tokenizer keeps capitals; transformer_jax embeds texts as the tokenizer "
                f"reads them. Use a tokenizer.json whose normalizer lower-cases."
            )
        longest = positions if self.max_seq_length is None else self.max_seq_length
        return EmbeddingSettings(self.pooling, min(longest, positions))


def _module_type(entry: Any, where: str) -> tuple[str, str]:
    """(class name, path) of one modules.json entry."""
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        raise ConversionError(f"{where}: an entry without a 'type': {entry!r:.200}.")
    path = entry.get("path", "")
    if not isinstance(path, str):
        raise ConversionError(f"{where}: the 'path' of {entry['type']} is not a string.")
    return entry["type"].rsplit(".", 1)[-1], path


def _pooling_mode(folder: epath.Path) -> str:
    """The pooling of a Pooling module's config.json, old or new format."""
    path = folder / "config.json"
    config = read_json(path)
    if "pooling_mode" in config:
        mode = config["pooling_mode"]
        modes = [mode] if isinstance(mode, str) else list(mode)
    else:
        modes = [name for key, name in LEGACY_MODES.items() if config.get(key)]
        modes = modes or ["mean"]  # sentence-transformers' default when none is set.
    if len(modes) != 1 or modes[0] not in POOLINGS:
        raise ConversionError(
            f"{path}: pooling {modes}; transformer_jax's embedder pools one way, "
            f"{' or '.join(POOLINGS)}, so this model's embeddings cannot be reproduced."
        )
    return modes[0]


def _max_seq_length(st_config: dict[str, Any], folder: epath.Path) -> int | None:
    """sentence_bert_config.json's max_seq_length, else the tokenizer's model_max_length
    (where sentence-transformers 3+ keeps it), else None."""
    value = st_config.get("max_seq_length")
    where = "sentence_bert_config.json"
    if value is None:
        path = folder / "tokenizer_config.json"
        value = read_json(path).get("model_max_length") if path.is_file() else None
        where = "tokenizer_config.json"
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 3:
        raise ConversionError(f"{folder / where}: max length {value!r} is not an integer >= 3.")
    return int(min(value, 2**31 - 1))  # Tokenizers write 1e30 for "no limit".


def read_pipeline(folder: str | os.PathLike) -> Pipeline | None:
    """The folder's sentence-transformers pipeline, or None when it has no modules.json.

    Raises:
      ConversionError: modules.json is not Transformer -> Pooling (-> Normalize), a module
        folder is missing, or the pooling is not one the embedder reproduces.
    """
    folder = storage.as_path(folder)
    path = folder / MODULES
    if not path.is_file():
        return None
    try:
        entries = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConversionError(f"{path}: not valid JSON ({e}).") from None
    if not isinstance(entries, list):
        raise ConversionError(f"{path}: holds a JSON {type(entries).__name__}, not a list.")
    modules = [_module_type(entry, str(path)) for entry in entries]
    kinds = [kind for kind, _ in modules]
    if kinds not in ([TRANSFORMER, POOLING], [TRANSFORMER, POOLING, NORMALIZE]):
        raise ConversionError(
            f"{path}: modules {kinds}; transformer_jax converts Transformer -> Pooling "
            f"(-> Normalize), and cannot reproduce the others' outputs. To import the BERT "
            f"alone, convert a copy of the folder without {MODULES}."
        )
    transformer, pooling = (folder / p if p else folder for _, p in modules[:2])
    for module in (transformer, pooling):
        if not module.is_dir():
            raise ConversionError(f"{module}: missing; {path} names it.")
    st_path = transformer / "sentence_bert_config.json"
    st_config = read_json(st_path) if st_path.is_file() else {}
    return Pipeline(
        transformer,
        _pooling_mode(pooling),
        _max_seq_length(st_config, transformer),
        bool(st_config.get("do_lower_case", False)),
    )
