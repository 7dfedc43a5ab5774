"""Classification scores (hand-computed and against scikit-learn) and the TF-IDF + logistic
regression baseline: perfect where words decide the label, chance where nothing does."""

import numpy as np
import pytest

from transformer_jax.data.classify.examples import Example
from transformer_jax.tasks import classify_baselines
from transformer_jax.tasks.classify_baselines import tfidf_logistic_regression
from transformer_jax.tasks.classify_metrics import accuracy, confusion_matrix, macro_f1

needs_sklearn = pytest.mark.skipif(
    not classify_baselines.HAVE_SKLEARN, reason="scikit-learn (the test extra) is not installed"
)

LABELS = [0, 0, 1, 2, 2, 2]
PREDICTIONS = [0, 1, 1, 2, 0, 2]


def test_scores_of_a_hand_worked_example():
    # K = 4: label 3 occurs nowhere, so it has a row and column of zeros and no say in macro-F1.
    assert confusion_matrix(LABELS, PREDICTIONS, 4).tolist() == [
        [1, 1, 0, 0],
        [0, 1, 0, 0],
        [1, 0, 2, 0],
        [0, 0, 0, 0],
    ]
    assert accuracy(LABELS, PREDICTIONS) == pytest.approx(4 / 6)
    # F1 = 2TP / (2TP + FP + FN): label 0: 2/4, label 1: 2/3, label 2: 4/5.
    assert macro_f1(LABELS, PREDICTIONS, 4) == pytest.approx((1 / 2 + 2 / 3 + 4 / 5) / 3)
    # A label predicted but never true counts, with F1 0.
    assert macro_f1([0, 0], [0, 1], 2) == pytest.approx((2 / 3 + 0) / 2)


@pytest.mark.parametrize("seed", range(5))
def test_scores_match_scikit_learn_on_random_labels(seed):
    skmetrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(seed)
    num_labels, size = 7, 23  # Few examples: some labels are missing from one side or both.
    labels, predictions = rng.integers(0, num_labels, (2, size))
    predictions[: size // 2] = labels[: size // 2]  # Better than chance, to test more than 0.
    assert accuracy(labels, predictions) == pytest.approx(
        skmetrics.accuracy_score(labels, predictions)
    )
    assert macro_f1(labels, predictions, num_labels) == pytest.approx(
        skmetrics.f1_score(labels, predictions, average="macro", zero_division=0)
    )
    np.testing.assert_array_equal(
        confusion_matrix(labels, predictions, num_labels),
        skmetrics.confusion_matrix(labels, predictions, labels=range(num_labels)),
    )


@pytest.mark.parametrize(
    "labels, predictions, message",
    [
        ([0, 1], [0], "must both be"),
        ([], [], "empty"),
        ([0, 5], [0, 1], r"labels must lie in \[0, 3\)"),
        ([0, 1], [0, -1], r"predictions must lie"),
        ([0.0, 1.0], [0, 1], "integer"),
    ],
)
def test_bad_scores_input_is_explained(labels, predictions, message):
    with pytest.raises(ValueError, match=message):
        macro_f1(labels, predictions, 3)


FILLER = [f"w{i}" for i in range(40)]
KEYWORDS = ["apple", "river", "violin"]


def _texts(rng, count, length=6):
    return [" ".join(rng.choice(FILLER, length)) for _ in range(count)]


def _keyword_examples(rng, count, pair):
    """Filler text with one keyword that decides the label: in A, or in B for a pair."""
    examples = []
    for text, label in zip(_texts(rng, count), rng.integers(0, 3, count), strict=True):
        with_keyword = f"{text} {KEYWORDS[label]}"
        if pair:
            examples.append(Example(_texts(rng, 1)[0], with_keyword, int(label)))
        else:
            examples.append(Example(with_keyword, None, int(label)))
    return examples


@needs_sklearn
@pytest.mark.parametrize("analyzer", ["char", "word"])
@pytest.mark.parametrize("pair", [False, True])
def test_words_that_decide_the_label_are_learned(analyzer, pair):
    rng = np.random.default_rng(0)
    train, test = _keyword_examples(rng, 400, pair), _keyword_examples(rng, 60, pair)
    result = tfidf_logistic_regression(train, test, analyzer=analyzer)
    assert result["accuracy"] == 1.0 and result["macro_f1"] == 1.0
    assert result["predictions"] == [ex.label for ex in test]
    assert all(type(p) is int for p in result["predictions"])


@needs_sklearn
@pytest.mark.parametrize("analyzer", ["char", "word"])
def test_random_labels_give_chance(analyzer):
    rng = np.random.default_rng(1)

    def examples(count):
        labels = rng.integers(0, 2, count)
        return [Example(t, None, int(y)) for t, y in zip(_texts(rng, count), labels, strict=True)]

    result = tfidf_logistic_regression(examples(300), examples(400), analyzer=analyzer)
    assert 0.4 < result["accuracy"] < 0.6
    assert len(result["predictions"]) == 400


def test_missing_scikit_learn_says_what_to_install(monkeypatch):
    monkeypatch.setattr(classify_baselines, "HAVE_SKLEARN", False)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[test\]'"):
        train = _keyword_examples(np.random.default_rng(0), 9, False)
        tfidf_logistic_regression(train, train, analyzer="word")


@needs_sklearn
def test_bad_baseline_input_is_explained():
    rng = np.random.default_rng(2)
    single, pairs = _keyword_examples(rng, 30, False), _keyword_examples(rng, 30, True)
    with pytest.raises(ValueError, match="analyzer='bytes'"):
        tfidf_logistic_regression(single, single, analyzer="bytes")
    with pytest.raises(ValueError, match="Mixed pairs"):
        tfidf_logistic_regression(single, pairs, analyzer="word")
    with pytest.raises(ValueError, match="at least two labels"):
        tfidf_logistic_regression([Example("a b", None, 1)] * 3, single, analyzer="word")
    with pytest.raises(ValueError, match="Need test examples"):
        tfidf_logistic_regression(single, [], analyzer="word")
