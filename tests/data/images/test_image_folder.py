"""Own image folders: classes from folder names, conversion and resizing, errors naming files."""

import numpy as np
import pytest
from PIL import Image

from transformer_jax.data.images.config import default_image_data_config
from transformer_jax.data.images.folder import folder_dataset
from transformer_jax.data.images.pipeline import load_image_dataset


def save(path, size, color, mode="RGB"):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, size, color).save(path)


def make_tree(root, sizes=((6, 4), (6, 4))):
    """cat: 2 red RGB images, dog: 1 gray L image and 1 blue RGB one; plus ignored files."""
    save(root / "cat" / "a.png", sizes[0], (255, 0, 0))
    save(root / "cat" / "B.PNG", sizes[1], (255, 0, 0))
    save(root / "dog" / "c.png", sizes[0], 128, mode="L")
    save(root / "dog" / "d.bmp", sizes[0], (0, 0, 255))
    (root / "dog" / "notes.txt").write_text("not an image")
    (root / "dog" / ".hidden.png").write_bytes(b"junk")
    (root / ".cache").mkdir()
    return str(root)


def test_labels_from_folder_names_and_conversion(tmp_path):
    train = make_tree(tmp_path / "train")
    save(tmp_path / "eval" / "dog" / "e.jpg", (6, 4), (0, 255, 0))
    dataset = folder_dataset(train, str(tmp_path / "eval"), None, None, 3)
    assert dataset.label_names == ("cat", "dog")
    train_split = dataset.splits["train"]
    assert train_split.images.shape == (4, 4, 6, 3)  # [N, H, W, C]: 6 wide, 4 high
    assert train_split.labels.tolist() == [0, 0, 1, 1]
    np.testing.assert_allclose(train_split.images[0, 0, 0], [1, 0, 0])
    np.testing.assert_allclose(train_split.images[2, 0, 0], [128 / 255] * 3)  # L -> RGB
    np.testing.assert_allclose(train_split.images[3, 0, 0], [0, 0, 1])
    assert dataset.splits["eval"].labels.tolist() == [1]
    assert len(dataset.splits["test"]) == 0 and dataset.image_shape == (4, 6, 3)


def test_grayscale_and_resize(tmp_path):
    train = make_tree(tmp_path / "train", sizes=((6, 4), (10, 12)))
    cfg = default_image_data_config()
    cfg.source, cfg.folder_train, cfg.folder_eval = "folder", train, train
    cfg.folder_test, cfg.folder_size, cfg.folder_channels = train, 5, 1
    dataset = load_image_dataset(cfg)
    for split in dataset.splits.values():
        assert split.images.shape == (4, 5, 5, 1)
    gray = dataset.splits["test"].images
    np.testing.assert_allclose(gray[0], 76 / 255, atol=1e-6)  # L of pure red: 299/1000 * 255
    np.testing.assert_allclose(gray[2], 128 / 255, atol=1e-6)


def test_size_mismatch_without_folder_size(tmp_path):
    train = make_tree(tmp_path / "train", sizes=((6, 4), (10, 12)))
    # Files are read in name order, and "B.PNG" < "a.png": B is the reference size.
    with pytest.raises(ValueError, match=r"a\.png: 6x4 pixels, but .*B\.PNG is 10x12.*folder_size"):
        folder_dataset(train, train, None, None, 1)


def test_corrupt_files_are_all_named(tmp_path):
    train = make_tree(tmp_path / "train")
    (tmp_path / "train" / "cat" / "x.png").write_bytes(np.random.default_rng(0).bytes(100))
    (tmp_path / "train" / "dog" / "y.jpg").write_bytes(b"")
    with pytest.raises(ValueError, match="2 image file") as error:
        folder_dataset(train, train, None, None, 1)
    message = str(error.value)
    assert "cat/x.png" in message and "dog/y.jpg" in message and "Delete or fix" in message


def test_unknown_eval_class(tmp_path):
    train = make_tree(tmp_path / "train")
    save(tmp_path / "eval" / "bird" / "a.png", (6, 4), (0, 0, 0))
    with pytest.raises(ValueError, match="class folder 'bird' is not a class of the training"):
        folder_dataset(train, str(tmp_path / "eval"), None, None, 1)


def test_empty_folders(tmp_path):
    train = make_tree(tmp_path / "train")
    (tmp_path / "train" / "emu").mkdir()
    with pytest.raises(ValueError, match="emu: no image files"):
        folder_dataset(train, train, None, None, 1)
    (tmp_path / "eval").mkdir()
    (tmp_path / "train" / "emu").rmdir()
    with pytest.raises(ValueError, match="eval: no class folders"):
        folder_dataset(train, str(tmp_path / "eval"), None, None, 1)
    save(tmp_path / "one" / "cat" / "a.png", (6, 4), (0, 0, 0))
    with pytest.raises(ValueError, match=r"1 class folder\(s\) \['cat'\].*at least 2"):
        folder_dataset(str(tmp_path / "one"), train, None, None, 1)
