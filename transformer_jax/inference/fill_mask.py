"""Fill-mask with a pretrained encoder: the masked LM's best guesses for each `[MASK]`.

    filler = MaskFiller.from_checkpoint("runs/bert")
    filler.fill_mask("The [MASK] function returns a list.", top_k=5)
    # -> [[Candidate(token="len", probability=0.21, text="The len function returns a list."),
    #      ...]]   one list per [MASK], best first

Each mask is predicted independently, from the input with every mask in place (as in
pretraining); `text` fills that one mask and leaves the others.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax.data.bert.inputs import MASK_TEXT, encode_masked, real_tokens, specials_of
from transformer_jax.inference.encoder_inputs import batch_inputs, load_encoder
from transformer_jax.runs.load import Run
from transformer_jax.serving_mesh import MeshLike, on_mesh, under
from transformer_jax.sharding import to_host
from transformer_jax.tokens import FIRST_REGULAR_ID


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One guess for one mask: the piece as text, its probability, the input with it filled."""

    token: str
    probability: float
    text: str


@functools.partial(jax.jit, static_argnums=(0, 5))
def _top_k(graphdef, params, tokens, segments, allowed, k: int):
    """Best k allowed ids and their probabilities at every position: [B, T, k] each."""
    model = nnx.merge(graphdef, params)
    logits = model.mlm_logits(model(tokens, segments, attention_mask=real_tokens(tokens)))
    probs = jax.nn.softmax(jnp.where(allowed, logits, -jnp.inf), axis=-1)
    probs, ids = jax.lax.top_k(probs, k)
    return probs, ids


top_k_program = _top_k  # What `transformer_jax.aot` compiles ahead of time.


class MaskFiller:
    """The masked-LM head of a BERT workdir, guessing `[MASK]`s."""

    def __init__(self, run: Run):
        self.run = run
        self.max_len = run.model.cfg.max_len
        self._graphdef, self._params = nnx.split(run.model)
        # Guesses are ordinary pieces that write something: not specials, not a bare space.
        tokenizer = run.tokenizer
        self.specials = specials_of(tokenizer)
        converted = getattr(tokenizer, "cls_id", None) is not None  # Its specials decode to "".
        self._wordpiece = converted
        first = 0 if converted else FIRST_REGULAR_ID
        self._allowed = np.zeros(run.model.cfg.vocab_size, bool)
        self._allowed[: tokenizer.vocab_size] = [
            i >= first and i not in self.specials.inputs and tokenizer.decode([i]).strip() != ""
            for i in range(tokenizer.vocab_size)
        ]

    @classmethod
    def from_checkpoint(
        cls, workdir: str | os.PathLike, step: int | None = None, *, mesh: MeshLike | None = None
    ) -> MaskFiller:
        """Loads a pretraining workdir (configs/bert_stdlib_pretrain.py) or a fine-tuned one
        (its masked-LM head is the pretrained one, not trained further); with `mesh` (axis
        sizes such as `{"fsdp": 4, "tensor": 2}`, or a `Mesh`) its parameters are restored
        straight into their shards of that mesh and batches are split over data and fsdp.

        Raises:
          MeshError: `mesh` does not fit the devices or the model (a ValueError).
          CheckpointError: the workdir is not an encoder's, or a file is missing or damaged.
        """
        run = load_encoder(workdir, ("bert_pretrain", "classify"), "fill_mask", step, mesh)
        return cls(run)

    def problem(self, text: str) -> str | None:
        """Why `text` cannot be filled (it has no `[MASK]`, or the model's positions end before
        its first one), or None when it can."""
        if MASK_TEXT not in text:
            return (
                f"has no {MASK_TEXT}: write {MASK_TEXT} where a word should be guessed, e.g. "
                f"'The {MASK_TEXT} function returns a list.' (got {text[:80]!r})"
            )
        # [CLS] text [SEP] in max_len positions: the text's first max_len - 2 tokens are kept.
        if self.specials.mask not in encode_masked(self.run.tokenizer, text)[: self.max_len - 2]:
            return (
                f"has every {MASK_TEXT} beyond the model's {self.max_len} tokens, where the "
                f"text is cut. Shorten the text before its first {MASK_TEXT}."
            )
        return None

    def _encode(self, text: str, index: int) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"texts[{index}] is a {type(text).__name__}, not a str.")
        problem = self.problem(text)
        if problem is not None:
            raise ValueError(f"texts[{index}] {problem}")
        return encode_masked(self.run.tokenizer, text)

    def fill_mask(
        self, texts: str | Sequence[str], top_k: int = 5, *, batch_size: int = 32
    ) -> list[list[Candidate]] | list[list[list[Candidate]]]:
        """The `top_k` guesses for each `[MASK]` of each text, best first.

        Args:
          texts: one text or several, each with at least one `[MASK]`.
          top_k: guesses per mask (1 to 100).
          batch_size: texts per model call.

        Returns:
          For one text: per mask, its candidates. For a list: that, per text.

        Raises:
          ValueError: a text without `[MASK]`, or one whose masks were all cut by truncation.
        """
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        if not isinstance(top_k, int) or not 1 <= top_k <= 100:
            raise ValueError(f"top_k must be an integer in [1, 100], got {top_k!r}.")
        encoded = [self._encode(t, i) for i, t in enumerate(texts)]
        results: list[list[list[Candidate]]] = []
        for start in range(0, len(texts), batch_size):
            chunk = encoded[start : start + batch_size]
            tokens, segments = batch_inputs([(ids, None) for ids in chunk], self.max_len,
                                            rows=batch_size, specials=self.specials)  # fmt: skip
            with under(self.run.mesh):
                placed = on_mesh(self.run.mesh, tokens, segments)
                found = _top_k(self._graphdef, self._params, *placed, self._allowed, top_k)
            probs, ids = jax.tree.map(to_host, found)
            for r, text in enumerate(texts[start : start + batch_size]):
                positions = np.flatnonzero(tokens[r] == self.specials.mask)  # See `problem`.
                results.append(
                    [
                        self._candidates(text, m, probs[r, p], ids[r, p])
                        for m, p in enumerate(positions)
                    ]  # fmt: skip
                )
        return results[0] if single else results

    def _candidates(self, text: str, mask: int, probs, ids) -> list[Candidate]:
        before, after = _split_at_mask(text, mask)
        out = []
        for p, i in zip(probs.tolist(), ids.tolist(), strict=True):
            piece = self.run.tokenizer.id_to_piece(i)
            word = self.run.tokenizer.decode([i])
            starts = _starts_word(piece, self._wordpiece)
            spaced = starts and before and not before.endswith((" ", "\n"))
            out.append(Candidate(word, float(p), before + (" " if spaced else "") + word + after))
        return out


def _starts_word(piece: str, wordpiece: bool) -> bool:
    """Whether a piece starts a word: SentencePiece's "▁word"; in WordPiece (a converted
    BERT's) every piece but a "##" continuation."""
    return not piece.startswith("##") if wordpiece else piece.startswith("▁")


def _split_at_mask(text: str, mask: int) -> tuple[str, str]:
    """The text before and after its mask number `mask` (0-based)."""
    parts = text.split(MASK_TEXT)
    return MASK_TEXT.join(parts[: mask + 1]), MASK_TEXT.join(parts[mask + 1 :])


__all__ = ["Candidate", "MaskFiller"]
