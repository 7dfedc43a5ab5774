"""ViT end to end (issue 12): a tiny run on the digits learns above chance and prints the pixel
baselines, `evaluate` writes the figures and a confusion-matrix PNG, `ImageClassifier` agrees
with it, the classify_image CLI answers files and writes attention PNGs, bad inputs are clear
errors; attention rollout by its definition."""

import json
import pathlib
import shutil

import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

from tests.train_runs import train_once
from transformer_jax.cli import classify_image, evaluate
from transformer_jax.data.images.digits import digits_dataset
from transformer_jax.inference.image_classifier import (
    ImageClassifier,
    mirror_averaged_logits,
    mirrored_probabilities_program,
    probabilities_program,
    view_averaged_program,
)
from transformer_jax.inference.patch_attention import (
    attention_rollout,
    patch_attention,
    save_attention_png,
)
from transformer_jax.runs.layout import CheckpointError, Workdir


@pytest.fixture(scope="module")
def vit_run(tmp_path_factory) -> pathlib.Path:
    """configs/vit_tiny.py with the baselines on (100 steps on the 8x8 digits)."""
    workdir = tmp_path_factory.mktemp("vit_run")
    return train_once(workdir, "configs/vit_tiny.py", "--config.baselines=True")


def _metrics(workdir: pathlib.Path, split: str) -> list[dict]:
    rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["split"] == split]


def _test_digits():
    split = digits_dataset(seed=0, eval_size=180, test_size=360).splits["test"]
    return split.images, split.labels


def test_a_tiny_run_learns_above_chance_and_prints_the_baselines(vit_run):
    evals = _metrics(vit_run, "eval")
    assert evals[-1]["accuracy"] > 0.3  # chance is 0.1 on ten balanced classes
    assert evals[-1]["loss"] < evals[0]["loss"]
    (test,) = _metrics(vit_run, "test")
    assert test["examples"] == 360
    assert 0.9 < test["svc_rbf_accuracy"] <= 1.0 and 0.85 < test["logistic_regression_accuracy"]
    log = (vit_run / "train.stderr").read_text()
    assert "SVC (RBF kernel) on raw pixels, same split: accuracy" in log
    assert "logistic regression on raw pixels" in log and "true \\ predicted" in log
    labels = json.loads((vit_run / "labels.json").read_text())
    assert labels == {"label_names": [str(d) for d in range(10)], "image_shape": [8, 8, 1]}


def test_the_final_test_scores_the_best_validation_checkpoint_and_names_its_step(vit_run):
    evals = _metrics(vit_run, "eval")
    best = max(evals, key=lambda r: (r["accuracy"], -r["step"]))  # the first of the best
    (test,) = _metrics(vit_run, "test")
    assert test["step"] == best["step"]
    assert (vit_run / "best" / str(best["step"])).is_dir()
    log = (vit_run / "train.stderr").read_text()
    assert f"test of step {best['step']}, the best by validation accuracy" in log


def test_evaluate_writes_figures_and_a_confusion_png_that_the_classifier_agrees_with(
    vit_run, capsys
):
    assert evaluate.main([f"--workdir={vit_run}", "--split=test"]) == 0
    out = capsys.readouterr().out
    record = json.loads((vit_run / "eval" / "test.step100.image.json").read_text())
    assert "accuracy" in out and record["examples"] == 360
    confusion = np.array(record["confusion"])
    assert confusion.shape == (10, 10) and confusion.sum() == 360
    png = vit_run / "eval" / "test.step100.image.confusion.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    classifier = ImageClassifier.from_checkpoint(vit_run)
    images, labels = _test_digits()
    predictions = classifier.predict(images)
    predicted = np.array([int(p.label) for p in predictions])
    assert np.mean(predicted == labels) == pytest.approx(record["accuracy"])
    assert all(abs(sum(p.probabilities.values()) - 1) < 1e-4 for p in predictions)
    np.testing.assert_array_equal(  # rows true, columns predicted
        confusion, np.bincount(labels * 10 + predicted, minlength=100).reshape(10, 10)
    )


def test_the_classifier_serves_the_mean_of_the_last_checkpoints_as_evaluate_scores_it(vit_run):
    assert evaluate.main([f"--workdir={vit_run}", "--split=test", "--average_last=2"]) == 0
    record = json.loads((vit_run / "eval" / "test.step100.avg2.image.json").read_text())
    classifier = ImageClassifier.from_checkpoint(vit_run, average_last=2)
    assert classifier.steps == [50, 100]
    images, labels = _test_digits()
    predicted = np.array([int(p.label) for p in classifier.predict(images)])
    assert np.mean(predicted == labels) == pytest.approx(record["accuracy"])


def test_classifier_inputs_single_batch_uint8_and_files(vit_run, tmp_path):
    classifier = ImageClassifier.from_checkpoint(vit_run)
    images, _ = _test_digits()
    batch = classifier.predict(images[:4])
    assert classifier.predict(images[0]) == batch[0]  # [H, W, C]
    assert classifier.predict(images[0][..., 0]) == batch[0]  # [H, W]
    as_uint8 = np.round(images[:4] * 255).astype(np.uint8)
    assert [p.label for p in classifier.predict(as_uint8)] == [p.label for p in batch]
    path = tmp_path / "digit.png"
    Image.fromarray(as_uint8[0, ..., 0]).save(path)
    assert classifier.predict(str(path)).label == batch[0].label


def test_classifier_bad_inputs_are_clear_errors(vit_run, tmp_path):
    classifier = ImageClassifier.from_checkpoint(vit_run)
    with pytest.raises(ValueError, match=r"shape \(10, 8, 1\).*8x8 images with 1 channel"):
        classifier.predict(np.zeros((10, 8, 1), np.float32))
    with pytest.raises(ValueError, match=r"\[0, 16\].*load_digits\(\)\.images / 16"):
        classifier.predict(np.linspace(0, 16, 64).reshape(8, 8))
    big = tmp_path / "big.png"
    Image.fromarray(np.zeros((16, 16), np.uint8)).save(big)
    with pytest.raises(ValueError, match=r"big.png.*resize=True"):
        classifier.predict(str(big))
    assert classifier.predict(str(big), resize=True).label in classifier.label_names
    wrong = tmp_path / "bert_run"
    wrong.mkdir()
    (wrong / "config.json").write_text(json.dumps({"task": "classify", "model": {"name": "x"}}))
    with pytest.raises(CheckpointError, match="needs a 'vit' model"):
        ImageClassifier.from_checkpoint(wrong)


def test_cli_classifies_files_and_test_images_and_writes_attention_pngs(vit_run, tmp_path, capsys):
    images, _ = _test_digits()
    path = tmp_path / "seven.png"
    Image.fromarray(np.round(images[0, ..., 0] * 255).astype(np.uint8)).save(path)
    pictures = tmp_path / "attention"
    argv = [f"--workdir={vit_run}", str(path), "--test_images=2", f"--attention_dir={pictures}"]
    assert classify_image.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == [str(path), "test[0]", "test[1]"]
    assert lines[0].split("\t")[1] == lines[1].split("\t")[1]  # the same image twice
    for name in ("seven", "test_0", "test_1"):
        assert (pictures / f"{name}.attention.png").read_bytes()[:4] == b"\x89PNG"
    assert classify_image.main([f"--workdir={vit_run}", str(tmp_path / "missing.png")]) == 1
    assert "missing.png" in capsys.readouterr().err


def test_attention_rollout_by_its_definition():
    rng = np.random.default_rng(0)
    layers = [rng.random((3, 5, 5)) for _ in range(2)]
    layers = [w / w.sum(-1, keepdims=True) for w in layers]
    expected = np.eye(5)
    for w in layers:
        a = 0.5 * w.mean(0) + 0.5 * np.eye(5)
        expected = (a / a.sum(-1, keepdims=True)) @ expected
    np.testing.assert_allclose(attention_rollout(layers), expected)
    np.testing.assert_allclose(attention_rollout(layers).sum(-1), 1.0)
    identity = [np.broadcast_to(np.eye(5), (3, 5, 5))]
    np.testing.assert_allclose(attention_rollout(identity), np.eye(5))


def test_patch_attention_reads_the_cls_row_on_the_grid_and_draws_it(tmp_path):
    weights = [np.zeros((2, 7, 7)) for _ in range(3)]
    for w in weights:
        w[:, :, 0] = 1.0  # every query looks at [CLS] ...
        w[1, 0] = 0.0
        w[1, 0, 4] = 1.0  # ... but head 1's [CLS] looks at patch 3: grid row 1, column 0
    maps = patch_attention(weights, (2, 3), has_cls=True)
    assert maps.per_head.shape == (3, 2, 2, 3) and maps.rollout.shape == (2, 3)
    assert maps.per_head[0, 1, 1, 0] == 1.0 and maps.per_head[0, 0].sum() == 0.0
    assert np.argmax(maps.rollout) == 3 and maps.rollout.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="does not fit a 3x3 grid"):
        patch_attention(weights, (3, 3), has_cls=True)
    path = save_attention_png(np.ones((4, 6, 1)) * 0.5, maps, tmp_path / "a" / "map.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_mirror_averaged_logits_are_the_log_of_the_mean_probabilities():
    rng = np.random.default_rng(0)
    images = rng.random((3, 4, 5, 1)).astype(np.float32)
    weights = rng.normal(size=(20, 6)).astype(np.float32)

    def logits_fn(x):  # not mirror-symmetric: the pixels' order matters
        return x.reshape(len(x), -1) @ weights

    def softmax(z):
        z = np.exp(z - z.max(-1, keepdims=True))
        return z / z.sum(-1, keepdims=True)

    mean = (softmax(np.asarray(logits_fn(images))) + softmax(logits_fn(images[:, :, ::-1]))) / 2
    got = np.asarray(mirror_averaged_logits(logits_fn, jnp.asarray(images)))
    np.testing.assert_allclose(np.exp(got), mean, rtol=1e-5)  # normalised already
    assert not np.allclose(softmax(logits_fn(images)), mean, atol=1e-3)


def test_test_time_views_score_each_image_with_its_mirror_and_moves_everywhere(vit_run, tmp_path):
    """test_time_flip and test_time_shift in evaluate, the classifier and the compiled program."""
    records = {}
    settings = {"plain": (False, 0), "flipped": (True, 0), "shifted": (False, 1)}
    for name, (flip, shift) in settings.items():  # copies: other tests read vit_run
        shutil.copytree(vit_run, tmp_path / name)
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert config["test_time_flip"] is False and config["test_time_shift"] == 0  # vit_tiny's
        config["test_time_flip"], config["test_time_shift"] = flip, shift
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        assert evaluate.main([f"--workdir={tmp_path / name}", "--split=test"]) == 0
        records[name] = json.loads((tmp_path / name / "eval/test.step100.image.json").read_text())

    plain = ImageClassifier.from_checkpoint(tmp_path / "plain")
    images, labels = _test_digits()

    def plain_probs(batch):
        return np.array([list(p.probabilities.values()) for p in plain.predict(batch)])

    padded = np.pad(images, ((0, 0), (1, 1), (1, 1), (0, 0)))
    moved = [padded[:, 1 - dy : 9 - dy, 1 - dx : 9 - dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)]
    expected = {
        "flipped": np.mean([plain_probs(images), plain_probs(images[:, :, ::-1])], axis=0),
        "shifted": np.mean([plain_probs(m) for m in moved], axis=0),
    }
    for name, mean in expected.items():
        classifier = ImageClassifier.from_checkpoint(tmp_path / name)
        assert (classifier.test_time_flip, classifier.test_time_shift) == settings[name]
        probs = np.array([list(p.probabilities.values()) for p in classifier.predict(images)])
        np.testing.assert_allclose(probs, mean, atol=1e-5)
        assert np.mean(probs.argmax(-1) == labels) == pytest.approx(records[name]["accuracy"])
        assert records[name]["nll"] != pytest.approx(records["plain"]["nll"])
    # `transformer-jax compile` compiles the program the classifier serves.
    programs = {"plain": probabilities_program, "flipped": mirrored_probabilities_program,
                "shifted": view_averaged_program(False, 1)}  # fmt: skip
    for name, program in programs.items():
        workdir = Workdir.at(tmp_path / name)
        assert evaluate.load_task(workdir, workdir.read_config()).serving_program() is program


def test_interpolated_weights_score_each_checkpoint_at_the_ends(vit_run, tmp_path):
    """benchmarks/interpolate_weights.py (WiSE-FT): alpha 0 is one checkpoint, 1 the other."""
    from benchmarks import interpolate_weights

    out = tmp_path / "interpolation.json"
    interpolate_weights.main([f"--workdir={vit_run}", "--from_step=50", "--to_step=100",
                              "--alphas=0,0.5,1", f"--out={out}"])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert [r["alpha"] for r in rows] == [0.0, 0.5, 1.0]
    images, labels = _test_digits()
    for row, step in ((rows[0], 50), (rows[2], 100)):
        classifier = ImageClassifier.from_checkpoint(vit_run, step=step)
        probs = np.array([list(p.probabilities.values()) for p in classifier.predict(images)])
        assert row["test"]["accuracy"] == pytest.approx(np.mean(probs.argmax(-1) == labels))
        assert row["eval"]["examples"] == 180
    with pytest.raises(SystemExit, match="each must lie in"):
        interpolate_weights.main([f"--workdir={vit_run}", "--from_step=50", "--to_step=100",
                                  "--alphas=0,2"])  # fmt: skip
