"""Decoding speed of transformer_jax against CTranslate2 on CPU: float32, same weights, same work.

Both engines decode the same 32 random sources of 32 tokens into exactly 64 tokens with the same
random weights: greedy and beam-4, batch 32 (all sources in one call, repeated for at least
`--min_time` seconds) and batch 1 (one source per call over `--batch1_sources` sources). The
transformer_jax model is randomly initialised (biases and LayerNorm parameters perturbed too, so
that a wrong mapping of any of them shows) and written as a CTranslate2 model directory by the
package's exporter (`transformer_jax.interop.ctranslate2`: its spec API, numpy weights, no
PyTorch). Each engine runs in its own worker process; the driver asks them in turn (ours, then
CTranslate2, alternating who goes first each repeat), so only one engine computes at a time,
and reports medians over the repeats.

Fixed-length work on both sides: ours decodes with `eos_id=None` (never stops; pad is never
emitted); CTranslate2 with `min_decoding_length = max_decoding_length = 64`, which keeps its
end token from being emitted. To make the two rules the same, CTranslate2's end token is our pad
token (`end_token="<pad>"`, which the export already keeps from being emitted) and our eos is an
ordinary token on both sides; sources end with eos on both (CTranslate2 appends it). So for
the same weights the outputs must be equal, and the script checks that they are (`agreement`
in the JSON): identical tokens, and the mean log-probability of each output within float32
rounding (it depends on every logit of every step, so it catches a mapping error that a random
model's repetitive output would hide).
tests/interop/test_ctranslate2.py checks the same on tiny models, post- and pre-LN, with Marian's
options (sines-then-cosines positions, SiLU, a logits bias, unscaled embeddings) and others.

CTranslate2 runs float32 at `intra_threads` 1 and 2 (`inter_threads=1`); the ratio is taken
against the faster of the two for each setting. Its int8 (`intra_threads=1`, fastest on a
2-core machine) is reported for reference. Our side is float32, jit-compiled, compilation and
a warm-up call excluded; XLA uses every core.

Setup: CTranslate2 needs only numpy; the project's `bench` extra adds it and nothing else:

  pip install -e ".[bench]"
  python benchmarks/ctranslate2_side_by_side.py
  ... --repeats 1 --batch1_sources 4 --min_time 0   # a quick pass (a busy machine)

The default (both shapes, 3 repeats) is sized for about 10 minutes on an idle 2-core machine
(an estimate, not yet measured idle); with other jobs on the machine it takes several times
that. Writes a table to stdout and JSON to `benchmarks/results/ctranslate2.json` (`--out`).

This file is also the workers (`--worker jax|ct2`): the CTranslate2 worker imports nothing but
numpy and ctranslate2 (it loads the directory the other worker wrote), which is why jax and the
project are imported inside the functions of the transformer_jax worker only.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

SHAPES = {  # name -> model fields (vocabulary, widths, layers per stack)
    "small": dict(vocab_size=8000, d_model=256, num_heads=4, d_ff=1024, layers=3),
    "base": dict(vocab_size=8192, d_model=512, num_heads=8, d_ff=2048, layers=6),
}
SETTINGS = (("beam4", 32), ("greedy", 32), ("beam4", 1), ("greedy", 1))  # (method, batch)
BEAM_SIZE = 4
BEAM_ALPHA = 0.6  # beam_search's default length penalty; all hypotheses have the same length
NUM_SOURCES, SOURCE_LEN, OUTPUT_LEN = 32, 32, 64  # SOURCE_LEN counts the eos
CT2_CONFIGS = (  # (label, compute_type, intra_threads); inter_threads is always 1.
    ("f32_intra1", "float32", 1),
    ("f32_intra2", "float32", 2),
    ("int8_intra1", "int8", 1),
)
REPLY = "@@ "  # Prefix of a worker's reply line on stdout; other output goes to stderr.
# Parameters that start as zeros or ones (LayerNorm, biases): perturbed in the benchmark's model.
BIASES = ("scale", "bias", "b1", "b2", "query_bias", "value_bias", "out_bias", "logits_bias")
CT2_MODEL = "ct2_model"  # The CTranslate2 directory the transformer_jax worker writes.


# ============================================================================ transformer_jax
def _jax_model(shape: dict, seed: int, **fields):
    """A random model of `shape` (and other `EncoderDecoderConfig` `fields`) with every parameter
    random, biases and LayerNorms included (their initial zeros and ones would hide a mapping
    that drops or swaps them)."""
    import jax.numpy as jnp  # Here, not at the top: the CTranslate2 worker has no jax.
    from flax import nnx

    from transformer_jax import EncoderDecoder, EncoderDecoderConfig

    cfg = EncoderDecoderConfig.base(
        vocab_size=shape["vocab_size"],
        d_model=shape["d_model"],
        num_heads=shape["num_heads"],
        d_ff=shape["d_ff"],
        num_encoder_layers=shape["layers"],
        num_decoder_layers=shape["layers"],
        dropout_rate=0.0,
        max_len=256,
        **fields,
    )
    model = EncoderDecoder(cfg, rngs=nnx.Rngs(seed))
    rng = np.random.default_rng(seed)
    perturbed = []
    for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        value = np.asarray(var[...])
        if path[-1] in BIASES:
            value = value + 0.1 * rng.standard_normal(value.shape, np.float32)  # LN, biases
        perturbed.append((path, var.replace(jnp.asarray(value, jnp.float32))))
    nnx.update(model, nnx.from_flat_state(perturbed))
    return model


def write_ct2_model(model, out_dir: pathlib.Path) -> None:
    """`model` as a CTranslate2 directory, through the package's exporter. Its vocabulary is
    "t{id}" but for the project's special tokens, which are CTranslate2's unk, bos and eos."""
    from transformer_jax.interop import ctranslate2 as ct2
    from transformer_jax.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

    special = {PAD_ID: "<pad>", EOS_ID: "</s>", BOS_ID: "<s>", UNK_ID: "<unk>"}
    pieces = [special.get(i, f"t{i}") for i in range(model.cfg.vocab_size)]
    tokens = ct2.special_tokens(pieces, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID)
    ct2.write_model(ct2.model_spec(model, pieces, tokens), out_dir)


class JaxEngine:
    """transformer_jax's `greedy_decode` / `beam_search` with eos disabled."""

    labels = ("ours",)  # one configuration

    def __init__(
        self, shape: dict, seed: int, workdir: pathlib.Path, sources: np.ndarray, **fields
    ):
        """Builds the model (see `_jax_model`) and writes it for the other engine."""
        import jax

        from transformer_jax.tokens import EOS_ID

        self.model = _jax_model(shape, seed, **fields)
        write_ct2_model(self.model, workdir / CT2_MODEL)
        eos = np.full((len(sources), 1), EOS_ID, sources.dtype)
        self.sources = np.concatenate([sources, eos], axis=1)  # int ids [32, 32], eos last
        self.versions = dict(jax=jax.__version__, jaxlib=importlib.metadata.version("jaxlib"))

    def decode(self, label: str, method: str, src: np.ndarray, scores: bool = False):
        """Output tokens `[B, 64]` (best hypothesis), and with `scores` their mean
        log-probability `[B]` (computed either way: it costs nothing next to the search)."""
        del label
        import jax.numpy as jnp

        from transformer_jax import beam_search, greedy_decode, length_penalty

        src = jnp.asarray(src, jnp.int32)

        if method == "greedy":
            tokens, logp = greedy_decode(self.model, src, max_len=OUTPUT_LEN, eos_id=None)
        else:
            tokens, ranked = beam_search(
                self.model, src, beam_size=BEAM_SIZE, max_len=OUTPUT_LEN, eos_id=None
            )
            tokens, logp = tokens[:, 0], ranked[:, 0] * length_penalty(OUTPUT_LEN, BEAM_ALPHA)
        tokens = np.asarray(tokens)  # to the host, as CTranslate2 returns Python lists
        return (tokens, np.asarray(logp) / OUTPUT_LEN) if scores else tokens


# ================================================================================ CTranslate2
class Ct2Engine:
    """`ctranslate2.Translator.translate_batch` at each of `CT2_CONFIGS`."""

    labels = tuple(label for label, _, _ in CT2_CONFIGS)

    def __init__(self, workdir: pathlib.Path, sources: np.ndarray):
        """Loads the directory `JaxEngine` wrote to `workdir` in every configuration."""
        import ctranslate2

        model_dir = str(workdir / CT2_MODEL)
        self.translators = {
            label: ctranslate2.Translator(
                model_dir,
                device="cpu",
                compute_type=compute_type,
                inter_threads=1,
                intra_threads=threads,
            )
            for label, compute_type, threads in CT2_CONFIGS
        }
        vocabulary = json.loads((workdir / CT2_MODEL / "shared_vocabulary.json").read_text())
        self.ids = {token: i for i, token in enumerate(vocabulary)}
        # Strings, without the eos that CTranslate2 appends (the model's add_source_eos).
        self.sources = [[vocabulary[i] for i in row] for row in sources.tolist()]
        self.versions = dict(ctranslate2=ctranslate2.__version__)

    def decode(self, label: str, method: str, src: list[list[str]], scores: bool = False):
        """Output tokens `[B, 64]`, and with `scores` their mean log-probability `[B]`
        (CTranslate2 divides the summed log-probability by the length, its default penalty)."""
        results = self.translators[label].translate_batch(
            src,
            beam_size=BEAM_SIZE if method == "beam4" else 1,
            num_hypotheses=1,
            max_decoding_length=OUTPUT_LEN,
            min_decoding_length=OUTPUT_LEN,
            end_token="<pad>",  # never emitted: our eos is an ordinary token, as on our side
            return_scores=scores,
            max_batch_size=0,
        )
        tokens = np.array([[self.ids[t] for t in r.hypotheses[0]] for r in results])
        if not scores:
            return tokens
        return tokens, np.array([r.scores[0] for r in results])


# ==================================================================================== workers
def _time_setting(decode, sources, batch: int, min_time: float, batch1_sources: int) -> dict:
    """Seconds and output tokens of timed calls: batch 32 repeated for at least `min_time`
    seconds; batch 1 one call per source over the first `batch1_sources` sources."""
    calls, start = 0, time.perf_counter()
    if batch == 1:
        for i in range(batch1_sources):
            decode(sources[i : i + 1])
        calls = batch1_sources
    else:
        while calls == 0 or time.perf_counter() - start < min_time:
            decode(sources[:batch])
            calls += 1
    seconds = time.perf_counter() - start
    return dict(seconds=seconds, calls=calls, tokens=calls * batch * OUTPUT_LEN)


def _check_length(tokens: np.ndarray, who: str) -> None:
    if tokens.shape[-1] != OUTPUT_LEN:
        raise RuntimeError(f"{who} returned {tokens.shape[-1]} tokens, expected {OUTPUT_LEN}.")


def worker(kind: str) -> None:
    """Answers the driver's JSON requests on stdin, one reply line each on stdout."""
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # stray prints must not break replies
    engine = None
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "setup":
            engine, reply = _setup(kind, request)
        elif request["op"] == "run":
            method, batch, label = request["method"], request["batch"], request["label"]
            reply = _time_setting(
                functools.partial(engine.decode, label, method),
                engine.sources,
                batch,
                request["min_time"],
                request["batch1_sources"],
            )
        else:  # "quit"
            return
        real_stdout.write(REPLY + json.dumps(reply) + "\n")
        real_stdout.flush()


def _setup(kind: str, request: dict):
    """Builds the engine, then compiles / warms up every setting of every configuration once;
    replies with the times and the batch-32 outputs (for the agreement check)."""
    workdir = pathlib.Path(request["workdir"])
    sources = np.load(workdir / "sources.npy")
    start = time.perf_counter()
    if kind == "jax":
        engine = JaxEngine(SHAPES[request["shape"]], request["seed"], workdir, sources)
    else:
        engine = Ct2Engine(workdir, sources)
    build_s = time.perf_counter() - start
    outputs, warmup_s = {}, {}
    for label in engine.labels:
        for method, batch in SETTINGS:
            start = time.perf_counter()
            tokens, logp = engine.decode(label, method, engine.sources[:batch], scores=True)
            warmup_s[f"{label}/{method}/b{batch}"] = time.perf_counter() - start
            _check_length(tokens, f"{label} {method}")
            if batch == NUM_SOURCES:
                outputs[f"{label}/{method}"] = dict(tokens=tokens.tolist(), logp=logp.tolist())
    return engine, dict(build_s=build_s, warmup_s=warmup_s, outputs=outputs, **engine.versions)


# ===================================================================================== driver
class Worker:
    """A worker process and its request/reply pipe."""

    def __init__(self, kind: str):
        self.kind = kind
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, **request) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY) :])
        raise RuntimeError(f"the {self.kind} worker exited ({self.proc.wait()}); see stderr.")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps(dict(op="quit")) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def agreement(ours: dict, theirs: dict) -> dict:
    """How far two engines' outputs for the same 32 sources agree.

    Identical tokens alone say little of a random model (it tends to repeat one token), so the
    mean log-probability of each output is compared too: it depends on every logit of every
    step through the softmax normaliser.
    """
    a, b = np.asarray(ours["tokens"]), np.asarray(theirs["tokens"])
    return dict(
        sentences_identical=float(np.mean(np.all(a == b, axis=1))),
        tokens_identical=float(np.mean(a == b)),
        distinct_outputs=len({tuple(row) for row in a.tolist()}),
        mean_logprob_max_abs_diff=float(np.max(np.abs(np.subtract(ours["logp"], theirs["logp"])))),
    )


def run_shape(name: str, args: argparse.Namespace) -> dict:
    """Builds both engines for one shape and times every setting, interleaved."""
    with tempfile.TemporaryDirectory(prefix="ct2_bench_") as tmp:
        rng = np.random.default_rng(args.seed)
        vocab = SHAPES[name]["vocab_size"]
        sources = rng.integers(4, vocab, (NUM_SOURCES, SOURCE_LEN - 1))  # no special tokens
        np.save(pathlib.Path(tmp) / "sources.npy", sources)
        ours, ct2 = Worker("jax"), Worker("ct2")
        try:
            jax_setup = ours.ask(op="setup", workdir=tmp, shape=name, seed=args.seed)
            ct2_setup = ct2.ask(op="setup", workdir=tmp)
            agree = {
                f"{label}/{method}": agreement(
                    jax_setup["outputs"][f"ours/{method}"],
                    ct2_setup["outputs"][f"{label}/{method}"],
                )
                for label, _, _ in CT2_CONFIGS
                for method in ("greedy", "beam4")
            }
            greedy = agree["f32_intra1/greedy"]
            print(
                f"[{name}] greedy agreement with CTranslate2 float32: "
                f"{greedy['sentences_identical']:.0%} of sentences, "
                f"{greedy['tokens_identical']:.1%} of tokens; mean log-prob per token differs "
                f"by at most {greedy['mean_logprob_max_abs_diff']:.1e}",
                flush=True,
            )
            samples = {s: {"ours": []} | {c[0]: [] for c in CT2_CONFIGS} for s in SETTINGS}
            timing = dict(min_time=args.min_time, batch1_sources=args.batch1_sources)
            for repeat in range(args.repeats):
                for method, batch in SETTINGS:
                    turns = [("ours", "ours")] + [("ct2", c[0]) for c in CT2_CONFIGS]
                    if repeat % 2:  # alternate who goes first, against drift in the load
                        turns = turns[1:] + turns[:1]
                    for who, label in turns:
                        worker_ = ours if who == "ours" else ct2
                        reply = worker_.ask(
                            op="run", method=method, batch=batch, label=label, **timing
                        )
                        samples[(method, batch)][label].append(reply["tokens"] / reply["seconds"])
                        time.sleep(args.pause)  # let the other engine's idle threads settle
                print(f"[{name}] repeat {repeat + 1}/{args.repeats} done", flush=True)
        finally:
            ours.close()
            ct2.close()
    rows = []
    for (method, batch), per_engine in samples.items():
        median = {k: statistics.median(v) for k, v in per_engine.items()}
        best = max(("f32_intra1", "f32_intra2"), key=median.get)
        rows.append(
            dict(
                method=method,
                batch=batch,
                ours_tokens_per_s=median["ours"],
                ct2_f32_intra1_tokens_per_s=median["f32_intra1"],
                ct2_f32_intra2_tokens_per_s=median["f32_intra2"],
                ct2_int8_intra1_tokens_per_s=median["int8_intra1"],
                ct2_best_f32=best,
                ratio_vs_best_f32=median["ours"] / median[best],
                samples_tokens_per_s=per_engine,
            )
        )
    return dict(
        shape=SHAPES[name],
        agreement=agree,
        setup=dict(
            ours=dict(build_s=jax_setup["build_s"], warmup_s=jax_setup["warmup_s"]),
            ct2=dict(build_s=ct2_setup["build_s"], warmup_s=ct2_setup["warmup_s"]),
        ),
        versions=dict(
            jax=jax_setup["jax"], jaxlib=jax_setup["jaxlib"], ctranslate2=ct2_setup["ctranslate2"]
        ),
        rows=rows,
    )


def _print_table(results: dict) -> None:
    print(
        f"\n{'shape':>5} {'setting':>10} {'ours tok/s':>10} {'ct2 f32 t1':>10} "
        f"{'ct2 f32 t2':>10} {'ratio':>6} {'ct2 int8 t1':>11}"
    )
    for name, shape in results.items():
        for r in shape["rows"]:
            print(
                f"{name:>5} {r['method'] + ' b' + str(r['batch']):>10} "
                f"{r['ours_tokens_per_s']:>10.0f} {r['ct2_f32_intra1_tokens_per_s']:>10.0f} "
                f"{r['ct2_f32_intra2_tokens_per_s']:>10.0f} {r['ratio_vs_best_f32']:>5.2f}x "
                f"{r['ct2_int8_intra1_tokens_per_s']:>11.0f}"
            )
    print("ratio = ours / the faster CTranslate2 float32 thread setting (t1, t2 = intra_threads)")


def _cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="small,base", help=f"comma-separated, of {list(SHAPES)}")
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds; medians reported")
    p.add_argument("--min_time", type=float, default=1.0, help="seconds per batch-32 timing")
    p.add_argument("--batch1_sources", type=int, default=8, help="sources per batch-1 timing")
    p.add_argument("--pause", type=float, default=0.3, help="seconds between timings")
    p.add_argument("--seed", type=int, default=0, help="weights and sources")
    p.add_argument("--out", default="benchmarks/results/ctranslate2.json", help="JSON path")
    p.add_argument("--worker", choices=["jax", "ct2"], help=argparse.SUPPRESS)
    return p.parse_args()


def main(args: argparse.Namespace) -> dict:
    shapes = args.shapes.split(",")
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown:
        raise SystemExit(f"--shapes: unknown {unknown}; choose from {list(SHAPES)}.")
    load_start = os.getloadavg()[0]
    start = time.perf_counter()
    results = {name: run_shape(name, args) for name in shapes}
    _print_table(results)
    return dict(
        cpu=_cpu_model(),
        cpu_count=os.cpu_count(),
        # Other jobs on the machine skew the times; both engines were measured under the same.
        load_average_1min=dict(start=load_start, end=os.getloadavg()[0]),
        python=platform.python_version(),
        wall_s=time.perf_counter() - start,
        work=dict(
            sources=NUM_SOURCES,
            source_len=SOURCE_LEN,
            output_len=OUTPUT_LEN,
            beam_size=BEAM_SIZE,
            batch1_sources=args.batch1_sources,
            repeats=args.repeats,
        ),
        note="float32 on both sides unless int8 is named. tokens/s counts output tokens of "
        "the returned best hypothesis (64 per sentence); beam search advances batch * 4 rows "
        "per step on both sides. Batch 1 is one source per call, timed over batch1_sources "
        "calls. Medians over interleaved repeats.",
        shapes=results,
    )


if __name__ == "__main__":
    args = _parse()
    if args.worker:
        worker(args.worker)
    else:
        result = main(args)
        out = pathlib.Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {out}")
