"""Serving a translation workdir with CTranslate2 beside the project's own `Translator`: output
tokens/s on the same sentences, and whether the outputs are identical.

The workdir is exported with the package (`transformer_jax.interop.ctranslate2.to_ctranslate2`)
twice, float32 and int8, and the engines translate the same English sentences (sources of the
embedded corpus's test split) text to text through their front ends: `Translator.translate`
and `Ct2Translator.translate`, one tokenizer for both. Greedy and beam 4, ranked by summed
log-probability on both sides (`alpha=0`, `length_penalty=0`: the engines' length penalties
are different functions), `--batch` sentences per call, at most `--max_len` output tokens.
CTranslate2 runs float32 with `intra_threads` 1 and 2 and int8 with 1 (`inter_threads=1`).
Identical means the same text for every sentence (each output id is a distinct piece here);
tokens/s counts the output ids before eos, read through the tokenizer's decode. Ours is
jit-compiled, compilation and a warm-up call excluded; every engine gets a warm-up call, then
the timed calls interleave, with medians over `--repeats`. One process: the engines take
turns, so only one computes at a time.

Without --workdir the model is random and Marian-shaped (OPUS-MT's base: d_model 512, 6+6
layers, 8 heads, d_ff 2048, sines-then-cosines positions, SiLU, a logits bias, vocabulary
58,101), written as a converted OPUS-MT workdir (`interop.Converted` + `write_workdir`) whose
tokenizer is tests/fixtures/hf/marian's SentencePiece models over a vocab.json padded to the
model's size with distinct pieces: OPUS-MT's special tokens (`</s>` 0, `<unk>` 1, `<pad>` last,
the decoder starting from `<pad>`). Its biases and LayerNorms are perturbed, as in
ctranslate2_side_by_side.py. A random model rarely ends a sentence, so most outputs run to
--max_len.

    pip install -e ".[bench]"
    python benchmarks/ctranslate2_serving.py                    # about 4 minutes on 2 cores
    python benchmarks/ctranslate2_serving.py --workdir=runs/en-de --out=/tmp/en-de.json

Writes a table to stdout and JSON to `benchmarks/results/ctranslate2_serving.json` (`--out`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pathlib
import platform
import statistics
import tempfile
import time

import jax
import numpy as np

from transformer_jax.data.translation.embedded import embedded_pairs
from transformer_jax.inference.translator import Translator
from transformer_jax.interop import ctranslate2 as ct2

ROOT = pathlib.Path(__file__).resolve().parents[1]

SHAPES = {  # OPUS-MT's base shape, and a smaller one for a quick pass
    "base": dict(d_model=512, num_heads=8, d_ff=2048, layers=6),
    "small": dict(d_model=256, num_heads=4, d_ff=1024, layers=3),
}
VOCAB = 58101  # OPUS-MT en-de's vocabulary (with <pad> last)
MARIAN = dict(positional="sinusoidal_halves", activation="silu", logits_bias=True,
              layer_norm_eps=1e-5, max_len=512)  # fmt: skip
FIXTURE = ROOT / "tests" / "fixtures" / "hf" / "marian"
BIASES = ("scale", "bias", "b1", "b2", "query_bias", "value_bias", "out_bias", "logits_bias")
METHODS = {"greedy": 1, "beam4": 4}
CT2_CONFIGS = (  # (label, exported weights, intra_threads); inter_threads is always 1.
    ("ct2_f32_t1", "float32", 1),
    ("ct2_f32_t2", "float32", 2),
    ("ct2_int8_t1", "int8", 1),
)


# ------------------------------------------------------------------------------ the workdir
def marian_tokenizer():
    """The fixture's OPUS-MT tokenizer over a vocabulary of `VOCAB` ids, each a distinct piece."""
    from transformer_jax.interop.tokenizer import MarianTokenizer

    vocab = json.loads((FIXTURE / "vocab.json").read_text())
    vocab.pop("<pad>")  # The fixture's last id; here it goes last again.
    vocab.update({f"▁w{i:05d}": i for i in range(len(vocab), VOCAB - 1)})
    vocab["<pad>"] = VOCAB - 1
    tokens = {"pad": "<pad>", "eos": "</s>", "unk": "<unk>", "bos": "<pad>"}
    spm = [(FIXTURE / name).read_bytes() for name in ("source.spm", "target.spm")]
    return MarianTokenizer(*spm, vocab, tokens, where=str(FIXTURE))


def marian_workdir(path: pathlib.Path, shape: dict, seed: int) -> pathlib.Path:
    """A random Marian-shaped model written as a converted OPUS-MT workdir."""
    import jax.numpy as jnp
    from flax import nnx

    from transformer_jax import EncoderDecoder, EncoderDecoderConfig, interop
    from transformer_jax.interop import convert

    tokenizer = marian_tokenizer()
    cfg = EncoderDecoderConfig(
        vocab_size=VOCAB, d_model=shape["d_model"], num_heads=shape["num_heads"],
        d_ff=shape["d_ff"], num_encoder_layers=shape["layers"],
        num_decoder_layers=shape["layers"], dropout_rate=0.0, pad_id=tokenizer.pad_id, **MARIAN,
    )  # fmt: skip
    model = EncoderDecoder(cfg, rngs=nnx.Rngs(seed))
    rng = np.random.default_rng(seed)
    perturbed = []
    for key, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        value = np.asarray(var[...])
        if key[-1] in BIASES:  # LayerNorms, biases: their zeros and ones would hide a mapping
            value = value + 0.1 * rng.standard_normal(value.shape).astype(np.float32)
        perturbed.append((key, var.replace(jnp.asarray(value, jnp.float32))))
    params = nnx.from_flat_state(perturbed)
    converted = interop.Converted(
        model_type="marian", architecture="MarianMTModel", cfg=cfg, params=params,
        tokenizer=tokenizer, task="translation", labels=None, fresh=[], dropped={},
    )  # fmt: skip
    return convert.write_workdir(converted, path, "random Marian-shaped model").path


# ------------------------------------------------------------------------------ measuring
class Recorder:
    """A tokenizer that also counts the output ids each `decode` gets (before eos, no pad)."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self.tokens = 0

    def __getattr__(self, name):
        return getattr(self._tokenizer, name)

    def decode(self, ids):
        ids = np.asarray(ids).tolist()
        eos, pad = self._tokenizer.eos_id, self._tokenizer.pad_id
        ids = ids[: ids.index(eos)] if eos in ids else ids
        self.tokens += sum(i != pad for i in ids)
        return self._tokenizer.decode(ids)


def engines(workdir: pathlib.Path, exported: dict[str, pathlib.Path], batch: int) -> dict:
    """label -> (the front end, its `translate` options)."""
    ours = Translator.from_checkpoint(workdir)
    ours.tokenizer = Recorder(ours.tokenizer)
    found = {"ours": (ours, dict(alpha=0.0, batch_size=batch))}
    for label, weights, threads in CT2_CONFIGS:
        served = ct2.Ct2Translator(exported[weights], compute_type=weights, inter_threads=1,
                                   intra_threads=threads)  # fmt: skip
        served.tokenizer = Recorder(served.tokenizer)
        found[label] = (served, dict(length_penalty=0, max_batch_size=batch))
    return found


def timed(engine, options: dict, texts: list[str], beam: int, max_len: int):
    """Seconds, output tokens and outputs of one `translate` call over every text."""
    engine.tokenizer.tokens = 0
    start = time.perf_counter()
    outputs = engine.translate(texts, beam_size=beam, max_len=max_len, **options)
    return time.perf_counter() - start, engine.tokenizer.tokens, outputs


def measure(args, workdir: pathlib.Path, tmp: pathlib.Path) -> dict:
    texts = [src for src, _ in embedded_pairs("test", args.sentences, args.seed, "de")]
    exported, export_s, sizes = {}, {}, {}
    for weights in ("float32", "int8"):
        start = time.perf_counter()
        path = tmp / f"ct2_{weights}"
        ct2.to_ctranslate2(workdir, path, quantization=weights)
        export_s[weights] = time.perf_counter() - start
        sizes[weights] = (path / "model.bin").stat().st_size
        exported[weights] = path
    found = engines(workdir, exported, args.batch)
    lengths = [len(found["ours"][0].tokenizer.encode(t)) + 1 for t in texts]
    samples = {m: {label: [] for label in found} for m in METHODS}
    tokens, outputs, warmup_s = {}, {}, {}
    for method, beam in METHODS.items():
        for label, (engine, options) in found.items():
            seconds, count, out = timed(
                engine, options, texts, beam, args.max_len
            )  # compile, warm up
            warmup_s[f"{label}/{method}"] = seconds
            tokens[(method, label)], outputs[(method, label)] = count, out
    for repeat in range(args.repeats):
        for method, beam in METHODS.items():
            turns = list(found)
            turns = turns[repeat % len(turns) :] + turns[: repeat % len(turns)]
            for label in turns:
                engine, options = found[label]
                seconds, count, out = timed(engine, options, texts, beam, args.max_len)
                if out != outputs[(method, label)] or count != tokens[(method, label)]:
                    raise RuntimeError(f"{label} {method}: outputs changed between calls")
                samples[method][label].append(count / seconds)
                time.sleep(args.pause)
        print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
    rows = []
    for method in METHODS:
        ours = outputs[(method, "ours")]
        for label in found:
            same = [a == b for a, b in zip(ours, outputs[(method, label)], strict=True)]
            rows.append(dict(
                method=method, engine=label,
                tokens_per_s=statistics.median(samples[method][label]),
                output_tokens=tokens[(method, label)],
                identical_to_ours=all(same), sentences_identical=float(np.mean(same)),
                samples_tokens_per_s=samples[method][label],
            ))  # fmt: skip
    return dict(source_tokens=dict(min=min(lengths), max=max(lengths), total=sum(lengths)),
                export_s=export_s, model_bin_bytes=sizes, warmup_s=warmup_s, rows=rows)  # fmt: skip


def _print_table(result: dict) -> None:
    print(f"\n{'setting':>7} {'engine':>12} {'tokens/s':>9} {'vs ours':>8} {'identical':>10}")
    for row in result["rows"]:
        ours = next(r for r in result["rows"] if r["method"] == row["method"])
        ratio = row["tokens_per_s"] / ours["tokens_per_s"]
        same = "yes" if row["identical_to_ours"] else f"{row['sentences_identical']:.0%}"
        print(f"{row['method']:>7} {row['engine']:>12} {row['tokens_per_s']:>9.0f} "
              f"{ratio:>7.2f}x {same:>10}")  # fmt: skip


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workdir", help="a translation workdir (default: a random Marian-shaped one)")
    p.add_argument("--shape", default="base", choices=sorted(SHAPES), help="of the random model")
    p.add_argument("--sentences", type=int, default=32, help="test-split sources translated")
    p.add_argument("--batch", type=int, default=32, help="sentences per decoding batch")
    p.add_argument("--max_len", type=int, default=64, help="most output tokens per sentence")
    p.add_argument("--repeats", type=int, default=2, help="interleaved rounds; medians reported")
    p.add_argument("--pause", type=float, default=0.3, help="seconds between timings")
    p.add_argument("--seed", type=int, default=0, help="weights and sentences")
    p.add_argument("--out", default="benchmarks/results/ctranslate2_serving.json", help="JSON")
    return p.parse_args()


def main(args: argparse.Namespace) -> dict:
    load_start, start = os.getloadavg()[0], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ct2_serving_") as tmp:
        tmp = pathlib.Path(tmp)
        if args.workdir:
            workdir, model = pathlib.Path(args.workdir), "the workdir's"
        else:
            build = time.perf_counter()
            workdir = marian_workdir(tmp / "workdir", SHAPES[args.shape], args.seed)
            model = dict(SHAPES[args.shape], vocab_size=VOCAB, **MARIAN,
                         build_s=time.perf_counter() - build)  # fmt: skip
        result = measure(args, workdir, tmp)
    _print_table(result)
    return dict(
        workdir=args.workdir, model=model, cpu=_cpu_model(), cpu_count=os.cpu_count(),
        load_average_1min=dict(start=load_start, end=os.getloadavg()[0]),
        python=platform.python_version(), jax=jax.__version__,
        ctranslate2=importlib.metadata.version("ctranslate2"),
        wall_s=time.perf_counter() - start,
        work=dict(sentences=args.sentences, batch=args.batch, max_len=args.max_len,
                  repeats=args.repeats, beam_size=4, alpha=0.0, length_penalty=0.0),
        note="Text to text through each front end (Translator.translate, Ct2Translator."
        "translate), one process, engines taking turns. tokens/s counts output ids before eos. "
        "Identical: the same text for every sentence.",
        **result,
    )  # fmt: skip


def _cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    arguments = _parse()
    output = main(arguments)
    out_path = pathlib.Path(arguments.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(output, indent=2) + "\n")
    print(f"wrote {out_path}")
