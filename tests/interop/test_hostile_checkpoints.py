"""Checkpoints that cannot be converted: each is one error naming the file and the field or
tensor, and nothing is written to the output workdir."""

import json
import pathlib
import pickle
import shutil
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from transformer_jax import interop
from transformer_jax.cli.convert import main as convert_main

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"


def copy(name: str, tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    return folder


def edit_config(folder: pathlib.Path, **fields) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(fields)
    (folder / "config.json").write_text(json.dumps(config))


def edit_tensors(folder: pathlib.Path, change) -> None:
    tensors = load_file(folder / "model.safetensors")
    change(tensors)
    save_file(tensors, folder / "model.safetensors")


def refused(folder: pathlib.Path, tmp_path: pathlib.Path, *needles: str) -> str:
    out = tmp_path / "out"
    with pytest.raises(interop.ConversionError) as error:
        interop.from_hf(folder, out)
    message = str(error.value)
    for needle in needles:
        assert needle in message, message
    assert not out.exists(), "a refused conversion wrote to the workdir"
    return message


def test_missing_tensor(tmp_path):
    folder = copy("gpt2", tmp_path)
    edit_tensors(folder, lambda t: t.pop("transformer.h.1.mlp.c_fc.weight"))
    refused(folder, tmp_path, "transformer.h.1.mlp.c_fc.weight", "missing", str(folder))


def test_tensor_of_the_wrong_shape(tmp_path):
    folder = copy("bert_pretraining", tmp_path)

    def shrink(tensors):
        name = "bert.encoder.layer.0.intermediate.dense.weight"
        tensors[name] = tensors[name][:-1]

    edit_tensors(folder, shrink)
    refused(folder, tmp_path, "bert.encoder.layer.0.intermediate.dense.weight", "shape")


def test_unexpected_tensor(tmp_path):
    folder = copy("vit_classifier", tmp_path)
    edit_tensors(folder, lambda t: t.update(extra_head=np.zeros(3, np.float32)))
    refused(folder, tmp_path, "extra_head", "refusing to drop")


def test_unknown_model_type(tmp_path):
    folder = copy("gpt2", tmp_path)
    edit_config(folder, model_type="llama")
    refused(folder, tmp_path, "model_type='llama'", "config.json")


@pytest.mark.parametrize(
    "name, field, value",
    [
        ("gpt2", "scale_attn_by_inverse_layer_idx", True),
        ("bert_pretraining", "position_embedding_type", "relative_key"),
        ("marian", "decoder_ffn_dim", 40),
        ("gpt2", "activation_function", "quick_gelu"),
    ],
)
def test_fields_that_cannot_be_expressed(tmp_path, name, field, value):
    folder = copy(name, tmp_path)
    edit_config(folder, **{field: value})
    refused(folder, tmp_path, field, "config.json")


def test_pickle_is_refused_unread(tmp_path):
    folder = copy("gpt2", tmp_path)
    (folder / "model.safetensors").unlink()

    class Boom:
        def __reduce__(self):
            return (pathlib.Path.touch, (tmp_path / "pwned",))

    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Boom()))
    refused(folder, tmp_path, "pytorch_model.bin", "safetensors", "never reads")
    assert not (tmp_path / "pwned").exists()


def test_truncated_safetensors(tmp_path):
    folder = copy("gpt2", tmp_path)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    refused(folder, tmp_path, "model.safetensors", "not a complete safetensors file")


def test_sharded_index_naming_a_missing_shard(tmp_path):
    folder = copy("gpt2_sharded", tmp_path)
    sorted(folder.glob("model-*.safetensors"))[-1].unlink()
    refused(folder, tmp_path, "listed in model.safetensors.index.json but missing")


def test_tokenizer_of_another_model(tmp_path):
    folder = copy("bert_pretraining", tmp_path)
    edit_config(folder, vocab_size=200)
    refused(folder, tmp_path, "tokenizer", "vocab_size")


def test_existing_workdir_is_not_overwritten(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(interop.ConversionError, match="not empty"):
        interop.from_hf(FIXTURES / "gpt2", out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_command_line_errors(tmp_path, capsys):
    assert convert_main([f"--from_hf={tmp_path / 'nothing'}", f"--workdir={tmp_path / 'w'}"]) == 1
    assert "nothing" in capsys.readouterr().err
    assert convert_main([f"--workdir={tmp_path / 'w'}"]) == 1
    assert "exactly one of --from_hf" in capsys.readouterr().err


def test_a_hub_name_offline_says_to_pass_a_folder(tmp_path, monkeypatch, capsys):
    import huggingface_hub

    def offline(*args, **kwargs):
        raise OSError("Name or service not known")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    assert (
        convert_main(["--from_hf=Helsinki-NLP/opus-mt-en-de", f"--workdir={tmp_path / 'w'}"]) == 1
    )
    error = capsys.readouterr().err
    assert "Helsinki-NLP/opus-mt-en-de" in error and "pass a local folder" in error
    assert not (tmp_path / "w").exists()


def test_a_hub_name_without_the_hub_package_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # `import` raises ImportError
    assert convert_main(["--from_hf=gpt2", f"--workdir={tmp_path / 'w'}"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("error: --from_hf=gpt2: ")
    assert 'pip install -e ".[hf]"' in error and "Traceback" not in error
    assert not (tmp_path / "w").exists()


def test_a_folder_without_tokenizer_files(tmp_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    for file in ("config.json", "model.safetensors"):
        (folder / file).write_bytes((FIXTURES / "gpt2" / file).read_bytes())
    refused(folder, tmp_path, "no tokenizer.json", "tokenizer files")
