"""Train-step and decoding throughput of the paper-sized models on one accelerator, from
random weights and random batches of each config's shapes: no data is read.

    python benchmarks/gpu_throughput.py --out=/tmp/throughput.json      # on a GPU
    python benchmarks/gpu_throughput.py --dry_run --out=/tmp/t.json     # tiny models, any CPU

What `benchmarks/gpu_measure.py` runs on the GPU machine (in a process of its own, so that a
crash loses one model, not the run). Each model is its config from
`benchmarks/aot_targets.py` (the paper's settings, bfloat16 computation, float32 parameters)
with the batch cut to one GPU: the train step of `plan()` (`transformer_jax.aot`) compiled
for a one-device mesh of the real GPU, its memory checked against the device's, then run on a
train state and a random batch of its shapes. Rows are halved until the step fits.

Reported per model: step time, tokens (or images) per second, and the model FLOPs utilisation
(MFU): the step's FLOPs over its time and one chip's bfloat16 peak (the chip table
`aot.targets.CHIPS`, by the device's kind as training logs it: `training.profiling`). The
FLOPs are counted two ways, both kept: `model_flops` by the usual formula (6 per parameter per
token, the vocabulary only where it is a matrix product, plus attention's 12 x layers x d_model
x keys per token), and `compiled_flops` of the compiled program as training counts them
(`profiling.step_flops`: XLA's cost analysis, where the backend gives one, plus the fused
attention calls it cannot see). `mfu` uses the compiled count where there is one, else the
formula; `mfu_source` says which.

Decoding: greedy and beam-4 search of the base translation model (random weights, eos off, so
every call decodes exactly `--decode_steps` tokens), tokens per second of the returned best
hypotheses.

Levers (`--lever NAME=VALUE`, repeatable) switch one thing for a run, so that a run with it
can be read against one without (`benchmarks/gpu_measure.py --ablate` runs them): see LEVERS.
Each row records the levers it ran with, the meta the process's XLA_FLAGS.
`--profile_steps=N --profile_dir=DIR` traces N more train steps after the timed ones with
`jax.profiler.trace(DIR)` (for TensorBoard's or Perfetto's profile viewer).

Writes JSON as it goes (`--out`; `running` names the case in progress) and prints a line per
case.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import platform
import sys
import tempfile
import time

# benchmarks/aot_targets.py pins the CPU unless a platform is named: "" lets JAX take the GPU.
os.environ.setdefault("JAX_PLATFORMS", "")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # for configs/

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402

from benchmarks.aot_targets import paper_configs  # noqa: E402
from benchmarks.train_step import model_flops_per_token  # noqa: E402
from transformer_jax import models, tasks  # noqa: E402
from transformer_jax import sharding as shd  # noqa: E402
from transformer_jax.aot import plan  # noqa: E402
from transformer_jax.aot.report import attention_in  # noqa: E402
from transformer_jax.aot.targets import CHIPS  # noqa: E402
from transformer_jax.inference.decoding import beam_search, greedy_decode  # noqa: E402
from transformer_jax.nn import precision  # noqa: E402
from transformer_jax.rng import RNG_IMPLS, check_rng_impl, dropout_key  # noqa: E402
from transformer_jax.training import profiling  # noqa: E402
from transformer_jax.training.optimizer import optimizer_from_config  # noqa: E402
from transformer_jax.training.state import create_train_state  # noqa: E402

TRAIN = ("base", "big", "gpt2_small", "bert_base", "vit_b16")
CASES = (*TRAIN, "decoding")
# Rows per step to try, largest first (halved until the step fits). Translation: 96 rows of
# 256 tokens, 24,576 per side, the paper's ~25k (§5.1).
ROWS = {"base": 96, "big": 96, "gpt2_small": 32, "bert_base": 32, "vit_b16": 128}
MIN_ROWS = {"base": 8, "big": 8, "gpt2_small": 8, "bert_base": 4, "vit_b16": 8}
CLASSES = 1000  # ViT-B/16's ImageNet head.


def _rate(value: str) -> float:
    rate = float(value)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"a rate in [0, 1), got {value!r}")
    return rate


def _choice(*allowed: str):
    def parse(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"one of {', '.join(allowed)}, got {value!r}")
        return value

    return parse


def _rows(value: str) -> int:
    rows = int(value)
    if rows < 1:
        raise ValueError(f"a positive number of rows, got {value!r}")
    return rows


# --lever NAME=VALUE: the form of each value and its parser.
LEVERS = {
    # config.model.attention_dropout_rate: above 0, attention runs written out (cuDNN's fused
    # kernel applies no dropout).
    "attention_dropout": ("RATE", _rate),
    # The float32-cotangent backward of the vocabulary head and the attention scores, as
    # before transformer_jax.nn.precision (apply_levers).
    "head": ("f32", _choice("f32")),
    # config.rng_impl: the generator of the dropout bits (transformer_jax/rng.py).
    "rng": ("|".join(RNG_IMPLS), check_rng_impl),
    # N rows a step instead of the most rows that fit (measure_train's search).
    "rows": ("N", _rows),
}


def parse_levers(items: list[str]) -> dict:
    """`["NAME=VALUE", ...]` as {NAME: parsed value}.

    Raises:
      ValueError: a lever not in LEVERS (the message names them), a bad value, or a lever twice.
    """
    known = ", ".join(f"{name}={what}" for name, (what, _) in LEVERS.items())
    levers = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in LEVERS:
            raise ValueError(f"--lever {item!r}: unknown lever {name!r}; known: {known}")
        if name in levers:
            raise ValueError(f"--lever {item!r}: {name} given twice")
        try:
            levers[name] = LEVERS[name][1](value)
        except ValueError as e:
            raise ValueError(f"--lever {item!r}: {name} takes {LEVERS[name][0]} ({e})") from None
    return levers


def f32_cotangent_backward(equation: str, x, w):
    """`einsum_f32_out`'s product with JAX's own backward: the float32 cotangent times the
    16-bit operands converted to float32, as the library computed it before
    `transformer_jax.nn.precision`."""
    return jnp.einsum(equation, x, w.astype(x.dtype), preferred_element_type=jnp.float32)


def apply_levers(configs: dict, levers: dict) -> None:
    """Sets `levers` on every config in `configs`; "head" is set on the library: for "f32" it
    replaces `transformer_jax.nn.precision._low_precision_backward` (which `einsum_f32_out`
    calls for 16-bit inputs) with `f32_cotangent_backward`. A monkeypatch of this benchmark's
    own process, which measures nothing else; "rows" is measure_train's."""
    for config in configs.values():
        if "attention_dropout" in levers:
            config.model.attention_dropout_rate = levers["attention_dropout"]
        if "rng" in levers:
            config.rng_impl = levers["rng"]
    if levers.get("head") == "f32":
        precision._low_precision_backward = f32_cotangent_backward


class DoesNotFit(RuntimeError):
    """No row count tried fits the device's memory."""


def one_gpu_configs(dry_run: bool, image_root: pathlib.Path) -> dict:
    """The models' configs (aot_targets' paper settings) with any row count allowed (one
    device) and a ViT that reads no data: its classes come from `image_root`'s empty class
    folders. Dry run: each family's tiny preset at tiny shapes."""
    configs = paper_configs()
    for config in configs.values():
        config.data.batch_multiple = 1
    vit = configs["vit_b16"].data
    for i in range(10 if dry_run else CLASSES):
        (image_root / f"class{i:04d}").mkdir(exist_ok=True)
    vit.source, vit.folder_train, vit.folder_eval = "folder", str(image_root), str(image_root)
    vit.folder_size, vit.folder_channels = (8, 1) if dry_run else (224, 3)
    if dry_run:
        for config in configs.values():
            family = config.model.name
            config.model = models.config_section(family, "tiny", dtype="bfloat16")
            for layers in ("num_layers", "num_encoder_layers", "num_decoder_layers"):
                if layers in config.model:
                    config.model[layers] = 1  # one layer: each program compiles faster
            if family != "vit":
                config.data.max_len, config.data.vocab_size = 16, 320
            if family == "vit":
                config.data.eval_batch_size = 4
    return configs


def with_rows(config, rows: int):
    """`config` with `rows` rows per training batch."""
    config = copy.deepcopy(config)
    if config.task == "image_classify":
        config.data.batch_size = rows
    else:
        config.data.tokens_per_batch = rows * config.data.max_len
    return config


def random_batch(spec: dict, vocab: int, mesh) -> dict:
    """A batch of `spec`'s shapes, every token real: ids in [4, vocab), positions counting
    from 0, one segment per row, weights 1, labels 0 or 1, images N(0, 1)."""
    rng = np.random.default_rng(0)
    batch = {}
    for key, s in spec.items():
        if s.ndim == 4:
            x = rng.standard_normal(s.shape, np.float32)
        elif jnp.issubdtype(s.dtype, jnp.floating):
            x = np.ones(s.shape, np.float32)
        elif key.endswith("positions"):
            x = np.broadcast_to(np.arange(s.shape[-1], dtype=np.int32), s.shape)
        elif key.endswith("segment_ids"):
            x = np.ones(s.shape, np.int32)
        elif key.endswith("labels"):
            x = rng.integers(0, 2, s.shape, dtype=np.int32)
        else:
            x = rng.integers(4, vocab, s.shape, dtype=np.int32)
        x = np.ascontiguousarray(x, dtype=s.dtype)
        batch[key] = jax.device_put(x, shd.batch_sharding(mesh))
    return batch


def model_flops(model_cfg, spec: dict, params: int) -> float:
    """Training FLOPs of one step by the usual count: 6 per parameter per token it acts on (the
    vocabulary table only where it is the output layer: a lookup is no product), plus
    attention's 12 x layers x d_model x keys per token. Learned position tables count as
    products (under 1% here)."""
    if "src" in spec:  # Encoder-decoder, source and target rows of one length.
        rows, length = spec["tgt_in"].shape
        return model_flops_per_token(model_cfg, length) * rows * length
    d, layers = model_cfg.d_model, model_cfg.num_layers
    vocab = getattr(model_cfg, "vocab_size", 0)
    if "images" in spec:
        rows = spec["images"].shape[0]
        length = model_cfg.num_patches + (model_cfg.pool == "cls")
        predicted = 0
    else:
        rows, length = spec["inputs"].shape
        predicted = spec["mlm_positions"].size if "mlm_positions" in spec else rows * length
    tokens = rows * length
    return (
        6 * (params - vocab * d) * tokens
        + 6 * vocab * d * predicted
        + (12 * layers * d * length * tokens)
    )


def needed_bytes(compiled) -> int | None:
    """Device memory the compiled program needs while it runs (arguments, outputs not written
    over donated arguments, temporaries, code)."""
    m = compiled.memory_analysis()
    if m is None:
        return None
    return (m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
            + m.temp_size_in_bytes + m.generated_code_size_in_bytes)  # fmt: skip


def device_facts(chip: str | None = None) -> dict:
    """The device, its memory limit and the peak the MFU divides by: `chip`'s (a key of
    CHIPS), else the chip table's for the device's kind (None for a kind it does not know)."""
    device = jax.devices()[0]
    kind = device.device_kind
    stats = device.memory_stats() or {}
    return {
        "device": kind,
        "platform": device.platform,
        "platform_version": getattr(getattr(device, "client", None), "platform_version", ""),
        "memory_limit_bytes": stats.get("bytes_limit"),
        "peak_bf16_flops": CHIPS[chip].peak_bf16_flops if chip else profiling.chip_peak(kind),
        "peak_from": f"--chip={chip}" if chip else "the chip table, by the device's kind",
        "jax": jax.__version__,
        "python": platform.python_version(),
    }


def is_out_of_memory(e: Exception) -> bool:
    text = str(e)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def measure_train(name: str, config, mesh, facts: dict, args) -> dict:
    """The train step of `config` at the most rows (from ROWS[name], halving) that fit."""
    fixed = args.levers.get("rows")  # The batch lever: these rows only, no search.
    attempts, rows = [], fixed or (ROWS[name] if not args.dry_run else 4)
    floor = fixed or (MIN_ROWS[name] if not args.dry_run else 2)
    limit = facts["memory_limit_bytes"]
    while rows >= floor:
        cfg = with_rows(config, rows)
        the_plan = plan(cfg, mesh, inference=False)
        program = the_plan.programs[0]
        assert program.name == "train step", program.name
        spec = tasks.get(cfg.task).batch_spec(cfg, "train")
        rows = next(iter(spec.values())).shape[0]  # Rounded to the config's batch_multiple.
        if any(a["rows"] == rows for a in attempts):  # Rounded back up to a failed size.
            break
        started = time.perf_counter()
        try:
            compiled = program.lower().compile()
            need = needed_bytes(compiled)
            if limit and need and need > limit:
                raise MemoryError(f"needs {need / 2**30:.1f} GiB of {limit / 2**30:.1f} GiB")
            compile_s = time.perf_counter() - started
            row = run_train(compiled, the_plan, cfg, spec, mesh, args)
        except Exception as e:
            if not (isinstance(e, MemoryError) or is_out_of_memory(e)):
                raise
            attempts.append({"rows": rows, "fits": False, "error": str(e)[:300]})
            rows //= 2
            continue
        attempts.append({"rows": rows, "fits": True})
        items, unit = program.items, program.unit
        flops_model = model_flops(the_plan.model_cfg, spec, the_plan.param_count)
        text = compiled.as_text() or ""
        flops_compiled = profiling.step_flops(compiled, text)
        peak = facts["peak_bf16_flops"]
        step_s = row.pop("step_s")
        mfu_model = profiling.mfu(flops_model, step_s, peak) if peak else None
        mfu_compiled = (
            profiling.mfu(flops_compiled, step_s, peak) if peak and flops_compiled else None
        )
        source = ("compiled program" if mfu_compiled else "model formula") if peak else None
        return {
            "case": name,
            "kind": "train step",
            "params": the_plan.param_count,
            "batch": "x".join(str(n) for n in next(iter(spec.values())).shape),
            "rows_tried": attempts,
            "items_per_step": items,
            "unit": unit,
            "attention": attention_in(text, the_plan.kernel),
            "compile_s": round(compile_s, 1),
            "step_ms": round(1000 * step_s, 2),
            "items_per_s": round(items / step_s, 1),
            "model_flops_per_step": flops_model,
            "compiled_flops_per_step": flops_compiled,
            "mfu_model": None if mfu_model is None else round(mfu_model, 4),
            "mfu_compiled": None if mfu_compiled is None else round(mfu_compiled, 4),
            "mfu": round(mfu_compiled or mfu_model, 4) if peak else None,
            "mfu_source": source,
            "memory_needed_gib": round(need / 2**30, 2) if need else None,
            **row,
        }
    raise DoesNotFit(f"no batch of {floor} to {attempts[0]['rows']} rows fits: {attempts}")


def run_train(compiled, the_plan, cfg, spec: dict, mesh, args) -> dict:
    """Warm-up steps, then `args.steps` timed ones on a fresh state and a random batch, then
    `args.profile_steps` traced ones."""
    tx, _ = optimizer_from_config(cfg, the_plan.model_cfg.d_model)
    _, state, _ = create_train_state(the_plan.model_cfg, tx, mesh, seed=0)
    vocab = getattr(the_plan.model_cfg, "vocab_size", 2)
    batch = random_batch(spec, vocab, mesh)
    # The key type the step was compiled for (aot.programs: the config's generator).
    rng = dropout_key(0, cfg.get("rng_impl", "threefry"))
    rng = jax.device_put(rng, shd.replicated(mesh))
    for _ in range(args.warmup):
        state, metrics = compiled(state, batch, rng)
    jax.block_until_ready(metrics)
    started = time.perf_counter()
    for _ in range(args.steps):
        state, metrics = compiled(state, batch, rng)
    jax.block_until_ready((state, metrics))
    step_s = (time.perf_counter() - started) / args.steps
    row = {
        "step_s": step_s,
        "timed_steps": args.steps,
        "grad_norm": float(metrics["grad_norm"]),
        "nonfinite_steps": float(metrics["nonfinite"]),
    }
    if args.profile_steps:
        with jax.profiler.trace(args.profile_dir):
            for _ in range(args.profile_steps):
                state, metrics = compiled(state, batch, rng)
            jax.block_until_ready((state, metrics))
        row.update(profiled_steps=args.profile_steps, profile_dir=args.profile_dir)
    return row


def measure_decoding(config, mesh, args) -> list[dict]:
    """Greedy and beam-4 decoding of the base translation model, eos off."""
    the_plan = plan(config, mesh, inference=False)
    model = models.build_model(the_plan.model_cfg, rngs=nnx.Rngs(0))
    vocab = the_plan.model_cfg.vocab_size
    src_len, steps = (8, 4) if args.dry_run else (args.decode_src_len, args.decode_steps)
    rows = []
    for batch in (int(b) for b in args.decode_batches.split(",")):
        batch = min(batch, 2) if args.dry_run else batch
        src = jnp.asarray(np.random.default_rng(batch).integers(4, vocab, (batch, src_len)))
        methods = {
            "greedy": lambda s=src: greedy_decode(model, s, max_len=steps, eos_id=None),
            "beam 4": lambda s=src: beam_search(model, s, beam_size=4, max_len=steps, eos_id=None),
        }
        for method, fn in methods.items():
            started = time.perf_counter()
            jax.block_until_ready(fn())
            first = time.perf_counter() - started
            calls, started = 0, time.perf_counter()
            while calls < args.decode_calls:
                jax.block_until_ready(fn())
                calls += 1
            seconds = (time.perf_counter() - started) / calls
            rows.append({
                "case": "decoding",
                "kind": method,
                "batch": f"{batch}x{src_len}",
                "decode_steps": steps,
                "compile_s": round(first - seconds, 1),
                "ms_per_call": round(1000 * seconds, 2),
                "ms_per_step": round(1000 * seconds / steps, 3),
                "items_per_s": round(batch * steps / seconds, 1),
                "unit": "token",
                "attention": the_plan.kernel,
            })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(CASES), help=f"Comma list of {CASES}.")
    parser.add_argument("--out", required=True, help="JSON written as cases finish.")
    parser.add_argument("--dry_run", action="store_true", help="Tiny models and shapes, any CPU.")
    parser.add_argument("--chip", choices=sorted(CHIPS), help="Peak for MFU (default: by name).")
    parser.add_argument("--warmup", type=int, default=2, help="Untimed steps after compiling.")
    parser.add_argument("--steps", type=int, default=10, help="Timed train steps per model.")
    parser.add_argument("--decode_batches", default="64", help="Comma list of decoding batches.")
    parser.add_argument("--decode_src_len", type=int, default=32)
    parser.add_argument("--decode_steps", type=int, default=64, help="Tokens decoded per row.")
    parser.add_argument("--decode_calls", type=int, default=3, help="Timed calls per case.")
    parser.add_argument("--lever", action="append", default=[], metavar="NAME=VALUE",
                        help=f"Repeatable: one of {', '.join(LEVERS)} (see LEVERS).")  # fmt: skip
    parser.add_argument("--profile_steps", type=int, default=0, help="Train steps to trace.")
    parser.add_argument("--profile_dir", help="Where --profile_steps' trace goes.")
    args = parser.parse_args()
    try:
        args.levers = parse_levers(args.lever)
    except ValueError as e:
        parser.error(str(e))
    if args.profile_steps and not args.profile_dir:
        parser.error("--profile_steps needs --profile_dir")
    if args.dry_run:
        args.warmup, args.steps, args.decode_calls = 1, 1, 1
    only = [c for c in args.only.split(",") if c]
    unknown = sorted(set(only) - set(CASES))
    if unknown:
        parser.error(f"--only: unknown {unknown}; known: {', '.join(CASES)}")
    if not args.dry_run and jax.default_backend() != "gpu":
        raise SystemExit(f"no GPU: JAX runs on {jax.devices()} (use --dry_run on a CPU)")

    facts = device_facts(args.chip)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {**facts, "dry_run": args.dry_run, "xla_flags": os.environ.get("XLA_FLAGS", "")}
    result = {"meta": meta, "rows": [], "running": None}

    def save():  # Whole or not at all: the process may be killed at any time.
        out.with_suffix(".tmp").write_text(json.dumps(result, indent=1) + "\n")
        out.with_suffix(".tmp").replace(out)

    mesh = shd.make_mesh({"data": 1, "fsdp": 1, "tensor": 1}, devices=jax.devices()[:1])
    with tempfile.TemporaryDirectory() as image_root:
        configs = one_gpu_configs(args.dry_run, pathlib.Path(image_root))
        apply_levers(configs, args.levers)
        for case in only:
            result["running"] = case
            save()
            print(f"{case} ...", file=sys.stderr, flush=True)
            started = time.perf_counter()
            try:
                if case == "decoding":
                    rows = measure_decoding(configs["base"], mesh, args)
                else:
                    rows = [measure_train(case, configs[case], mesh, facts, args)]
            except Exception as e:  # Recorded; the next case still runs.
                rows = [{"case": case, "error": f"{type(e).__name__}: {str(e)[:2000]}"}]
            for row in rows:
                row["levers"] = args.levers
                row["seconds"] = round(time.perf_counter() - started, 1)
                print(json.dumps(row), flush=True)
            result["rows"].extend(rows)
            jax.clear_caches()
    result["running"] = None
    save()


if __name__ == "__main__":
    main()
