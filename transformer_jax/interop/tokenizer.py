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


def _hf_specials(folder: epath.Path, defaults: dict[str, str | None]) -> dict[str, str | None]:
    """Token strings by role from special_tokens_map.json / tokenizer_config.json, else defaults."""
    tokens = dict(defaults)
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = folder / name
        if path.is_file():
            try:
                config = json.loads(path.read_text())
            except json.JSONDecodeError as e:
                raise ConversionError(f"{path}: not valid JSON ({e}).") from None
            for role in ROLES:
                if _token(config.get(f"{role}_token")) is not None:
                    tokens[role] = _token(config.get(f"{role}_token"))
    return tokens


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
    if (folder / "tokenizer.json").is_file():
        return PretrainedTokenizer(
            (folder / "tokenizer.json").read_text(), tokens, where=str(folder / "tokenizer.json")
        )
    if (folder / "vocab.txt").is_file():
        config = folder / "tokenizer_config.json"
        lower = (
            json.loads(config.read_text()).get("do_lower_case", True) if config.is_file() else True
        )
        return PretrainedTokenizer(
            _wordpiece_json(folder / "vocab.txt", lower), tokens, where=str(folder / "vocab.txt")
        )
    if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
        specials = sorted({t for t in tokens.values() if t})
        json_text = _byte_level_json(folder / "vocab.json", folder / "merges.txt", specials)
        return PretrainedTokenizer(json_text, tokens, where=str(folder / "vocab.json"))
    raise ConversionError(
        f"{folder}: no tokenizer.json (or vocab.txt, or vocab.json with merges.txt). Copy "
        f"the model's tokenizer files into the folder: the workdir needs its tokenizer."
    )
