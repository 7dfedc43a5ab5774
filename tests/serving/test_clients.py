"""The server through the clients users call it with, against the front ends it wraps.

The references run here on one device, as the server does, so both compute the same
floating-point programs row for row: greedy texts must match exactly, vectors to 1e-6.
"""

from __future__ import annotations

import base64
import io
import re

import httpx
import jax
import numpy as np
import openai
import pytest
from jax.sharding import Mesh
from libretranslatepy import LibreTranslateAPI
from PIL import Image

from transformer_jax import sharding as shd
from transformer_jax.inference.classifier import Classifier
from transformer_jax.inference.embedder import Embedder
from transformer_jax.inference.fill_mask import MaskFiller
from transformer_jax.inference.generator import Generator
from transformer_jax.inference.image_classifier import ImageClassifier
from transformer_jax.inference.translator import Translator

pytestmark = pytest.mark.slow(seconds=90)
SOURCES = ["twenty-one", "three hundred and four", "", "nine thousand and twelve", "seven"]
PROMPTS = ["import os", "def main(", "", "class Parser:\n    def", "x"]
TEXTS = ["A man is eating food.", "return the list", "", "os.path.join(a, b)"]


@pytest.fixture(scope="module")
def one_device() -> Mesh:
    """The server's device count: one."""
    return Mesh(np.asarray(jax.devices()[:1]).reshape(1, 1, 1), shd.MESH_AXES)


def _openai(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def _vector(value) -> np.ndarray:
    """An embedding as the openai package returns it: floats, or base64 when asked for."""
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), "<f4")
    return np.asarray(value, np.float32)


def compilations(server) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    return float(re.search(r"^transformer_jax_xla_compilations_total (\S+)$", text, re.M)[1])


def test_models_and_readiness(server):
    listed = httpx.get(f"{server.url}/v1/models").json()["data"]
    kinds = {(m["id"], m["kind"]) for m in listed}
    assert kinds == {("tiny", "translation"), ("gpt", "completion"), ("bert", "embeddings"),
                     ("bert", "fill-mask"), ("cls", "classification"), ("cls", "embeddings"),
                     ("vit", "image-classification")}  # fmt: skip
    assert httpx.get(f"{server.url}/readyz").json()["status"] == "ready"
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_greedy_completions_equal_generate(server, workdirs, one_device):
    generator = Generator.from_checkpoint(workdirs["gpt"], mesh=one_device)
    client = _openai(server)
    for prompt in PROMPTS:
        want = generator.generate([prompt], max_new_tokens=12, temperature=0)[0]
        got = client.completions.create(model="gpt", prompt=prompt, max_tokens=12, temperature=0)
        assert got.choices[0].text == want, prompt
        assert got.usage.completion_tokens <= 12
        streamed = client.completions.create(
            model="gpt", prompt=prompt, max_tokens=12, temperature=0, stream=True
        )
        chunks = list(streamed)
        assert "".join(c.choices[0].text for c in chunks) == want
        assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_sampled_completions_follow_the_seed(server):
    client = _openai(server)
    kwargs = dict(model="gpt", prompt="def ", max_tokens=10, temperature=1.0)
    top_k = {"top_k": 20}  # Not in OpenAI's API: vLLM's extra, as clients send it.
    one = client.completions.create(seed=7, **kwargs, extra_body=top_k).choices[0].text
    two = client.completions.create(seed=7, **kwargs, extra_body=top_k).choices[0].text
    assert one == two


def test_stop_strings_cut_the_completion(server, workdirs, one_device):
    generator = Generator.from_checkpoint(workdirs["gpt"], mesh=one_device)
    full = generator.generate(["import"], max_new_tokens=20, temperature=0)[0]
    stop = full[3:5]  # Two characters inside the greedy continuation.
    got = _openai(server).completions.create(model="gpt", prompt="import", max_tokens=20,
                                             temperature=0, stop=[stop])  # fmt: skip
    assert got.choices[0].text == full[: full.index(stop)]
    assert got.choices[0].finish_reason == "stop"


def test_embeddings_equal_embed(server, workdirs, one_device):
    client = _openai(server)
    want = Embedder.from_checkpoint(workdirs["bert"], mesh=one_device).embed(TEXTS)
    for encoding in ("float", "base64"):  # The openai package asks for base64 by default.
        got = client.embeddings.create(model="bert", input=TEXTS, encoding_format=encoding)
        vectors = np.asarray([_vector(d.embedding) for d in got.data], np.float32)
        np.testing.assert_allclose(vectors, want, atol=1e-6)
    one = client.embeddings.create(model="bert", input=TEXTS[1])
    np.testing.assert_allclose(one.data[0].embedding, want[1], atol=1e-6)


def test_libretranslate_client_and_translate_equal_translator(server, workdirs, one_device):
    translator = Translator.from_checkpoint(workdirs["tiny"], mesh=one_device)
    want = translator.translate(SOURCES, beam_size=1)  # The server's first --beam_sizes.
    client = LibreTranslateAPI(server.url)
    assert [client.translate(s, "en", "fr") if s else "" for s in SOURCES] == want
    assert {"code": "en", "name": "English", "targets": ["fr"]} in client.languages()
    body = httpx.post(f"{server.url}/v1/translate", json={"text": SOURCES, "beam_size": 2})
    assert body.json()["translations"] == translator.translate(SOURCES, beam_size=2)
    cut = httpx.post(f"{server.url}/v1/translate", json={"text": SOURCES[0], "max_length": 2})
    (tokens,) = translator.translate_tokens(SOURCES[:1], beam_size=1)
    assert cut.json()["translation"] == translator.tokenizer.decode(tokens[:2])


def test_classify_and_fill_mask_equal_the_front_ends(server, workdirs, one_device):
    pairs = [["four", "quatre"], ["twelve", "douze"]]
    want = Classifier.from_checkpoint(workdirs["cls"], mesh=one_device).predict(
        [tuple(p) for p in pairs]
    )
    got = httpx.post(f"{server.url}/v1/classify", json={"model": "cls", "input": pairs}).json()
    for w, g in zip(want, got["data"], strict=True):
        assert g["label"] == w.label
        for name, p in w.probabilities.items():
            assert g["probabilities"][name] == pytest.approx(p, abs=1e-6)
    text = "The [MASK] function returns a list."
    (masks,) = [MaskFiller.from_checkpoint(workdirs["bert"], mesh=one_device).fill_mask(
        text, top_k=3)]  # fmt: skip
    got = httpx.post(f"{server.url}/v1/fill-mask", json={"input": text, "top_k": 3}).json()
    assert [[c["token"] for c in m] for m in got["data"][0]["masks"]] == [
        [c.token for c in m] for m in masks
    ]


def test_image_upload_equals_predict(server, workdirs, one_device):
    classifier = ImageClassifier.from_checkpoint(workdirs["vit"], mesh=one_device)
    h, w, c = classifier.image_shape
    pixels = np.random.default_rng(0).integers(0, 256, (h, w), np.uint8)
    png = io.BytesIO()
    Image.fromarray(pixels).save(png, format="PNG")
    want = classifier.predict(pixels)
    raw = httpx.post(f"{server.url}/v1/classify-image", content=png.getvalue(),
                     headers={"Content-Type": "image/png"}).json()  # fmt: skip
    form = httpx.post(f"{server.url}/v1/classify-image",
                      files={"image": ("x.png", png.getvalue(), "image/png")}).json()  # fmt: skip
    for got in (raw, form):
        assert got["label"] == want.label
        for name, p in want.probabilities.items():
            assert got["probabilities"][name] == pytest.approx(p, abs=1e-6)
    big = io.BytesIO()
    Image.fromarray(np.zeros((2 * h, 2 * w), np.uint8)).save(big, format="PNG")
    refused = httpx.post(f"{server.url}/v1/classify-image", content=big.getvalue(),
                         headers={"Content-Type": "image/png"})  # fmt: skip
    assert refused.status_code == 422 and refused.json()["error"]["param"] == "image"
    resized = httpx.post(f"{server.url}/v1/classify-image?resize=true", content=big.getvalue(),
                         headers={"Content-Type": "image/png"})  # fmt: skip
    assert resized.status_code == 200


def test_no_compilation_while_serving(server):
    """Every size of request, every endpoint, after the warm-up: zero compilations."""
    before = compilations(server)
    rng = np.random.default_rng(0)
    words = ["one", "two", "three", "hundred", "thousand", "and", "forty"]
    client = _openai(server)
    for n in (1, 2, 3, 5, 8):
        sentences = [" ".join(rng.choice(words, rng.integers(1, 12))) for _ in range(n)]
        for beam in (1, 2):
            httpx.post(f"{server.url}/v1/translate", json={"text": sentences, "beam_size": beam})
        client.embeddings.create(model="cls", input=sentences)
        for length in (1, 10, 30):
            prompt = "x" * int(rng.integers(0, 40))
            client.completions.create(model="gpt", prompt=prompt, max_tokens=length,
                                      temperature=float(rng.uniform(0, 2)),
                                      seed=int(rng.integers(1 << 62)))  # fmt: skip
        client.completions.create(model="gpt", prompt="y" * 15, max_tokens=5)  # A random seed.
    assert compilations(server) == before
