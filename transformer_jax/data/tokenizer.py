"""SentencePiece tokenizer with one vocabulary shared by source and target, and fixed special ids.

The paper (§5.1) used byte-pair encoding with "a shared source-target vocabulary of about 37000
tokens" for English-German; `model_type="bpe"` is that, "unigram" is SentencePiece's default.

Ids: pad=0, eos=1, bos=2, unk=3, always (the model and the batches rely on them). Training uses the
identity normalization and keeps whitespace as written, so `decode(encode(text)) == text` for any
text whose characters are in the vocabulary; other characters become unk (id 3).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import sentencepiece as spm

from transformer_jax import storage
from transformer_jax.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

_SPECIAL_PIECES = {PAD_ID: "<pad>", EOS_ID: "</s>", BOS_ID: "<s>", UNK_ID: "<unk>"}


class Tokenizer:
    """Encodes text to ids and back with a SentencePiece model.

    Attributes:
      pad_id, eos_id, bos_id, unk_id: the fixed special ids 0, 1, 2, 3.
      add_bos: True: a text's ids start with bos, as documents do in training (data/lm/rows.py),
        so the Generator puts bos before a prompt.
    """

    pad_id, eos_id, bos_id, unk_id = PAD_ID, EOS_ID, BOS_ID, UNK_ID
    add_bos = True

    def __init__(self, model_proto: bytes, *, origin: str = "<memory>"):
        """Loads a serialized SentencePiece model.

        Args:
          model_proto: the bytes of a .model file.
          origin: where the bytes came from, for error messages.

        Raises:
          ValueError: the bytes are not a SentencePiece model (an empty file, text, another
            format), or the model does not use the fixed special ids.
        """
        self._proto = bytes(model_proto)
        redo = "Use the .model file SentencePiece wrote (train.py writes workdir/tokenizer.model)."
        if not self._proto:
            raise ValueError(f"{origin}: the file is empty, not a SentencePiece model. {redo}")
        try:
            self._sp = spm.SentencePieceProcessor(model_proto=self._proto)
        except RuntimeError:  # "INTERNAL: ... ParseFromArray ...": not a model protobuf.
            raise ValueError(
                f"{origin}: not a SentencePiece model ({len(self._proto)} bytes that do not "
                f"parse as one). {redo}"
            ) from None
        found = {
            "pad": self._sp.pad_id(),
            "eos": self._sp.eos_id(),
            "bos": self._sp.bos_id(),
            "unk": self._sp.unk_id(),
        }
        wanted = {"pad": PAD_ID, "eos": EOS_ID, "bos": BOS_ID, "unk": UNK_ID}
        if found != wanted:
            raise ValueError(
                f"{origin}: SentencePiece model has special ids {found}, but "
                f"transformer_jax needs {wanted}. Train it with `train_tokenizer` "
                f"(or pass pad_id={PAD_ID} eos_id={EOS_ID} bos_id={BOS_ID} unk_id={UNK_ID} to "
                f"spm_train)."
            )

    @property
    def model_proto(self) -> bytes:
        """The serialized model (what `save` writes)."""
        return self._proto

    @property
    def vocab_size(self) -> int:
        """Number of pieces, special ones included (the embedding table's size)."""
        return self._sp.get_piece_size()

    @property
    def fingerprint(self) -> str:
        """A short hash of the model, to key caches of tokenized data."""
        return hashlib.sha256(self._proto).hexdigest()[:16]

    def encode(self, text: str) -> list[int]:
        """Returns the ids of `text` (no bos, no eos)."""
        return self._sp.encode(text)

    def encode_batch(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        """Returns the ids of each text (no bos, no eos), encoding in parallel threads.

        Args:
          texts: the texts.
          num_threads: encoder threads; -1 = as many as CPUs.
        """
        return self._sp.encode(list(texts), num_threads=num_threads)

    def decode(self, ids: Iterable[int | np.integer] | np.ndarray) -> str:
        """Returns the text of `ids`, stopping at the first eos and skipping pad and bos.

        Args:
          ids: token ids, e.g. one row of a batch or of a decoder's output.
        """
        kept = []
        for i in np.asarray(ids, dtype=np.int64).reshape(-1).tolist():
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID):
                kept.append(i)
        return self._sp.decode(kept)

    def id_to_piece(self, i: int) -> str:
        """Returns the piece of id `i`, e.g. "▁vingt"."""
        return self._sp.id_to_piece(int(i))

    def save(self, path: str | os.PathLike) -> None:
        """Writes the model file (atomically, so concurrent writers never leave half a file)."""
        storage.write_bytes_atomic(storage.as_path(path), self._proto)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Tokenizer:
        """Reads a model file written by `save` (or any SentencePiece model with our ids)."""
        path = storage.as_path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: no SentencePiece model there. Check spm_model_path, "
                f"or set it to None to train one into the workdir."
            )
        return cls(path.read_bytes(), origin=str(path))


def train_tokenizer(
    sentences: Iterable[str],
    *,
    vocab_size: int,
    model_type: str = "unigram",
    character_coverage: float = 1.0,
    byte_fallback: bool = False,
    user_defined_symbols: Sequence[str] = (),
    max_sentence_length: int = 16384,
) -> Tokenizer:
    """Trains a SentencePiece model in memory.

    Args:
      sentences: training text (source and target sentences together, for a shared vocabulary).
      vocab_size: wanted number of pieces; a small corpus may give fewer (no hard limit).
      model_type: "unigram", "bpe", "char" or "word".
      character_coverage: share of characters to cover; rarer characters map to unk, or with
        `byte_fallback` to pieces of their UTF-8 bytes (then no text ever maps to unk).
      byte_fallback: spell characters outside the vocabulary as 256 byte pieces.
      user_defined_symbols: strings always kept as one piece (e.g. "\n", "[MASK]").
      max_sentence_length: longest training text in bytes; longer ones are skipped.

    Returns:
      The trained tokenizer.
    """
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=buffer,
        model_type=model_type,
        vocab_size=vocab_size,
        character_coverage=character_coverage,
        hard_vocab_limit=False,
        pad_id=PAD_ID,
        eos_id=EOS_ID,
        bos_id=BOS_ID,
        unk_id=UNK_ID,
        pad_piece=_SPECIAL_PIECES[PAD_ID],
        eos_piece=_SPECIAL_PIECES[EOS_ID],
        bos_piece=_SPECIAL_PIECES[BOS_ID],
        unk_piece=_SPECIAL_PIECES[UNK_ID],
        # Exact round trips: no NFKC rewriting, no collapsing of repeated spaces.
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        byte_fallback=byte_fallback,
        user_defined_symbols=list(user_defined_symbols),
        # The caller samples the corpus; sentences up to max_sentence_length are kept whole.
        input_sentence_size=0,
        max_sentence_length=max_sentence_length,
        minloglevel=2,
    )
    return Tokenizer(buffer.getvalue())


def configured_vocab_size(vocab_size: int, model_path: str | os.PathLike | None) -> int:
    """The vocabulary a config gives its tokenizer, known before any text is read.

    Args:
      vocab_size: the pieces a tokenizer trained here is asked for (`train_tokenizer` has no
        hard limit, so a small corpus gives fewer): an upper bound.
      model_path: an existing model the config names instead, or None.

    Returns:
      The model's pieces (the file is read) when `model_path` is given, else `vocab_size`.
    """
    return vocab_size if model_path is None else Tokenizer.load(model_path).vocab_size


def _read_settings(path) -> dict:
    """The JSON object of a tokenizer.json; ValueError naming the file when it is not one."""
    try:
        saved = json.loads(path.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        saved = e
    if not isinstance(saved, dict):
        raise ValueError(
            f"{path}: not the JSON object of tokenizer settings train.py writes ({saved}). "
            f"Delete it together with the tokenizer.model beside it to train a new tokenizer, "
            f"or restore both."
        )
    return saved


def load_or_train(
    model_path: str | os.PathLike,
    settings_path: str | os.PathLike,
    settings: dict,
    train: Callable[[], Tokenizer],
) -> Tokenizer:
    """The workdir's tokenizer: loaded if `model_path` exists, else trained and written there.

    Args:
      model_path: where the SentencePiece model lives (e.g. workdir/tokenizer.model).
      settings_path: a JSON file of the config fields that decided the training.
      settings: those fields now; a model trained with other values is refused.
      train: trains a new model (called only when there is none).

    Raises:
      ValueError: the existing model was trained with other settings (naming them).
    """
    model_path, settings_path = storage.as_path(model_path), storage.as_path(settings_path)
    if model_path.exists():
        saved = _read_settings(settings_path) if settings_path.exists() else settings
        if saved != settings:
            changed = sorted(k for k in settings if saved.get(k) != settings[k])
            raise ValueError(
                f"{model_path} was trained with { ({k: saved.get(k) for k in changed}) }, but the "
                f"config now says { ({k: settings[k] for k in changed}) }. Use a new workdir, "
                f"delete the tokenizer files to retrain, or restore the config."
            )
        return Tokenizer.load(model_path)
    tokenizer = train()
    tokenizer.save(model_path)
    storage.write_text_atomic(settings_path, json.dumps(settings, indent=1))
    return tokenizer
