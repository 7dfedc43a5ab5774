"""Accelerators to compile for without having them: the chips, the names users type, and the
compile-only devices JAX gives for them.

`target_devices("v5e-8")` returns eight TPU v5e devices that the real TPU compiler (libtpu)
compiles for on a CPU host; `target_devices("h100x8")` eight H100s for XLA's GPU compiler
(jax-cuda12-plugin). Nothing runs on them: they exist to compile, and to measure what the
compiled program needs (`transformer_jax.aot.report`).

Names: a TPU slice is `GENERATION-N` as Google Cloud names it (v4 and v5p count TensorCores,
two per chip, so v4-8 is 4 chips; v5e and v6e count chips), `-NxS` for S slices
(`v5e-16x2`); a GPU host is `h100x8` (GPUs) and `h100x16` two such hosts.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import re

import jax
from jax.experimental import mesh_utils
from jax.sharding import Mesh

from transformer_jax import sharding as shd
from transformer_jax.libtpu_env import quiet_libtpu


@dataclasses.dataclass(frozen=True)
class Chip:
    """One accelerator chip's published figures (per chip, dense, no sparsity)."""

    name: str  # As printed in reports, e.g. "TPU v5e".
    platform: str  # "tpu" or "gpu".
    hbm_bytes: int  # Memory per chip.
    peak_bf16_flops: float  # bfloat16 matrix FLOP/s per chip.
    hbm_bandwidth: float  # Bytes/s per chip.
    source: str  # Where the figures come from.
    topology_prefix: str = ""  # TPU: the generation in topology names ("v5e:2x4").
    cores_per_chip_in_name: int = 1  # TPU names count TensorCores (2 per chip on v4/v5p).
    three_d: bool = False  # TPU torus with three dimensions (v4, v5p) or two (v5e, v6e).
    chip_config: str = "default"  # TPU: "megacore" shows a v4 chip's two cores as one device.
    # GPU only: what XLA's GPU compiler needs to know of the device (a GpuTargetConfig).
    compute_capability: tuple[int, int] = (0, 0)
    sm_count: int = 0
    l2_cache_bytes: int = 0
    clock_ghz: float = 0.0


_GIB = 2**30
CHIPS: dict[str, Chip] = {
    "v4": Chip(
        "TPU v4", "tpu", 32 * _GIB, 275e12, 1228e9,
        "cloud.google.com/tpu/docs/v4 (275 TFLOP/s bf16, 32 GiB HBM2 at 1,228 GB/s)",
        topology_prefix="v4", cores_per_chip_in_name=2, three_d=True, chip_config="megacore",
    ),
    "v5e": Chip(
        "TPU v5e", "tpu", 16 * _GIB, 197e12, 819e9,
        "cloud.google.com/tpu/docs/v5e (197 TFLOP/s bf16, 16 GiB HBM2 at 819 GB/s)",
        topology_prefix="v5e",
    ),
    "v5p": Chip(
        "TPU v5p", "tpu", 95 * _GIB, 459e12, 2765e9,
        "cloud.google.com/tpu/docs/v5p (459 TFLOP/s bf16, 95 GiB HBM2e at 2,765 GB/s)",
        topology_prefix="v5p", cores_per_chip_in_name=2, three_d=True,
    ),
    "v6e": Chip(
        "TPU v6e", "tpu", 32 * _GIB, 918e12, 1640e9,
        "cloud.google.com/tpu/docs/v6e (918 TFLOP/s bf16, 32 GiB HBM at 1,640 GB/s)",
        topology_prefix="v6e",
    ),
    "h100": Chip(
        "NVIDIA H100 SXM 80GB", "gpu", 80 * 10**9, 989e12, 3.35e12,
        "NVIDIA H100 Tensor Core GPU datasheet (SXM5: 989 TFLOP/s dense bf16, 80 GB HBM3 at "
        "3.35 TB/s, 132 SMs)",
        compute_capability=(9, 0), sm_count=132, l2_cache_bytes=50 * 2**20, clock_ghz=1.98,
    ),
    "h200": Chip(
        "NVIDIA H200 SXM 141GB", "gpu", 141 * 10**9, 989e12, 4.8e12,
        "NVIDIA H200 Tensor Core GPU datasheet (SXM: 989 TFLOP/s dense bf16, 141 GB HBM3e at "
        "4.8 TB/s, 132 SMs)",
        compute_capability=(9, 0), sm_count=132, l2_cache_bytes=50 * 2**20, clock_ghz=1.98,
    ),
}  # fmt: skip

# Torus shapes by chip count: the slices Google Cloud offers.
_SHAPES_2D = {1: (1, 1), 4: (2, 2), 8: (2, 4), 16: (4, 4), 32: (4, 8), 64: (8, 8),
              128: (8, 16), 256: (16, 16)}  # fmt: skip
_SHAPES_3D = {4: (2, 2, 1), 8: (2, 2, 2), 16: (2, 2, 4), 32: (2, 4, 4), 64: (4, 4, 4),
              128: (4, 4, 8), 256: (4, 8, 8), 512: (8, 8, 8)}  # fmt: skip
_GPUS_PER_HOST = 8
EXAMPLES = ("v4-8", "v5e-8", "v5e-256", "v5p-8", "v6e-8", "v5e-16x2", "h100x8", "h200x8")

TPU_EXTRA = 'pip install -e ".[aot]"  (libtpu, the TPU compiler)'
GPU_EXTRA = 'pip install -e ".[gpu-aot]"  (jax-cuda12-plugin and cuDNN, the GPU compiler)'


@dataclasses.dataclass(frozen=True)
class Target:
    """A named set of accelerators: `num_slices` slices of `shape` chips (TPU), or hosts of
    GPUs (`shape` = (hosts, GPUs per host))."""

    name: str
    chip: Chip
    shape: tuple[int, ...]
    num_slices: int = 1

    @property
    def num_devices(self) -> int:
        return math.prod(self.shape) * self.num_slices

    @property
    def topology(self) -> str:
        """The topology string JAX's `get_topology_desc` takes."""
        dims = "x".join(map(str, self.shape))
        if self.chip.platform == "gpu":
            return f"1x{dims}"
        return f"{self.chip.topology_prefix}:{dims}"

    @property
    def chips_per_host(self) -> tuple[int, int, int]:
        """Chips per host along each torus axis: a whole small slice is one host, larger ones
        are hosts of 2x2 chips (the bound libtpu needs to lay out a topology)."""
        shape = (*self.shape, 1)[:3]
        if math.prod(shape) <= 8 and not self.chip.three_d:
            return shape
        return (min(shape[0], 2), min(shape[1], 2), 1)


def known_targets() -> str:
    """The accepted names, for error messages."""
    tpus = ", ".join(
        f"{k}-N (N in {sorted({n * c.cores_per_chip_in_name for n in _shapes(c)})})"
        for k, c in CHIPS.items()
        if c.platform == "tpu"
    )
    gpus = ", ".join(f"{k}xN (N = 1..8, or a multiple of 8)" for k, c in CHIPS.items()
                     if c.platform == "gpu")  # fmt: skip
    return f"{tpus}; slices as v5e-16x2; {gpus}. Examples: {', '.join(EXAMPLES)}"


def _shapes(chip: Chip) -> dict[int, tuple[int, ...]]:
    return _SHAPES_3D if chip.three_d else _SHAPES_2D


def parse_target(name: str) -> Target:
    """The `Target` a user's name means (`v5e-8`, `v4-8`, `v5e-16x2`, `h100x8`, ...).

    Raises:
      ValueError: an unknown name or size, listing the known ones.
    """
    text = name.strip().lower()
    gpu = re.fullmatch(r"([a-z]\d+)x(\d+)", text)
    tpu = re.fullmatch(r"(v\d+[a-z]?)-(\d+)(?:x(\d+))?", text)
    if gpu and gpu.group(1) in CHIPS and CHIPS[gpu.group(1)].platform == "gpu":
        chip, count = CHIPS[gpu.group(1)], int(gpu.group(2))
        if 1 <= count <= _GPUS_PER_HOST:
            return Target(text, chip, (1, count))
        if count % _GPUS_PER_HOST == 0:
            return Target(text, chip, (count // _GPUS_PER_HOST, _GPUS_PER_HOST))
    elif tpu and tpu.group(1) in CHIPS and CHIPS[tpu.group(1)].platform == "tpu":
        chip = CHIPS[tpu.group(1)]
        cores, slices = int(tpu.group(2)), int(tpu.group(3) or 1)
        chips = cores // chip.cores_per_chip_in_name
        if cores % chip.cores_per_chip_in_name == 0 and chips in _shapes(chip) and slices >= 1:
            return Target(text, chip, _shapes(chip)[chips], slices)
    raise ValueError(f"--target={name!r} is not a known accelerator. Known: {known_targets()}.")


def gpu_target_config(chip: Chip) -> str:
    """The GpuTargetConfig (text proto) XLA's GPU compiler reads instead of a real device:
    the chip's figures, and the limits every NVIDIA GPU of compute capability >= 8 shares."""
    major, minor = chip.compute_capability
    return f"""gpu_device_info {{
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_block_optin: 232448
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: {chip.sm_count}
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  thread_dim_limit_x: 1024
  thread_dim_limit_y: 1024
  thread_dim_limit_z: 64
  memory_bandwidth: {int(chip.hbm_bandwidth)}
  l2_cache_size: {chip.l2_cache_bytes}
  clock_rate_ghz: {chip.clock_ghz}
  device_memory_size: {chip.hbm_bytes}
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
  cuda_compute_capability {{ major: {major} minor: {minor} }}
}}
platform_name: "CUDA"
dnn_version_info {{ major: 9 minor: 10 patch: 0 }}
device_description_str: "{chip.name}"
"""


def check_extra(target: Target) -> None:
    """Raises ImportError naming the `pip install` line when the target's compiler is absent."""
    if target.chip.platform == "tpu" and not installed("libtpu"):
        raise ImportError(f"compiling for {target.name} needs libtpu: {TPU_EXTRA}.")
    if target.chip.platform == "gpu" and not installed("jax_plugins.xla_cuda12"):
        raise ImportError(f"compiling for {target.name} needs the CUDA plugin: {GPU_EXTRA}.")


def installed(module: str) -> bool:
    """Whether `module` (dotted: its parent packages too) can be imported."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def target_devices(target: Target) -> list:
    """Compile-only devices of `target` (none of them can run anything).

    Raises:
      ImportError: the compiler for the target is not installed (names the extra).
    """
    from jax.experimental import topologies

    check_extra(target)
    if target.chip.platform == "tpu":
        os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")  # No metadata server to ask.
        # No chip to claim either: let several processes load libtpu (its lock file would make
        # a second compiling process fail).
        os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
        quiet_libtpu()
        topology = topologies.get_topology_desc(
            platform="tpu",
            topology_name=target.topology,
            chip_config_name=target.chip.chip_config,
            chips_per_host_bounds=target.chips_per_host,
            num_slices=target.num_slices,
            wrap=(False, False, False),
        )
    else:
        topology = topologies.get_topology_desc(
            platform="cuda",
            target_config=gpu_target_config(target.chip),
            topology=target.topology,
        )
    return list(topology.devices)


def target_mesh(target: Target, shape: dict[str, int], devices=None) -> Mesh:
    """A `("data", "fsdp", "tensor")` mesh over the target's devices (`shape` as in a config's
    `mesh` field, -1 for the rest). Over several slices the data axis spans them (the slow
    network between slices carries only the gradient all-reduce).

    Raises:
      ValueError: a mesh that does not divide the target, naming both.
    """
    devices = target_devices(target) if devices is None else devices
    try:
        sizes = shd.mesh_sizes(shape, len(devices))
        if sizes[0] % target.num_slices:
            raise ValueError(
                f"the data axis ({sizes[0]}) must be a multiple of the {target.num_slices} "
                "slices, which it spans"
            )
    except ValueError as e:
        raise ValueError(
            f"mesh {dict(shape)} does not fit {target.name} ({len(devices)} devices): {e}"
        ) from None
    auto = (jax.sharding.AxisType.Auto,) * len(shd.MESH_AXES)
    if target.num_slices == 1:
        return jax.make_mesh(sizes, shd.MESH_AXES, axis_types=auto, devices=devices)
    per_slice = (sizes[0] // target.num_slices, *sizes[1:])
    grid = mesh_utils.create_hybrid_device_mesh(
        per_slice, (target.num_slices, 1, 1), devices=devices, allow_split_physical_axes=True
    )
    return Mesh(grid, shd.MESH_AXES, axis_types=auto)
