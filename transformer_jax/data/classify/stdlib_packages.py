"""Which standard-library package a documentation sentence comes from: a sequence task.

Sentences are taken from the embedded stdlib corpus (`data.lm.stdlib_corpus`, this Python's
own docstrings), split by `data.bert.sentences.split_sentences`. Code paragraphs, signature
lines ("wrap_future(future, *, loop=None)") and sentences shorter than MIN_CHARS or longer than
MAX_CHARS are dropped, and a sentence written in several places is kept once (dropped
altogether when two packages share it). The label is the top-level package of the sentence's
module ("email.utils" -> "email").

The corpus's own split holds out only 5% of modules for eval and 5% for test, too few for a
handful of classes, so the modules of the chosen packages are split again here, per package and
never across splits (a module's sentences are all in one split). The rule, deterministic for a
given Python: modules are taken largest first (by kept sentences; ties by the SHA-256 of the
name); the first three go to train, eval and test, so every class is in every split; each later
one goes to the split furthest below its share (SPLIT_SHARES) of the package's sentences. Each
split is then balanced by downsampling every class, at random (seeded), to the smallest class
of that split.

Note: the language-model corpus's training split holds most of these modules, so a model
pretrained on it has read (without labels) sentences of this task's eval and test splits.
"""

from __future__ import annotations

import collections
import hashlib
import os
import re
from collections.abc import Sequence

import numpy as np

from transformer_jax.data.bert.sentences import looks_like_code, split_sentences
from transformer_jax.data.classify.examples import SPLITS, Example, LabelledSplits
from transformer_jax.data.lm.stdlib_corpus import StdlibCorpus, load_stdlib_corpus

# The classes, sorted. Chosen on Python 3.11 as the multi-module packages with the most kept
# sentences whose smallest split still holds 20+ sentences under the rule above (logging's test
# split would hold 16, urllib's 8, importlib's 15); left out: distutils (removed in Python
# 3.12), encodings (90 near-identical codec modules) and pydoc_data (language-reference topics,
# not a package). All five exist from Python 3.10 on. Kept sentences on 3.11.7, train / eval /
# test before balancing: asyncio 170/37/36, email 151/33/32, http 92/56/22, unittest 100/22/21,
# xml 132/28/28; balanced: 92 / 22 / 21 per class.
PACKAGES = ("asyncio", "email", "http", "unittest", "xml")
MIN_CHARS, MAX_CHARS = 30, 300  # Shorter: fragments ("Return the value."); longer: run-ons.
# The gatherer's header lines, `name(signature)` and `class Name(Bases)`: code, not prose.
_SIGNATURE = re.compile(r"class\s+[\w.]+(\(.*\))?|[\w.]+\(.*\)(\s*->.*)?")
SPLIT_SHARES = {"train": 0.70, "eval": 0.15, "test": 0.15}  # Of each package's sentences.
_STREAM = 0x706B67  # Separates this task's random stream from other uses of the seed.


def package_of(module: str) -> str:
    """The top-level package of a module name ("xml.dom.minidom" -> "xml")."""
    return module.split(".", 1)[0]


def _keep(sentence: str) -> bool:
    return (
        MIN_CHARS <= len(sentence) <= MAX_CHARS
        and not looks_like_code(sentence)
        and not _SIGNATURE.fullmatch(sentence)
    )


def module_sentences(corpus: StdlibCorpus, packages: Sequence[str]) -> dict[str, list[str]]:
    """The kept sentences of every module of `packages`, from all of the corpus's splits.

    Args:
      corpus: the stdlib corpus.
      packages: top-level package names.

    Returns:
      module name -> its sentences in document order; modules sorted by name; no sentence
      appears twice, and none of those found in two packages appears at all.
    """
    wanted = set(packages)
    found: dict[str, list[str]] = collections.defaultdict(list)
    for split in corpus.splits:
        for text, module in zip(corpus.splits[split], corpus.modules[split], strict=True):
            if package_of(module) not in wanted:
                continue
            for sentence in split_sentences(text):
                if _keep(sentence):
                    found[module].append(sentence)
    owners = collections.defaultdict(set)
    for module, sentences in found.items():
        for sentence in sentences:
            owners[sentence].add(package_of(module))
    seen, kept = set(), {}
    for module in sorted(found):
        kept[module] = []
        for sentence in found[module]:
            if len(owners[sentence]) == 1 and sentence not in seen:
                seen.add(sentence)
                kept[module].append(sentence)
    return {module: sentences for module, sentences in kept.items() if sentences}


def _name_hash(module: str) -> bytes:
    return hashlib.sha256(module.encode("utf-8")).digest()


def assign_modules(sentence_counts: dict[str, int]) -> dict[str, str]:
    """Splits the modules of one package: largest first, 3 seeds, then the split most in need.

    Args:
      sentence_counts: module -> number of kept sentences (at least 3 modules).

    Returns:
      module -> "train", "eval" or "test"; every split gets at least one module.
    """
    order = sorted(sentence_counts, key=lambda m: (-sentence_counts[m], _name_hash(m)))
    total = sum(sentence_counts.values())
    assigned = dict.fromkeys(SPLITS, 0)
    splits = {}
    for i, module in enumerate(order):
        if i < len(SPLITS):
            split = SPLITS[i]
        else:  # max() keeps the first of equals: ties go to train, then eval.
            split = max(SPLITS, key=lambda s: SPLIT_SHARES[s] * total - assigned[s])
        splits[module] = split
        assigned[split] += sentence_counts[module]
    return splits


def _package_modules(
    sentences: dict[str, list[str]], packages: Sequence[str], python: str
) -> dict[str, list[str]]:
    """package -> its modules; raises when a package has too few to fill three splits."""
    modules = {p: [m for m in sentences if package_of(m) == p] for p in packages}
    for package, names in modules.items():
        if len(names) < len(SPLITS):
            found = f"has only {len(names)} module(s) with" if names else "is missing, or has no"
            raise ValueError(
                f"stdlib_packages: package {package!r} {found} usable sentences in the stdlib "
                f"corpus of this Python ({python}); a class needs {len(SPLITS)} modules (one "
                f"per split). "
                f"The classes (PACKAGES in {__name__}) were chosen on Python 3.11: run with "
                f"Python 3.11, or pass packages=... naming multi-module packages this Python "
                f"documents."
            )
    return modules


def stdlib_packages_dataset(
    cache_dir: str | os.PathLike | None = None,
    seed: int = 0,
    max_per_class: int | None = None,
    *,
    packages: Sequence[str] = PACKAGES,
) -> LabelledSplits:
    """Builds the balanced "which package is this sentence from?" splits.

    Args:
      cache_dir: where the stdlib corpus is cached (None: gather it again, a second or two).
      seed: seed of the downsampling and of the order within each split.
      max_per_class: at most this many examples per class and split (None: no cap).
      packages: the classes (top-level stdlib packages), at least 2.

    Returns:
      LabelledSplits with label_names = sorted(packages), text_b None, and in each split the
      same number of examples of every class, in a seeded random order.

    Raises:
      ValueError: fewer than 2 packages, a bad max_per_class, or a package that this Python
        does not document in at least 3 modules.
    """
    label_names = tuple(sorted(set(packages)))
    if len(label_names) < 2:
        raise ValueError(f"stdlib_packages: need at least 2 distinct packages, got {packages}.")
    if max_per_class is not None and max_per_class < 1:
        raise ValueError(f"stdlib_packages: max_per_class={max_per_class}; use None or >= 1.")
    corpus = load_stdlib_corpus(cache_dir)
    sentences = module_sentences(corpus, label_names)
    modules = _package_modules(sentences, label_names, corpus.python_version)
    by_split = {s: [[] for _ in label_names] for s in SPLITS}  # split -> label -> sentences
    for label, package in enumerate(label_names):
        counts = {m: len(sentences[m]) for m in modules[package]}
        for module, split in assign_modules(counts).items():
            by_split[split][label].extend(sentences[module])
    splits = {}
    for code, split in enumerate(SPLITS):
        rng = np.random.default_rng([seed, code, _STREAM])
        per_class = min(len(texts) for texts in by_split[split])
        if max_per_class is not None:
            per_class = min(per_class, max_per_class)
        examples = []
        for label, texts in enumerate(by_split[split]):
            chosen = np.sort(rng.choice(len(texts), per_class, replace=False))
            examples.extend(Example(texts[i], None, label) for i in chosen)
        splits[split] = [examples[i] for i in rng.permutation(len(examples))]
    return LabelledSplits(label_names, splits)
