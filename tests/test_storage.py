"""transformer_jax.storage on local folders, and gs:// for real against a local GCS emulator.

The emulator tests check the objects through the emulator's own JSON API (`list_objects`), so
they fail if a write lands on the local disk (e.g. in a folder named "gs:") instead.
"""

import io
import os
import pathlib
import struct
import uuid

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from etils import epath

from tests.gcs_emulator import gcs_bucket, list_objects  # noqa: F401 (fixture)
from transformer_jax import storage


@pytest.fixture
def gcs_dir(gcs_bucket, tmp_path, monkeypatch) -> str:  # noqa: F811
    """A fresh gs:// folder; the test runs in an empty local folder, checked to stay empty."""
    monkeypatch.chdir(tmp_path)
    yield f"{gcs_bucket}/{uuid.uuid4().hex[:8]}"
    assert not list(tmp_path.iterdir()), "a gs:// write landed on the local disk"


def read_scalars(data: bytes) -> dict[str, list[tuple[int, float]]]:
    """The scalars of a TensorBoard events file (CRCs checked): tag -> [(step, value)]."""
    from tensorboardX.proto import event_pb2
    from tensorboardX.record_writer import masked_crc32c

    scalars, f = {}, io.BytesIO(data)
    while header := f.read(8):
        (length,) = struct.unpack("Q", header)
        assert struct.unpack("I", f.read(4))[0] == masked_crc32c(header)
        record = f.read(length)
        assert struct.unpack("I", f.read(4))[0] == masked_crc32c(record)
        event = event_pb2.Event.FromString(record)
        for value in event.summary.value:
            scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


# ------------------------------------------------------------------------------ local paths
def test_as_path_makes_local_paths_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert storage.as_path("run") == epath.Path(tmp_path / "run")
    assert storage.as_path("~/run") == epath.Path(tmp_path / "home" / "run")
    assert storage.as_path(f"file://{tmp_path}/x") == epath.Path(tmp_path / "x")
    assert not storage.is_remote(storage.as_path("run"))


def test_as_path_keeps_uris(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = storage.as_path("gs://bucket/run") / "checkpoints"
    assert str(path) == "gs://bucket/run/checkpoints"
    assert storage.is_remote(path) and storage.is_remote("gs://bucket")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("bad", [pathlib.Path("gs://bucket/run"), "/home/me/gs:/bucket/run"])
def test_as_path_rejects_a_uri_that_lost_a_slash(bad):
    with pytest.raises(ValueError, match="lost a slash"):
        storage.as_path(bad)


def test_as_path_rejects_unsupported_schemes():
    with pytest.raises(ValueError, match="unsupported scheme http://"):
        storage.as_path("http://host/run")


def test_write_text_atomic_local(tmp_path, monkeypatch):
    path = tmp_path / "a" / "b" / "config.json"
    storage.write_text_atomic(path, "one")
    storage.write_text_atomic(str(path), "two")
    assert path.read_text() == "two"

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        storage.write_bytes_atomic(path, b"three")
    assert path.read_text() == "two"  # The old content, whole,
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.json"]  # and no temp file.


def test_line_appender_local_keeps_earlier_lines(tmp_path):
    path = tmp_path / "run" / "metrics.jsonl"
    with storage.LineAppender(path) as log:
        log.append("a")
        log.append("b")
        assert path.read_text() == "a\nb\n"  # Durable before close.
    with storage.LineAppender(path) as log:
        log.append("c")
    assert path.read_text() == "a\nb\nc\n"


def test_tensorboard_writer_local(tmp_path):
    writer = storage.tensorboard_writer(tmp_path / "tb")
    writer.add_scalar("train/loss", 2.5, 7)
    writer.close()
    (events,) = (tmp_path / "tb").iterdir()
    assert read_scalars(events.read_bytes()) == {"train/loss": [(7, 2.5)]}


# ------------------------------------------------------------------------------ gs://
def test_epath_on_emulator(gcs_dir):
    root = storage.as_path(gcs_dir)
    root.mkdir(parents=True, exist_ok=True)  # A no-op on object stores; must not fail.
    (root / "a.txt").write_text("hello")
    (root / "sub" / "b.bin").write_bytes(b"\x00\xff")
    assert list_objects(gcs_dir) == [f"{gcs_dir}/a.txt", f"{gcs_dir}/sub/b.bin"]
    assert (root / "a.txt").read_text() == "hello"
    assert (root / "sub" / "b.bin").read_bytes() == b"\x00\xff"
    assert (root / "sub").is_dir() and (root / "a.txt").is_file()
    assert not (root / "missing").exists()
    assert sorted(p.name for p in root.iterdir()) == ["a.txt", "sub"]
    assert [str(p) for p in root.glob("*.txt")] == [f"{gcs_dir}/a.txt"]
    (root / "a.txt").rename(root / "c.txt")
    assert list_objects(gcs_dir) == [f"{gcs_dir}/c.txt", f"{gcs_dir}/sub/b.bin"]
    root.rmtree()
    assert list_objects(gcs_dir) == [] and not root.exists()


def test_write_atomic_on_emulator(gcs_dir):
    path = f"{gcs_dir}/run/config.json"
    storage.write_text_atomic(path, "one")
    storage.write_text_atomic(storage.as_path(path), "two")
    storage.write_bytes_atomic(f"{gcs_dir}/run/tokenizer.model", b"\x01\x02")
    assert list_objects(gcs_dir) == [path, f"{gcs_dir}/run/tokenizer.model"]  # No temp objects.
    assert storage.as_path(path).read_text() == "two"


def test_line_appender_on_emulator_keeps_earlier_lines(gcs_dir):
    # gcsfs opens mode "a" as "w": a plain append would lose "old".
    path = storage.as_path(f"{gcs_dir}/metrics.jsonl")
    path.write_text("old\n")
    log = storage.LineAppender(path)
    log.append("a")
    assert path.read_text() == "old\na\n"  # Written before close.
    log.append("b")
    log.close()
    with storage.LineAppender(str(path)) as log:
        log.append("c")
    assert path.read_text() == "old\na\nb\nc\n"


def test_tensorboard_writer_on_emulator(gcs_dir):
    writer = storage.tensorboard_writer(f"{gcs_dir}/tensorboard")
    writer.add_scalar("train/loss", 3.0, 1)
    writer.flush()
    (events,) = list_objects(f"{gcs_dir}/tensorboard/")
    assert read_scalars(epath.Path(events).read_bytes()) == {"train/loss": [(1, 3.0)]}
    writer.add_scalar("train/loss", 2.0, 2)
    writer.add_scalar("eval/bleu", 7.5, 2)
    writer.close()
    scalars = read_scalars(epath.Path(events).read_bytes())
    assert scalars == {"train/loss": [(1, 3.0), (2, 2.0)], "eval/bleu": [(2, 7.5)]}


def test_sentencepiece_model_through_emulator(gcs_dir):
    import sentencepiece as spm

    model = io.BytesIO()
    sentences = [f"{a} plus {b} is {a + b}" for a in range(20) for b in range(5)]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=40,
        hard_vocab_limit=False, minloglevel=2,
    )  # fmt: skip
    path = f"{gcs_dir}/tokenizer.model"
    storage.write_bytes_atomic(path, model.getvalue())
    loaded = spm.SentencePieceProcessor(model_proto=storage.as_path(path).read_bytes())
    original = spm.SentencePieceProcessor(model_proto=model.getvalue())
    assert loaded.encode("3 plus 4 is 7") == original.encode("3 plus 4 is 7")


def test_emulator_serves_the_generations_tensorstore_needs(gcs_dir):
    """Orbax's OCDBT store relies on them (else "Malformed StorageGeneration", now and then)."""
    import tensorstore as ts

    bucket, _, prefix = gcs_dir.removeprefix("gs://").partition("/")
    kv = ts.KvStore.open({"driver": "gcs", "bucket": bucket, "path": f"{prefix}/"}).result()
    first = kv.write("k", b"v1").result().generation
    assert kv.read("k").result().stamp.generation == first  # x-goog-generation on reads.
    assert kv.read("k", if_not_equal=first).result().state == "unspecified"  # 304.
    assert kv.write("k", b"v2", if_equal=first).result().generation not in (b"", first)
    assert kv.write("k", b"v3", if_equal=first).result().generation == b""  # 412: stale.
    assert kv.read("k").result().value == b"v2"


def test_orbax_checkpoints_on_emulator(gcs_dir):
    """Orbax writes arrays through TensorStore's gcs driver and metadata through epath."""
    directory = storage.as_path(gcs_dir) / "checkpoints"
    mesh = jax.make_mesh((jax.device_count(),), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    rows = 2 * jax.device_count()
    state = {"w": jax.device_put(jnp.arange(rows * 3.0).reshape(rows, 3), sharding)}
    state["b"] = jnp.ones(5, jnp.int32)
    # Many arrays: OCDBT then re-reads its manifest, which needs GCS generation semantics.
    state["layers"] = {f"layer{i}": jnp.full((4,), float(i)) for i in range(60)}
    options = ocp.CheckpointManagerOptions(max_to_keep=2, create=True)
    with ocp.CheckpointManager(directory, options=options) as manager:
        for step in (1, 2, 3):
            bumped = jax.tree.map(lambda x, s=step: x + s, state)
            args = ocp.args.Composite(
                state=ocp.args.StandardSave(bumped), meta=ocp.args.JsonSave({"step": step})
            )
            manager.save(step, args=args)
        manager.wait_until_finished()

    objects = list_objects(f"{gcs_dir}/checkpoints/")
    assert not [o for o in objects if "/checkpoints/1/" in o]  # max_to_keep deleted step 1.
    assert [o for o in objects if "/checkpoints/3/state/" in o and "/d/" in o]  # TensorStore data.

    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding),
                            state)  # fmt: skip
    with ocp.CheckpointManager(directory) as manager:
        assert manager.all_steps() == [2, 3]
        args = ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()
        )
        restored = manager.restore(manager.latest_step(), args=args)
    assert restored["meta"] == {"step": 3}
    np.testing.assert_array_equal(restored["state"]["w"], np.asarray(state["w"]) + 3)
    np.testing.assert_array_equal(restored["state"]["b"], np.full(5, 4))
    np.testing.assert_array_equal(restored["state"]["layers"]["layer59"], np.full(4, 62.0))
    assert restored["state"]["w"].sharding == sharding
