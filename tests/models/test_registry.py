"""The model registry: config sections, building from a section, errors, canonical fields."""

import dataclasses

import jax
import pytest
from absl import flags
from ml_collections import config_flags

from transformer_jax import models
from transformer_jax.models.encoder_decoder import EncoderDecoder, EncoderDecoderConfig


def test_section_has_every_preset_field_and_data_fields_unset():
    section = models.config_section("encoder_decoder", "big")
    assert section.name == "encoder_decoder"
    big = EncoderDecoderConfig.big()
    for f in dataclasses.fields(EncoderDecoderConfig):
        if f.name in ("vocab_size", "max_len"):
            assert section[f.name] is None  # decided by the tokenizer and data.max_len
        else:
            assert section[f.name] == getattr(big, f.name), f.name


def test_build_config_fills_data_fields_and_keeps_explicit_ones():
    section = models.config_section("encoder_decoder", "tiny")
    cfg = models.build_config(section, {"vocab_size": 123, "max_len": 40})
    assert isinstance(cfg, EncoderDecoderConfig)
    assert (cfg.vocab_size, cfg.max_len, cfg.d_model) == (123, 40, 32)
    section.max_len = 20  # set in the config: the data does not override it
    assert models.build_config(section, {"vocab_size": 123, "max_len": 40}).max_len == 20


def test_build_model_and_count_params_from_any_config():
    cfg = EncoderDecoderConfig.tiny(vocab_size=50)
    assert models.get("encoder_decoder").module_class is EncoderDecoder
    assert models.spec_of(cfg).name == "encoder_decoder"
    graphdef, params = models.abstract_model(cfg)
    assert models.count_params(cfg) == sum(x.size for x in jax.tree.leaves(params))


def test_unknown_model_name_lists_the_known_ones():
    with pytest.raises(
        ValueError,
        match=r"'gpt9' is not a registered model; known: \['decoder_only', 'encoder_decoder', "
        r"'encoder_only', 'vit'\]",
    ):
        models.get("gpt9")
    with pytest.raises(ValueError, match="no preset 'huge'"):
        models.config_section("encoder_decoder", "huge")


def test_unknown_or_invalid_fields_are_named():
    section = dict(models.config_section("encoder_decoder", "tiny"), d_modle=64)
    with pytest.raises(ValueError, match=r"fields \['d_modle'\] that model 'encoder_decoder'"):
        models.build_config(section, {"vocab_size": 64})
    section = dict(models.config_section("encoder_decoder", "tiny"), num_heads=5)
    with pytest.raises(ValueError, match="not divisible by num_heads=5"):
        models.build_config(section, {"vocab_size": 64})


def test_canonical_fields_fill_defaults_so_old_sections_compare_equal():
    full = dict(models.config_section("encoder_decoder", "base"))
    partial = {k: v for k, v in full.items() if k not in ("use_bias", "layer_norm_eps")}
    assert models.canonical_fields(partial) == models.canonical_fields(full)
    changed = dict(partial, d_ff=1024)
    assert models.canonical_fields(changed) != models.canonical_fields(full)


def test_model_section_fields_override_from_the_command_line(tmp_path):
    """Every field of config.model, data fields included, is typed for the command line."""
    path = tmp_path / "cfg.py"
    path.write_text(
        "from transformer_jax import models\n"
        "import ml_collections\n"
        "def get_config():\n"
        "    c = ml_collections.ConfigDict()\n"
        "    c.model = models.config_section('encoder_decoder', 'tiny')\n"
        "    return c\n"
    )
    argv = ["p", f"--config={path}", "--config.model.max_len=99", "--config.model.norm=pre"]
    values = flags.FlagValues()
    config_flags.DEFINE_config_file("config", str(path), flag_values=values, sys_argv=argv)
    values(argv)
    assert values.config.model.max_len == 99 and values.config.model.norm == "pre"
