"""Read and write a Hugging Face model folder: `config.json` and safetensors, never a pickle.

A folder holds `config.json` and either `model.safetensors` or shards listed by
`model.safetensors.index.json` (`{"weight_map": {tensor name: shard file}}`). Tensors are read
into numpy with the `safetensors` library; a `pytorch_model.bin` (or any pickle) is refused,
since unpickling a file runs the code it carries.

Every problem raises `ConversionError` naming the file and what is wrong with it.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from etils import epath

from transformer_jax import storage

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.ckpt")


class ConversionError(ValueError):
    """A checkpoint or workdir that cannot be converted; the message names the file and the
    field, and says what to do. Nothing is written when it is raised."""


def read_json(path: epath.Path) -> dict[str, Any]:
    """The JSON object in `path`; ConversionError naming the file otherwise."""
    if not path.is_file():
        raise ConversionError(f"{path}: missing. A Hugging Face model folder holds {CONFIG}.")
    try:
        value = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConversionError(f"{path}: not valid JSON ({e}).") from None
    if not isinstance(value, dict):
        raise ConversionError(f"{path}: holds a JSON {type(value).__name__}, not an object.")
    return value


def _refuse_pickles(folder: epath.Path) -> None:
    found = [name for name in PICKLES if (folder / name).exists()]
    found += sorted(p.name for p in folder.glob("pytorch_model-*.bin"))
    if found:
        raise ConversionError(
            f"{folder / found[0]}: a PyTorch pickle, and this folder has no {WEIGHTS}. "
            f"Pickles run code when loaded, so transformer_jax never reads them. Convert it to "
            f"safetensors where PyTorch is installed: `AutoModel.from_pretrained(DIR)."
            f"save_pretrained(DIR, safe_serialization=True)` in transformers, or download the "
            f"model's model.safetensors (most hub models have one)."
        )


def _load_safetensors(path: epath.Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load

    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConversionError(f"{path}: cannot be read ({e}).") from None
    try:
        return load(data)
    except Exception as e:  # SafetensorError: truncated, garbled header, unknown dtype.
        raise ConversionError(
            f"{path}: not a complete safetensors file ({e}; {len(data):,} bytes). Download or "
            f"copy it again."
        ) from None


def read_tensors(folder: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every tensor of the folder's safetensors checkpoint (one file or shards), by name.

    Raises:
      ConversionError: no safetensors checkpoint (a pickle is named as refused), a truncated
        or unreadable file, an index naming a missing shard or missing a listed tensor.
    """
    folder = storage.as_path(folder)
    single, index = folder / WEIGHTS, folder / INDEX
    if single.is_file():
        return _load_safetensors(single)
    if not index.is_file():
        _refuse_pickles(folder)
        raise ConversionError(
            f"{folder}: no {WEIGHTS} and no {INDEX}. Pass the folder `save_pretrained` wrote "
            f"(with safe_serialization=True)."
        )
    weight_map = read_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ConversionError(f"{index}: has no `weight_map` of tensor names to shard files.")
    tensors: dict[str, np.ndarray] = {}
    for shard in sorted(set(weight_map.values())):
        path = folder / str(shard)
        if not path.is_file():
            raise ConversionError(f"{path}: listed in {index.name} but missing.")
        tensors.update(_load_safetensors(path))
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise ConversionError(
            f"{index}: tensors {missing[:5]} are listed but in none of the shards."
        )
    return tensors


def write_folder(
    folder: epath.Path, config: dict[str, Any], tensors: dict[str, np.ndarray]
) -> None:
    """Writes config.json and model.safetensors (float arrays as they are, contiguous)."""
    from safetensors.numpy import save

    folder.mkdir(parents=True, exist_ok=True)
    arrays = {name: np.ascontiguousarray(value) for name, value in tensors.items()}
    storage.write_bytes_atomic(folder / WEIGHTS, save(arrays, metadata={"format": "pt"}))
    storage.write_text_atomic(folder / CONFIG, json.dumps(config, indent=2, sort_keys=True))
