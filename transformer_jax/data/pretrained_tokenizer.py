"""Converted checkpoints' tokenizers behind the interface every front end uses (`encode`,
`encode_batch`, `decode`, `id_to_piece`, `vocab_size`, `fingerprint` and the special ids).

- `PretrainedTokenizer`: a Hugging Face `tokenizer.json` run by the `tokenizers` library: GPT-2's
  byte-level BPE, BERT's WordPiece (also built from a bare `vocab.txt`).
- `MarianTokenizer`: the OPUS-MT pair of SentencePiece models (`source.spm` encodes sources,
  `target.spm` decodes targets) over one shared `vocab.json`.

Special ids are the checkpoint's own, read from the token strings its tokenizer config names:
`pad_id`, `eos_id`, `bos_id` (the decoder's first input), `unk_id`, and for BERT `cls_id`,
`sep_id`, `mask_id`. GPT-2 has one special token, `<|endoftext|>`: it is bos, eos and pad.
Marian's decoder starts from `<pad>`: its bos is pad.

`add_bos` says whether a text's ids start with the bos token, as the checkpoint's tokenizer
config has it (`add_bos_token`, false when absent: GPT-2's tokenizer adds none, so a prompt is
continued as it is). The tokenizers trained here add it (`Tokenizer.add_bos`).

In a workdir the files live in `tokenizer/` with `special_tokens.json` (the token strings) and
`options.json` (`{"add_bos_token": ...}`); `transformer_jax.interop` reads them from a Hugging
Face folder and writes them there.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

import numpy as np
import sentencepiece as spm
from etils import epath

from transformer_jax import storage

SPECIALS = "special_tokens.json"
OPTIONS = "options.json"  # {"add_bos_token": bool}, from the checkpoint's tokenizer config.
WORKDIR_FOLDER = "tokenizer"  # Where a workdir keeps a pretrained tokenizer's files.
ROLES = ("pad", "eos", "bos", "unk", "cls", "sep", "mask")


def _ids(values: Iterable[int | np.integer] | np.ndarray) -> list[int]:
    return np.asarray(values, dtype=np.int64).reshape(-1).tolist()


class _Specials:
    """Special ids from token strings: `self.<role>_id`, None where the vocabulary has none."""

    pad_id = eos_id = bos_id = unk_id = cls_id = sep_id = mask_id = None
    add_bos = False  # Whether a text's ids start with bos (the checkpoint's add_bos_token).

    def _set_specials(self, tokens: dict[str, str | None], lookup, where: str) -> None:
        self.special_tokens = {k: v for k, v in tokens.items() if v is not None}
        for role, token in self.special_tokens.items():
            i = lookup(token)
            if i is None:
                raise ValueError(f"{where}: the {role} token {token!r} is not in the vocabulary.")
            setattr(self, f"{role}_id", int(i))

    def _kept(self, ids) -> list[int]:
        """`ids` up to the first eos, without pad and bos (the front ends' decode contract).
        Leading bos and pad come first: GPT-2's bos is also its eos."""
        ids = _ids(ids)
        first = 0
        while first < len(ids) and ids[first] in (self.bos_id, self.pad_id):
            first += 1
        kept = []
        for i in ids[first:]:
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                kept.append(i)
        return kept


class PretrainedTokenizer(_Specials):
    """A `tokenizers` tokenizer (tokenizer.json) with the checkpoint's special tokens."""

    def __init__(
        self,
        json_text: str,
        special_tokens: dict[str, str | None],
        *,
        where: str,
        add_bos: bool = False,
    ):
        from tokenizers import Tokenizer as Backend

        try:
            self._backend = Backend.from_str(json_text)
        except Exception as e:  # tokenizers raises its own Exception subclass.
            raise ValueError(
                f"{where}: not a tokenizer.json the tokenizers library reads ({e})."
            ) from None
        # A saved tokenizer.json may pad or truncate batches; ids here are never padded or cut.
        self._backend.no_padding()
        self._backend.no_truncation()
        self._json = json_text
        self._set_specials(special_tokens, self._backend.token_to_id, where)
        if add_bos and self.bos_id is None:
            raise ValueError(f"{where}: add_bos_token is true but the tokenizer names no bos.")
        self.add_bos = bool(add_bos)

    @property
    def vocab_size(self) -> int:
        return self._backend.get_vocab_size(with_added_tokens=True)

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self._json.encode()).hexdigest()[:16]

    def encode(self, text: str) -> list[int]:
        """The ids of `text`, without the special tokens a pipeline adds ([CLS], [SEP])."""
        return self._backend.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        del num_threads  # tokenizers parallelises on its own.
        return [e.ids for e in self._backend.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids) -> str:
        """The text of `ids` up to the first eos, special tokens left out."""
        return self._backend.decode(self._kept(ids), skip_special_tokens=True)

    def id_to_piece(self, i: int) -> str:
        return self._backend.id_to_token(int(i)) or ""

    def save(self, folder: epath.Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        storage.write_text_atomic(folder / "tokenizer.json", self._json)
        storage.write_text_atomic(folder / SPECIALS, json.dumps(self.special_tokens, indent=1))
        storage.write_text_atomic(folder / OPTIONS, json.dumps({"add_bos_token": self.add_bos}))


class MarianTokenizer(_Specials):
    """OPUS-MT's tokenizer: SentencePiece pieces looked up in a shared vocab.json."""

    def __init__(
        self,
        source_spm: bytes,
        target_spm: bytes,
        vocab: dict[str, int],
        special_tokens: dict[str, str | None],
        *,
        where: str,
    ):
        try:
            self._source = spm.SentencePieceProcessor(model_proto=source_spm)
            self._target = spm.SentencePieceProcessor(model_proto=target_spm)
        except RuntimeError as e:
            raise ValueError(
                f"{where}: source.spm or target.spm is not a SentencePiece model ({e})."
            ) from None
        self._files = (source_spm, target_spm, vocab)
        self._vocab = vocab
        self._pieces = {i: p for p, i in vocab.items()}
        self._size = max(self._pieces) + 1
        self._set_specials(special_tokens, vocab.get, where)

    @property
    def vocab_size(self) -> int:
        return self._size

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256(self._files[0] + self._files[1])
        digest.update(json.dumps(self._vocab, sort_keys=True).encode())
        return digest.hexdigest()[:16]

    def encode(self, text: str) -> list[int]:
        """The ids of a source text (no eos): source.spm pieces in the shared vocabulary."""
        pieces = self._source.encode(text, out_type=str)
        return [self._vocab.get(p, self.unk_id) for p in pieces]

    def encode_batch(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def encode_target(self, text: str) -> list[int]:
        """The ids of a target text (no eos), with target.spm."""
        pieces = self._target.encode(text, out_type=str)
        return [self._vocab.get(p, self.unk_id) for p in pieces]

    def encode_target_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode_target` of each text (what fine-tuning's targets are encoded with)."""
        return [self.encode_target(t) for t in texts]

    def decode(self, ids) -> str:
        """The target text of `ids` up to the first eos (target.spm), special tokens left out."""
        specials = {self.unk_id}
        pieces = [
            self._pieces[i] for i in self._kept(ids) if i in self._pieces and i not in specials
        ]
        # Pieces of the shared vocabulary that target.spm lacks come back as written: their
        # word-start marks become spaces, as transformers' MarianTokenizer writes them.
        return self._target.decode_pieces(pieces).replace("\u2581", " ").strip()

    def id_to_piece(self, i: int) -> str:
        return self._pieces.get(int(i), "")

    def save(self, folder: epath.Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        storage.write_bytes_atomic(folder / "source.spm", self._files[0])
        storage.write_bytes_atomic(folder / "target.spm", self._files[1])
        storage.write_text_atomic(folder / "vocab.json", json.dumps(self._vocab))
        storage.write_text_atomic(folder / SPECIALS, json.dumps(self.special_tokens, indent=1))


def in_workdir(workdir: str | epath.Path) -> bool:
    """Whether a workdir holds a converted checkpoint's tokenizer (`tokenizer/`)."""
    return (storage.as_path(workdir) / WORKDIR_FOLDER / SPECIALS).is_file()


def load(folder: str | epath.Path):
    """The tokenizer a workdir's `tokenizer/` folder holds (written by `save`)."""
    folder = storage.as_path(folder)
    path = folder / SPECIALS
    try:
        tokens = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(
            f"{path}: missing or not valid JSON ({e}). Convert the model again."
        ) from None
    if (folder / "source.spm").is_file():
        files = [(folder / n) for n in ("source.spm", "target.spm", "vocab.json")]
        vocab = json.loads(files[2].read_text())
        return MarianTokenizer(
            files[0].read_bytes(), files[1].read_bytes(), vocab, tokens, where=str(folder)
        )
    return PretrainedTokenizer(
        (folder / "tokenizer.json").read_text(),
        tokens,
        where=str(folder),
        add_bos=_add_bos(folder / OPTIONS),
    )


def _add_bos(path: epath.Path) -> bool:
    """`add_bos_token` of a workdir tokenizer's options.json; false where there is none (a
    workdir converted before the file existed: GPT-2's tokenizer adds no bos)."""
    if not path.is_file():
        return False
    try:
        value = json.loads(path.read_text()).get("add_bos_token", False)
    except (OSError, json.JSONDecodeError, AttributeError) as e:
        raise ValueError(f"{path}: not a JSON object ({e}). Convert the model again.") from None
    if not isinstance(value, bool):
        raise ValueError(
            f"{path}: add_bos_token must be true or false, got {value!r}. Convert the model "
            f"again, or set it to the value of the checkpoint's tokenizer_config.json."
        )
    return value
