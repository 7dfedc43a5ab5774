"""Accelerator names, compile-only devices, and choices that follow the mesh's devices."""

import importlib.util

import jax
import jax.numpy as jnp
import pytest

from transformer_jax import sharding as shd
from transformer_jax.aot import targets
from transformer_jax.nn.attention import resolve_kernel

needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None,
    reason='needs the aot extra: pip install -e ".[aot]"',
)


@pytest.mark.parametrize(
    "name, topology, devices, slices",
    [
        ("v4-8", "v4:2x2x1", 4, 1),  # v4 names count TensorCores: 2 per chip
        ("v5p-8", "v5p:2x2x1", 4, 1),
        ("v5e-8", "v5e:2x4", 8, 1),
        ("v5e-256", "v5e:16x16", 256, 1),
        ("v6e-8", "v6e:2x4", 8, 1),
        ("v5e-16x2", "v5e:4x4", 32, 2),
        ("h100x8", "1x1x8", 8, 1),
        ("H200x16", "1x2x8", 16, 1),
    ],
)
def test_names_users_type_map_to_topologies(name, topology, devices, slices):
    target = targets.parse_target(name)
    assert (target.topology, target.num_devices, target.num_slices) == (topology, devices, slices)


@pytest.mark.parametrize("name", ["v5e-7", "v4-4", "a100x8", "h100x12", "tpu", ""])
def test_an_unknown_target_lists_the_known_ones(name):
    with pytest.raises(ValueError, match="not a known accelerator. Known: v4-N .*h100xN"):
        targets.parse_target(name)


def test_a_missing_compiler_names_the_extra(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match=r'pip install -e "\.\[aot\]"'):
        targets.check_extra(targets.parse_target("v5e-8"))
    with pytest.raises(ImportError, match=r'pip install -e "\.\[gpu-aot\]"'):
        targets.check_extra(targets.parse_target("h100x8"))


def test_gpu_target_config_carries_the_chip_figures():
    text = targets.gpu_target_config(targets.CHIPS["h200"])
    assert "device_memory_size: 141000000000" in text
    assert "memory_bandwidth: 4800000000000" in text
    assert "major: 9" in text


@needs_libtpu
@pytest.mark.parametrize("name", ["v4-8", "v5e-8", "v5p-8", "v6e-8", "v5e-1", "v5e-16x2"])
def test_compile_only_tpu_devices(name):
    target = targets.parse_target(name)
    devices = targets.target_devices(target)
    assert len(devices) == target.num_devices
    assert {d.platform for d in devices} == {"tpu"}
    mesh = targets.target_mesh(target, {"data": -1, "fsdp": 1, "tensor": 1}, devices)
    assert mesh.shape["data"] == target.num_devices


@needs_libtpu
def test_a_mesh_that_does_not_divide_the_target_names_both():
    with pytest.raises(ValueError, match=r"mesh \{'data': 3.*does not fit v5e-8 \(8 devices\)"):
        targets.target_mesh(targets.parse_target("v5e-8"), {"data": 3})
    with pytest.raises(ValueError, match="multiple of the 2 slices"):
        targets.target_mesh(targets.parse_target("v5e-4x2"), {"data": 1, "fsdp": 8})


@needs_libtpu
def test_kernel_choices_follow_the_mesh_devices_not_the_host():
    """On this CPU host, tracing under a TPU mesh picks the TPU's attention (splash) and
    leaves out the CPU-only gradient barrier."""
    assert jax.default_backend() == "cpu"
    mesh = targets.target_mesh(targets.parse_target("v5e-4"), {"data": -1})
    seen = {}

    def probe(x):
        seen["platform"] = shd.target_platform()
        seen["kernel"] = resolve_kernel("auto", jnp.bfloat16)
        return x

    spec = jax.ShapeDtypeStruct((4,), jnp.float32, sharding=shd.batch_sharding(mesh))
    with jax.set_mesh(mesh):
        jax.jit(probe).lower(spec)
    assert seen == {"platform": "tpu", "kernel": "splash"}
    assert shd.target_platform() == "cpu"  # outside the mesh: the host
    assert resolve_kernel("auto", jnp.bfloat16) == "reference"
