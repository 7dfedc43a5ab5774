"""Attention implementations side by side: the reference equation against
`jax.nn.dot_product_attention` (XLA, and cuDNN on a GPU), forward and forward+backward.

    PYTHONPATH=. python benchmarks/attention_kernels.py                 # CPU: about a minute
    PYTHONPATH=. python benchmarks/attention_kernels.py --dtype=bfloat16 --lengths=256,1024,4096

Each case is causal self-attention with a padding mask (the decoder's training pass). Prints
milliseconds per call and writes JSON (default benchmarks/results/attention_kernels.json); the
`auto` choice of `transformer_jax.nn.attention.resolve_kernel` rests on these figures.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import time

import jax
import jax.numpy as jnp

from transformer_jax.nn.attention import (
    causal_mask,
    combine_masks,
    dot_product_attention,
    kernel_attention,
    padding_mask,
    resolve_kernel,
)


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=32, help="rows")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head_dim", type=int, default=64)
    p.add_argument("--lengths", default="32,128", help="comma-separated sequence lengths")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--min_time", type=float, default=1.0, help="seconds of timed calls per case")
    p.add_argument("--out", default="benchmarks/results/attention_kernels.json")
    return p.parse_args()


def ms_per_call(fn, *args, min_time: float) -> float:
    """Milliseconds per call of `fn(*args)`, after one call that compiles it; at least 3 calls
    and `min_time` seconds."""
    jax.block_until_ready(fn(*args))  # compile
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_time or calls < 3:
        jax.block_until_ready(fn(*args))
        calls += 1
    return 1e3 * (time.perf_counter() - start) / calls


def _implementations(dtype) -> dict:
    """name -> attention(q, k, v, padding) for the causal self-attention case."""

    def reference(q, k, v, pad):
        return dot_product_attention(q, k, v, combine_masks(causal_mask(q.shape[1]), pad))

    impls = {"reference": reference}
    kernels = ["xla"] + (["cudnn"] if jax.default_backend() == "gpu" else [])
    for name in kernels:
        impls[name] = lambda q, k, v, pad, name=name: kernel_attention(
            q, k, v, pad, is_causal=True, implementation=name
        )
    return impls


def main() -> None:
    args = _parse()
    dtype = jnp.dtype(args.dtype)
    rows = []
    for length in (int(x) for x in args.lengths.split(",")):
        keys = jax.random.split(jax.random.key(0), 3)
        shape = (args.batch, length, args.heads, args.head_dim)
        q, k, v = (jax.random.normal(key, shape, dtype) for key in keys)
        lengths = jnp.arange(args.batch) % length + length // 2  # Varied padding.
        tokens = (jnp.arange(length)[None] < lengths[:, None]).astype(jnp.int32)
        pad = padding_mask(tokens)
        for name, attend in _implementations(dtype).items():
            forward = jax.jit(attend)
            grad = jax.jit(jax.grad(lambda q, k, v, p, a=attend: a(q, k, v, p).sum(), (0, 1, 2)))
            row = {"impl": name, "length": length}
            try:
                row["forward_ms"] = ms_per_call(forward, q, k, v, pad, min_time=args.min_time)
                row["grad_ms"] = ms_per_call(grad, q, k, v, pad, min_time=args.min_time)
            except Exception as e:  # e.g. cuDNN refusing a dtype or head dim: report, go on.
                row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            rows.append(row)
            print(
                f"L={length:5d} {name:9s} forward {row.get('forward_ms', float('nan')):8.2f} ms"
                f"  forward+backward {row.get('grad_ms', float('nan')):8.2f} ms"
                + (f"  ({row['error']})" if "error" in row else "")
            )
    result = {
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0].device_kind),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "shape": {"batch": args.batch, "heads": args.heads, "head_dim": args.head_dim},
        "dtype": args.dtype,
        "auto_choice": resolve_kernel("auto", dtype),
        "cases": rows,
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"auto -> {result['auto_choice']} on {result['backend']}; wrote {out}")


if __name__ == "__main__":
    main()
