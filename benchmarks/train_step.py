"""Train-step throughput: target tokens/s, compile time, memory and model FLOPs per token.

    python benchmarks/train_step.py                       # tiny, default, base on this machine
    python benchmarks/train_step.py --models=base --dtype=bfloat16 --batch_tokens=25000 \
        --peak_tflops=989   # e.g. on a GPU, to report MFU
    python benchmarks/train_step.py --models=base,big --compile_only [--scan_layers] \
        [--remat=full] --out=/tmp/compile.json   # compile time with/without the layer scan

Synthetic batches of fixed shape (every token real) go through the same jitted, sharded,
donated `train_step` as `train.py`. Beside each model's achieved FLOP/s the script measures
XLA's float32 matrix-product rate on the same machine (`matmul_tflops`), the practical ceiling
on a CPU, and reports the fraction of it reached (`of_matmul_rate`). Prints a table and writes
JSON (default benchmarks/results/train_step.json).
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import platform
import resource
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # for configs/

from configs import default as default_config  # noqa: E402
from transformer_jax import EncoderDecoderConfig, count_params, models
from transformer_jax import sharding as shd
from transformer_jax.tasks.translation import translation_loss
from transformer_jax.training import step as ts
from transformer_jax.training.optimizer import make_optimizer
from transformer_jax.training.state import create_train_state

# Model sections: the presets of EncoderDecoderConfig, and the model of configs/default.py.
MODELS = {
    "tiny": models.config_section("encoder_decoder", "tiny"),
    "default": default_config.get_config().model,
    "base": models.config_section("encoder_decoder", "base"),
    "big": models.config_section("encoder_decoder", "big"),
}
VOCAB = {"tiny": 200, "default": 110, "base": 37000, "big": 37000}


def model_flops_per_token(cfg: EncoderDecoderConfig, length: int) -> float:
    """Training FLOPs (forward + backward = 3x forward) per target token, with equal source and
    target lengths: matrix products 2*m*n*k, attention scores and mixing over `length` keys."""
    d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab_size
    enc = cfg.num_encoder_layers * (2 * (4 * d * d + 2 * d * f) + 4 * length * d)
    dec = cfg.num_decoder_layers * (2 * (8 * d * d + 2 * d * f) + 8 * length * d)
    return 3.0 * (enc + dec + 2 * d * v)


def matmul_tflops(n: int = 2048, repeats: int = 5, dtype=jnp.float32) -> float:
    """XLA's rate on one jitted n x n x n matrix product on this machine (best of `repeats`),
    in TFLOP/s: the ceiling a matmul-bound step could reach here."""
    a = jax.random.normal(jax.random.key(0), (n, n), dtype)
    b = jax.random.normal(jax.random.key(1), (n, n), dtype)
    dot = jax.jit(jnp.dot)
    jax.block_until_ready(dot(a, b))
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(dot(a, b))
        best = min(best, time.perf_counter() - started)
    return 2.0 * n**3 / best / 1e12


def build_step(cfg: EncoderDecoderConfig, rows: int, seq_len: int, *, label_smoothing: float = 0.1):
    """The jitted, sharded, donated `train_step` of `train.py` for `cfg`, on a data-parallel
    mesh over every device, with a synthetic batch of `rows` x `seq_len` real tokens.

    `rows` is rounded up to a multiple of the device count. Returns
    `(train_fn, state, batch, key, compile_s, compiled)`; `train_fn(state, batch, key)`.
    """
    tx, _ = make_optimizer(cfg.d_model, warmup_steps=4000)
    mesh = shd.make_mesh({"data": -1})
    rows = -(-rows // mesh.size) * mesh.size
    graphdef, state, shardings = create_train_state(cfg, tx, mesh, seed=0)
    loss = functools.partial(translation_loss, label_smoothing=label_smoothing)
    train_fn, _ = ts.compile_steps(graphdef, tx, shardings, mesh, loss_fn=loss)
    rng = np.random.default_rng(0)
    shape = (rows, seq_len)
    batch = {
        "src": rng.integers(4, cfg.vocab_size, shape).astype(np.int32),
        "tgt_in": rng.integers(4, cfg.vocab_size, shape).astype(np.int32),
        "tgt_out": rng.integers(4, cfg.vocab_size, shape).astype(np.int32),
        "weights": np.ones(shape, np.float32),
    }
    batch = ts.global_batch(batch, mesh)
    key = jax.random.key(0)
    with jax.set_mesh(mesh):
        started = time.perf_counter()
        compiled = train_fn.jitted.lower(state, batch, key).compile()
        compile_s = time.perf_counter() - started
    return train_fn, state, batch, key, compile_s, compiled


def bench(name, args, matmul: float):
    options = dict(
        scan_layers=args.scan_layers, remat=args.remat, attention_kernel=args.attention_kernel
    )
    section = {**MODELS[name], "dtype": args.dtype, "dropout_rate": 0.1, **options}
    if args.depth:
        section.update(num_encoder_layers=args.depth, num_decoder_layers=args.depth)
    cfg = models.build_config(section, {"vocab_size": VOCAB[name], "max_len": args.seq_len})
    devices = jax.device_count()
    rows = max(args.batch_tokens // args.seq_len // devices, 1) * devices
    train_fn, state, batch, key, compile_s, compiled = build_step(cfg, rows, args.seq_len)
    memory = compiled.memory_analysis()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    if args.compile_only:
        return {
            "model": name,
            "params": count_params(cfg),
            **options,
            "compile_s": round(compile_s, 2),
            "temp_mib": round(memory.temp_size_in_bytes / 2**20, 1) if memory else None,
        }
    state, m = train_fn(state, batch, key)  # warm-up
    jax.block_until_ready(m)
    steps, started = 0, time.perf_counter()
    while steps < args.min_steps or time.perf_counter() - started < args.min_time:
        state, m = train_fn(state, batch, key)
        steps += 1
    jax.block_until_ready(m)
    step_s = (time.perf_counter() - started) / steps
    tokens_per_s = rows * args.seq_len / step_s
    flops_token = model_flops_per_token(cfg, args.seq_len)
    row = {
        "model": name,
        "params": count_params(cfg),
        **options,
        "dtype": args.dtype,
        "batch": f"{rows}x{args.seq_len}",
        "compile_s": round(compile_s, 2),
        "step_ms": round(1000 * step_s, 1),
        "target_tokens_per_s": round(tokens_per_s),
        "model_flops_per_token": flops_token,
        "achieved_tflops": round(tokens_per_s * flops_token / 1e12, 4),
        "matmul_tflops": round(matmul, 4),
        "of_matmul_rate": round(tokens_per_s * flops_token / 1e12 / matmul, 3),
        "xla_flops_per_step": float(cost.get("flops", 0.0)) if cost else None,
        "temp_mib": round(memory.temp_size_in_bytes / 2**20, 1) if memory else None,
        "args_mib": round(memory.argument_size_in_bytes / 2**20, 1) if memory else None,
    }
    if args.peak_tflops:
        row["mfu"] = round(row["achieved_tflops"] / args.peak_tflops, 4)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--models", default="tiny,default,base", help="Comma list of " + str(list(MODELS))
    )
    p.add_argument("--batch_tokens", type=int, default=4096, help="Target tokens per step.")
    p.add_argument("--seq_len", type=int, default=32, help="Source = target length.")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--min_steps", type=int, default=3)
    p.add_argument("--min_time", type=float, default=10.0, help="Seconds of timed steps per model.")
    p.add_argument("--peak_tflops", type=float, default=0.0, help="Device peak, for MFU.")
    p.add_argument("--scan_layers", action="store_true", help="Layers as one lax.scan.")
    p.add_argument("--remat", default="none", choices=["none", "full", "dots"])
    p.add_argument("--attention_kernel", default="auto", help="auto, reference, xla, cudnn")
    p.add_argument("--compile_only", action="store_true", help="Compile time and memory only.")
    p.add_argument("--depth", type=int, default=0, help="Encoder and decoder layers (0: preset).")
    p.add_argument("--out", default="benchmarks/results/train_step.json")
    args = p.parse_args()
    matmul = matmul_tflops()
    print(f"XLA float32 2048^3 matmul on this machine: {1000 * matmul:.1f} GFLOP/s")
    rows = [bench(name, args, matmul) for name in args.models.split(",")]
    cols = [
        "model",
        "params",
        "dtype",
        "batch",
        "compile_s",
        "step_ms",
        "target_tokens_per_s",
        "model_flops_per_token",
        "achieved_tflops",
        "of_matmul_rate",
        "temp_mib",
    ] + (["mfu"] if args.peak_tflops else [])
    if args.compile_only:
        cols = ["model", "params", "scan_layers", "remat", "compile_s", "temp_mib"]
    for r in rows:
        r["layers"] = args.depth or None
    print(" | ".join(cols))
    for r in rows:
        print(
            " | ".join(
                f"{r[c]:,}"
                if isinstance(r[c], int)
                else f"{r[c]:.4g}"
                if isinstance(r[c], float)
                else str(r[c])
                for c in cols
            )
        )
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "device": str(jax.devices()[0].device_kind),
        "devices": jax.device_count(),
        "backend": jax.default_backend(),
        "machine": platform.machine(),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "jax": jax.__version__,
    }
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    print(f"peak RSS {meta['peak_rss_mib']} MiB; wrote {out}")


if __name__ == "__main__":
    main()
