"""Train step side by side with the Flax WMT example's, at equal shapes, in one process.

The Flax example (google/flax, examples/wmt) is read at run time from a git-ignored folder,
never copied into this repository. Fetch it once, e.g. from a clone of google/flax:

    git -C <flax-clone> archive HEAD examples/wmt \
        | tar -x -C benchmarks/external/flax_wmt --strip-components=2
    python benchmarks/flax_wmt_side_by_side.py              # base-like and small shapes

Both sides train the same encoder-decoder at equal widths, depths, vocabulary and batch (every
token real, equal source and target lengths): pre-LN blocks, no attention-projection biases (the
example's layout), source/target/output embedding shared, label smoothing 0.1, Adam with the
Noam schedule (§5.3; the same optax transformation on both sides), dropout 0.1 and attention
dropout `--attention_dropout` on both, float32. Our side is `build_step` of
benchmarks/train_step.py (the real jitted, donated `train_step`); the example's side is its own
`train_step` from train.py under `jax.pmap` over one device, as its `train_and_evaluate` runs
it. Steps are timed interleaved (ours, theirs, ours, ...) and the median per-step time of each
is reported, with XLA's float32 matmul rate measured in the same process.

Importing the example's train.py needs only its `train_step`, but the module imports
TensorFlow, clu and the example's input/BLEU/decoding modules at the top: those are replaced by
empty modules before the import (a shim; none of them is used by `train_step`).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import pathlib
import platform
import resource
import statistics
import sys
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
from flax import jax_utils, linen

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.train_step import build_step, matmul_tflops, model_flops_per_token  # noqa: E402
from transformer_jax import models  # noqa: E402
from transformer_jax.training.optimizer import make_optimizer  # noqa: E402

DEFAULT_DIR = ROOT / "benchmarks" / "external" / "flax_wmt"
# name: (d_model, encoder = decoder layers, heads, d_ff, vocabulary, rows, length)
SHAPES = {
    "base_like": (512, 6, 8, 2048, 8192, 16, 64),
    "small": (256, 3, 4, 1024, 8192, 64, 32),
}
# Imported by the example's train.py at the top but unused by its train_step.
SHIMMED = ("tensorflow", "clu", "clu.metric_writers", "clu.periodic_actions", "bleu", "decode")
SHIMMED += ("input_pipeline",)


def load_flax_wmt(folder: pathlib.Path):
    """The example's `models` and `train` modules from `folder` (its examples/wmt files)."""
    if not (folder / "models.py").is_file() or not (folder / "train.py").is_file():
        raise SystemExit(
            f"The Flax WMT example is not in {folder}. Fetch it (git-ignored, never committed):\n"
            "  git clone --depth 1 https://github.com/google/flax /tmp/flax  # or any clone\n"
            f"  mkdir -p {folder} && git -C /tmp/flax archive HEAD examples/wmt"
            f" | tar -x -C {folder} --strip-components=2"
        )
    # flax.io looks for TensorFlow when first imported: let it find none before the shim exists.
    importlib.import_module("flax.training.checkpoints")
    for name in SHIMMED:
        if name not in sys.modules:
            sys.modules[name] = types.ModuleType(name)
    sys.modules["clu"].metric_writers = sys.modules["clu.metric_writers"]
    sys.modules["clu"].periodic_actions = sys.modules["clu.periodic_actions"]
    sys.modules["tensorflow"].data = types.SimpleNamespace(Dataset=object)  # In annotations.
    sys.path.insert(0, str(folder))
    return importlib.import_module("models"), importlib.import_module("train")


def our_step(shape, args):
    d, layers, heads, d_ff, vocab, rows, length = shape
    section = {
        **models.config_section("encoder_decoder", "base"),
        "d_model": d,
        "num_encoder_layers": layers,
        "num_decoder_layers": layers,
        "num_heads": heads,
        "d_ff": d_ff,
        "dropout_rate": 0.1,
        "attention_dropout_rate": args.attention_dropout,
        "norm": args.our_norm,
        "use_bias": False,
        "share_embeddings": True,
        "tie_output": True,
        "dtype": "float32",
    }
    cfg = models.build_config(section, {"vocab_size": vocab, "max_len": length})
    train_fn, state, batch, key, compile_s, _ = build_step(cfg, rows, length)
    return cfg, train_fn, state, (batch, key), compile_s


def flax_step(shape, args, wmt_models, wmt_train):
    """The example's TrainState and pmapped `train_step` at `shape`, with our optimizer."""
    d, layers, heads, d_ff, vocab, rows, length = shape
    cfg = wmt_models.TransformerConfig(
        vocab_size=vocab,
        output_vocab_size=vocab,
        share_embeddings=True,
        logits_via_embedding=True,
        dtype=jnp.float32,
        emb_dim=d,
        num_heads=heads,
        num_layers=layers,
        qkv_dim=d,
        mlp_dim=d_ff,
        max_len=length,
        dropout_rate=0.1,
        attention_dropout_rate=args.attention_dropout,
        deterministic=False,
        decode=False,
        kernel_init=linen.initializers.xavier_uniform(),
        bias_init=linen.initializers.normal(stddev=1e-6),
    )
    tx, schedule = make_optimizer(d, warmup_steps=4000)
    model = wmt_models.Transformer(cfg.replace(deterministic=True))
    ones = jnp.ones((rows, length), jnp.float32)
    params = jax.jit(model.init)(jax.random.key(0), ones, ones)["params"]
    state = wmt_train.TrainState.create(
        apply_fn=model.apply, params=params, tx=tx, dynamic_scale=None
    )
    state = jax_utils.replicate(state)
    pmapped = jax.pmap(
        functools.partial(
            wmt_train.train_step, config=cfg, learning_rate_fn=schedule, label_smoothing=0.1
        ),
        axis_name="batch",
        donate_argnums=(0,),
    )
    rng = np.random.default_rng(0)
    batch = {  # Ids from 4 up: no padding (the example treats id 0 as padding).
        "inputs": rng.integers(4, vocab, (1, rows, length)).astype(np.int32),
        "targets": rng.integers(4, vocab, (1, rows, length)).astype(np.int32),
    }
    keys = jax.random.split(jax.random.key(0), 1)

    def step(state, batch, keys):  # As the example's loop calls it.
        return pmapped(state, batch, dropout_rng=keys)

    step.lower = lambda state, batch, keys: pmapped.lower(state, batch, dropout_rng=keys)
    started = time.perf_counter()
    state, metrics = step(state, batch, keys)
    jax.block_until_ready(metrics)
    return step, state, (batch, keys), time.perf_counter() - started


def timed(fn, state, extra, steps):
    """Runs `steps` steps; returns the new state and the mean seconds per step."""
    started = time.perf_counter()
    for _ in range(steps):
        state, metrics = fn(state, *extra)
    jax.block_until_ready(metrics)
    return state, (time.perf_counter() - started) / steps


def compare(name, args, wmt_models, wmt_train, matmul):
    shape = SHAPES[name]
    rows, length = shape[5], shape[6]
    cfg, ours, o_state, o_extra, o_compile = our_step(shape, args)
    o_state, _ = timed(ours, o_state, o_extra, 1)  # warm-up
    theirs, f_state, f_extra, f_compile = flax_step(shape, args, wmt_models, wmt_train)
    f_state, _ = timed(theirs, f_state, f_extra, 1)  # Its first timed round ran 1.5-4x slow.
    o_times, f_times = [], []
    for _ in range(args.rounds):
        o_state, t = timed(ours, o_state, o_extra, args.steps)
        o_times.append(t)
        f_state, t = timed(theirs, f_state, f_extra, args.steps)
        f_times.append(t)
    o_s, f_s = statistics.median(o_times), statistics.median(f_times)
    tokens = rows * length
    flops = model_flops_per_token(cfg, length)
    row = {
        "shape": name,
        "d_model": cfg.d_model,
        "layers": f"{cfg.num_encoder_layers}+{cfg.num_decoder_layers}",
        "heads": cfg.num_heads,
        "d_ff": cfg.d_ff,
        "vocab": cfg.vocab_size,
        "batch": f"{rows}x{length}",
        "attention_dropout": args.attention_dropout,
        "our_norm": args.our_norm,
        "ours_tokens_per_s": round(tokens / o_s),
        "flax_tokens_per_s": round(tokens / f_s),
        "ratio": round(f_s / o_s, 3),
        "ours_step_ms": [round(1000 * t, 1) for t in o_times],
        "flax_step_ms": [round(1000 * t, 1) for t in f_times],
        "model_flops_per_token": flops,
        "ours_gflops": round(tokens / o_s * flops / 1e9, 1),
        "flax_gflops": round(tokens / f_s * flops / 1e9, 1),
        "ours_of_matmul_rate": round(tokens / o_s * flops / 1e12 / matmul, 3),
        "ours_compile_s": round(o_compile, 2),
        "flax_compile_s": round(f_compile, 2),  # Compile plus its first step.
    }
    print(
        f"{name}: ours {row['ours_tokens_per_s']:,} vs flax {row['flax_tokens_per_s']:,} "
        f"target tokens/s (x{row['ratio']}); ours {row['ours_gflops']} GFLOP/s = "
        f"{100 * row['ours_of_matmul_rate']:.0f}% of the matmul rate; compile "
        f"{row['ours_compile_s']} s vs {row['flax_compile_s']} s",
        flush=True,
    )
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flax_wmt_dir", default=str(DEFAULT_DIR), help="The example's files.")
    p.add_argument("--shapes", default="base_like,small", help="Comma list of " + str(list(SHAPES)))
    p.add_argument("--rounds", type=int, default=5, help="Interleaved rounds (median taken).")
    p.add_argument("--steps", type=int, default=2, help="Steps per side per round.")
    p.add_argument("--attention_dropout", type=float, default=0.0, help="On both sides.")
    p.add_argument(
        "--our_norm", default="pre", choices=["pre", "post"], help="pre = the example's blocks."
    )
    p.add_argument("--out", default="benchmarks/results/flax_wmt_side_by_side.json")
    args = p.parse_args()
    wmt_models, wmt_train = load_flax_wmt(pathlib.Path(args.flax_wmt_dir))
    matmul = matmul_tflops()
    print(f"XLA float32 2048^3 matmul: {1000 * matmul:.1f} GFLOP/s", flush=True)
    rows = [compare(n, args, wmt_models, wmt_train, matmul) for n in args.shapes.split(",")]
    meta = {
        "matmul_gflops": round(1000 * matmul, 1),
        "device": str(jax.devices()[0].device_kind),
        "devices": jax.device_count(),
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_at_end": os.getloadavg(),
        "machine": platform.machine(),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "jax": jax.__version__,
        "flax": importlib.import_module("flax").__version__,
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
