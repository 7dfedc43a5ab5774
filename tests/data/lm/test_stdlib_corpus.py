"""The embedded corpus: real stdlib documentation, cleaned, deduplicated, split by module with
nothing shared between splits, deterministic, cached per Python version."""

import json
import os
import subprocess
import sys

import pytest

from transformer_jax.data.lm import stdlib_corpus
from transformer_jax.data.lm.stdlib_gather import MIN_CHARS, clean

CANARY = "canary-value-5f3a9"  # An environment variable that must not reach the corpus.


@pytest.fixture(scope="module")
def corpus_and_cache(tmp_path_factory):
    cache = tmp_path_factory.mktemp("stdlib_cache")
    os.environ["TRANSFORMER_JAX_CANARY"] = CANARY  # cgi.parse(environ=os.environ) would show it
    try:
        return stdlib_corpus.load_stdlib_corpus(cache), cache
    finally:
        del os.environ["TRANSFORMER_JAX_CANARY"]


def test_splits_are_by_module_and_share_no_text(corpus_and_cache):
    corpus, _ = corpus_and_cache
    sizes = {s: len(corpus.splits[s]) for s in stdlib_corpus.SPLITS}
    assert sizes["train"] > 1000 and sizes["eval"] > 10 and sizes["test"] > 10
    modules = {s: set(corpus.modules[s]) for s in stdlib_corpus.SPLITS}
    texts = {s: set(corpus.splits[s]) for s in stdlib_corpus.SPLITS}
    for a, b in (("train", "eval"), ("train", "test"), ("eval", "test")):
        assert not modules[a] & modules[b]
        assert not texts[a] & texts[b]
    for split in stdlib_corpus.SPLITS:
        assert all(stdlib_corpus.split_of(m) == split for m in modules[split])
    all_texts = [t for s in stdlib_corpus.SPLITS for t in corpus.splits[s]]
    assert len(all_texts) == len(set(all_texts))  # deduplicated


def test_documents_are_clean_english_text(corpus_and_cache):
    corpus, _ = corpus_and_cache
    texts = [t for s in stdlib_corpus.SPLITS for t in corpus.splits[s]]
    assert all(len(t) >= MIN_CHARS and t == t.strip() for t in texts)
    assert not any(c in t for t in texts for c in "\x1e\r\x00\x0b")
    assert not any(" at 0x" in t for t in texts)  # no memory addresses: deterministic
    assert not any(CANARY in t or "/work/" in t for t in texts)  # nothing of this machine
    assert sum(len(t) for t in texts) > 1_000_000
    joined = " ".join(corpus.splits["train"])
    assert joined.count(" the ") > 5000  # English prose, not just signatures


def test_the_cache_is_read_back_and_keyed_by_python_version(corpus_and_cache, monkeypatch):
    corpus, cache = corpus_and_cache
    (path,) = cache.glob("stdlib_docs-py*.json")
    assert path.name == f"stdlib_docs-py{corpus.python_version}.json"

    def no_subprocess(*args, **kwargs):
        raise AssertionError("gathered again despite the cache")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    again = stdlib_corpus.load_stdlib_corpus(cache)
    assert again.sha256 == corpus.sha256 and again.splits == corpus.splits
    stale = json.loads(path.read_text())
    stale["python_version"] = "2.7.18"
    path.write_text(json.dumps(stale))
    with pytest.raises(AssertionError, match="gathered again"):
        stdlib_corpus.load_stdlib_corpus(cache)


def test_manifest_counts_add_up(corpus_and_cache):
    corpus, _ = corpus_and_cache
    manifest = corpus.manifest()
    assert manifest["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert len(manifest["sha256"]) == 64
    for split in stdlib_corpus.SPLITS:
        texts = corpus.splits[split]
        assert manifest[split]["documents"] == len(texts)
        assert manifest[split]["bytes"] == sum(len(t.encode()) for t in texts)


def test_split_of_is_a_stable_hash():
    assert stdlib_corpus.split_of("json") == "test"
    assert stdlib_corpus.split_of("collections") == "test"
    assert stdlib_corpus.split_of("os") == "train"
    counts = {"train": 0, "eval": 0, "test": 0}
    for i in range(10_000):
        counts[stdlib_corpus.split_of(f"module{i}")] += 1
    assert 400 < counts["eval"] < 600 and 400 < counts["test"] < 600


def test_clean_normalises_a_messy_docstring():
    messy = "Title\r\n\r\n\r\n\r\nBody  \x07text\x1e\ttab   \n\n\n\nEnd\x00"
    assert clean(messy) == "Title\n\nBody  text\ttab\n\nEnd"
