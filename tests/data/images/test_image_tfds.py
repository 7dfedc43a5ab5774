"""TFDS images through tfds.testing.mock_data (numpy records of mnist's real shape)."""

import numpy as np
import pytest
import tensorflow_datasets as tfds

from transformer_jax.data.images.config import default_image_data_config
from transformer_jax.data.images.pipeline import load_image_dataset


def mnist_config(**overrides):
    cfg = default_image_data_config()
    cfg.source, cfg.tfds_name = "tfds", "mnist"
    for key, value in overrides.items():
        cfg[key] = value
    return cfg


def test_mock_mnist():
    with tfds.testing.mock_data(num_examples=20):
        raw = tfds.data_source("mnist", split="test")
        expected = np.stack([raw[i]["image"] for i in range(20)]) / 255
        dataset = load_image_dataset(mnist_config())
    assert dataset.label_names == tuple("0123456789")  # from the builder's ClassLabel
    assert dataset.image_shape == (28, 28, 1)
    for split in dataset.splits.values():
        assert len(split) == 20
        assert split.images.dtype == np.float32
        assert 0.0 <= split.images.min() and split.images.max() <= 1.0
        assert split.labels.dtype == np.int32 and split.labels.max() < 10
    np.testing.assert_allclose(dataset.splits["test"].images, expected, rtol=1e-6)


def test_no_test_split_and_bad_keys():
    with tfds.testing.mock_data(num_examples=20):
        dataset = load_image_dataset(mnist_config(tfds_test_split=""))
        assert dataset.splits["test"].images.shape == (0, 28, 28, 1)
        with pytest.raises(ValueError, match=r"no field 'img'; the records have \['image', "):
            load_image_dataset(mnist_config(tfds_image_key="img"))
        with pytest.raises(ValueError, match="field 'image' is uint8 .*not one integer class"):
            load_image_dataset(mnist_config(tfds_label_key="image"))


def test_mock_fashion_mnist_names_its_classes():
    """The TFDS name of the same data as the IDX files: the builder's class names come along."""
    with tfds.testing.mock_data(num_examples=12):
        dataset = load_image_dataset(mnist_config(tfds_name="fashion_mnist"))
    assert dataset.label_names[:2] == ("T-shirt/top", "Trouser") and len(dataset.label_names) == 10
    assert dataset.image_shape == (28, 28, 1) and len(dataset.splits["test"]) == 12
