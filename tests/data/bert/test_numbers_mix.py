"""Bilingual number documents for BERT pretraining: their layout and their integers (none of
numbers_pair's validation or test side A)."""

from transformer_jax.data.bert.numbers_mix import number_documents
from transformer_jax.data.classify.numbers_pair import numbers_pair_dataset
from transformer_jax.data.translation.embedded import number_pairs, sample_integers


def test_each_document_is_a_training_integer_in_english_then_french():
    documents = number_documents(5, seed=0, lang="fr")
    expected = number_pairs(sample_integers("train", 5, 0), "fr")
    assert documents == [[english, french] for english, french in expected]
    assert (
        number_documents(3, seed=0, lang="de")[0][1]
        == number_pairs(sample_integers("train", 3, 0), "de")[0][1]
    )
    packed = number_documents(5, seed=0, lang="fr", per_document=2)
    assert [len(d) for d in packed] == [4, 4, 2]
    assert [s for d in packed for s in d] == [s for d in documents for s in d]
    assert number_documents(0, seed=0, lang="fr") == []


def test_no_validation_or_test_number_of_numbers_pair_is_mixed_in():
    mixed = {s for d in number_documents(3000, seed=0, lang="fr") for s in d[::2]}
    held_out = numbers_pair_dataset({"eval": 1000, "test": 1000}, seed=0)
    for split in ("eval", "test"):
        assert not mixed & {example.text_a for example in held_out.splits[split]}
    train = numbers_pair_dataset({"train": 1000}, seed=0).splits["train"]
    assert mixed & {example.text_a for example in train}  # the same corpus: the check can fail
