"""Every optional config field can be set from the command line, as train.py parses it.

A field whose default is a plain `None` has type NoneType, which ml_collections refuses to
override (`UnsupportedOperationError: Type <class 'NoneType'> of field ... is not supported for
overriding`); such fields must be placeholders (`config_dict.placeholder(str)`) or typed.
"""

import importlib
import pathlib
import re
import shlex

import pytest
from absl import flags
from ml_collections import ConfigDict, config_flags

from transformer_jax.data.translation import bucket_lengths, validate_data_config
from transformer_jax.data.translation.config import check_text_split_fields

ROOT = pathlib.Path(__file__).resolve().parents[1]
# ml_collections loads config files with importlib's deprecated load_module().
pytestmark = pytest.mark.filterwarnings("ignore:the load_module:DeprecationWarning")

CONFIG_FILES = sorted(
    p for p in (ROOT / "configs").glob("*.py") if "def get_config" in p.read_text()
)
# What a command-line value of each kind of optional field looks like, and what it must become.
# Paths (every optional field but bucket_boundaries) must arrive as the same string.
PATH_VALUE = "some dir/file-1.tsv"
VALUES_BY_TYPE = {  # Field type -> (command-line text, the value it must become).
    str: (PATH_VALUE, PATH_VALUE),
    tuple: ("(16, 32)", (16, 32)),
    int: ("48", 48),  # e.g. model.max_len, which the data decides unless set.
}


def parse(config_file: pathlib.Path, *overrides: str) -> ConfigDict:
    """Parses `prog --config=FILE OVERRIDES...` exactly as train.py does; returns the config."""
    argv = ["prog", f"--config={config_file}", *overrides]
    flag_values = flags.FlagValues()  # Fresh flags per call: nothing leaks between cases.
    config_flags.DEFINE_config_file(
        "config", str(config_file), "x", flag_values=flag_values, lock_config=True, sys_argv=argv
    )
    flag_values(argv)
    return flag_values.config


def unset_fields(config: ConfigDict, prefix: str = "") -> list[str]:
    """Dotted paths of every field (at any depth) whose value is None."""
    paths = []
    for key, value in config.items():
        if isinstance(value, ConfigDict):
            paths += unset_fields(value, f"{prefix}{key}.")
        elif value is None:
            paths.append(f"{prefix}{key}")
    return paths


def get_path(config: ConfigDict, path: str):
    for key in path.split("."):
        config = config[key]
    return config


def field_type(config: ConfigDict, path: str) -> type:
    *parents, name = path.split(".")
    for key in parents:
        config = config[key]
    return config.get_ref(name).get_type()


def _config_module(config_file: pathlib.Path):
    return importlib.import_module(f"configs.{config_file.stem}")


CASES = [
    pytest.param(path, field, id=f"{path.stem}:{field}")
    for path in CONFIG_FILES
    for field in unset_fields(_config_module(path).get_config())
]


def test_every_config_file_is_found_and_has_optional_fields():
    names = {p.stem for p in CONFIG_FILES}
    assert {"default", "tiny", "text", "wmt14_en_de_base", "wmt14_en_de_big"} <= names
    fields = {field for path, field in (case.values for case in CASES)}
    assert {"data.text_train_tsv", "data.spm_model_path", "data.bucket_boundaries"} <= fields


@pytest.mark.parametrize(("config_file", "field"), CASES)
def test_unset_field_is_overridable_from_the_command_line(config_file, field):
    arg, expected = VALUES_BY_TYPE[field_type(parse(config_file), field)]
    config = parse(config_file, f"--config.{field}={arg}")
    value = get_path(config, field)
    assert value == expected and type(value) is type(expected), (field, value)
    assert get_path(parse(config_file), field) is None  # Unset, it still reads None.


@pytest.fixture
def text_files(tmp_path, monkeypatch):
    """The files the commands below name, in the current directory (as a user would run them)."""
    for name in ("train.tsv", "valid.tsv", "valid.en", "valid.fr", "a", "b"):
        (tmp_path / name).write_text("one\tun\n" if name.endswith("tsv") else "one\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_issue_command_gives_a_valid_text_config(text_files):
    config = parse(
        ROOT / "configs" / "default.py",
        "--config.data.source=text",
        "--config.data.text_train_tsv=train.tsv",
        "--config.data.text_eval_src=valid.en",
        "--config.data.text_eval_tgt=valid.fr",
    )
    assert (config.data.text_train_tsv, config.data.text_eval_src) == ("train.tsv", "valid.en")
    assert config.data.text_train_src is None and config.data.text_eval_tsv is None
    validate_data_config(config.data)  # Train split: a TSV and no src/tgt is fine.


def test_bucket_boundaries_tuple_from_the_command_line():
    default = ROOT / "configs" / "default.py"  # max_len 48
    for args in (
        ["--config.data.bucket_boundaries=(16, 32)"],
        ["--config.data.bucket_boundaries=16,32"],
        ["--config.data.bucket_boundaries=16", "--config.data.bucket_boundaries=32"],
    ):
        cfg = parse(default, "--config.data.pack=False", *args).data
        assert cfg.bucket_boundaries == (16, 32), args
        validate_data_config(cfg)
        assert bucket_lengths(cfg) == (16, 32, 48)  # max_len appended
    cfg = parse(default, "--config.data.bucket_boundaries=(32, 16)").data
    with pytest.raises(ValueError, match="field 'bucket_boundaries'"):
        validate_data_config(cfg)  # Parsed, then refused by validation.
    with pytest.raises(flags.IllegalFlagValueError, match="bucket_boundaries"):
        parse(default, "--config.data.bucket_boundaries=(16, 32")


def test_unset_placeholders_validate_as_none_did(text_files):
    cfg = parse(ROOT / "configs" / "default.py", "--config.data.source=text").data
    with pytest.raises(ValueError, match="field 'text_train_src': not set for the train split"):
        validate_data_config(cfg)
    cfg.text_train_src, cfg.text_train_tgt, cfg.text_train_tsv = "a", "b", "train.tsv"
    with pytest.raises(ValueError, match="field 'text_train_tsv': set together"):
        validate_data_config(cfg)
    cfg.text_train_src = cfg.text_train_tgt = None  # Back to unset in Python.
    validate_data_config(cfg)


@pytest.mark.parametrize(
    "override", ["--config.data.text_train_tvs=train.tsv", "--config.data.bucket_boundary=(8,)"]
)
def test_misspelled_field_is_refused(override):
    name = override.split("=")[0].rsplit(".", 1)[-1]
    with pytest.raises((AttributeError, KeyError, flags.Error), match=name):
        parse(ROOT / "configs" / "default.py", override)


def test_text_config_docstring_command_parses_and_validates(text_files):
    """The command in configs/text.py's docstring is complete: it gives a valid config."""
    doc = _config_module(ROOT / "configs" / "text.py").__doc__
    command = re.search(r"^ *(python train\.py .*?)(?:\n\n|\Z)", doc, re.S | re.M).group(1)
    args = shlex.split(command.replace("\\\n", " "))
    assert args[:2] == ["python", "train.py"] and "--config=configs/text.py" in args
    overrides = [a for a in args if a.startswith("--config.")]
    cfg = parse(ROOT / "configs" / "text.py", *overrides).data
    assert cfg.source == "text" and cfg.text_train_tsv and cfg.text_eval_tsv
    validate_data_config(cfg)
    for split in ("train", "eval"):  # train_and_evaluate reads both splits.
        check_text_split_fields(cfg, split)


def test_a_missing_text_file_is_named_with_its_field(text_files):
    cfg = parse(
        ROOT / "configs" / "text.py",
        "--config.data.text_train_tsv=trian.tsv",
        "--config.data.text_eval_tsv=valid.tsv",
    ).data
    with pytest.raises(ValueError, match="field 'text_train_tsv': 'trian.tsv' is not a file"):
        validate_data_config(cfg)


def test_the_own_text_recipe_translates_inputs_longer_than_its_training_pairs():
    """configs/text.py trains on pairs of at most data.max_len pieces but builds positions for
    inputs four times as long, so a long user sentence is translated whole, not cut."""
    from configs import text
    from transformer_jax import models

    config = text.get_config()
    built = models.build_config(config.model, {"vocab_size": 100, "max_len": config.data.max_len})
    assert built.positional.startswith("sinusoidal")  # positions beyond training exist
    assert built.max_len >= 4 * config.data.max_len
