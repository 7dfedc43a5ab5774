"""What a compiled program needs on its target: memory per device against the chip's HBM,
FLOPs, the collectives it runs, the attention it ended up with, and a roofline bound.

The bound is max(FLOP time, HBM time) per device: FLOP time = FLOPs / peak FLOP/s, HBM time =
bytes accessed / HBM bandwidth, from the compiler's own cost analysis and the chip's published
peaks (`targets.CHIPS`). No step can be faster, and real steps are slower (communication,
imperfect overlap): it is a bound, not a measurement. FLOP time / bound is the highest model
FLOPs utilisation the program could reach. The attention kernels' FLOPs, which the cost
analysis does not count, are added (`flops.custom_call_flops`); `hlo.hbm_uses` lists the
instructions that move the most bytes.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import re
import time

import jax

from transformer_jax.aot.flops import custom_call_flops
from transformer_jax.aot.hlo import HbmUse, hbm_uses
from transformer_jax.aot.programs import Plan, Program
from transformer_jax.aot.targets import Target

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")
_CUDNN_ATTENTION = re.compile(r'custom_call_target="(__cudnn\$fmha[A-Za-z]*)"')
# Splash attention's Pallas kernels, by the names of their custom calls (forward, dq, dkv).
_SPLASH_ATTENTION = re.compile(r"%splash_mha_(fwd|dq|dkv)[\w.]* = ")
_OOM = re.compile(r"\(([\d.]+[KMGT]?)\) exceeds available HBM \(([\d.]+[KMGT]?)\)")

# The config fields that trade memory for time or spread it over more chips.
MEMORY_FIELDS = (
    "--config.mesh.fsdp=N (shards parameters and optimizer state over N devices)",
    "--config.mesh.tensor=N (shards heads, feed-forward width and vocabulary)",
    "--config.model.remat=full (recomputes activations in the backward pass)",
    "--config.model.scan_layers=True (one layer's temporaries at a time)",
    "--config.grad_accum_steps=N (micro-batches: 1/N of the activations)",
    '--config.model.dtype="bfloat16" (half the activation memory)',
)


# Without a GPU the compiler cannot time candidate kernels, and its untimed choice of Triton
# matrix-product tiles failed on some small shapes ("Couldn't find output tile sizes"): the
# library matrix products (cuBLAS) compile for every shape.
GPU_OPTIONS = {"xla_gpu_enable_triton_gemm": False}


class OutOfMemoryError(ValueError):
    """A program does not fit its target's memory (says by how much and what to change)."""


@dataclasses.dataclass(frozen=True)
class Compiled:
    """One compiled program's figures, per device."""

    name: str
    compile_s: float
    argument_bytes: int
    output_bytes: int
    alias_bytes: int  # Outputs written over donated arguments (the train state).
    temp_bytes: int
    code_bytes: int
    flops: float | None  # Per device, from the compiler's cost analysis (None: not given).
    bytes_accessed: float | None
    collectives: dict[str, int]
    attention: str  # The attention the program runs (a cuDNN custom call, or XLA's ops).
    items: int
    unit: str
    loops: bool = False  # Holds a while loop, whose body the cost analysis counts once.
    cost_estimated: bool = False  # FLOPs from the unpartitioned program over the devices.
    custom_call_flops: float = 0.0  # Of `flops`: the attention custom calls' (`flops.py`).
    top_hbm: tuple[HbmUse, ...] = ()  # The instructions moving the most HBM bytes.
    hbm_estimate_bytes: int = 0  # The sum over all instructions of `hlo.hbm_uses`.

    @property
    def total_bytes(self) -> int:
        """Memory the program needs on one device while it runs."""
        return (
            self.argument_bytes
            + self.output_bytes
            - self.alias_bytes
            + self.temp_bytes
            + self.code_bytes
        )


@contextlib.contextmanager
def _no_persistent_cache_writes():
    """Compiles inside write nothing to JAX's persistent compilation cache: a program compiled
    for a target this host does not have cannot be loaded back from it (each later read would
    only warn), so its entry would cost the write and the disk for nothing."""
    name = "jax_persistent_cache_min_compile_time_secs"
    before = getattr(jax.config, name)
    jax.config.update(name, float("inf"))
    try:
        yield
    finally:
        jax.config.update(name, before)


def compile_program(program: Program, target: Target, kernel: str, top_hbm: int = 0) -> Compiled:
    """Lowers and compiles `program` for `target`; its figures (with its `top_hbm` largest
    HBM consumers).

    Raises:
      OutOfMemoryError: the compiler found the program too large for the chip's memory.
    """
    started = time.perf_counter()
    lowered = program.lower()
    try:
        with _no_persistent_cache_writes():
            compiled = lowered.compile(GPU_OPTIONS if target.chip.platform == "gpu" else None)
    except Exception as e:  # The compiler's own error type is not public API.
        if "RESOURCE_EXHAUSTED" in str(e):
            raise out_of_memory(program.name, target, str(e)) from None
        raise
    seconds = time.perf_counter() - started
    memory = compiled.memory_analysis()
    flops, accessed, optimised = _cost(compiled, lowered)
    text = compiled.as_text() or ""
    # The target program's own analysis (not a host estimate) misses its custom calls' FLOPs;
    # the analysis before optimisation counts the matrix products that became cuBLAS calls.
    extra = custom_call_flops(text, gemms=optimised) if flops is not None else 0.0
    # The HBM bytes by the compiled layouts: the bound's HBM term on TPUs, whose compiler
    # places arrays in on-chip memory too (GPU programs carry no memory spaces).
    uses = hbm_uses(text) if top_hbm or target.chip.platform == "tpu" else []
    return Compiled(
        name=program.name,
        compile_s=seconds,
        argument_bytes=int(memory.argument_size_in_bytes),
        output_bytes=int(memory.output_size_in_bytes),
        alias_bytes=int(memory.alias_size_in_bytes),
        temp_bytes=int(memory.temp_size_in_bytes),
        code_bytes=int(memory.generated_code_size_in_bytes),
        flops=None if flops is None else flops + extra,
        bytes_accessed=accessed,
        collectives=count_collectives(text),
        attention=attention_in(text, kernel),
        items=program.items,
        unit=program.unit,
        loops=" while(" in text,
        custom_call_flops=extra,
        top_hbm=tuple(uses[:top_hbm]),
        hbm_estimate_bytes=sum(u.bytes for u in uses),
    )


def _cost(compiled, lowered) -> tuple[float | None, float | None, bool]:
    """(FLOPs, bytes accessed) per device, and whether they are the compiled program's: its
    analysis where the backend gives one (TPU), else XLA's analysis of the program before
    optimisation (GPU targets compiled on a host)."""
    for source in (compiled, lowered):
        try:
            cost = source.cost_analysis()
        except Exception:  # Some backends do not implement it.
            cost = None
        if isinstance(cost, list):
            cost = cost[0] if cost else None
        if cost and cost.get("flops"):
            accessed = float(cost.get("bytes accessed", 0.0)) or None
            return float(cost["flops"]), accessed, source is compiled
    return None, None, False


def count_collectives(hlo_text: str) -> dict[str, int]:
    """How many of each collective operation the optimised program holds (async pairs once)."""
    counts = collections.Counter()
    for name in COLLECTIVES:
        counts[name] = len(re.findall(rf"= [^=]*? {name}(?:-start)?\(", hlo_text))
    return {k: v for k, v in counts.items() if v}


def attention_in(hlo_text: str, kernel: str) -> str:
    """The attention the compiled program runs: cuDNN's or splash's fused kernels by their
    custom calls, else what the model chose ("xla": XLA's fused ops; "reference": the
    written-out einsums)."""
    calls = sorted(set(_CUDNN_ATTENTION.findall(hlo_text)))
    if calls:
        return "cudnn " + "+".join(c.removeprefix("__cudnn$") for c in calls)
    kernels = set(_SPLASH_ATTENTION.findall(hlo_text))
    if kernels:
        return "splash " + "+".join(k for k in ("fwd", "dq", "dkv") if k in kernels)
    if kernel in ("cudnn", "splash"):
        return (
            f"no {kernel} call (attention dropout in training and cached decoding steps run "
            f"the written-out equation; elsewhere XLA where {kernel} could not: see the log)"
        )
    return kernel


def _parse_size(text: str) -> float:
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    return float(text[:-1] if text[-1] in units else text) * units.get(text[-1], 1)


def out_of_memory(name: str, target: Target, message: str) -> OutOfMemoryError:
    """The error for a program the compiler refused for lack of memory."""
    found = _OOM.search(message)
    if found:
        need, have = (_parse_size(x) for x in found.groups())
        what = (
            f"needs {gib(need)} (the compiler's figure), {gib(need - have)} more than {gib(have)}"
        )
    else:
        what = f"does not fit ({message.splitlines()[0][:200]})"
    return OutOfMemoryError(
        f"the {name} {what} per {target.chip.name} chip on {target.name}. Spread or shrink it: "
        + "; ".join(MEMORY_FIELDS)
        + "."
    )


def check_fits(result: Compiled, target: Target) -> None:
    """Raises OutOfMemoryError when the program needs more than the chip's memory."""
    hbm = target.chip.hbm_bytes
    if result.total_bytes > hbm:
        raise OutOfMemoryError(
            f"the {result.name} needs {gib(result.total_bytes)} per device, "
            f"{gib(result.total_bytes - hbm)} more than the {gib(hbm)} of a {target.chip.name}"
            f" on {target.name}. Spread or shrink it: " + "; ".join(MEMORY_FIELDS) + "."
        )


@dataclasses.dataclass(frozen=True)
class Roofline:
    """The terms of the roofline bound of one call, per device, in seconds."""

    flop_s: float  # FLOPs / the chip's peak bf16 FLOP/s.
    hbm_s: float | None  # HBM bytes / HBM bandwidth; None where the bytes are unknown.
    # The compiler's "bytes accessed" / HBM bandwidth: every memory, on-chip included.
    accessed_s: float | None = None

    @property
    def bound_s(self) -> float:
        """No call can be faster: the larger term."""
        return self.flop_s if self.hbm_s is None else max(self.flop_s, self.hbm_s)

    @property
    def mfu_ceiling(self) -> float | None:
        """FLOP time / bound: the highest FLOPs utilisation the call can reach (None where the
        bytes are unknown)."""
        return None if self.hbm_s is None else self.flop_s / max(self.bound_s, 1e-30)


def roofline(result: Compiled, target: Target) -> Roofline | None:
    """The roofline terms of `result` on `target`; None without FLOPs.

    The HBM term is the bytes the compiled program moves through HBM by its layouts
    (`hlo.hbm_uses`) where the compiler places arrays in several memories (TPUs), else the
    cost analysis' bytes accessed: on a TPU those count the on-chip memory's traffic too.
    """
    if result.flops is None:
        return None
    chip = target.chip
    accessed = result.bytes_accessed / chip.hbm_bandwidth if result.bytes_accessed else None
    if chip.platform == "tpu" and result.bytes_accessed:
        hbm = result.hbm_estimate_bytes / chip.hbm_bandwidth
    else:
        hbm = accessed
    return Roofline(result.flops / chip.peak_bf16_flops, hbm, accessed)


def roofline_seconds(result: Compiled, target: Target) -> float | None:
    """The lower bound on one call's time: max(FLOPs / peak, bytes / bandwidth) per device."""
    terms = roofline(result, target)
    return None if terms is None else terms.bound_s


def gib(n: int | float) -> str:
    return f"{n / 2**30:,.2f} GiB"


def size(n: int | float) -> str:
    """Bytes in GiB, or MiB below one GiB."""
    return gib(n) if abs(n) >= 2**30 else f"{n / 2**20:,.1f} MiB"


def _flops(r: Compiled, x: float | None) -> str:
    if x is None:
        return "n/a"
    mark = (">=" if r.loops else "") + ("~" if r.cost_estimated else "")
    return f"{mark}{x:.3g}"


def seconds(x: float) -> str:
    """A duration in s, ms or us, three significant digits."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x / 1e-6:.3g} us"


def byte_size(n: int | float) -> str:
    """Bytes in B, KiB, MiB or GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n)} B"


def _short_op(op_name: str, width: int = 80) -> str:
    """A JAX op name (`jit(train_step)/jvp(...)/dot_general`), its middle cut if long."""
    if len(op_name) <= width:
        return op_name
    head = width // 3
    return op_name[:head] + "..." + op_name[-(width - head - 3) :]


def _bound_rows(target: Target, results: list[Compiled]) -> list[str]:
    lines = [
        f"{'program':<16} {'FLOP time':>11} {'HBM time':>11} {'bound':>11} {'bound by':>10} "
        f"{'MFU ceiling':>11} {'all memories':>13}"
    ]
    for r in results:
        terms = roofline(r, target)
        if terms is None:
            lines.append(f"{r.name:<16} {'n/a':>11} {'n/a':>11} {'n/a':>11}")
            continue
        mark = (">=" if r.loops else "") + ("~" if r.cost_estimated else "")
        hbm = "unknown" if terms.hbm_s is None else mark + seconds(terms.hbm_s)
        by = "FLOPs only" if terms.hbm_s is None else (
            "FLOPs" if terms.flop_s >= terms.hbm_s else "HBM"
        )  # fmt: skip
        ceiling = "unknown" if terms.mfu_ceiling is None else f"{terms.mfu_ceiling:.1%}"
        every = "" if terms.accessed_s in (None, terms.hbm_s) else mark + seconds(terms.accessed_s)
        lines.append(
            f"{r.name:<16} {mark + seconds(terms.flop_s):>11} {hbm:>11} "
            f"{mark + seconds(terms.bound_s):>11} {by:>10} {ceiling:>11} {every:>13}"
        )
    return lines


def _top_hbm_rows(r: Compiled) -> list[str]:
    lines = [
        f"{r.name}: the {len(r.top_hbm)} largest HBM consumers (estimated bytes per call; "
        f"{byte_size(r.hbm_estimate_bytes)} over all instructions)"
    ]
    name_w = max(len(u.name) for u in r.top_hbm)
    op_w = max(len(u.opcode) for u in r.top_hbm)
    shape_w = max(len(u.shape) for u in r.top_hbm)
    for use in r.top_hbm:
        loop = "  (in loop)" if use.in_loop else ""
        lines.append(
            f"  {byte_size(use.bytes):>10}  {use.name:<{name_w}}  {use.opcode:<{op_w}}  "
            f"{use.shape:<{shape_w}}  {_short_op(use.op_name) or '-'}{loop}"
        )
    return lines


def table(plan: Plan, target: Target, results: list[Compiled], measured_step_s=None) -> str:
    """The report: the state per device, then one row per program (memory and FLOPs), the
    terms of each program's roofline bound, its attention and collectives, and (when asked
    for) its largest HBM consumers."""
    chip, mesh = target.chip, plan.mesh
    lines = [
        f"target {target.name}: {target.num_devices} x {chip.name} ({size(chip.hbm_bytes)} "
        f"each), mesh {dict(mesh.shape)}",
        f"model: {plan.param_count:,} parameters, dtype {plan.model_cfg.dtype}, attention "
        f"kernel {plan.kernel} (the choice for {chip.platform})",
        f"per device: parameters {size(plan.param_bytes)}, optimizer state "
        f"{size(plan.optimizer_bytes)}",
        "",
        f"{'program':<16} {'compile':>8} {'arguments':>11} {'temporaries':>11} {'code':>9} "
        f"{'total':>11} {'of HBM':>7} {'FLOPs/device':>13} {'FLOPs/item':>17}",
    ]
    for r in results:
        per_item = (
            None if r.flops is None or not r.items else r.flops * target.num_devices / r.items
        )
        lines.append(
            f"{r.name:<16} {r.compile_s:>7.1f}s {size(r.argument_bytes):>11} "
            f"{size(r.temp_bytes):>11} {size(r.code_bytes):>9} {size(r.total_bytes):>11} "
            f"{r.total_bytes / chip.hbm_bytes:>7.1%} {_flops(r, r.flops):>13} "
            f"{_flops(r, per_item) + ('/' + r.unit if per_item else ''):>17}"
        )
    if not results:
        lines.append("(no program fits: see the errors below)")
    else:
        lines += ["", *_bound_rows(target, results)]
    lines.append("")
    for r in results:
        collectives = ", ".join(f"{k} x{v}" for k, v in r.collectives.items()) or "none"
        lines.append(f"{r.name}: attention {r.attention}; collectives {collectives}")
    for r in results:
        if r.top_hbm:
            lines += ["", *_top_hbm_rows(r)]
    lines += [
        "",
        "bound: max(FLOP time, HBM time) per device, FLOP time = FLOPs / peak bf16 FLOP/s, "
        "HBM time = bytes / HBM bandwidth: a bound on the time of one call, not a "
        "measurement. MFU ceiling = FLOP time / bound, the highest FLOPs utilisation the "
        "call can reach. "
        + (
            "On TPUs the bytes are those the compiled program moves through HBM by its "
            "layouts (arrays the compiler places in on-chip memory excluded, an estimate: "
            "docs/performance.md); all memories: the compiler's cost analysis' bytes "
            "accessed over the same bandwidth, which counts the on-chip memories' traffic too."
            if chip.platform == "tpu"
            else "The bytes are the compiler's cost analysis' bytes accessed."
        ),
        f"Chip figures: {chip.source}.",
    ]
    if any(r.loops for r in results):
        lines.append(
            ">=: the program loops (decoding steps, scanned layers, micro-batches) and the "
            "compiler's cost analysis counts each loop body once."
        )
    if any(r.cost_estimated for r in results):
        lines.append(
            "~: estimated as the whole step's FLOPs (XLA's analysis of it lowered on this host, "
            "layers unrolled, one batch) over the devices: the GPU compiler gives no cost "
            "analysis, and the TPU's counts a loop body once. Its bytes are unknown (the "
            "unfused host program's would bound nothing), so the bound is FLOP time alone."
        )
    custom = [r for r in results if r.custom_call_flops]
    if custom:
        lines.append(
            "FLOPs include the attention kernels' custom calls ("
            + ", ".join(f"{r.name} {r.custom_call_flops:.3g}" for r in custom)
            + "), which the cost analysis does not count, from their shapes: splash forward, "
            "dq and dkv 4, 6 and 8 x BNTSH, cuDNN forward and backward 4 and 10 x BNTSH, half "
            "for causal attention."
        )
    if any(r.top_hbm for r in results):
        lines.append(
            "HBM consumers: each instruction's output plus operand bytes as laid out (tiles "
            "padded), arrays the compiler keeps in on-chip memory (memory space S(1) and up) "
            "counted zero, an asynchronous start/done pair once; fusions stand for their "
            "bodies. Rows marked (in loop) run once per loop iteration."
        )
    train = next((r for r in results if r.name == "train step"), None)
    if measured_step_s and train is not None and train.flops is not None:
        use = train.flops / (measured_step_s * chip.peak_bf16_flops)
        lines.append(
            f"At the measured {measured_step_s:g} s per train step the compiled FLOPs run at "
            f"{use:.1%} of the chip's peak (with remat they include the recomputation, so the "
            "model FLOPs utilisation is lower)."
        )
    return "\n".join(lines)
