"""The embedded corpus: exact translations, disjoint splits by integer, determinism by seed."""

import numpy as np
import pytest
from num2words import num2words

from transformer_jax.data.translation import (
    embedded,
    embedded_pairs,
    get_pairs,
    number_pairs,
    sample_integers,
)

KNOWN = [
    (21, "twenty-one", "vingt et un", "einundzwanzig"),
    (80, "eighty", "quatre-vingts", "achtzig"),
    (81, "eighty-one", "quatre-vingt-un", "einundachtzig"),
    (71, "seventy-one", "soixante et onze", "einundsiebzig"),
    (200, "two hundred", "deux cents", "zweihundert"),
    (2_000_000, "two million", "deux millions", "zwei Millionen"),
    (
        384_221,
        "three hundred and eighty-four thousand, two hundred and twenty-one",
        "trois cent quatre-vingt-quatre mille deux cent vingt et un",
        "dreihundertvierundachtzigtausendzweihunderteinundzwanzig",
    ),
    (10**9, "one billion", "un milliard", "eine Milliarde"),
]


@pytest.mark.parametrize(("n", "en", "fr", "de"), KNOWN)
def test_known_translations(n, en, fr, de):
    assert number_pairs(np.array([n]), "fr") == [(en, fr)]
    assert number_pairs(np.array([n]), "de") == [(en, de)]


def test_fast_converter_writes_what_num2words_writes():
    values = sample_integers("train", 300, seed=3)
    for lang in ("fr", "de"):
        expected = [(num2words(int(v), lang="en"), num2words(int(v), lang=lang)) for v in values]
        assert number_pairs(values, lang) == expected


def test_splits_are_disjoint_by_integer_and_in_range():
    splits = {
        s: sample_integers(s, n, seed=0) for s, n in (("train", 5000), ("eval", 500), ("test", 500))
    }
    for name, values in splits.items():
        assert len(np.unique(values)) == len(values), name
        assert values.min() >= 1 and values.max() <= 10**9
    assert not set(splits["train"]) & set(splits["eval"])
    assert not set(splits["train"]) & set(splits["test"])
    assert not set(splits["eval"]) & set(splits["test"])


def test_log_uniform_spread():
    values = sample_integers("train", 5000, seed=0)
    decades = np.bincount(np.floor(np.log10(values)).astype(int), minlength=10)
    # Every decade from 10^3 up is drawn (small decades have too few distinct integers).
    assert (decades[3:9] > 300).all(), decades


def test_determinism_by_seed():
    a = embedded_pairs("eval", 50, seed=7, target_lang="fr")
    assert a == embedded_pairs("eval", 50, seed=7, target_lang="fr")
    assert a != embedded_pairs("eval", 50, seed=8, target_lang="fr")
    # A split does not depend on the size asked for (a longer split extends a shorter one).
    assert embedded_pairs("eval", 80, seed=7, target_lang="fr")[:50] == a


def test_cache_file_gives_the_same_pairs(tmp_path):
    fresh = embedded_pairs("test", 40, seed=1, target_lang="de", cache_dir=tmp_path)
    assert len(list(tmp_path.glob("embedded-en-de-test-n40-seed1-*.tsv"))) == 1
    assert embedded_pairs("test", 40, seed=1, target_lang="de", cache_dir=tmp_path) == fresh
    assert fresh == embedded_pairs("test", 40, seed=1, target_lang="de")


def test_get_pairs_uses_config(make_cfg):
    cfg = make_cfg(embedded_target_lang="de", embedded_eval_size=30)
    pairs = get_pairs(cfg, "eval")
    assert len(pairs) == 30
    assert pairs == embedded_pairs("eval", 30, cfg.embedded_seed, "de")
    assert any("Million" in de for _, de in pairs)  # German nouns are capitalised.


def test_unknown_split_is_an_error(make_cfg):
    with pytest.raises(ValueError, match="unknown split 'validation'"):
        embedded.embedded_pairs("validation", 3, seed=0, target_lang="fr")
    with pytest.raises(ValueError, match="unknown split 'dev'.*eval_split"):
        get_pairs(make_cfg(), "dev")
