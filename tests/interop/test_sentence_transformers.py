"""sentence-transformers folders in their layouts old and new: where the BERT lies, the pooling
(one mode string, or older per-mode booleans) and the longest input are read; a pipeline the
embedder cannot reproduce is refused by name, and nothing is written."""

import json
import pathlib
import shutil

import pytest

from transformer_jax import interop
from transformer_jax.inference.pooling import EmbeddingSettings
from transformer_jax.interop.files import ConversionError
from transformer_jax.interop.sentence_transformers import read_pipeline

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"
# all-MiniLM-L6-v2's 1_Pooling/config.json, written by sentence-transformers 2.0.
LEGACY_MEAN = {
    "word_embedding_dimension": 12,
    "pooling_mode_cls_token": False,
    "pooling_mode_mean_tokens": True,
    "pooling_mode_max_tokens": False,
    "pooling_mode_mean_sqrt_len_tokens": False,
}


def folder_copy(tmp_path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(FIXTURES / "bert_sentence", tmp_path / "st"))


def write(path: pathlib.Path, value) -> None:
    path.write_text(json.dumps(value))


def test_new_layout(tmp_path):
    pipeline = read_pipeline(folder_copy(tmp_path))
    assert (pipeline.pooling, pipeline.max_seq_length, pipeline.lowercase) == ("mean", 12, False)
    assert str(pipeline.folder) == str(tmp_path / "st")


@pytest.mark.parametrize(
    "flags, pooling",
    [({}, "mean"), ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}, "cls")],
)
def test_legacy_pooling_booleans(tmp_path, flags, pooling):
    folder = folder_copy(tmp_path)
    write(folder / "1_Pooling" / "config.json", LEGACY_MEAN | flags)
    assert read_pipeline(folder).pooling == pooling
    write(folder / "1_Pooling" / "config.json", {"word_embedding_dimension": 12})
    assert read_pipeline(folder).pooling == "mean"  # sentence-transformers' default


def test_old_layout_with_a_transformer_subfolder(tmp_path):
    """sentence-transformers 1.x: 0_Transformer/ holds the BERT and sentence_bert_config.json
    with max_seq_length; the conversion reads the BERT there and records that length."""
    source = FIXTURES / "bert_sentence"
    folder = tmp_path / "old"
    transformer = folder / "0_Transformer"
    transformer.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(source / name, transformer / name)
    write(transformer / "sentence_bert_config.json", {"max_seq_length": 9, "do_lower_case": True})
    shutil.copytree(source / "1_Pooling", folder / "1_Pooling")
    write(folder / "1_Pooling" / "config.json", LEGACY_MEAN)
    modules = [
        {"idx": 0, "name": "0", "path": "0_Transformer",
         "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"},
    ]  # fmt: skip
    write(folder / "modules.json", modules)
    converted = interop.from_hf(folder, tmp_path / "workdir")
    # do_lower_case is kept: the fixture's tokenizer lower-cases already.
    assert converted.embedding == EmbeddingSettings("mean", 9)
    assert json.loads((tmp_path / "workdir" / "embedding.json").read_text()) == {
        "pooling": "mean",
        "max_len": 9,
    }


def test_a_longest_input_beyond_the_positions_is_capped(tmp_path):
    folder = folder_copy(tmp_path)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    write(folder / "tokenizer_config.json", config | {"model_max_length": 10**30})
    assert interop.read_hf(folder).embedding == EmbeddingSettings("mean", 40)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda f: write(f / "1_Pooling" / "config.json", {"pooling_mode": "max"}),
         r"1_Pooling/config.json: pooling \['max'\]; .* cannot be reproduced"),
        (lambda f: write(f / "1_Pooling" / "config.json", LEGACY_MEAN | {
            "pooling_mode_cls_token": True}),
         r"pooling \['cls', 'mean'\]"),
        (lambda f: write(f / "modules.json", [
            {"path": "", "type": "sentence_transformers.models.Transformer"},
            {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}]),
         r"modules \['Transformer', 'Pooling', 'Dense'\]; .*without modules.json"),
        (lambda f: shutil.rmtree(f / "1_Pooling"), r"1_Pooling: missing; .*modules.json names it"),
        (lambda f: (f / "modules.json").write_text("[{"), r"modules.json: not valid JSON"),
        (lambda f: write(f / "sentence_bert_config.json", {"max_seq_length": "long"}),
         r"sentence_bert_config.json: max length 'long' is not an integer"),
    ],
)  # fmt: skip
def test_what_cannot_be_reproduced_is_refused_and_nothing_written(tmp_path, change, message):
    folder = folder_copy(tmp_path)
    change(folder)
    with pytest.raises(ConversionError, match=message):
        interop.from_hf(folder, tmp_path / "workdir")
    assert not (tmp_path / "workdir").exists()


def test_lowercasing_a_tokenizer_does_not_do_is_refused(tmp_path):
    folder = folder_copy(tmp_path)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["normalizer"]["lowercase"] = False
    write(folder / "tokenizer.json", tokenizer)
    write(folder / "sentence_bert_config.json", {"do_lower_case": True})
    with pytest.raises(ConversionError, match="do_lower_case is true but the tokenizer keeps"):
        interop.read_hf(folder)
