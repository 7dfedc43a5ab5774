"""Which stdlib package a sentence comes from: balanced classes, module-disjoint splits, labels
that match the sentence's module, clean sentences, determinism by seed."""

import collections

import pytest

from transformer_jax.data.classify import stdlib_packages
from transformer_jax.data.classify.examples import SPLITS
from transformer_jax.data.classify.stdlib_packages import (
    MAX_CHARS,
    MIN_CHARS,
    PACKAGES,
    assign_modules,
    module_sentences,
    package_of,
    stdlib_packages_dataset,
)
from transformer_jax.data.lm.stdlib_corpus import StdlibCorpus, load_stdlib_corpus


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A corpus cache shared by the module: the stdlib is gathered once (about 2 s)."""
    path = tmp_path_factory.mktemp("stdlib_cache")
    load_stdlib_corpus(path)
    return path


@pytest.fixture(scope="module")
def data(cache):
    return stdlib_packages_dataset(cache, seed=0)


@pytest.fixture(scope="module")
def module_of(cache):
    """sentence -> its module (sentences are unique after module_sentences)."""
    sentences = module_sentences(load_stdlib_corpus(cache), PACKAGES)
    return {s: module for module, texts in sentences.items() for s in texts}


def test_classes_are_balanced_in_every_split(data):
    assert data.label_names == tuple(sorted(PACKAGES)) and not data.is_pair
    for split in SPLITS:
        counts = collections.Counter(ex.label for ex in data.splits[split])
        assert sorted(counts) == list(range(len(PACKAGES)))
        assert len(set(counts.values())) == 1, (split, counts)
    per_class = {s: len(data.splits[s]) // len(PACKAGES) for s in SPLITS}
    assert per_class["train"] >= 50 and per_class["eval"] >= 10 and per_class["test"] >= 10


def test_labels_match_modules_and_splits_share_no_module(data, module_of):
    modules = {}
    for split in SPLITS:
        modules[split] = set()
        for ex in data.splits[split]:
            module = module_of[ex.text_a]
            assert package_of(module) == data.label_names[ex.label]
            modules[split].add(module)
    for a, b in (("train", "eval"), ("train", "test"), ("eval", "test")):
        assert not modules[a] & modules[b]


def test_sentences_are_prose_of_the_right_length_and_never_repeat(data):
    texts = [ex.text_a for split in SPLITS for ex in data.splits[split]]
    assert len(texts) == len(set(texts))
    assert all(MIN_CHARS <= len(t) <= MAX_CHARS and "\n" not in t for t in texts)
    assert all(ex.text_b is None for split in SPLITS for ex in data.splits[split])
    assert not any(t.startswith(("class ", ">>>")) for t in texts)


def test_seed_decides_the_sample_and_max_per_class_caps_it(cache, data):
    assert stdlib_packages_dataset(cache, seed=0) == data
    other = stdlib_packages_dataset(cache, seed=1)
    assert {ex.text_a for ex in other.splits["train"]} != {ex.text_a for ex in data.splits["train"]}
    small = stdlib_packages_dataset(cache, seed=0, max_per_class=3)
    assert all(len(small.splits[s]) == 3 * len(PACKAGES) for s in SPLITS)


def test_a_package_this_python_lacks_is_named(cache):
    with pytest.raises(ValueError, match="'tkinter' is missing.*packages="):
        stdlib_packages_dataset(cache, packages=("asyncio", "tkinter"))


def test_modules_are_split_largest_first_then_by_need():
    counts = {"p.e": 5, "p.c": 10, "p.a": 100, "p.d": 10, "p.b": 50}
    splits = assign_modules(counts)
    assert assign_modules(dict(reversed(counts.items()))) == splits  # order of the dict: no matter
    assert splits["p.a"] == "train" and splits["p.b"] == "eval"
    totals = collections.Counter()
    for module, split in splits.items():
        totals[split] += counts[module]
    # Targets of 175 sentences: 122.5 / 26.25 / 26.25. Third module -> test (10); the other 10
    # -> train (22.5 short vs 16.25); the 5 -> test (16.25 short vs 12.5).
    assert dict(totals) == {"train": 110, "eval": 50, "test": 15}


def _corpus(documents):
    return StdlibCorpus.from_documents("3.99.0", [{"module": m, "text": t} for m, t in documents])


def test_sentences_are_filtered_and_shared_ones_kept_once_or_dropped():
    shared = "This sentence is written in two modules of one package."
    both = "This sentence is written in modules of two different packages."
    corpus = _corpus(
        [
            ("pkg.a", f"first(x, y=1)\n\n{shared} Too short.\n\n    >>> code_is_not_prose()"),
            ("pkg.b", f"{shared} {both}"),
            ("other", f"{both} Another package keeps its own sentences here."),
            ("unrelated", "A package that was not asked for is never read at all."),
        ]
    )
    assert module_sentences(corpus, ["pkg", "other"]) == {
        "other": ["Another package keeps its own sentences here."],
        "pkg.a": [shared],
    }


def test_a_package_with_too_few_modules_is_explained(monkeypatch):
    prose = "A sentence long enough to be kept by the filter, number {}."
    documents = [(f"big.m{i}", prose.format(i)) for i in range(3)] + [
        ("small.x", prose.format(10)),
        ("small.y", prose.format(11)),
    ]
    monkeypatch.setattr(stdlib_packages, "load_stdlib_corpus", lambda _: _corpus(documents))
    with pytest.raises(ValueError, match="'small' has only 2 module"):
        stdlib_packages_dataset(packages=("big", "small"))
    with pytest.raises(ValueError, match="at least 2 distinct packages"):
        stdlib_packages_dataset(packages=("big", "big"))
