"""Shared fixtures for the data tests: a small embedded corpus and a tokenizer trained on it.

Translation's data config builds them, but the tokenizer tests beside this file and the BERT
input tests (bert/) use them too, so they live here rather than in translation/."""

import pytest

from transformer_jax.data.translation import default_data_config, load_tokenizer_or_train


def small_config(**overrides):
    """A config small enough that everything (tokenizer included) takes well under a second."""
    cfg = default_data_config()
    cfg.embedded_train_size = 2000
    cfg.embedded_eval_size = 150
    cfg.embedded_test_size = 100
    cfg.vocab_size = 200
    cfg.spm_sample_size = 4000
    cfg.max_len = 32
    cfg.tokens_per_batch = 1024
    cfg.eval_batch_size = 32
    for key, value in overrides.items():
        cfg[key] = value
    return cfg


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    """A workdir shared by the session, holding the tokenizer and token caches."""
    return tmp_path_factory.mktemp("workdir")


@pytest.fixture(scope="session")
def tokenizer(workdir):
    """The tokenizer of the small embedded English -> French corpus."""
    return load_tokenizer_or_train(small_config(), workdir)


@pytest.fixture
def make_cfg():
    """Returns `small_config`, to build configs with overrides inside tests."""
    return small_config
