"""Encoder (BERT) runs served: embeddings, classification and fill-mask.

Each text is counted in tokens with its [CLS] and [SEP] and grouped by the power-of-two
length the encoder pads it to (`encoder_inputs.padded_length`); every batch has `max_batch`
rows (the front ends pad the rest), so the warm-up runs one batch per length. A text longer
than the model's positions is refused (422) rather than cut.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from transformer_jax.data.bert.inputs import encode_masked, encode_plain
from transformer_jax.inference.classifier import Classifier
from transformer_jax.inference.embedder import Embedder
from transformer_jax.inference.encoder_inputs import padded_length
from transformer_jax.inference.fill_mask import MaskFiller
from transformer_jax.serving.errors import ApiError
from transformer_jax.serving.metrics import Metrics
from transformer_jax.serving.service import Service, text_with_tokens
from transformer_jax.serving.settings import Limits

MAX_TOP_K = 20  # Fill-mask guesses a request may ask for: computed once at this many.


def _lengths(max_len: int) -> list[int]:
    """Every padded length `padded_length` gives up to `max_len`."""
    return sorted({padded_length(n, max_len) for n in range(1, max_len + 1)})


def _too_long(name: str, tokens: int, limit: int) -> ApiError:
    return ApiError(
        422,
        f"{name} is {tokens} tokens with [CLS] and [SEP]; the model reads at "
        f"most {limit}. Shorten or split it.",
        param=name,
    )


def _name(param: str, i: int, count: int) -> str:
    return param if count == 1 else f"{param}[{i}]"


class EmbeddingService(Service):
    """Unit-length sentence embeddings (`Embedder`), OpenAI's `POST /v1/embeddings`."""

    KIND = "embeddings"
    ROUTES = ("/v1/embeddings",)

    def __init__(self, name: str, embedder: Embedder, limits: Limits, metrics: Metrics):
        self.embedder = embedder
        super().__init__(name, limits, metrics)

    def count(self, text: str) -> int:
        return len(encode_plain(self.embedder.run.tokenizer, [text])[0]) + 2

    def payloads(self, texts: list[str], param: str) -> list[tuple]:
        out = []
        for i, text in enumerate(texts):
            n = self.count(text)
            if n > self.embedder.max_len:
                raise _too_long(_name(param, i, len(texts)), n, self.embedder.max_len)
            out.append(((text, n), padded_length(n, self.embedder.max_len)))
        return out

    def run_batch(self, payloads: Sequence[tuple]) -> list[tuple[np.ndarray, int]]:
        vectors = self.embedder.embed([t for t, _ in payloads], batch_size=self.limits.max_batch)
        return [(v, n) for v, (_, n) in zip(vectors, payloads, strict=True)]

    def warmup_batches(self) -> list[list[tuple]]:
        out, previous = [], 0
        for length in _lengths(self.embedder.max_len):
            text = text_with_tokens(self.count, max(previous + 1, 3), length)
            out.append([(text, length)])
            previous = length
        return out


class ClassifyService(Service):
    """Text (or text-pair) classification of a fine-tuned run (`Classifier`)."""

    KIND = "classification"
    ROUTES = ("/v1/classify",)

    def __init__(self, name: str, classifier: Classifier, limits: Limits, metrics: Metrics):
        self.classifier = classifier
        super().__init__(name, limits, metrics)

    def count(self, a: str, b: str | None) -> int:
        ids = encode_plain(self.classifier.run.tokenizer, [a] if b is None else [a, b])
        return sum(map(len, ids)) + len(ids) + 1

    def payloads(self, items: list, param: str) -> list[tuple]:
        pair, limit, out = self.classifier.pair, self.classifier.max_len, []
        for i, item in enumerate(items):
            name = _name(param, i, len(items))
            if isinstance(item, str):
                if pair:
                    raise ApiError(
                        400,
                        f"{name} is one text; this model classifies pairs: "
                        'give ["text a", "text b"].',
                        param=name,
                    )
                a, b = item, None
            elif (
                isinstance(item, list) and len(item) == 2 and all(isinstance(t, str) for t in item)
            ):
                if pair is False:
                    raise ApiError(
                        400, f"{name} is a pair; this model classifies single texts.", param=name
                    )
                if not item[1].strip():
                    raise ApiError(400, f"{name}'s second text is empty.", param=name)
                a, b = item
            else:
                raise ApiError(400, f"{name} must be a string or a pair of strings.", param=name)
            n = self.count(a, b)
            if n > limit:
                raise _too_long(name, n, limit)
            out.append(((a, b), padded_length(n, limit)))
        return out

    def run_batch(self, payloads: Sequence[tuple]) -> list:
        items = [a if b is None else (a, b) for a, b in payloads]
        return self.classifier.predict(items, batch_size=self.limits.max_batch)

    def warmup_batches(self) -> list[list[tuple]]:
        out, previous, pair = [], 0, bool(self.classifier.pair)
        for length in _lengths(self.classifier.max_len):
            if pair:
                text = text_with_tokens(lambda t: self.count(t, "a"), max(previous + 1, 5), length)
                out.append([(text, "a")])
            else:
                text = text_with_tokens(lambda t: self.count(t, None), max(previous + 1, 3), length)
                out.append([(text, None)])
            previous = length
        return out

    def describe(self) -> dict:
        return {
            **super().describe(),
            "labels": list(self.classifier.label_names),
            "pair": self.classifier.pair,
        }


class FillMaskService(Service):
    """The masked-LM head's guesses for each [MASK] (`MaskFiller`)."""

    KIND = "fill-mask"
    ROUTES = ("/v1/fill-mask",)

    def __init__(self, name: str, filler: MaskFiller, limits: Limits, metrics: Metrics):
        self.filler = filler
        super().__init__(name, limits, metrics)

    def count(self, text: str) -> int:
        return len(encode_masked(self.filler.run.tokenizer, text)) + 2

    def payloads(self, texts: list[str], param: str, top_k: int) -> list[tuple]:
        out = []
        for i, text in enumerate(texts):
            name = _name(param, i, len(texts))
            n = self.count(text)
            if n > self.filler.max_len:
                raise _too_long(name, n, self.filler.max_len)
            problem = self.filler.problem(text)
            if problem is not None:
                raise ApiError(422, f"{name} {problem}", param=name)
            out.append(((text, top_k), padded_length(n, self.filler.max_len)))
        return out

    def run_batch(self, payloads: Sequence[tuple]) -> list:
        found = self.filler.fill_mask(
            [t for t, _ in payloads], top_k=MAX_TOP_K, batch_size=self.limits.max_batch
        )
        return [
            [guesses[:k] for guesses in masks]
            for masks, (_, k) in zip(found, payloads, strict=True)
        ]

    def warmup_batches(self) -> list[list[tuple]]:
        out, previous = [], 0
        mask = "[MASK]"
        for length in _lengths(self.filler.max_len):
            text = text_with_tokens(
                lambda t: self.count(f"{mask} {t}"), max(previous + 1, 4), length
            )
            out.append([(f"{mask} {text}", 1)])
            previous = length
        return out
