"""TFDS without TensorFlow: tfds.testing.mock_data (str records) and a real ArrayRecord build
(bytes records) of a tiny Translation dataset."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from transformer_jax.data.translation import get_pairs, load_tokenizer_or_train, make_train_iterator


class TransformerJaxTinyTranslate(tfds.core.GeneratorBasedBuilder):
    """A tiny de/en Translation dataset, written as ArrayRecord into a temporary directory."""

    VERSION = tfds.core.Version("1.0.0")
    BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="de-en")]

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            features=tfds.features.Translation(languages=("de", "en")),
            supervised_keys=("de", "en"),
        )

    def _split_generators(self, dl_manager):
        return {
            "train": self._generate_examples(40, "train"),
            "validation": self._generate_examples(6, "newstest"),
        }

    def _generate_examples(self, n, tag):
        for i in range(n):
            yield (
                f"{tag}{i}",
                {"de": f"Grüße {tag} Nummer {i} – schön", "en": f"greetings {tag} number {i}"},
            )


NAME = "transformer_jax_tiny_translate/de-en"


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tfds")
    TransformerJaxTinyTranslate(
        data_dir=directory, config="de-en", file_format="array_record"
    ).download_and_prepare()
    return str(directory)


def tfds_cfg(make_cfg, tfds_dir, **overrides):
    settings = dict(
        source="tfds",
        tfds_name=NAME,
        tfds_data_dir=tfds_dir,
        tfds_download=False,
        source_lang="en",
        target_lang="de",
    )
    return make_cfg(**{**settings, **overrides})


def test_array_record_bytes_are_read_as_text_in_the_chosen_direction(make_cfg, tfds_dir):
    raw = tfds.data_source(NAME, split="train", data_dir=tfds_dir)[0]
    assert isinstance(raw["de"], bytes)  # The real source gives bytes; we must decode them.
    pairs = get_pairs(tfds_cfg(make_cfg, tfds_dir), "train")
    assert len(pairs) == 40
    expected = {
        (f"greetings train number {i}", f"Grüße train Nummer {i} – schön") for i in range(40)
    }
    assert set(pairs) == expected  # en -> de although the supervised keys are (de, en).
    reverse = get_pairs(tfds_cfg(make_cfg, tfds_dir, source_lang="de", target_lang="en"), "train")
    assert reverse == [(t, s) for s, t in pairs]


def test_split_names_come_from_the_config(make_cfg, tfds_dir):
    cfg = tfds_cfg(make_cfg, tfds_dir, eval_split="validation", test_split="train[:5]")
    assert sorted(get_pairs(cfg, "eval"))[0] == (
        "greetings newstest number 0",
        "Grüße newstest Nummer 0 – schön",
    )
    assert len(get_pairs(cfg, "eval")) == 6
    assert get_pairs(cfg, "test") == get_pairs(cfg, "train")[:5]


def test_shards_are_contiguous_disjoint_and_complete(make_cfg, tfds_dir):
    cfg = tfds_cfg(make_cfg, tfds_dir)
    shards = [get_pairs(cfg, "train", process_index=i, process_count=3) for i in range(3)]
    assert [len(s) for s in shards] == [13, 13, 14]
    assert sum(shards, []) == get_pairs(cfg, "train")


def test_language_not_in_dataset(make_cfg, tfds_dir):
    cfg = tfds_cfg(make_cfg, tfds_dir, target_lang="fr")
    with pytest.raises(
        ValueError,
        match=r"field 'target_lang': 'fr' is not a language of TFDS "
        r"dataset .*\('de', 'en'\)",
    ):
        get_pairs(cfg, "train")


def test_unknown_dataset_is_a_clear_error(make_cfg, tfds_dir):
    cfg = tfds_cfg(make_cfg, tfds_dir, tfds_name="no_such_dataset_xyz/de-en")
    with pytest.raises(
        ValueError, match="'no_such_dataset_xyz/de-en', split 'train'.*could not be opened"
    ):
        get_pairs(cfg, "train")


def test_train_iterator_over_array_record(make_cfg, tfds_dir, tmp_path):
    cfg = tfds_cfg(make_cfg, tfds_dir, vocab_size=60, tokens_per_batch=512)
    tokenizer = load_tokenizer_or_train(cfg, tmp_path)
    pairs = get_pairs(cfg, "train")
    assert all(tokenizer.decode(tokenizer.encode(t)) == t for pair in pairs for t in pair)
    iterator = make_train_iterator(cfg, tokenizer, tmp_path, process_index=0, process_count=1)
    seen = set()
    for _ in range(iterator.batches_in_epoch):
        batch = next(iterator)
        for src, tgt in zip(batch["src"], batch["tgt_out"], strict=True):
            if src.any():
                seen.add((tokenizer.decode(src), tokenizer.decode(tgt)))
    assert seen == set(pairs)


def test_mock_data_wmt14_en_to_de(make_cfg):
    cfg = make_cfg(
        source="tfds",
        tfds_name="wmt14_translate/de-en",
        source_lang="en",
        target_lang="de",
        eval_split="validation",
    )
    with tfds.testing.mock_data(num_examples=12):
        records = tfds.data_source("wmt14_translate/de-en", split="validation")
        expected = [(records[i]["en"], records[i]["de"]) for i in range(12)]
        pairs = get_pairs(cfg, "eval")
        shard = get_pairs(cfg, "eval", process_index=1, process_count=2)
    assert all(isinstance(t, str) for pair in pairs for t in pair)  # mock_data gives str.
    assert pairs == expected
    assert shard == expected[6:]
    assert np.mean([len(s) for s, _ in pairs]) > 0
