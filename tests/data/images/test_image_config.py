"""The image data config: defaults validate, bad fields are named, paths become absolute."""

import os

import pytest

from transformer_jax.data.images.config import (
    default_image_data_config,
    validate_image_data_config,
    with_absolute_paths,
)


def config(**overrides):
    cfg = default_image_data_config()
    for key, value in overrides.items():
        cfg[key] = value
    return cfg


def test_defaults_are_valid():
    validate_image_data_config(config())


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(source="cifar"), "source"),
        (dict(source="folder"), "folder_train"),
        (dict(random_shift=-1), "random_shift"),
        (dict(random_shift_from_epoch=-1), "random_shift_from_epoch"),
        (dict(random_rotate=-5.0), "random_rotate"),
        (dict(random_scale=0.6), "random_scale"),
        (dict(batch_size=60), "batch_size"),
        (dict(eval_batch_size=100), "eval_batch_size"),
        (dict(digits_eval=0), "digits_eval"),
        (dict(digits_eval=600, digits_test=600), "digits_test"),
        (dict(source="tfds"), "tfds_name"),
    ],
)
def test_bad_field_is_named(overrides, field):
    with pytest.raises(ValueError, match=f"data config field '{field}'"):
        validate_image_data_config(config(**overrides))


def test_folder_fields(tmp_path):
    (tmp_path / "train").mkdir()
    cfg = config(source="folder", folder_train=str(tmp_path / "train"))
    with pytest.raises(ValueError, match="field 'folder_eval': not set"):
        validate_image_data_config(cfg)
    cfg.folder_eval = str(tmp_path / "missing")
    with pytest.raises(ValueError, match="field 'folder_eval': .*is not a folder"):
        validate_image_data_config(cfg)
    cfg.folder_eval = str(tmp_path / "train")
    validate_image_data_config(cfg)
    cfg.folder_channels = 2
    with pytest.raises(ValueError, match="field 'folder_channels': got 2"):
        validate_image_data_config(cfg)
    cfg.folder_channels, cfg.folder_size = 3, 0
    with pytest.raises(ValueError, match="field 'folder_size': got 0"):
        validate_image_data_config(cfg)


def test_missing_field_is_named():
    cfg = config()
    del cfg["random_flip"]
    with pytest.raises(ValueError, match="field 'random_flip': missing"):
        validate_image_data_config(cfg)


def test_with_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = with_absolute_paths(config(folder_train="a", tfds_data_dir="tfds"))
    assert cfg.folder_train == os.path.join(str(tmp_path), "a")
    assert cfg.tfds_data_dir == os.path.join(str(tmp_path), "tfds")
    assert cfg.folder_eval is None
