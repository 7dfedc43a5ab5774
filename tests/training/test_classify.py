"""BERT fine-tuning: init_from (the encoder copied exactly, only the heads new, clear errors on
other shapes or vocabularies), a tiny run end to end, Classifier and the classify CLI with their
bad inputs, TSV files (issue 11). The loss itself: tests/tasks/test_classify_loss.py."""

import dataclasses
import io
import json
import pathlib
import sys

import jax
import numpy as np
import pytest
from flax import nnx

from configs import bert_classify_tiny
from transformer_jax import models
from transformer_jax.cli import classify, evaluate
from transformer_jax.data.classify import pipeline
from transformer_jax.data.classify.tsv import tsv_dataset
from transformer_jax.data.tokenizer import train_tokenizer
from transformer_jax.inference.classifier import Classifier
from transformer_jax.runs import reading
from transformer_jax.runs.layout import CheckpointError, Workdir
from transformer_jax.runs.tokenizer import load_tokenizer
from transformer_jax.sharding import make_mesh
from transformer_jax.tasks import ClassificationTask
from transformer_jax.tokens import BERT_SYMBOLS
from transformer_jax.training.init_from import init_from_workdir
from transformer_jax.training.optimizer import make_optimizer
from transformer_jax.training.state import create_train_state


def _rows(workdir, split):
    lines = (pathlib.Path(workdir) / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def test_fine_tuning_run_reports_accuracy_f1_confusion_and_baseline(tiny_classifier):
    stderr = (tiny_classifier / "train.stderr").read_text()
    assert "initialised from" in stderr and "new (sequence_head, token_head)" in stderr
    (test,) = _rows(tiny_classifier, "test")
    assert np.asarray(test["confusion"]).sum() == 64
    assert 0 <= test["macro_f1"] <= 1 and 0 <= test["baseline_accuracy"] <= 1
    assert "logistic regression" in stderr and "true \\ predicted" in stderr
    labels = json.loads((tiny_classifier / "labels.json").read_text())
    assert labels == {"label_names": ["not_translation", "translation"], "pair": True}
    assert (tiny_classifier / "tokenizer.model").read_bytes() == (
        pathlib.Path(json.loads((tiny_classifier / "config.json").read_text())["init_from"])
        / "tokenizer.model"
    ).read_bytes()


def _classify_state(tiny_bert_workdir, **model_overrides):
    config = bert_classify_tiny.get_config()
    pretrained = Workdir.at(tiny_bert_workdir)
    tokenizer = load_tokenizer(pretrained, pretrained.read_config())
    cfg = models.build_config(config.model, {"vocab_size": tokenizer.vocab_size, "num_labels": 3})
    cfg = dataclasses.replace(cfg, **model_overrides)
    tx, _ = make_optimizer(cfg.d_model)
    mesh = make_mesh({"data": -1, "fsdp": 1, "tensor": 1})
    graphdef, state, _ = create_train_state(cfg, tx, mesh, seed=7)
    return cfg, state, pretrained, tokenizer


def test_init_from_copies_the_encoder_exactly_and_only_the_heads_are_new(tiny_bert_workdir):
    cfg, state, pretrained, tokenizer = _classify_state(tiny_bert_workdir)
    fresh = ClassificationTask.fresh_params
    new_state, note = init_from_workdir(state, str(tiny_bert_workdir), cfg, ClassificationTask)
    assert "new (sequence_head, token_head)" in note
    model, _ = reading.load_model(pretrained, pretrained.read_config(), tokenizer)
    flat = lambda tree: {  # noqa: E731
        "/".join(map(reading.key_name, p)): np.asarray(v)
        for p, v in jax.tree_util.tree_flatten_with_path(tree)[0]
    }
    before, after, source = flat(state.params), flat(new_state.params), flat(nnx.state(model))
    assert before.keys() == after.keys()
    for name, value in after.items():
        if name.split("/")[0] in fresh:
            np.testing.assert_array_equal(value, before[name])  # the new initialisation
        else:
            np.testing.assert_array_equal(value, source[name])  # the pretrained weights
    assert after["sequence_head/kernel/value"].shape[-1] == 3


def test_init_fresh_keeps_the_named_parameters_new_and_refuses_unknown_names(tiny_bert_workdir):
    cfg, state, pretrained, tokenizer = _classify_state(tiny_bert_workdir)
    new_state, note = init_from_workdir(
        state, str(tiny_bert_workdir), cfg, ClassificationTask, ("pooler",)
    )
    assert "new (sequence_head, token_head, pooler)" in note
    model, _ = reading.load_model(pretrained, pretrained.read_config(), tokenizer)
    fresh, old = new_state.params["pooler"], state.params["pooler"]
    np.testing.assert_array_equal(fresh["kernel"][...], old["kernel"][...])
    assert not np.array_equal(fresh["kernel"][...], nnx.state(model)["pooler"]["kernel"][...])
    np.testing.assert_array_equal(  # the rest is still the pretrained encoder
        new_state.params["embed_norm"]["scale"][...], nnx.state(model)["embed_norm"]["scale"][...]
    )
    with pytest.raises(ValueError, match="config.init_fresh names \\['poolr'\\].*'pooler'"):
        init_from_workdir(state, str(tiny_bert_workdir), cfg, ClassificationTask, ("poolr",))


def test_a_mean_pooled_classifier_starts_from_a_cls_pretrained_encoder(tiny_bert_workdir):
    cfg, state, _, _ = _classify_state(tiny_bert_workdir, pool="mean")
    _, note = init_from_workdir(state, str(tiny_bert_workdir), cfg, ClassificationTask)
    assert "new (sequence_head, token_head)" in note  # pool may differ; nothing else is new


@pytest.mark.parametrize(
    "overrides, message",
    [({"d_model": 64, "d_ff": 128}, "d_model: this config 64"), ({"vocab_size": 99}, "vocab_size")],
)
def test_init_from_refuses_other_shapes_and_vocabularies(tiny_bert_workdir, overrides, message):
    cfg, state, _, _ = _classify_state(tiny_bert_workdir, **overrides)
    with pytest.raises(ValueError, match=message):
        init_from_workdir(state, str(tiny_bert_workdir), cfg, ClassificationTask)


def test_init_from_a_missing_workdir_says_to_pretrain_first(tiny_bert_workdir, tmp_path):
    cfg, state, _, _ = _classify_state(tiny_bert_workdir)
    with pytest.raises(CheckpointError, match="Pretrain first"):
        init_from_workdir(state, str(tmp_path / "none"), cfg, ClassificationTask)


def test_classifier_and_cli_round_trip_and_bad_inputs(tiny_classifier, capsys, monkeypatch):
    classifier = Classifier.from_checkpoint(tiny_classifier)
    one = classifier.predict(("four hundred", "quatre cent"))
    assert one.label in one.probabilities and sum(one.probabilities.values()) == pytest.approx(1)
    many = classifier.predict([("one", "un"), ("two", "deux"), ("three", "trois")])
    assert len(many) == 3
    with pytest.raises(ValueError, match="has no second text"):
        classifier.predict([("one", "un"), ("two", "")])
    with pytest.raises(ValueError, match="reads pairs"):
        classifier.predict(["one"])
    with pytest.warns(UserWarning, match="truncated"):
        classifier.predict([("one " * 100, "un")])
    stdin = "four hundred\tquatre cent\nseven\tsept\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    assert classify.main([f"--workdir={tiny_classifier}", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["label"] for line in lines] == [p.label for p in classifier.predict(
        [("four hundred", "quatre cent"), ("seven", "sept")])]  # fmt: skip
    assert classify.main([f"--workdir={tiny_classifier}", "--text=no tab here"]) == 1
    assert "no second text" in capsys.readouterr().err


def test_tsv_files_and_their_errors(tmp_path):
    train, eval_ = tmp_path / "train.tsv", tmp_path / "eval.tsv"
    train.write_text("pos\tgood film\nneg\tbad film\n\npos\tgreat\n")
    eval_.write_text("neg\tawful\n")
    data = tsv_dataset(str(train), str(eval_), None)
    assert data.label_names == ("neg", "pos") and not data.is_pair
    assert [e.label for e in data.splits["train"]] == [1, 0, 1] and data.splits["test"] == []
    eval_.write_text("meh\tso so\n")
    with pytest.raises(ValueError, match=r"eval.tsv:1: label 'meh' is not among"):
        tsv_dataset(str(train), str(eval_), None)
    eval_.write_text("neg\tone\tpair\n")
    with pytest.raises(ValueError, match="disagree on single texts vs pairs"):
        tsv_dataset(str(train), str(eval_), None)
    train.write_text("pos\ta\tb\nneg\tc\n")
    with pytest.raises(ValueError, match=r"train.tsv:2: 2 fields.*A pair needs both texts"):
        tsv_dataset(str(train), str(eval_), None)


def test_evaluate_cli_reports_a_confusion_matrix(tiny_classifier, capsys):
    assert evaluate.main([f"--workdir={tiny_classifier}", "--split=eval"]) == 0
    out = capsys.readouterr().out
    assert "accuracy" in out and "true \\ predicted" in out and "logistic regression" in out
    (path,) = (tiny_classifier / "eval").glob("eval.step*.classify.json")
    record = json.loads(path.read_text())
    assert np.asarray(record["confusion"]).sum() == 64 and "baseline_macro_f1" in record


def test_init_from_a_folder_without_a_pretraining_run_is_refused_before_training(tmp_path):
    config = bert_classify_tiny.get_config()
    data = pipeline.load_dataset(config.data)
    with pytest.raises(ValueError, match="not a pretraining workdir. Pretrain first"):
        pipeline.load_classify_tokenizer(config.data, tmp_path / "run", data, str(tmp_path))


def test_a_classify_run_keeps_its_external_tokenizer(tmp_path):
    """data.spm_model_path is copied into the workdir at the first start; a resume whose file
    now holds another model is refused, as in every task (transformer_jax.runs.tokenizer)."""
    config = bert_classify_tiny.get_config()
    config.init_from = ""
    data = pipeline.load_dataset(config.data)
    texts = [e.text_a for e in data.splits["train"]] + [
        e.text_b or "" for e in data.splits["train"]
    ]

    def tokenizer(vocab_size):
        symbols = [*BERT_SYMBOLS, "\n"]
        return train_tokenizer(texts, vocab_size=vocab_size, user_defined_symbols=symbols)

    external = tmp_path / "spm.model"
    first = tokenizer(60)
    external.write_bytes(first.model_proto)
    config.data.spm_model_path = str(external)
    run = tmp_path / "run"
    loaded = pipeline.load_classify_tokenizer(config.data, run, data)
    assert loaded.model_proto == first.model_proto
    assert (run / "tokenizer.model").read_bytes() == first.model_proto
    external.write_bytes(tokenizer(70).model_proto)  # Another model at the same path.
    with pytest.raises(ValueError, match="is not the tokenizer .*tokenizer.model was started"):
        pipeline.load_classify_tokenizer(config.data, run, data)
    assert (run / "tokenizer.model").read_bytes() == first.model_proto  # The copy stays.
