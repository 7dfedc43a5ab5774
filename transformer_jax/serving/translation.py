"""Translation served: `POST /v1/translate` and LibreTranslate's `POST /translate`.

Requests are grouped by beam size, length penalty and source length (rounded up to the
Translator's 16-token steps), so a batch is sentences of similar length decoded together.
Each batch runs `Translator.translate_tokens` with `max_batch` rows at most, whose shapes are
those rows rounded to a power of two and the length step: the warm-up decodes each of them
for every allowed beam size.
"""

from __future__ import annotations

from collections.abc import Sequence

from transformer_jax.inference.translator import LENGTH_STEP, Translator
from transformer_jax.serving.errors import ApiError
from transformer_jax.serving.metrics import Metrics
from transformer_jax.serving.service import Service, round_up, text_with_tokens
from transformer_jax.serving.settings import Limits


class TranslationService(Service):
    """A translation run served (`Translator`).

    Args:
      beam_sizes: the beam sizes requests may ask for, each compiled at warm-up; the first is
        the default (LibreTranslate's endpoint always uses it).
    """

    KIND = "translation"
    ROUTES = ("/v1/translate", "/translate")

    def __init__(
        self,
        name: str,
        translator: Translator,
        limits: Limits,
        metrics: Metrics,
        beam_sizes: Sequence[int] = (4, 1),
        alpha: float = 0.6,
    ):
        self.translator = translator
        self.beam_sizes, self.alpha = tuple(beam_sizes), alpha
        self.positions = translator.model.cfg.max_len
        super().__init__(name, limits, metrics)

    # ------------------------------------------------------------------------------ requests
    def payloads(
        self,
        texts: list[str],
        param: str,
        beam_size: int | None,
        alpha: float | None,
        max_length: int | None,
    ) -> list[tuple]:
        """(payload, group) per text, after checking each against the model's limits."""
        beam = self.beam_sizes[0] if beam_size is None else beam_size
        if beam not in self.beam_sizes:
            raise ApiError(
                422,
                f"beam_size={beam} is not served; this server compiled beam "
                f"sizes {list(self.beam_sizes)} (--beam_sizes).",
                param="beam_size",
            )
        alpha = self.alpha if alpha is None else alpha
        out = []
        for i, text in enumerate(texts):
            length = self.translator.source_length(text)
            if length > self.positions:
                name = param if len(texts) == 1 else f"{param}[{i}]"
                raise ApiError(
                    422,
                    f"{name} is {length} tokens with its end token; the model "
                    f"reads at most {self.positions} (its max_len). Split the text.",
                    param=name,
                )
            bucket = round_up(max(length, 1), LENGTH_STEP)
            out.append(((text, beam, alpha, max_length), (beam, alpha, bucket)))
        return out

    # ------------------------------------------------------------------------------ batches
    def run_batch(self, payloads: Sequence[tuple]) -> list[str]:
        texts = [text for text, *_ in payloads]
        _, beam, alpha, _ = payloads[0]  # One group: the same settings.
        rows = self.translator.translate_tokens(
            texts, beam_size=beam, alpha=alpha, batch_size=self.limits.max_batch
        )
        tok = self.translator.tokenizer
        return [
            "" if row is None else tok.decode(row if cut is None else row[:cut])
            for row, (_, _, _, cut) in zip(rows, payloads, strict=True)
        ]

    def warmup_batches(self) -> list[list[tuple]]:
        lengths = range(LENGTH_STEP, round_up(self.positions, LENGTH_STEP) + 1, LENGTH_STEP)
        counts = {}  # rows of a batch -> the fewest sentences that give it
        for n in range(self.limits.max_batch, 0, -1):
            counts[self.translator.batch_rows(n, self.limits.max_batch)] = n
        batches = []
        for length in lengths:
            text = text_with_tokens(
                self.translator.source_length, length - LENGTH_STEP + 1, min(length, self.positions)
            )
            for beam in self.beam_sizes:
                for n in sorted(counts.values()):
                    batches.append([(text, beam, self.alpha, None)] * n)
        return batches
