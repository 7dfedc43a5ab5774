"""Read the tokenizer of a Hugging Face model folder (the classes: `transformer_jax.data.
pretrained_tokenizer`): tokenizer.json, or BERT's bare vocab.txt, or Marian's source.spm,
target.spm and vocab.json, with the special tokens its configs name."""

from __future__ import annotations

import json
from typing import Any

from etils import epath

from transformer_jax.data.pretrained_tokenizer import ROLES, MarianTokenizer, PretrainedTokenizer
from transformer_jax.interop.files import ConversionError


def _token(value: Any) -> str | None:
    """A token string from tokenizer_config.json, where it may be an AddedToken dict."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def _read_config(path: epath.Path) -> dict[str, Any]:
    """A tokenizer config file's JSON object ({} when the folder has no such file)."""
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConversionError(f"{path}: not valid JSON ({e}).") from None
    if not isinstance(config, dict):
        raise ConversionError(f"{path}: not a JSON object.")
    return config


def _hf_specials(folder: epath.Path, defaults: dict[str, str | None]) -> dict[str, str | None]:
    """Token strings by role from special_tokens_map.json / tokenizer_config.json, else defaults."""
    tokens = dict(defaults)
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        config = _read_config(folder / name)
        for role in ROLES:
            if _token(config.get(f"{role}_token")) is not None:
                tokens[role] = _token(config.get(f"{role}_token"))
    return tokens


def _add_bos(folder: epath.Path) -> bool:
    """tokenizer_config.json's `add_bos_token`: whether the tokenizer puts bos before a text
    (false when absent, as for GPT-2, whose text-generation pipeline continues the prompt
    alone)."""
    path = folder / "tokenizer_config.json"
    value = _read_config(path).get("add_bos_token", False)
    if not isinstance(value, bool):
        raise ConversionError(f"{path}: add_bos_token must be true or false, got {value!r}.")
    return value


def _wordpiece_json(vocab: epath.Path, lowercase: bool) -> str:
    from tokenizers.implementations import BertWordPieceTokenizer

    return BertWordPieceTokenizer(str(vocab), lowercase=lowercase).to_str()


def _byte_level_json(vocab: epath.Path, merges: epath.Path, specials: list[str]) -> str:
    """GPT-2's byte-level BPE from vocab.json + merges.txt, its special tokens kept whole."""
    from tokenizers.implementations import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer(str(vocab), str(merges), add_prefix_space=False)
    tokenizer.add_special_tokens(specials)
    return tokenizer.to_str()


def read_hf_tokenizer(folder: epath.Path, kind: str, defaults: dict[str, str | None]):
    """The tokenizer of a Hugging Face model folder.

    Args:
      kind: "tokenizers" (tokenizer.json, or BERT's vocab.txt, or GPT-2's vocab.json and
        merges.txt) or "marian".
      defaults: token strings by role where the folder's configs name none (e.g. GPT-2's
        `<|endoftext|>` as bos, eos and pad).

    Raises:
      ConversionError: no tokenizer files, or a special token not in the vocabulary.
    """
    tokens = _hf_specials(folder, defaults)
    if kind == "marian":
        files = [folder / n for n in ("source.spm", "target.spm", "vocab.json")]
        missing = [str(p) for p in files if not p.is_file()]
        if missing:
            raise ConversionError(
                f"{missing[0]}: missing; an OPUS-MT folder holds source.spm, target.spm and "
                f"vocab.json."
            )
        try:
            vocab = json.loads(files[2].read_text())
        except json.JSONDecodeError as e:
            raise ConversionError(f"{files[2]}: not valid JSON ({e}).") from None
        return MarianTokenizer(
            files[0].read_bytes(), files[1].read_bytes(), vocab, tokens, where=str(folder)
        )
    add_bos = _add_bos(folder)
    if (folder / "tokenizer.json").is_file():
        where = str(folder / "tokenizer.json")
        json_text = (folder / "tokenizer.json").read_text()
    elif (folder / "vocab.txt").is_file():
        lower = _read_config(folder / "tokenizer_config.json").get("do_lower_case", True)
        where, json_text = str(folder / "vocab.txt"), _wordpiece_json(folder / "vocab.txt", lower)
    elif (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        specials = sorted({t for t in tokens.values() if t})
        where = str(folder / "vocab.json")
        json_text = _byte_level_json(folder / "vocab.json", folder / "merges.txt", specials)
    else:
        raise ConversionError(
            f"{folder}: no tokenizer.json (or vocab.txt, or vocab.json with merges.txt). Copy "
            f"the model's tokenizer files into the folder: the workdir needs its tokenizer."
        )
    try:
        return PretrainedTokenizer(json_text, tokens, where=where, add_bos=add_bos)
    except ValueError as e:
        raise ConversionError(str(e)) from None
