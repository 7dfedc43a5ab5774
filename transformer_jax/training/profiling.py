"""Where a run's time goes: the model FLOPs utilisation (MFU) of the train steps, logged with
the train metrics, and a profiler trace of chosen steps (`config.profile_steps`).

MFU = FLOPs per device of the steps of a log window / (the window's seconds x one device's
peak bf16 FLOP/s). The FLOPs are those of the compiled train step the loop runs (XLA's cost
analysis of it, plus its attention kernels' custom calls, `aot.flops`), per batch shape; the
peak comes from the chip table (`aot.targets.CHIPS`) by the devices' kind, or from
`config.chip_peak_flops`. With `remat` the compiled FLOPs include the recomputation, so the
figure is the hardware's utilisation rather than the model's.

The trace is `jax.profiler`'s: `workdir/profile/plugins/profile/RUN/HOST.xplane.pb` (TensorBoard's
profile plugin, XProf), `HOST.trace.json.gz` and `perfetto_trace.json.gz` (ui.perfetto.dev).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable

import jax
import ml_collections
from etils import epath

from transformer_jax import storage
from transformer_jax.aot.flops import custom_call_flops
from transformer_jax.aot.hlo import matmul_loops
from transformer_jax.aot.targets import CHIPS
from transformer_jax.runs.layout import Workdir
from transformer_jax.runs.lock import WorkdirNotWritableError
from transformer_jax.training.validation import profile_window

ACCELERATORS = ("tpu", "gpu", "cuda", "rocm")  # The platforms whose chips the table may know.
# `jax.Device.device_kind` -> the chip in `CHIPS` (PCIe and NVL GPUs have lower peaks: unknown).
DEVICE_KINDS = (
    (r"TPU v4", "v4"),
    (r"TPU v5 ?(lite|e)", "v5e"),
    (r"TPU v5p?", "v5p"),
    (r"TPU v6 ?(lite|e)", "v6e"),
    (r"NVIDIA H100( 80GB HBM3| SXM.*)?", "h100"),
    (r"NVIDIA H200( SXM.*)?", "h200"),
)


def chip_peak(device_kind: str) -> float | None:
    """Peak bf16 FLOP/s of one device of `device_kind` from the chip table; None if unknown."""
    for pattern, chip in DEVICE_KINDS:
        if re.fullmatch(pattern, device_kind.strip(), flags=re.IGNORECASE):
            return CHIPS[chip].peak_bf16_flops
    return None


def step_flops(compiled: jax.stages.Compiled, hlo_text: str | None = None) -> float | None:
    """FLOPs per device of one call of `compiled`: XLA's cost analysis plus the custom calls
    it does not count (attention kernels; on GPUs, cuBLAS's matrix products); None when the
    backend gives no analysis."""
    try:
        cost = compiled.cost_analysis()
    except Exception:  # Some backends do not implement it.
        cost = None
    if isinstance(cost, list):
        cost = cost[0] if cost else None
    if not cost or cost.get("flops") is None:
        return None
    text = compiled.as_text() if hlo_text is None else hlo_text
    return float(cost["flops"]) + custom_call_flops(text or "")


def mfu(flops_per_step_per_device: float, seconds_per_step: float, peak: float) -> float:
    """The share of `peak` FLOP/s that steps of `flops_per_step_per_device` FLOPs taking
    `seconds_per_step` each use."""
    return flops_per_step_per_device / (max(seconds_per_step, 1e-12) * peak)


class Utilisation:
    """Counts the FLOPs of the train steps of each log window, for its `mfu`."""

    def __init__(self, peak: float | None, message: Callable[[str], None] = print):
        self.peak = peak
        self._message = message
        self._by_shape: dict[tuple, float] = {}
        self._flops, self._steps = 0.0, 0

    @classmethod
    def for_run(cls, config: ml_collections.ConfigDict, message: Callable[[str], None]):
        """The peak of `config.chip_peak_flops` if set, else the chip table's for the
        devices' kind on TPUs and GPUs; none on CPUs (no mfu). An accelerator the table does
        not know is said once."""
        peak = config.get("chip_peak_flops", 0.0) or None
        device = jax.devices()[0]
        if peak is None and device.platform in ACCELERATORS:
            peak = chip_peak(device.device_kind)
            if peak is None:
                message(
                    f"mfu is not reported: the chip table (transformer_jax/aot/targets.py) has "
                    f"no peak for {device.device_kind!r}; set config.chip_peak_flops to one "
                    f"device's peak bf16 FLOP/s to see it."
                )
        return cls(peak, message)

    def count(self, train_fn, mesh, state, batch, rng) -> None:
        """Adds the FLOPs of the train step about to run on `batch` to the window. A batch
        shape seen for the first time asks the jit for its compiled program: the same one
        the call then runs (jax compiles it once, for the first of the two)."""
        if self.peak is None:
            return
        key = tuple((k, v.shape, str(v.dtype)) for k, v in sorted(batch.items()))
        if key not in self._by_shape:
            with jax.set_mesh(mesh):
                compiled = train_fn.jitted.lower(state, batch, rng).compile()
            text = compiled.as_text() or ""
            flops = step_flops(compiled, text)
            if flops is None:
                self._message("mfu is not reported: the compiler gives no cost analysis here.")
                self.peak = None
                return
            if matmul_loops(text):
                self._message(
                    "mfu counts each loop body of the train step once (scanned layers, "
                    "micro-batches), as XLA's cost analysis does: it is a lower bound here."
                )
            self._by_shape[key] = flops
        self._flops += self._by_shape[key]
        self._steps += 1

    def window(self, elapsed: float) -> dict[str, float]:
        """`{"mfu": ...}` of the steps counted since the last window (over `elapsed`
        seconds, the time the window's tokens/s figure uses); {} without a peak."""
        if self.peak is None or not self._steps:
            return {}
        steps, flops = self._steps, self._flops
        self._flops, self._steps = 0.0, 0
        return {"mfu": mfu(flops / steps, elapsed / steps, self.peak)}


class Profiler:
    """A `jax.profiler` trace of the train steps `config.profile_steps` names, written into
    `workdir/profile` (through a local folder, then copied, when the workdir is remote)."""

    def __init__(self, first: int, count: int, folder: epath.Path, message=print):
        self.first, self.last = first, first + count - 1
        self.folder = folder
        self._message = message
        self._local = None if storage.is_remote(folder) else folder
        self.active = False
        self._traced = 0  # The last step traced.

    @classmethod
    def for_run(
        cls, config: ml_collections.ConfigDict, workdir: Workdir, start_step: int, message=print
    ) -> Profiler | None:
        """The run's profiler (None when `profile_steps` is off or the window ended before
        `start_step`, the step a resumed run starts after).

        Raises:
          WorkdirNotWritableError: the profile folder cannot be written (before training).
        """
        first, count = profile_window(config)
        if count == 0:
            return None
        if first + count - 1 <= start_step:
            message(
                f"config.profile_steps=({first}, {count}) ended before step {start_step + 1}, "
                f"where this resumed run starts: no trace is taken."
            )
            return None
        if first <= start_step:
            count -= start_step + 1 - first
            first = start_step + 1
        profiler = cls(first, count, workdir.profile, message)
        profiler._check_writable(config)
        return profiler

    def _check_writable(self, config) -> None:
        probe = self.folder / f".probe-{uuid.uuid4().hex}"
        try:
            if self._local is not None:
                self.folder.mkdir(parents=True, exist_ok=True)
            probe.write_text("")
            probe.unlink()
        except OSError as e:
            raise WorkdirNotWritableError(
                f"config.profile_steps={tuple(config.profile_steps)}: cannot write the profile "
                f"folder {self.folder} ({e}). Make it writable (a file named `profile` in the "
                f"workdir is in the way), or set --config.profile_steps=0,0 to trace nothing."
            ) from e

    @contextlib.contextmanager
    def step(self, number: int):
        """Around the dispatch of train step `number` (counted from 1): starts the trace at
        the window's first step and names each step of the window in it."""
        if number == self.first and not self.active:
            if self._local is None:
                self._local = epath.Path(tempfile.mkdtemp(prefix="transformer_jax_profile_"))
            jax.profiler.start_trace(str(self._local), create_perfetto_trace=True)
            self.active = True
        if self.active:
            self._traced = number
            with jax.profiler.StepTraceAnnotation("train", step_num=number):
                yield
        else:
            yield

    def finished(self, number: int, outputs) -> None:
        """After step `number` is dispatched: at the window's last step, waits for `outputs`
        (so the devices' work is in the trace) and writes the trace."""
        if self.active and number >= self.last:
            jax.block_until_ready(outputs)
            self.close()

    def close(self) -> None:
        """Stops a running trace and writes it (on an error or a preemption too)."""
        if not self.active:
            return
        self.active = False
        jax.profiler.stop_trace()
        if storage.is_remote(self.folder):
            storage.upload_tree(self._local, self.folder)
            shutil.rmtree(self._local, ignore_errors=True)
            self._local = None
        self._message(f"profile of steps {self.first}-{self._traced} written to {self.folder}")
