"""One labelled example, and a labelled dataset's splits: what every classification source gives.

A sequence task has `text_b=None`; a sentence-pair task has both texts. Labels are indices into
the dataset's `label_names`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

SPLITS = ("train", "eval", "test")


@dataclasses.dataclass(frozen=True)
class Example:
    """A text (or a pair of texts) and its label index."""

    text_a: str
    text_b: str | None
    label: int


@dataclasses.dataclass(frozen=True)
class LabelledSplits:
    """The examples of each split and the names of the labels.

    Attributes:
      label_names: label index -> name ("not_translation", "translation", ...).
      splits: "train" / "eval" / "test" -> examples in a fixed order.
    """

    label_names: tuple[str, ...]
    splits: dict[str, list[Example]]

    def __post_init__(self):
        for split, examples in self.splits.items():
            for i, ex in enumerate(examples):
                if not 0 <= ex.label < len(self.label_names):
                    raise ValueError(
                        f"{split} example {i}: label {ex.label} is not in "
                        f"[0, {len(self.label_names)}) ({self.label_names})."
                    )

    @property
    def is_pair(self) -> bool:
        """True when examples are pairs (every example of the first non-empty split has B)."""
        for examples in self.splits.values():
            if examples:
                return examples[0].text_b is not None
        return False


def label_subset(examples: list[Example], fraction: float, seed: int) -> list[Example]:
    """`fraction` of `examples` drawn per label (round(fraction * count), at least one of each
    label present), in their original order: the same subset for the same seed.

    For the low-label regime: fine-tuning on a tenth of the training labels.
    """
    by_label: dict[int, list[int]] = {}
    for i, ex in enumerate(examples):
        by_label.setdefault(ex.label, []).append(i)
    rng = np.random.default_rng(seed)
    kept: list[int] = []
    for label in sorted(by_label):
        indices = by_label[label]
        count = max(1, round(fraction * len(indices)))
        kept.extend(rng.choice(indices, size=count, replace=False).tolist())
    return [examples[i] for i in sorted(kept)]
