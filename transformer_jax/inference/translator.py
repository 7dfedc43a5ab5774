"""Translate text with a trained run: load a checkpoint (or the mean of several), batch, decode.

    translator = Translator.from_checkpoint("runs/default", average_last=3)
    translator.translate(["twenty-one", "three hundred"])  # beam 4, alpha 0.6 (§6.1)
    result = translator.attention("twenty-one")  # every attention weight, per layer and head

Inputs are sorted by length and decoded in batches whose source length is padded to a multiple
of 16 tokens, so a whole file compiles a handful of programs; outputs come back in input order.
The parameters are replicated on the local devices and each batch is split over them; with
`mesh=` (e.g. `{"fsdp": 4, "tensor": 2}`, see `transformer_jax.serving_mesh`) each parameter
is restored straight into its shard of that mesh and batches are split over data and fsdp.

Letters: B batch, S source length, T target length, N heads.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import warnings
from collections.abc import Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from transformer_jax import sharding as shd
from transformer_jax.inference.decoding import beam_search, greedy_decode
from transformer_jax.inference.front_end import FromCheckpoint
from transformer_jax.models.encoder_decoder import EncoderDecoder
from transformer_jax.runs.layout import CheckpointError
from transformer_jax.runs.load import Expect, Run

LENGTH_STEP = 16  # Source lengths are padded to a multiple of this: few compiled shapes.
ATTENTION_KINDS = ("encoder", "decoder_self", "decoder_cross")

__all__ = ["ATTENTION_KINDS", "AttentionResult", "CheckpointError", "Translator"]


@dataclasses.dataclass(frozen=True)
class AttentionResult:
    """Attention weights of one sentence pair, as numpy arrays, one per layer.

    Attributes:
      source_tokens: the S source pieces, ending with "</s>".
      target_tokens: the T decoder input pieces, "<s>" then the target's pieces; row t of a
        decoder map is the position that predicts `output_tokens[t]`.
      output_tokens: the T pieces the decoder is trained to produce there (target, "</s>").
      encoder: per layer `[N, S, S]` (query source position, key source position).
      decoder_self: per layer `[N, T, T]` (causal: zero above the diagonal).
      decoder_cross: per layer `[N, T, S]` (target query, source key).
    """

    source_tokens: list[str]
    target_tokens: list[str]
    output_tokens: list[str]
    encoder: list[np.ndarray]
    decoder_self: list[np.ndarray]
    decoder_cross: list[np.ndarray]

    def weights(self, kind: str) -> list[np.ndarray]:
        """The per-layer arrays of `kind`: "encoder", "decoder_self" or "decoder_cross"."""
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"attention kind {kind!r} is not one of {ATTENTION_KINDS}.")
        return getattr(self, kind)

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(query labels, key labels) of the maps of `kind`."""
        if kind == "encoder":
            return self.source_tokens, self.source_tokens
        if kind == "decoder_self":
            return self.target_tokens, self.target_tokens
        if kind == "decoder_cross":
            return self.target_tokens, self.source_tokens
        raise ValueError(f"attention kind {kind!r} is not one of {ATTENTION_KINDS}.")


@functools.partial(jax.jit, static_argnums=0)
def _forward_with_attention(graphdef, params, src, tgt_in):
    model = nnx.merge(graphdef, params)
    _, weights = model(src, tgt_in, return_attention=True)
    return weights


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


class Translator(FromCheckpoint):
    """An `EncoderDecoder` with its tokenizer, ready to translate text.

    Build it with `Translator.from_checkpoint(workdir)`, or directly from a model and tokenizer.

    Args (of the constructor, besides the attributes):
      mesh: the `("data", "fsdp", "tensor")` mesh the model's parameters live on (e.g. the
        training mesh); every process then feeds the same full batch. Default: the
        parameters are replicated on this host's devices.

    Attributes:
      model: the `EncoderDecoder` (parameters replicated on the local devices, or sharded).
      tokenizer: the run's `transformer_jax.data.Tokenizer`.
      steps: the checkpoint steps whose parameters were loaded (averaged when several).
      config: the run's ml_collections config (None when built from a model).
      workdir: the run's directory (None when built from a model).
    """

    EXPECT = Expect("Translator", models=("encoder_decoder",), needs="an 'encoder_decoder'.")

    def __init__(
        self, model: EncoderDecoder, tokenizer, *, steps=(), config=None, workdir=None, mesh=None
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.steps = tuple(steps)
        self.config = config
        self.workdir = workdir
        # Without a mesh, batches are split over this host's devices. With one (the training
        # mesh, whose parameters may span hosts) every process feeds the same full batch.
        self._global_mesh = mesh
        self._mesh = Mesh(np.asarray(jax.local_devices()), ("data",)) if mesh is None else mesh

    # ------------------------------------------------------------------------------ loading
    @classmethod
    def from_run(cls, run: Run) -> Translator:
        return cls(
            run.model,
            run.tokenizer,
            steps=run.steps,
            config=run.config,
            workdir=run.workdir,
            mesh=run.mesh,
        )

    # ------------------------------------------------------------------------------ encoding
    def _encode(self, texts: Sequence[str]) -> list[list[int] | None]:
        """Source ids + eos per text (None for a blank one), truncated to the model's max_len."""
        max_len = self.model.cfg.max_len
        out: list[list[int] | None] = []
        truncated = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is a {type(text).__name__}, not a str.")
            if not text.strip():
                out.append(None)
                continue
            ids = self.tokenizer.encode(text)
            if len(ids) > max_len - 1:
                truncated.append(i)
                ids = ids[: max_len - 1]
            out.append(ids + [self.tokenizer.eos_id])
        if truncated:
            warnings.warn(
                f"{len(truncated)} input(s) longer than the model's max_len={max_len} tokens "
                f"(eos included) were truncated; the first is input {truncated[0]} (0-based).",
                stacklevel=3,
            )
        return out

    def batch_rows(self, count: int, batch_size: int) -> int:
        """Rows of a batch of `count` sentences: a power of two up to `batch_size` (few shapes),
        a multiple of the device count (the batch is split over the devices)."""
        rows = batch_size if count >= batch_size else 1 << max(count - 1, 0).bit_length()
        return _round_up(min(rows, batch_size), self._mesh.size)

    def _decode_batch(self, src: np.ndarray, beam_size: int, alpha: float, max_len) -> np.ndarray:
        """Best output ids `[B, L]` for padded sources `[B, S]`."""
        if self._global_mesh is None:
            src = jax.device_put(src, NamedSharding(self._mesh, PartitionSpec("data")))
        else:
            src = shd.place_batch(src, self._global_mesh)
        with jax.set_mesh(self._mesh):  # Activations keep the batch split (constrain_batch).
            # The tokenizer's ids: a converted OPUS-MT model starts from <pad>, ends at </s>.
            ids = {"bos_id": self.tokenizer.bos_id, "eos_id": self.tokenizer.eos_id}
            if beam_size == 1:
                tokens, _ = greedy_decode(self.model, src, max_len=max_len, **ids)
            else:
                tokens, _ = beam_search(
                    self.model, src, beam_size=beam_size, alpha=alpha, max_len=max_len, **ids
                )
                tokens = tokens[:, 0]
        return shd.to_host(tokens)

    # ------------------------------------------------------------------------------ translate
    def check_max_len(self, max_len: int | None, *, name: str = "max_len") -> None:
        """Raises ValueError unless `max_len` (an output length; None = the default) is a
        positive integer within the model's positions, `cfg.max_len`: the longest sequence the
        model was built and trained for (inputs are truncated to it too). `name` is how the
        error calls the value (e.g. "--max_len")."""
        if max_len is None:
            return
        if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1:
            raise ValueError(f"{name} must be a positive integer, got {max_len!r}.")
        limit = self.model.cfg.max_len
        if max_len > limit:
            raise ValueError(
                f"{name}={max_len} is more than the model's {limit} positions (its config's "
                f"max_len, the longest sequence it was trained for): pass {name} <= {limit}, "
                f"or leave it out for the source length + 50, at most {limit}."
            )

    def translate(
        self,
        texts: Sequence[str],
        beam_size: int = 4,
        alpha: float = 0.6,
        batch_size: int = 64,
        max_len: int | None = None,
        *,
        progress: bool = False,
    ) -> list[str]:
        """Translates `texts`; the outputs are in the same order.

        Blank texts give "" without decoding; texts longer than the model's `max_len` tokens are
        truncated (with a warning); characters the tokenizer never saw become unk.

        Args:
          texts: source sentences.
          beam_size: K; 1 decodes greedily, more runs beam search (§6.1: K=4).
          alpha: the beam search's length-penalty exponent (§6.1: 0.6).
          batch_size: sentences decoded together (rounded up to a multiple of the devices).
          max_len: most output tokens, at most the model's max_len (positions); default
            source length + 50 (§6.1), capped at the model's max_len.
          progress: show a progress bar on stderr.

        Returns:
          One translation per text.
        """
        rows = self.translate_tokens(
            texts, beam_size, alpha, batch_size, max_len, progress=progress
        )
        return ["" if row is None else self.tokenizer.decode(row) for row in rows]

    def translate_tokens(
        self,
        texts: Sequence[str],
        beam_size: int = 4,
        alpha: float = 0.6,
        batch_size: int = 64,
        max_len: int | None = None,
        *,
        progress: bool = False,
    ) -> list[np.ndarray | None]:
        """`translate`'s output ids before detokenizing: one int row per text (eos, then
        padding, after the translation), None for a blank text. A server cuts them to a
        request's length before `tokenizer.decode`, which stops at eos."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings; wrap a single one: [text].")
        if not isinstance(beam_size, int) or isinstance(beam_size, bool) or beam_size < 1:
            raise ValueError(f"beam_size must be a positive integer, got {beam_size!r}.")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
        if not math.isfinite(alpha):
            raise ValueError(f"alpha must be a finite number (paper: 0.6), got {alpha!r}.")
        self.check_max_len(max_len)
        encoded = self._encode(texts)
        todo = [i for i, ids in enumerate(encoded) if ids is not None]
        todo.sort(key=lambda i: len(encoded[i]))
        outputs: list[np.ndarray | None] = [None] * len(texts)
        from tqdm.auto import tqdm

        with tqdm(
            total=len(texts), disable=not progress, file=sys.stderr, unit="sent", leave=False
        ) as bar:
            bar.update(len(texts) - len(todo))
            for start in range(0, len(todo), batch_size):
                idx = todo[start : start + batch_size]
                length = _round_up(max(len(encoded[i]) for i in idx), LENGTH_STEP)
                rows = self.batch_rows(len(idx), batch_size)
                src = np.full((rows, length), self.model.cfg.pad_id, np.int32)
                for row, i in enumerate(idx):
                    src[row, : len(encoded[i])] = encoded[i]
                tokens = self._decode_batch(src, beam_size, alpha, max_len)
                for row, i in enumerate(idx):
                    outputs[i] = tokens[row]
                bar.update(len(idx))
        return outputs

    def source_length(self, text: str) -> int:
        """The tokens `text` takes as a source, eos included (0 for a blank text): more than
        the model's `cfg.max_len` are truncated when translating."""
        return len(self.tokenizer.encode(text)) + 1 if text.strip() else 0

    # ------------------------------------------------------------------------------ attention
    def attention(self, source: str, target: str | None = None) -> AttentionResult:
        """Every attention weight of the model on one sentence pair (teacher-forced).

        Args:
          source: the source sentence.
          target: its translation; default the model's own greedy translation.

        Returns:
          An `AttentionResult`: per layer `[N, q, k]` arrays and the token pieces on each axis.
        """
        (src_ids,) = self._encode([source])
        if src_ids is None:
            raise ValueError("attention: the source is empty; there is nothing to attend to.")
        if target is None:
            target = self.translate([source], beam_size=1)[0]
        encode_target = getattr(self.tokenizer, "encode_target", self.tokenizer.encode)
        tgt_ids = encode_target(target)[: self.model.cfg.max_len - 1]
        tok = self.tokenizer
        tgt_in = [tok.bos_id] + tgt_ids
        graphdef, params = nnx.split(self.model)
        weights = _forward_with_attention(
            graphdef, params, np.asarray([src_ids], np.int32), np.asarray([tgt_in], np.int32)
        )
        weights = jax.tree.map(shd.to_host, weights)
        return AttentionResult(
            source_tokens=[tok.id_to_piece(i) for i in src_ids],
            target_tokens=[tok.id_to_piece(i) for i in tgt_in],
            output_tokens=[tok.id_to_piece(i) for i in tgt_ids + [tok.eos_id]],
            **{kind: [np.asarray(w[0]) for w in weights[kind]] for kind in ATTENTION_KINDS},
        )
