"""`config.init_from`: the field of the tasks that fine-tune, and what such a task reads from the
pretrained workdir before training (the loop then copies its parameters:
`transformer_jax.training.init_from`).

The pretrained workdir is one trained here or one converted from a Hugging Face checkpoint
(`python -m transformer_jax convert`). A text task takes its tokenizer, which the pretrained
embeddings were trained with, and keeps a copy in the new workdir at its first start, so the
new run stands alone: it resumes, evaluates and serves without the pretrained workdir.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import ml_collections
from ml_collections.config_dict import placeholder

from transformer_jax.data import pretrained_tokenizer as converted
from transformer_jax.data.byte_tokenizer import ByteTokenizer
from transformer_jax.data.tokenizer import Tokenizer
from transformer_jax.runs import reading
from transformer_jax.runs.layout import CheckpointError, Workdir
from transformer_jax.runs.tokenizer import AnyTokenizer, load_tokenizer

# How a run keeps its tokenizer (its config's `data.tokenizer`): nothing for bytes, a
# converted checkpoint's `tokenizer/` folder, or a SentencePiece tokenizer.model.
TOKENIZER_KINDS = ("byte", "pretrained", "sentencepiece")


def add_init_from(config: ml_collections.ConfigDict) -> None:
    """Adds `config.init_from` (for a task that declares `fresh_params`, if any, and reads it)."""
    config.init_from = placeholder(str)  # Workdir (trained here or converted) to start from.
    config.init_fresh = ""  # Comma-separated top-level parameters that start anew, e.g. "pooler".


def check_init_from(config: ml_collections.ConfigDict, other_tokenizers: str = "") -> None:
    """Raises unless `config.init_from` is unset, '' (from scratch) or a path; for a task whose
    `data.tokenizer` may be "pretrained" (`other_tokenizers` names its other choices, e.g.
    "'sentencepiece' or 'byte'"), also unless that tokenizer comes with an `init_from`."""
    pretrained_tokens = config.data.get("tokenizer") == "pretrained"
    if other_tokenizers and pretrained_tokens and not config.get("init_from"):
        raise ValueError(
            "config.data.tokenizer='pretrained' is the tokenizer of a converted checkpoint, "
            "which comes with it: set --config.init_from=<its workdir> (python -m "
            f"transformer_jax convert writes one), or use {other_tokenizers}."
        )
    init_from = config.get("init_from")
    if init_from is not None and not isinstance(init_from, str):
        raise ValueError(f"config.init_from must be a workdir path or '', got {init_from!r}.")
    if not isinstance(config.get("init_fresh", ""), str):
        raise ValueError(
            f"config.init_fresh must be a string of comma-separated parameter names (e.g. "
            f"'pooler'), got {config.init_fresh!r}."
        )


def init_from_vocab_size(config: ml_collections.ConfigDict, task: str) -> dict[str, Any] | None:
    """`{"vocab_size": ...}` of the pretrained model a config starts from (`init_from`), or None
    when it starts from scratch: what a task's `abstract_data_values` gives then."""
    if not config.get("init_from"):
        return None
    return {"vocab_size": pretrained_field(config.init_from, "vocab_size", task)}


def init_fresh_names(config: ml_collections.ConfigDict) -> tuple[str, ...]:
    """The top-level parameter names `config.init_fresh` lists (none when unset)."""
    return tuple(n.strip() for n in config.get("init_fresh", "").split(",") if n.strip())


class PretrainedRun(NamedTuple):
    """A pretrained workdir as the loaders read it."""

    workdir: Workdir
    config: ml_collections.ConfigDict  # Its config.json.
    model_cfg: Any  # Its model's config dataclass (model.json).
    tokenizer: AnyTokenizer | None  # Only for a 0.1 workdir, whose model needs it; else None.


def pretrained_workdir(init_from: str, task: str) -> Workdir:
    """The workdir `init_from` names; `CheckpointError` saying how to make one when there is
    none."""
    workdir = Workdir.at(init_from)
    if not workdir.path.is_dir():
        raise CheckpointError(
            f"config.init_from={init_from!r} (the {task} task): no such workdir. Pretrain first "
            f"(python train.py --config=configs/<NAME>.py --workdir={init_from}), or convert a "
            f"Hugging Face checkpoint there (python -m transformer_jax convert --from_hf=<DIR> "
            f"--workdir={init_from}), or set --config.init_from='' to train from scratch."
        )
    return workdir


def read_pretrained(init_from: str, task: str) -> PretrainedRun:
    """The pretrained workdir's config and model config (errors name the file and `task`)."""
    workdir = pretrained_workdir(init_from, task)
    config = workdir.read_config()
    # model.json describes the model whole; only a 0.1 workdir needs its tokenizer for that.
    tokenizer = None if workdir.model_json.is_file() else load_tokenizer(workdir, config)
    return PretrainedRun(
        workdir, config, reading.load_model_config(workdir, config, tokenizer), tokenizer
    )


def pretrained_field(init_from: str, field: str, task: str, workdir: Workdir | None = None) -> Any:
    """A field of the pretrained model (e.g. its `vocab_size`). Once this run has started
    (`workdir` has its model.json) from its own model.json, which holds the same value: a
    resumed run does not need the pretrained workdir."""
    own = workdir.read_model() if workdir is not None else None
    if own is not None and own.get(field) is not None:
        return own[field]
    return getattr(read_pretrained(init_from, task).model_cfg, field)


def tokenizer_kind(config: ml_collections.ConfigDict, workdir: Workdir) -> str:
    """How the run of `config` in `workdir` keeps its tokenizer (one of TOKENIZER_KINDS)."""
    kind = config.get("data", {}).get("tokenizer")
    if kind == "byte":
        return "byte"
    if kind == "pretrained" or converted.in_workdir(workdir.path):
        return "pretrained"
    return "sentencepiece"


def _kept(kind: str, workdir: Workdir) -> AnyTokenizer | None:
    """The tokenizer a run of `kind` keeps in `workdir` (None when it is not there yet)."""
    if kind == "byte":
        return ByteTokenizer()
    if kind == "pretrained":
        if not converted.in_workdir(workdir.path):
            return None
        return converted.load(workdir.path / converted.WORKDIR_FOLDER)
    return Tokenizer.load(workdir.tokenizer_model) if workdir.tokenizer_model.exists() else None


def _where(kind: str, workdir: Workdir) -> str:
    """Where a run of `kind` keeps its tokenizer, for messages."""
    if kind == "byte":
        return "byte tokens"
    if kind == "pretrained":
        return f"{workdir.path / converted.WORKDIR_FOLDER}/"
    return str(workdir.tokenizer_model)


def _keep(tokenizer: AnyTokenizer, kind: str, workdir: Workdir) -> None:
    """Writes the tokenizer's files into `workdir` (process 0), where `_kept` finds them."""
    if jax.process_index() != 0 or kind == "byte":
        return
    if kind == "pretrained":
        tokenizer.save(workdir.path / converted.WORKDIR_FOLDER)
    else:
        tokenizer.save(workdir.tokenizer_model)


def pretrained_tokenizer(
    data: ml_collections.ConfigDict, workdir: Workdir, init_from: str, task: str
) -> AnyTokenizer:
    """The tokenizer of the pretrained workdir `init_from`, kept in `workdir` at the first start:
    a converted checkpoint's `tokenizer/` folder, a SentencePiece tokenizer.model, or nothing
    for bytes. Later (resumed, evaluated) the kept copy is read.

    Args:
      data: the data section: `tokenizer` must name the pretrained run's kind, and
        `spm_model_path` must be unset (the pretrained embeddings fit its tokenizer only).
      workdir: the new run's workdir.
      init_from: the pretrained workdir.
      task: the task's name, for the messages.

    Raises:
      ValueError: `data.tokenizer` is not the pretrained run's kind, `spm_model_path` is
        set, or `workdir` keeps another tokenizer than the pretrained run's (each naming both
        tokenizers and what to set).
      CheckpointError: the pretrained workdir or its tokenizer cannot be read.
    """
    kind = data.tokenizer
    kept = _kept(kind, workdir)
    source = Workdir.at(init_from)
    if kept is not None and not source.path.is_dir():
        return kept  # The run stands alone.
    pretrained = read_pretrained(init_from, task)
    theirs = tokenizer_kind(pretrained.config, pretrained.workdir)
    if kind != theirs:
        raise ValueError(
            f"config.data.tokenizer={kind!r}, but config.init_from={init_from!r} was trained "
            f"with {theirs!r} tokens ({_where(theirs, source)}), the only ones its embeddings "
            f"fit. Set --config.data.tokenizer={theirs} (the {task} task then takes the "
            f"pretrained run's tokenizer)."
        )
    if data.get("spm_model_path") is not None:
        raise ValueError(
            f"config.data.spm_model_path={data.spm_model_path!r}, but config.init_from="
            f"{init_from!r} brings its own tokenizer ({_where(theirs, source)}). Unset "
            f"spm_model_path: the pretrained embeddings only fit the pretrained tokenizer."
        )
    try:
        tokenizer = pretrained.tokenizer or load_tokenizer(source, pretrained.config)
    except CheckpointError:
        if kept is None:
            raise
        return kept  # The pretrained run's tokenizer is gone: the run stands alone.
    if kept is not None:
        if kept.fingerprint != tokenizer.fingerprint:
            raise ValueError(
                f"{workdir.path} keeps another tokenizer ({_where(kind, workdir)}, fingerprint "
                f"{kept.fingerprint}) than config.init_from={init_from!r} "
                f"({_where(theirs, source)}, fingerprint {tokenizer.fingerprint}), whose "
                f"embeddings fit only its own. Use a new --workdir, or the init_from this run "
                f"started from."
            )
        return kept
    _keep(tokenizer, kind, workdir)
    return tokenizer
