"""Decoding throughput: cached vs uncached greedy, greedy vs beam search, small vs large batch.

A randomly initialised model decodes random sources with eos disabled, so every run takes
exactly `--steps` decoder steps (a random model would otherwise stop at arbitrary lengths) and
tokens/s counts real work. Times exclude compilation (reported separately) and are the mean of
repeated calls.

  PYTHONPATH=. python benchmarks/decoding.py        # CPU default: about 1 minute on 2 cores
  PYTHONPATH=. python benchmarks/decoding.py --d_model 512 --layers 6 --vocab 37000 --d_ff 2048
  (add --batch_sizes 1,64,256 --min_time 5 on a GPU)

Writes a table to stdout and JSON to `benchmarks/results/decoding.json` (see `--out`).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from transformer_jax import EncoderDecoder, EncoderDecoderConfig, beam_search, greedy_decode


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", type=int, default=8000, help="vocabulary size")
    p.add_argument("--d_model", type=int, default=256, help="model width")
    p.add_argument("--layers", type=int, default=3, help="encoder and decoder layers (each)")
    p.add_argument("--heads", type=int, default=4, help="attention heads")
    p.add_argument("--d_ff", type=int, default=1024, help="feed-forward width")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--src_len", type=int, default=24, help="source tokens per sentence")
    p.add_argument("--steps", type=int, default=32, help="decoder steps = output tokens (L)")
    p.add_argument("--batch_sizes", default="1,64", help="comma-separated batch sizes")
    p.add_argument("--beam_size", type=int, default=4)
    p.add_argument("--no_uncached", action="store_true", help="skip the slow uncached runs")
    p.add_argument("--min_time", type=float, default=2.0, help="seconds of timed calls per case")
    p.add_argument("--out", default="benchmarks/results/decoding.json", help="JSON output path")
    return p.parse_args()


def _time(fn, min_time: float) -> tuple[float, float, int]:
    """(compile + first call seconds, mean seconds per later call, number of later calls)."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - start
    calls, start = 0, time.perf_counter()
    while True:
        jax.block_until_ready(fn())
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time or calls >= 100:
            return first, elapsed / calls, calls


def _cases(model: EncoderDecoder, args: argparse.Namespace, src_for):
    """(method, cache, batch, fn) for every case to time."""
    k = args.beam_size
    kw = dict(max_len=args.steps, eos_id=None)  # fixed-length runs
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        src = src_for(batch)
        yield "greedy", "cached", batch, lambda s=src: greedy_decode(model, s, **kw)
        if not args.no_uncached:
            yield (
                "greedy",
                "uncached",
                batch,
                lambda s=src: greedy_decode(model, s, use_cache=False, **kw),
            )
        yield f"beam{k}", "cached", batch, lambda s=src: beam_search(model, s, beam_size=k, **kw)


def main(args: argparse.Namespace) -> dict:
    cfg = EncoderDecoderConfig.base(
        vocab_size=args.vocab,
        d_model=args.d_model,
        num_heads=args.heads,
        d_ff=args.d_ff,
        num_encoder_layers=args.layers,
        num_decoder_layers=args.layers,
        dropout_rate=0.0,
        dtype=args.dtype,
        max_len=max(256, args.steps),
    )
    model = EncoderDecoder(cfg, rngs=nnx.Rngs(0))

    def src_for(batch):
        rng = np.random.default_rng(batch)
        return jnp.asarray(rng.integers(4, cfg.vocab_size, (batch, args.src_len)))

    print(
        f"{'method':>7} {'cache':>8} {'batch':>5} {'sentences/s':>11} {'tokens/s':>10} "
        f"{'ms/step':>9} {'compile_s':>9}"
    )
    results = []
    for method, cache, batch, fn in _cases(model, args, src_for):
        first, seconds, calls = _time(fn, args.min_time)
        row = dict(
            method=method,
            cache=cache,
            batch=batch,
            steps=args.steps,
            compile_s=round(first - seconds, 2),
            seconds_per_batch=seconds,
            sentences_per_s=batch / seconds,
            tokens_per_s=batch * args.steps / seconds,
            ms_per_step=1e3 * seconds / args.steps,
            timed_calls=calls,
        )
        results.append(row)
        print(
            f"{method:>7} {cache:>8} {batch:>5} {row['sentences_per_s']:>11.1f} "
            f"{row['tokens_per_s']:>10.0f} {row['ms_per_step']:>9.2f} {row['compile_s']:>9.1f}",
            flush=True,
        )
    return dict(
        device=jax.devices()[0].device_kind,
        backend=jax.default_backend(),
        cpu_count=os.cpu_count(),
        load_average_1min_at_end=os.getloadavg()[0],  # other jobs on the machine skew times
        python=platform.python_version(),
        jax=jax.__version__,
        model=dict(
            vocab=cfg.vocab_size,
            d_model=cfg.d_model,
            layers=args.layers,
            heads=cfg.num_heads,
            d_ff=cfg.d_ff,
            dtype=cfg.dtype,
        ),
        src_len=args.src_len,
        note="eos disabled: every sentence decodes exactly `steps` tokens. Beam tokens/s counts "
        "the returned best hypothesis; the search advances batch * beam rows per step.",
        cases=results,
    )


if __name__ == "__main__":
    args = _parse()
    result = main(args)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
