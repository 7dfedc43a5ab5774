"""Language model throughput: generation with and without the KV cache (batch 1 and 32), and
the train step of the CPU default (configs/gpt_stdlib.py) and GPT-2 small shapes.

Randomly initialised models; generation runs exactly `--new_tokens` steps after a
`--prompt_len`-token prompt (eos off, so every run does the same work). Without the cache,
each step runs the whole model over a fixed buffer of prompt + new tokens and reads the logits
at the current position (what generation costs without `decode_step`). Times exclude
compilation (reported separately) and are means over repeated calls.

  PYTHONPATH=. python benchmarks/language_model.py            # about 3 minutes on 2 cores
  PYTHONPATH=. python benchmarks/language_model.py --skip_gpt2  # without the 124M model

Writes a table to stdout and JSON to `benchmarks/results/language_model.json` (see `--out`).
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import platform
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from configs import gpt_stdlib  # noqa: E402
from transformer_jax import count_params, models  # noqa: E402
from transformer_jax import sharding as shd  # noqa: E402
from transformer_jax.inference.search import greedy_pick, sample_loop  # noqa: E402
from transformer_jax.tasks.language_model import lm_loss  # noqa: E402
from transformer_jax.tokens import PAD_ID  # noqa: E402
from transformer_jax.training import step as ts  # noqa: E402
from transformer_jax.training.optimizer import make_optimizer  # noqa: E402
from transformer_jax.training.state import create_train_state  # noqa: E402

VOCAB = {"cpu": 4096, "gpt2_small": 50257}


def _config(preset: str, args) -> object:
    section = gpt_stdlib.get_config().model if preset == "cpu" else None
    if section is None:
        section = models.config_section("decoder_only", preset)
    section = {**section, "dtype": args.dtype}
    return models.build_config(section, {"vocab_size": VOCAB[preset]})


def _time(fn, min_time: float) -> tuple[float, float]:
    """(compile + first call seconds, mean seconds per later call)."""
    start = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - start
    calls, start = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - start < min_time:
        jax.block_until_ready(fn())
        calls += 1
    return first, (time.perf_counter() - start) / calls


@functools.partial(jax.jit, static_argnames=("graphdef", "new_tokens"))
def cached_generate(graphdef, params, prompt, *, new_tokens):
    """Prefill the prompt but its last token, then one cached step per new token."""
    model = nnx.merge(graphdef, params)
    cache = model.init_cache(prompt.shape[0], prompt.shape[1] - 1 + new_tokens)
    _, cache = model.decode_step(prompt[:, :-1], cache)

    def step(tokens, cache):
        logits, cache = model.decode_step(tokens[:, None], cache)
        return jax.nn.log_softmax(logits[:, 0]), cache

    return sample_loop(
        step, cache, batch_size=prompt.shape[0], max_len=new_tokens, pick_fn=greedy_pick,
        bos_id=prompt[:, -1], eos_id=None, pad_id=PAD_ID,
    ).tokens  # fmt: skip


@functools.partial(jax.jit, static_argnames=("graphdef", "new_tokens"))
def uncached_generate(graphdef, params, prompt, *, new_tokens):
    """Every step reruns the model over the whole buffer (causal: later slots do not matter)."""
    model = nnx.merge(graphdef, params)
    b, p = prompt.shape
    buffer = jnp.concatenate([prompt, jnp.full((b, new_tokens), PAD_ID, prompt.dtype)], axis=1)

    def body(t, buffer):
        logits = model(buffer)  # [B, P + L, V]
        position = p - 1 + t
        token = jnp.argmax(jax.lax.dynamic_index_in_dim(logits, position, 1, False), -1)
        return jax.lax.dynamic_update_index_in_dim(
            buffer, token.astype(buffer.dtype), position + 1, 1
        )

    return jax.lax.fori_loop(0, new_tokens, body, buffer)[:, p:]  # fmt: skip


def bench_generation(preset: str, args) -> list[dict]:
    cfg = _config(preset, args)
    graphdef, params = nnx.split(models.build_model(cfg, rngs=nnx.Rngs(0)))
    rows = []
    for batch in args.batch_sizes:
        prompt = jnp.asarray(
            np.random.default_rng(0).integers(4, cfg.vocab_size, (batch, args.prompt_len)),
            jnp.int32,
        )
        for name, fn in (("KV cache", cached_generate), ("no cache", uncached_generate)):
            first, seconds = _time(
                lambda fn=fn, prompt=prompt: fn(
                    graphdef, params, prompt, new_tokens=args.new_tokens
                ),
                args.min_time,
            )
            rows.append(
                {
                    "model": preset,
                    "method": name,
                    "batch": batch,
                    "new_tokens": args.new_tokens,
                    "compile_s": round(first - seconds, 2),
                    "tokens_per_s": round(batch * args.new_tokens / seconds, 1),
                    "ms_per_token_step": round(1000 * seconds / args.new_tokens, 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def bench_train_step(preset: str, args) -> dict:
    cfg = _config(preset, args)
    tx, _ = make_optimizer(cfg.d_model, warmup_steps=4000)
    mesh = shd.make_mesh({"data": -1})
    graphdef, state, shardings = create_train_state(cfg, tx, mesh, seed=0)
    train_fn, _ = ts.compile_steps(graphdef, tx, shardings, mesh, loss_fn=lm_loss)
    length = min(cfg.max_len, args.train_len)
    tokens = args.batch_tokens if preset == "cpu" else args.gpt2_batch_tokens
    rows = max(tokens // length, mesh.size)
    rng = np.random.default_rng(0)
    shape = (rows, length)
    tokens = rng.integers(4, cfg.vocab_size, (rows, length + 1)).astype(np.int32)
    batch = {
        "inputs": tokens[:, :-1],
        "targets": tokens[:, 1:],
        "weights": np.ones(shape, np.float32),
        "segment_ids": np.ones(shape, np.int32),
        "positions": np.broadcast_to(np.arange(length, dtype=np.int32), shape).copy(),
        "bytes": np.full(shape, 3.5, np.float32),
    }
    batch, key = ts.global_batch(batch, mesh), jax.random.key(0)

    def one_step():
        nonlocal state
        state, metrics = train_fn(state, batch, key)
        return metrics

    first, seconds = _time(one_step, args.min_time)
    row = {
        "model": preset,
        "params": count_params(cfg),
        "dtype": args.dtype,
        "batch": f"{rows}x{length}",
        "compile_s": round(first - seconds, 2),
        "step_ms": round(1000 * seconds, 1),
        "tokens_per_s": round(rows * length / seconds),
    }
    print(json.dumps(row), flush=True)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--prompt_len", type=int, default=16, help="Prompt tokens.")
    p.add_argument("--new_tokens", type=int, default=64, help="Generated tokens per row.")
    p.add_argument("--batch_sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 32])
    p.add_argument("--train_len", type=int, default=256, help="Row length of the train step.")
    p.add_argument("--batch_tokens", type=int, default=8192, help="Tokens per train step.")
    p.add_argument(
        "--gpt2_batch_tokens", type=int, default=2048, help="Tokens per GPT-2 small train step."
    )
    p.add_argument("--skip_gpt2", action="store_true", help="Only the CPU default shape.")
    p.add_argument("--min_time", type=float, default=3.0, help="Seconds of timed calls per case.")
    p.add_argument("--out", default="benchmarks/results/language_model.json")
    args = p.parse_args()
    presets = ["cpu"] if args.skip_gpt2 else ["cpu", "gpt2_small"]
    generation = bench_generation("cpu", args)
    train = [bench_train_step(preset, args) for preset in presets]
    print("\n| method | batch | tokens/s | ms/step |\n|---|---|---|---|")
    for r in generation:
        print(
            f"| {r['method']} | {r['batch']} | {r['tokens_per_s']:,} | {r['ms_per_token_step']} |"
        )
    print("\n| model | parameters | batch | compile | step | tokens/s |\n|---|---|---|---|---|---|")
    for r in train:
        print(
            f"| {r['model']} | {r['params']:,} | {r['batch']} | {r['compile_s']} s | "
            f"{r['step_ms']} ms | {r['tokens_per_s']:,} |"
        )
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "machine": {"platform": platform.platform(), "devices": str(jax.devices())},
        "args": vars(args),
        "generation": generation,
        "train_step": train,
    }
    out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
