"""A converted workdir is an ordinary one: the front ends load it, lay out inputs as the
checkpoint's tokenizer does, and give what `transformers` gave."""

import json
import pathlib
import shutil

import numpy as np
import pytest

from tests.gcs_emulator import gcs_bucket  # noqa: F401 (fixture)
from transformer_jax import interop
from transformer_jax.data.bert.inputs import encode_plain, layout, specials_of
from transformer_jax.inference.classifier import Classifier
from transformer_jax.inference.fill_mask import MaskFiller
from transformer_jax.inference.generator import Generator
from transformer_jax.inference.image_classifier import ImageClassifier
from transformer_jax.inference.translator import Translator

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"


def reference(name: str) -> tuple[dict, dict]:
    folder = FIXTURES / name
    arrays = dict(np.load(folder / "reference.npz"))
    return arrays, json.loads((folder / "reference.json").read_text())


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    """Each fixture converted once into a workdir."""
    root = tmp_path_factory.mktemp("converted")
    cache = {}

    def get(name: str) -> pathlib.Path:
        if name not in cache:
            interop.from_hf(FIXTURES / name, root / name)
            cache[name] = root / name
        return cache[name]

    return get


@pytest.mark.parametrize("mesh", [None, {"fsdp": 2}])
def test_generator_continues_the_prompt_as_the_transformers_pipeline_does(workdirs, mesh):
    """GPT-2's tokenizer adds no bos: the prompt alone is continued ("" from <|endoftext|>),
    all three in one left-padded batch."""
    generator = Generator.from_checkpoint(workdirs("gpt2"), mesh=mesh)
    _, meta = reference("gpt2")
    assert meta["generation"]["add_bos_token"] is False and not generator.tokenizer.add_bos
    prompts = meta["generation"]["prompts"]
    assert prompts[0]["prompt_ids"][0] != generator.tokenizer.bos_id and prompts[-1]["text"] == ""
    assert [generator._encode([p["text"]], 8)[0] for p in prompts] == [
        p["prompt_ids"] for p in prompts
    ]
    texts = generator.generate([p["text"] for p in prompts], max_new_tokens=8, temperature=0)
    assert texts == [p["new_text"] for p in prompts]
    streamed = "".join(generator.stream(prompts[0]["text"], max_new_tokens=8, temperature=0))
    assert streamed == prompts[0]["new_text"]


def test_a_tokenizer_that_adds_bos_puts_it_before_the_prompt(tmp_path):
    """tokenizer_config.json's add_bos_token, recorded at conversion and read back with the
    workdir: true gives <|endoftext|> + the prompt, as transformers feeds it then."""
    folder = tmp_path / "gpt2"
    shutil.copytree(FIXTURES / "gpt2", folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "add_bos_token": True}))
    interop.from_hf(folder, tmp_path / "workdir")
    saved = json.loads((tmp_path / "workdir" / "tokenizer" / "options.json").read_text())
    assert saved == {"add_bos_token": True}
    generator = Generator.from_checkpoint(tmp_path / "workdir")
    _, meta = reference("gpt2")
    prompts = meta["generation"]["prompts_with_bos"]
    assert generator.tokenizer.add_bos and {p["prompt_ids"][0] for p in prompts} == {329}
    texts = generator.generate([p["text"] for p in prompts], max_new_tokens=8, temperature=0)
    assert texts == [p["new_text"] for p in prompts]
    assert texts[:2] != [p["new_text"] for p in meta["generation"]["prompts"][:2]]
    interop.to_hf(tmp_path / "workdir", tmp_path / "exported")  # Written back for transformers.
    exported = json.loads((tmp_path / "exported" / "tokenizer_config.json").read_text())
    assert (
        exported["add_bos_token"] is True
        and interop.read_hf(tmp_path / "exported").tokenizer.add_bos
    )

    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "add_bos_token": "yes"}))
    with pytest.raises(interop.ConversionError, match="add_bos_token must be true or false"):
        interop.read_hf(folder)


def test_bert_inputs_are_laid_out_as_transformers_does(workdirs):
    run = MaskFiller.from_checkpoint(workdirs("bert_mlm")).run
    _, meta = reference("bert_mlm")
    specials = specials_of(run.tokenizer)
    for item in meta["pairs"]:
        a, b = encode_plain(run.tokenizer, item["text"])
        tokens, segments, _ = layout(a, b, len(item["input_ids"]), specials)
        assert tokens.tolist() == [
            specials.unk if i == specials.mask else i for i in item["input_ids"]
        ]  # A [MASK] written in a text to classify is unk (transformers reads it as the mask).
        assert segments.tolist() == item["token_type_ids"]


def test_fill_mask_on_a_converted_bert(workdirs):
    filler = MaskFiller.from_checkpoint(workdirs("bert_mlm"))
    guesses = filler.fill_mask("The model reads a [MASK] word.", top_k=3)
    assert len(guesses) == 1 and len(guesses[0]) == 3
    assert all("[" not in g.token for g in guesses[0]), "a special token was guessed"
    assert sum(g.probability for g in guesses[0]) <= 1.0


def test_classifier_equals_transformers(workdirs):
    classifier = Classifier.from_checkpoint(workdirs("bert_sequence"))
    ref, meta = reference("bert_sequence")
    rows = [0, 2]  # Row 1 writes "[MASK]" in its text, which transformers reads as the mask.
    pairs = [tuple(meta["pairs"][r]["text"]) for r in rows]
    got = classifier.predict(pairs)
    want = np.exp(ref["logits"][rows]) / np.exp(ref["logits"][rows]).sum(-1, keepdims=True)
    for prediction, probabilities in zip(got, want, strict=True):
        assert classifier.label_names == ("LABEL_0", "LABEL_1", "LABEL_2")
        np.testing.assert_allclose(
            [prediction.probabilities[n] for n in classifier.label_names], probabilities, atol=1e-5
        )


def test_image_classifier_equals_transformers(workdirs):
    classifier = ImageClassifier.from_checkpoint(workdirs("vit_classifier"))
    ref, _ = reference("vit_classifier")
    got = classifier.predict(list(ref["images"]))
    want = np.exp(ref["logits"]) / np.exp(ref["logits"]).sum(-1, keepdims=True)
    for prediction, probabilities in zip(got, want, strict=True):
        np.testing.assert_allclose(
            [prediction.probabilities[n] for n in classifier.label_names], probabilities, atol=1e-5
        )


def test_translator_greedy_equals_transformers(workdirs):
    translator = Translator.from_checkpoint(workdirs("marian"))
    ref, meta = reference("marian")
    sources = [item["text"] for item in meta["sources"]]
    eos = meta["special_tokens"]["eos"]
    # transformers forces eos as the last of max_new_tokens; compare the tokens before it.
    limit = ref["greedy_ids"].shape[1] - 2
    got = translator.translate(sources, beam_size=1, max_len=limit)
    want = []
    for row in ref["greedy_ids"][:, 1 : 1 + limit]:
        ids = row.tolist()
        want.append(translator.tokenizer.decode(ids[: ids.index(eos)] if eos in ids else ids))
    assert got == want
    assert got == meta["generation"]["greedy_texts"]  # transformers' own decoded texts.


def test_evaluate_scores_a_converted_translator_on_text_files(workdirs, tmp_path, capsys):
    """A converted translation workdir's data section reads text files: set the test TSV in
    config.json and `evaluate` scores it (its hypotheses are the Translator's)."""
    from transformer_jax.cli.evaluate import main as evaluate_main

    _, meta = reference("marian")
    tsv = tmp_path / "test.tsv"
    pairs = zip(meta["sources"], meta["targets"], strict=True)
    tsv.write_text("".join(f"{s['text']}\t{t['text']}\n" for s, t in pairs))
    workdir = tmp_path / "marian"
    interop.from_hf(FIXTURES / "marian", workdir)
    config = json.loads((workdir / "config.json").read_text())
    config["data"]["text_test_tsv"] = str(tsv)
    (workdir / "config.json").write_text(json.dumps(config))
    assert evaluate_main([f"--workdir={workdir}", "--beam_size=1"]) == 0
    assert "4 test sentences" in capsys.readouterr().out
    hypotheses = (workdir / "eval" / "test.step0.beam1.txt").read_text().splitlines()
    sources = [s["text"] for s in meta["sources"]]
    assert hypotheses == Translator.from_checkpoint(workdir).translate(sources, beam_size=1)


def test_evaluate_refuses_a_converted_model_without_data(workdirs, capsys):
    from transformer_jax.cli.evaluate import main as evaluate_main

    assert evaluate_main([f"--workdir={workdirs('vit_classifier')}"]) == 1
    assert "init_from" in capsys.readouterr().err


def test_a_converted_workdir_in_cloud_storage(gcs_bucket, tmp_path):  # noqa: F811
    """from_hf writes a gs:// workdir (on a local Cloud Storage emulator) that serves as a
    local one does, and to_hf reads it back."""
    workdir = f"{gcs_bucket}/converted/gpt2"
    interop.from_hf(FIXTURES / "gpt2", workdir)
    _, meta = reference("gpt2")
    prompt = meta["generation"]["prompts"][0]
    generator = Generator.from_checkpoint(workdir)
    assert generator.generate([prompt["text"]], max_new_tokens=8, temperature=0) == [
        prompt["new_text"]
    ]
    assert interop.to_hf(workdir, tmp_path / "hf") == "GPT2LMHeadModel"
