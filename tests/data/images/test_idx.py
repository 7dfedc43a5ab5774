"""IDX files (MNIST, Fashion-MNIST): the format by its definition, gzip or not, a folder or single
files, a stratified held-out split, and errors that name the file and what was expected."""

import gzip
import struct

import numpy as np
import pytest

from tests.train_runs import train_once
from transformer_jax import tasks
from transformer_jax.data.images import idx
from transformer_jax.data.images.config import default_image_data_config, validate_image_data_config
from transformer_jax.data.images.pipeline import load_image_dataset

SHAPE = (6, 5)  # H, W of the fixture's images: not square, so a swapped axis shows.


def idx_bytes(array: np.ndarray, type_code: int = 0x08) -> bytes:
    """The IDX encoding written out from the specification: magic, big-endian dims, values."""
    header = struct.pack(">BBBB", 0, 0, type_code, array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(idx.IDX_TYPES[type_code]).tobytes()


def write_set(folder, n_train=40, n_test=10, classes=4, gz=True):
    """The four MNIST-named files of a tiny dataset; each image's pixels encode its index and
    label, so a reordering or misread shows. Returns (train_images, train_labels)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    arrays = {}
    for part, n in (("train", n_train), ("test", n_test)):
        labels = np.arange(n) % classes
        rng.shuffle(labels)
        images = np.zeros((n, *SHAPE), np.uint8)
        images[:, 0, 0] = np.arange(n)
        images[:, 1, :] = labels[:, None] * 60
        arrays[f"{part}_images"], arrays[f"{part}_labels"] = images, labels.astype(np.uint8)
    for role, name in idx.FILE_NAMES.items():
        data = idx_bytes(arrays[role])
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)
    return arrays


def config(folder, **fields):
    cfg = default_image_data_config()
    cfg.source, cfg.idx_eval = "idx", 8
    cfg.idx_dir = str(folder) if folder else None
    for key, value in fields.items():
        cfg[key] = value
    return cfg


@pytest.mark.parametrize("gz", [True, False])
def test_reads_a_folder_gzip_or_not(tmp_path, gz):
    arrays = write_set(tmp_path / "d", gz=gz)
    cfg = config(tmp_path / "d", batch_size=8)
    validate_image_data_config(cfg)
    dataset = load_image_dataset(cfg)
    assert dataset.label_names == ("0", "1", "2", "3") and dataset.image_shape == (*SHAPE, 1)
    train, held, test = (dataset.splits[s] for s in ("train", "eval", "test"))
    assert (len(train), len(held), len(test)) == (32, 8, 10)
    assert np.bincount(held.labels).tolist() == [2, 2, 2, 2]  # stratified
    for split, source in ((train, "train"), (held, "train"), (test, "test")):
        index = np.rint(split.images[:, 0, 0, 0] * 255).astype(int)
        np.testing.assert_array_equal(split.labels, arrays[f"{source}_labels"][index])
        np.testing.assert_allclose(split.images[:, 1, 0, 0], split.labels * 60 / 255, rtol=1e-6)
    assert sorted(np.rint(np.r_[train.images, held.images][:, 0, 0, 0] * 255)) == list(range(40))
    assert np.array_equal(test.images[:, 0, 0, 0] * 255, np.arange(10, dtype=np.float32))


def test_single_files_names_and_no_test(tmp_path):
    write_set(tmp_path / "d", gz=False)
    names = "ant, bee,cow,dog"
    cfg = config(None, idx_label_names=names, idx_eval=4, batch_size=8)
    cfg.idx_train_images = str(tmp_path / "d" / idx.FILE_NAMES["train_images"])
    cfg.idx_train_labels = str(tmp_path / "d" / idx.FILE_NAMES["train_labels"])
    validate_image_data_config(cfg)
    dataset = load_image_dataset(cfg)
    assert dataset.label_names == ("ant", "bee", "cow", "dog")
    assert len(dataset.splits["test"]) == 0 and len(dataset.splits["eval"]) == 4


def test_other_types_and_four_dims_follow_the_specification(tmp_path):
    values = np.array([[1.5, -2.0], [3.25, 1e6]])
    for code in (0x0D, 0x0E):
        np.testing.assert_array_equal(idx.parse_idx(idx_bytes(values, code), "f"), values)
    signed = np.array([-3, 7, -32000])
    assert idx.parse_idx(idx_bytes(signed, 0x0B), "s").tolist() == [-3, 7, -32000]
    rgb = np.arange(2 * 3 * 4 * 3).reshape(2, 3, 4, 3) % 256
    path = tmp_path / "rgb"
    path.write_bytes(idx_bytes(rgb))
    assert idx.idx_shape(str(path)) == (2, 3, 4, 3)
    labels = tmp_path / "labels"
    labels.write_bytes(idx_bytes(np.array([0, 1])))
    images, got = idx.read_images_and_labels(str(path), str(labels))
    assert images.shape == (2, 3, 4, 3) and images.dtype == np.uint8 and got.dtype == np.int32
    np.testing.assert_array_equal(images, rgb)


def test_header_only_read_matches_the_file(tmp_path):
    write_set(tmp_path / "d")
    path = tmp_path / "d" / (idx.FILE_NAMES["train_images"] + ".gz")
    assert idx.idx_shape(str(path)) == (40, *SHAPE)


def test_the_task_knows_classes_and_shape_from_the_headers(tmp_path):
    write_set(tmp_path / "d")
    cfg = config(tmp_path / "d")
    from configs.vit_tiny import get_config

    run = get_config()
    run.data = cfg
    values = tasks.ImageClassificationTask.abstract_data_values(run)
    assert values == {"num_classes": 4, "image_height": 6, "image_width": 5, "channels": 1}
    run.data.idx_label_names = "a,b,c,d,e"
    assert tasks.ImageClassificationTask.abstract_data_values(run)["num_classes"] == 5


def test_wrong_magic_number_names_the_file(tmp_path):
    path = tmp_path / "x.gz"
    path.write_bytes(gzip.compress(b"\x89PNG" + bytes(100)))
    with pytest.raises(ValueError, match=r"x\.gz: not an IDX file \(magic number 89504e47"):
        idx.read_idx(str(path))


def test_truncated_data_names_the_file_and_the_sizes(tmp_path):
    data = idx_bytes(np.zeros((3, 2, 2), np.uint8))
    path = tmp_path / "t"
    path.write_bytes(data[:-1])
    with pytest.raises(
        ValueError,
        match=r"t: the header declares uint8 \(3, 2, 2\) .*28 bytes.*27 bytes.*truncated",
    ):
        idx.read_idx(str(path))
    path.write_bytes(gzip.compress(data)[:-6])
    with pytest.raises(ValueError, match=r"damaged or truncated gzip"):
        idx.read_idx(str(path))


def test_counts_that_differ_name_both_files(tmp_path):
    images, labels = tmp_path / "i", tmp_path / "l"
    images.write_bytes(idx_bytes(np.zeros((3, 2, 2))))
    labels.write_bytes(idx_bytes(np.zeros(4)))
    with pytest.raises(ValueError, match=r"i holds 3 images but .*l holds 4 labels"):
        idx.read_images_and_labels(str(images), str(labels))
    with pytest.raises(ValueError, match=r"l: holds uint8 \(4,\); expected uint8 images"):
        idx.read_images_and_labels(str(labels), str(labels))


def test_labels_outside_the_named_classes(tmp_path):
    write_set(tmp_path / "d")
    cfg = config(tmp_path / "d", idx_label_names="a,b,c")
    with pytest.raises(
        ValueError, match=r"train-labels-idx1-ubyte.gz: labels span \[0, 3\], outside the 3"
    ):
        load_image_dataset(cfg)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"idx_dir": "/nonexistent/folder"}, r"'idx_dir': .*is not a folder"),
        ({"idx_label_names": "a,a"}, r"'idx_label_names'"),
        ({"idx_test_images": "/nonexistent/f"}, r"'idx_test_images': .*is not a file"),
        ({"idx_eval": 0}, r"'idx_eval'"),
    ],
)
def test_bad_fields_are_named(tmp_path, fields, message):
    write_set(tmp_path / "d")
    with pytest.raises(ValueError, match=message):
        validate_image_data_config(config(tmp_path / "d", **fields))


def test_a_folder_without_the_files_says_what_it_looked_for(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"has no train-images-idx3-ubyte or .*\.gz"):
        load_image_dataset(config(tmp_path / "empty"))


def test_no_folder_and_no_debian_package_says_how_to_get_the_data(monkeypatch):
    monkeypatch.setattr(idx, "DEBIAN_FASHION_MNIST", "/nonexistent/fashion-mnist")
    cfg = config(None)
    with pytest.raises(ValueError, match=r"apt-get install dataset-fashion-mnist"):
        validate_image_data_config(cfg)


def test_the_fashion_config_trains_on_idx_files(tmp_path):
    """configs/vit_fashion_mnist.py end to end on a tiny IDX set: a few steps, the test split
    scored with the final average, labels named."""
    write_set(tmp_path / "d", n_train=64, n_test=16, gz=True)
    images = np.zeros((64, 28, 28), np.uint8)
    for role in ("train_images", "test_images"):  # 28x28 images, as the config's patches need
        n = 64 if role == "train_images" else 16
        path = tmp_path / "d" / (idx.FILE_NAMES[role] + ".gz")
        path.write_bytes(
            gzip.compress(idx_bytes(images[:n] + np.arange(n)[:, None, None] % 4 * 50))
        )
    flags = [
        f"--config.data.idx_dir={tmp_path / 'd'}",
        "--config.data.idx_label_names=T-shirt/top,Trouser,Pullover,Dress",
        "--config.data.idx_eval=16",
        "--config.data.batch_size=16",
        "--config.data.eval_batch_size=16",
        "--config.model.num_layers=1",
        "--config.model.d_model=16",
        "--config.model.num_heads=2",
        "--config.model.d_ff=32",
        "--config.num_train_steps=6",
        "--config.warmup_steps=2",
        "--config.eval_every=3",
        "--config.checkpoint_every=1",
        "--config.log_every=3",
        "--config.baselines=False",
    ]
    run = train_once(tmp_path / "run", "configs/vit_fashion_mnist.py", *flags)
    log = (run / "train.stderr").read_text()
    assert "16 test images" in log and "T-shirt/top" in log
    assert "test of the mean of the last 5 checkpoints (steps 2, 3, 4, 5, 6)" in log
