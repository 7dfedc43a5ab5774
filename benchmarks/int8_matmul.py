"""Can XLA on this CPU run int8 weights faster than float32? The decoder's matmuls, side by side.

    PYTHONPATH=. python benchmarks/int8_matmul.py          # about a minute on 2 cores

Weight-only int8 is how CTranslate2 users serve on CPUs. Every case is one matmul of the decoding
step, `x[M, D_in] @ W[D_in, D_out]`, with M = rows decoded at once (1: greedy batch 1, 4: beam 4
batch 1, 32: greedy batch 32, 128: beam 4 batch 32) and W one of the small preset's weights (the
output projection 256 x 8,000, a feed-forward 256 x 1,024, an attention projection 256 x 256).
Four ways, timed in the same process, interleaved per shape:

- `f32`: float32 x float32 (what decoding runs today);
- `w8_convert`: int8 weights with one float32 scale per output column, converted to float32 in
  the program (`(x @ q.astype(f32)) * s`): weight-only int8;
- `w8_preferred`: the same through `dot_general(x, q, preferred_element_type=f32)`, which lets
  XLA pick a mixed-type kernel if it has one;
- `w8a8`: int8 x int8 -> int32 with each row of x quantized on the fly (CTranslate2's int8).

Prints milliseconds per call and each int8 way's speed relative to float32 (> 1 = faster), and
writes JSON (default benchmarks/results/int8_matmul.json).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int8

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.attention_kernels import ms_per_call  # noqa: E402

DOT = (((1,), (0,)), ((), ()))  # x[M, K] . w[K, N]


def f32(
    x: Float[Array, "M K"], w: Float[Array, "K N"], s: Float[Array, " N"]
) -> Float[Array, "M N"]:
    del s
    return x @ w


def w8_convert(x: Float[Array, "M K"], q: Int8[Array, "K N"], s: Float[Array, " N"]):
    return (x @ q.astype(jnp.float32)) * s


def w8_preferred(x: Float[Array, "M K"], q: Int8[Array, "K N"], s: Float[Array, " N"]):
    return jax.lax.dot_general(x, q, DOT, preferred_element_type=jnp.float32) * s


def w8a8(x: Float[Array, "M K"], q: Int8[Array, "K N"], s: Float[Array, " N"]):
    x_scale = jnp.max(jnp.abs(x), axis=1, keepdims=True) / 127
    xq = jnp.round(x / x_scale).astype(jnp.int8)
    acc = jax.lax.dot_general(xq, q, DOT, preferred_element_type=jnp.int32)
    return acc.astype(jnp.float32) * x_scale * s


WAYS = {"f32": f32, "w8_convert": w8_convert, "w8_preferred": w8_preferred, "w8a8": w8a8}


def quantize(w: Float[Array, "K N"]) -> tuple[Int8[Array, "K N"], Float[Array, " N"]]:
    """Symmetric per-output-column int8: w ~= q * s."""
    s = jnp.max(jnp.abs(w), axis=0) / 127
    return jnp.round(w / s).astype(jnp.int8), s


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", default="1,4,32,128", help="comma-separated M")
    p.add_argument(
        "--shapes", default="256x8000,256x1024,256x256", help="D_in x D_out, comma-separated"
    )
    p.add_argument("--min_time", type=float, default=1.0, help="seconds of timed calls per case")
    p.add_argument("--out", default="benchmarks/results/int8_matmul.json")
    return p.parse_args()


def main(args: argparse.Namespace) -> dict:
    key_x, key_w = jax.random.split(jax.random.key(0))
    print(f"{'M':>4} {'shape':>9} " + " ".join(f"{w:>13}" for w in WAYS) + "   (ms; x = f32 / way)")
    rows = []
    for shape in args.shapes.split(","):
        d_in, d_out = (int(n) for n in shape.split("x"))
        w = jax.random.normal(key_w, (d_in, d_out)) / d_in**0.5
        q, s = quantize(w)
        for m in (int(r) for r in args.rows.split(",")):
            x = jax.random.normal(key_x, (m, d_in))
            ms = {}
            for name, way in WAYS.items():
                fn = jax.jit(way)
                ms[name] = ms_per_call(fn, x, w if name == "f32" else q, s, min_time=args.min_time)
            err = float(jnp.max(jnp.abs(w8_convert(x, q, s) - f32(x, w, s))))
            rows.append(dict(rows=m, d_in=d_in, d_out=d_out, ms=ms, max_abs_error_w8=err))
            cells = " ".join(
                f"{ms[n]:7.3f}" + (f" {ms['f32'] / ms[n]:4.2f}x" if n != "f32" else " " * 6)
                for n in WAYS
            )
            print(f"{m:>4} {shape:>9} {cells}", flush=True)
    result = dict(
        jax=jax.__version__,
        backend=jax.default_backend(),
        device=str(jax.devices()[0]),
        machine=platform.machine(),
        rows=rows,
    )
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main(_parse())
