"""Hugging Face model folder -> workdir (`from_hf`), and workdir -> Hugging Face folder (`to_hf`).

An imported workdir is an ordinary one: config.json (task, model, `data.tokenizer =
"pretrained"`), model.json, run.json, the tokenizer in `tokenizer/` and the parameters as the
checkpoint of step 0 (parameters only: fine-tune from it with `config.init_from`); from a
sentence-transformers folder, also embedding.json (its pooling and longest input). Every check
runs before anything is written, so a refused conversion leaves no partial workdir.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import jax
import ml_collections
import numpy as np
from flax import nnx

from transformer_jax import models, storage
from transformer_jax.data import pretrained_tokenizer
from transformer_jax.data.translation.config import default_data_config
from transformer_jax.inference.pooling import EmbeddingSettings
from transformer_jax.interop import bert, gpt2, marian, sentence_transformers, vit
from transformer_jax.interop import tokenizer as tokenizers
from transformer_jax.interop.files import (
    CONFIG,
    ConversionError,
    read_json,
    read_tensors,
    write_folder,
)
from transformer_jax.interop.tensors import Source, fill_params, flat_params
from transformer_jax.nn.positional import sinusoidal_encoding
from transformer_jax.runs import reading
from transformer_jax.runs.checkpoints import Checkpoints
from transformer_jax.runs.identity import model_hash
from transformer_jax.runs.layout import RunIdentity, Workdir
from transformer_jax.runs.tokenizer import load_tokenizer


@dataclasses.dataclass(frozen=True)
class Family:
    """How one `model_type` converts: its module, model name, task and tokenizer kind."""

    module: Any
    model: str
    task: str
    tokenizer: str | None  # "tokenizers", "marian", or None (images).
    defaults: dict[str, str | None]  # Special token strings where the folder names none.


FAMILIES = {
    "gpt2": Family(gpt2, "decoder_only", "language_model", "tokenizers",
                   {"bos": "<|endoftext|>", "eos": "<|endoftext|>", "unk": "<|endoftext|>",
                    "pad": "<|endoftext|>"}),
    "bert": Family(bert, "encoder_only", "bert_pretrain", "tokenizers",
                   {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]",
                    "mask": "[MASK]"}),
    "vit": Family(vit, "vit", "image_classify", None, {}),
    "marian": Family(marian, "encoder_decoder", "translation", "marian",
                     {"pad": "<pad>", "eos": "</s>", "unk": "<unk>", "bos": "<pad>"}),
}  # fmt: skip


@dataclasses.dataclass
class Converted:
    """A checkpoint read and checked, ready to be written as a workdir."""

    model_type: str
    architecture: str
    cfg: Any
    params: Any  # nnx State of arrays
    tokenizer: Any
    task: str
    labels: list[str] | None
    fresh: list[str]  # Parts the checkpoint lacks, left at their initial values.
    dropped: dict[str, float]  # What the conversion leaves out -> the largest |value| dropped.
    embedding: EmbeddingSettings | None = None  # A sentence-transformers folder's pooling.


def _family(hf: dict[str, Any], where: str) -> tuple[str, Family, str]:
    model_type = hf.get("model_type")
    if model_type not in FAMILIES:
        raise ConversionError(
            f"{where}: model_type={model_type!r} cannot be converted; supported: "
            f"{sorted(FAMILIES)} (GPT-2, BERT, ViT, Marian/OPUS-MT)."
        )
    family = FAMILIES[model_type]
    architectures = hf.get("architectures") or [family.module.ARCHITECTURES[0]]
    architecture = architectures[0]
    if architecture not in family.module.ARCHITECTURES:
        raise ConversionError(
            f"{where}: architectures={architectures}; for model_type {model_type!r} "
            f"transformer_jax converts {list(family.module.ARCHITECTURES)}."
        )
    return model_type, family, architecture


def _fresh(cfg: Any) -> dict[str, np.ndarray]:
    """The parameters of a newly initialised model (for heads a checkpoint lacks)."""
    return flat_params(nnx.state(models.build_model(cfg, rngs=nnx.Rngs(0)), nnx.Param))


def _key_bias(source: Source, names: list[str]) -> float:
    """The largest |value| of the key biases the conversion drops (0 when there are none)."""
    values = [np.abs(source.tensors[source.name(n)]).max() for n in names if source.has(n)]
    return float(max(values, default=0.0))


def read_hf(path: str | os.PathLike, *, num_classes: int | None = None) -> Converted:
    """Reads and checks a Hugging Face model folder; nothing is written.

    Args:
      path: a folder with config.json, model.safetensors (or shards and their index) and the
        tokenizer files; or a sentence-transformers folder (modules.json) of a BERT, whose
        pooling is read too.
      num_classes: classes of a new head for a checkpoint without a classifier (`ViTModel`).

    Raises:
      ConversionError: naming the file and the field or tensor that cannot be converted.
    """
    folder = storage.as_path(path)
    pipeline = sentence_transformers.read_pipeline(folder)
    if pipeline is not None:
        folder = pipeline.folder
    where = str(folder / CONFIG)
    hf = read_json(folder / CONFIG)
    model_type, family, architecture = _family(hf, where)
    if pipeline is not None and model_type != "bert":
        raise ConversionError(
            f"{where}: a sentence-transformers model of model_type {model_type!r}; "
            f"transformer_jax embeds sentences with BERT models only."
        )
    try:
        if model_type == "vit":
            cfg = vit.model_config(hf, where, num_classes)
        else:
            cfg = family.module.model_config(hf, where)
    except KeyError as e:
        raise ConversionError(f"{where}: field {e} is missing; {model_type} needs it.") from None
    except (TypeError, ValueError) as e:
        if isinstance(e, ConversionError):
            raise
        raise ConversionError(f"{where}: {e}") from None
    tokenizer = None
    if family.tokenizer is not None:
        tokenizer = tokenizers.read_hf_tokenizer(folder, family.tokenizer, family.defaults)
        if tokenizer.vocab_size > _vocab_size(cfg):
            raise ConversionError(
                f"{folder}: the tokenizer has {tokenizer.vocab_size} tokens but the model "
                f"{_vocab_size(cfg)} (vocab_size in config.json): they are not of one model."
            )
    tensors = read_tensors(folder)
    source = Source(tensors, str(folder), family.module.PREFIXES)
    fresh_heads: list[str] = []
    if model_type == "gpt2":
        values = gpt2.params_from_hf(source, cfg)
        keys = [f"h.{i}.attn.c_attn.bias" for i in range(cfg.num_layers)]
        dropped = {"key biases": _gpt2_key_bias(source, cfg, keys)}
    elif model_type == "bert":
        values, fresh_heads = bert.params_from_hf(source, cfg, _fresh(cfg))
        keys = [f"encoder.layer.{i}.attention.self.key.bias" for i in range(cfg.num_layers)]
        dropped = {"key biases": _key_bias(source, keys)}
    elif model_type == "vit":
        processor_path = folder / "preprocessor_config.json"
        processor = read_json(processor_path) if processor_path.is_file() else None
        mean, std = vit.normalisation(processor, cfg.channels, str(processor_path))
        values, fresh_heads = vit.params_from_hf(source, cfg, _fresh(cfg), mean, std)
        keys = [f"encoder.layer.{i}.attention.attention.key.bias" for i in range(cfg.num_layers)]
        dropped = {"key biases": _key_bias(source, keys)}
    else:
        values, dropped = marian.params_from_hf(source, cfg)
    unused = source.unused(getattr(family.module, "IGNORED", ()))
    if unused:
        raise ConversionError(
            f"{folder}: tensors {unused[:6]} have no place in the {architecture} model "
            f"transformer_jax builds from config.json; refusing to drop them silently."
        )
    _, abstract = models.abstract_model(cfg)
    params = jax.tree.map(jax.numpy.asarray, fill_params(abstract, values, str(folder)))
    labels = _labels(hf, cfg, model_type, architecture)
    task = "classify" if architecture == "BertForSequenceClassification" else family.task
    embedding = None if pipeline is None else pipeline.settings(cfg.max_len, tokenizer)
    return Converted(model_type, architecture, cfg, params, tokenizer, task, labels,
                     fresh_heads, dropped, embedding)  # fmt: skip


def _gpt2_key_bias(source: Source, cfg, names: list[str]) -> float:
    d = cfg.d_model
    values = [np.abs(source.tensors[source.name(n)][d : 2 * d]).max() for n in names]
    return float(max(values, default=0.0))


def _vocab_size(cfg: Any) -> int:
    return cfg.vocab_size


def _labels(hf: dict, cfg: Any, model_type: str, architecture: str) -> list[str] | None:
    count = getattr(cfg, "num_classes", None) if model_type == "vit" else None
    if architecture == "BertForSequenceClassification":
        count = cfg.num_labels
    if count is None:
        return None
    names = hf.get("id2label") or {}
    return [str(names.get(str(i), names.get(i, f"LABEL_{i}"))) for i in range(count)]


def _config(converted: Converted, source: str) -> ml_collections.ConfigDict:
    """The config.json of the imported workdir."""
    cfg = converted.cfg
    model_name = models.spec_of(cfg).name
    data: dict[str, Any] = {}
    if converted.task == "translation":
        # `evaluate` scores the split of text files set here (data.text_test_tsv, ...).
        data = default_data_config().to_dict() | {"source": "text"}
    if converted.tokenizer is not None:
        data["tokenizer"] = "pretrained"
    if hasattr(cfg, "max_len"):
        data["max_len"] = cfg.max_len
    return ml_collections.ConfigDict(
        {
            "task": converted.task,
            "model": {"name": model_name, **dataclasses.asdict(cfg)},
            "data": data,
            "seed": 0,
            "imported": {
                "source": source,
                "model_type": converted.model_type,
                "architecture": converted.architecture,
            },
        }
    )


def write_workdir(converted: Converted, workdir: str | os.PathLike, source: str) -> Workdir:
    """Writes an imported workdir (see the module doc). Refuses a workdir that has files."""
    out = Workdir.at(workdir)
    if out.path.exists() and any(out.path.iterdir()):
        raise ConversionError(
            f"{out.path}: not empty. Convert into a new workdir (nothing was written)."
        )
    config = _config(converted, source)
    out.path.mkdir(parents=True, exist_ok=True)
    out.write_config(config)
    out.write_model(models.spec_of(converted.cfg).name, converted.cfg)
    identity = RunIdentity.new(model_hash(config))
    out.write_identity(identity)
    if converted.tokenizer is not None:
        converted.tokenizer.save(out.path / pretrained_tokenizer.WORKDIR_FOLDER)
    if converted.labels is not None:
        labels = {"label_names": converted.labels, "pair": None}  # Texts or pairs alike.
        if converted.model_type == "vit":
            labels = {"label_names": converted.labels}
        storage.write_text_atomic(out.labels_json, json.dumps(labels, indent=1))
    if converted.embedding is not None:
        converted.embedding.write(out)
    params = jax.tree.map(jax.numpy.asarray, converted.params)  # Numpy leaves too.
    ckpt = Checkpoints(out, identity=identity, keep=1)
    try:
        meta = {"seed": 0, "imported_from": source}
        ckpt.save(0, {"params": params}, {}, meta, force=True)
        ckpt.wait()
    finally:
        ckpt.close()
    return out


def from_hf(path: str | os.PathLike, workdir: str | os.PathLike, **kwargs) -> Converted:
    """Converts a Hugging Face model folder into a workdir (see `read_hf`, `write_workdir`)."""
    converted = read_hf(path, **kwargs)
    write_workdir(converted, workdir, str(path))
    return converted


# ------------------------------------------------------------------------------ export
_EXPORTS = {"decoder_only": gpt2, "encoder_only": bert, "vit": vit}


def _positions(cfg: Any, flat: dict[str, np.ndarray]) -> np.ndarray:
    """The `[max_len, D]` table a decoder-only model adds: learned, or sinusoidal written out."""
    if cfg.positional == "learned":
        return flat["pos_embed"]
    layout = "halves" if cfg.positional == "sinusoidal_halves" else "interleaved"
    return np.asarray(sinusoidal_encoding(cfg.max_len, cfg.d_model, layout=layout), np.float32)


def to_hf(workdir: str | os.PathLike, path: str | os.PathLike, step: int | None = None) -> str:
    """Writes a GPT, BERT or ViT workdir's parameters (latest step, or `step`) as a Hugging Face
    folder: config.json, model.safetensors, and the tokenizer (tokenizer.json for a converted
    one, the SentencePiece model for one trained here) or ViT's preprocessor_config.json.

    Returns:
      The architecture written (e.g. "GPT2LMHeadModel").

    Raises:
      ConversionError: the model has a field its Hugging Face class cannot hold (named), or
        the output folder is not empty. Nothing is written then.
    """
    source = Workdir.at(workdir).require()
    config = source.read_config()
    name = config.model.get("name")
    if name not in _EXPORTS:
        raise ConversionError(
            f"{source.config_json}: a {name!r} model; to_hf exports {sorted(_EXPORTS)} "
            f"(GPT-2, BERT, ViT classes). Translation models export to CTranslate2."
        )
    tokenizer = load_tokenizer(source, config) if name != "vit" else None
    cfg = reading.load_model_config(source, config, tokenizer)
    module = _EXPORTS[name]
    module.check_exportable(cfg, str(source.model_json))
    out = storage.as_path(path)
    if out.exists() and any(out.iterdir()):
        raise ConversionError(f"{out}: not empty. Export into a new folder (nothing was written).")
    model, _ = reading.load_model(source, config, tokenizer, step)
    flat = flat_params(nnx.state(model, nnx.Param))
    if name == "decoder_only":
        tensors = gpt2.params_to_hf(flat, cfg, _positions(cfg, flat))
        hf = gpt2.config_to_hf(cfg, tokenizer.bos_id, tokenizer.eos_id)
    elif name == "encoder_only":
        labels = _label_names(source) if config.get("task") == "classify" else None
        tensors = bert.params_to_hf(flat, cfg, classifier=labels is not None)
        hf = bert.config_to_hf(cfg, tokenizer.pad_id or 0, labels)
    else:
        tensors = vit.params_to_hf(flat, cfg)
        hf = vit.config_to_hf(cfg)
    write_folder(out, hf, tensors)
    if name == "vit":
        processor = json.dumps(vit.preprocessor_to_hf(cfg), indent=2)
        storage.write_text_atomic(out / "preprocessor_config.json", processor)
    else:
        _write_tokenizer(tokenizer, out)
    return hf["architectures"][0]


def _label_names(workdir: Workdir) -> list[str]:
    """The label names of a classifier's labels.json."""
    try:
        return list(json.loads(workdir.labels_json.read_text())["label_names"])
    except (OSError, ValueError, KeyError) as e:
        raise ConversionError(f"{workdir.labels_json}: missing or unreadable ({e}).") from None


def _write_tokenizer(tokenizer: Any, out) -> None:
    """The tokenizer beside exported weights: tokenizer.json with its special tokens and
    `add_bos_token` for a converted one; a SentencePiece model trained here is written as
    tokenizer.model."""
    if isinstance(tokenizer, pretrained_tokenizer.PretrainedTokenizer):
        tokenizer.save(out)
        config = {f"{role}_token": token for role, token in tokenizer.special_tokens.items()}
        config["add_bos_token"] = tokenizer.add_bos
        storage.write_text_atomic(out / "tokenizer_config.json", json.dumps(config, indent=2))
    elif hasattr(tokenizer, "model_proto"):
        storage.write_bytes_atomic(out / "tokenizer.model", tokenizer.model_proto)
