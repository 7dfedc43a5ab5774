"""The floor a fine-tuned encoder must beat: TF-IDF n-grams and logistic regression (scikit-learn).

The standard text-classification baseline, with fixed settings (nothing is tuned, on eval or
test): TF-IDF with sublinear term frequency over character n-grams within words (`char_wb`,
1-4) or word unigrams and bigrams, then multinomial logistic regression (L2, C=1, lbfgs). A pair
is one text, `A ||| B`: the model sees a bag of both sides' n-grams, and nothing that compares
A with B. Both the model and the baseline are scored by `classify_metrics`.

scikit-learn is not a dependency of the package; it comes with the test extra.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import numpy as np

from transformer_jax.data.classify.examples import Example
from transformer_jax.tasks import classify_metrics

# scikit-learn is imported when a baseline is fit (a slow import at every train.py start
# otherwise); only this module needs it, and the error is raised when it is used.
HAVE_SKLEARN = importlib.util.find_spec("sklearn") is not None

PAIR_SEPARATOR = " ||| "  # A word of its own: n-grams next to it say which side they are on.
ANALYZERS = {
    "char": {"analyzer": "char_wb", "ngram_range": (1, 4)},
    # scikit-learn's word pattern (2+ word characters), plus the separator.
    "word": {"analyzer": "word", "ngram_range": (1, 2), "token_pattern": r"(?u)\b\w\w+\b|\|\|\|"},
}
C = 1.0  # Inverse L2 strength: scikit-learn's default, not tuned.
MAX_ITER = 2000


def feature_text(example: Example) -> str:
    """The text the vectorizer reads: A, or `A ||| B` for a pair."""
    if example.text_b is None:
        return example.text_a
    return example.text_a + PAIR_SEPARATOR + example.text_b


def _check(train: Sequence[Example], test: Sequence[Example], analyzer: str) -> None:
    if not HAVE_SKLEARN:
        raise ImportError(
            "tfidf_logistic_regression needs scikit-learn: install the test extra: "
            "pip install -e '.[test]'"
        )
    if analyzer not in ANALYZERS:
        raise ValueError(f"analyzer={analyzer!r}; use one of {sorted(ANALYZERS)}.")
    if not test or len({ex.label for ex in train}) < 2:
        raise ValueError(
            f"Need test examples ({len(test)} given) and training examples of at least two "
            f"labels ({sorted({ex.label for ex in train})} given)."
        )
    if len({ex.text_b is None for ex in (*train, *test)}) > 1:
        raise ValueError("Mixed pairs and single texts: every example must have text_b or none.")


def tfidf_logistic_regression(
    train: Sequence[Example], test: Sequence[Example], *, analyzer: str
) -> dict:
    """Fits TF-IDF + logistic regression on `train` and scores it on `test`.

    Args:
      train: labelled training examples (at least two labels).
      test: the examples to predict and score.
      analyzer: "char" (character 1-4-grams within words) or "word" (word 1-2-grams).

    Returns:
      {"accuracy": float, "macro_f1": float, "predictions": list[int] (one per test example)}.

    Raises:
      ImportError: scikit-learn is not installed.
      ValueError: an unknown analyzer, no test examples, one label only, or pairs mixed with
        single texts.
    """
    _check(train, test, analyzer)
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(sublinear_tf=True, dtype=np.float32, **ANALYZERS[analyzer])
    features = vectorizer.fit_transform([feature_text(ex) for ex in train])
    model = LogisticRegression(C=C, max_iter=MAX_ITER)
    model.fit(features, [ex.label for ex in train])
    predictions = model.predict(vectorizer.transform([feature_text(ex) for ex in test]))
    predictions = np.asarray(predictions, np.int64)
    labels = np.array([ex.label for ex in test], np.int64)
    num_labels = 1 + max(int(labels.max()), max(ex.label for ex in train))
    return {
        "accuracy": classify_metrics.accuracy(labels, predictions),
        "macro_f1": classify_metrics.macro_f1(labels, predictions, num_labels),
        "predictions": predictions.tolist(),
    }
