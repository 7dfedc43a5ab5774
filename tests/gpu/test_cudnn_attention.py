"""cuDNN's fused attention on a real NVIDIA GPU against the written-out equation: outputs and
gradients (w.r.t. queries, keys and values) for every mask the models build, in bfloat16 (cuDNN
runs) and float32 (cuDNN refuses it: XLA's attention runs, and the reason is logged).

Marked `gpu` and skipped without one. Run on a GPU machine with
`JAX_PLATFORMS=cuda python -m pytest -m gpu tests/gpu` (tests/conftest.py would otherwise pin
the CPU), or through `benchmarks/gpu_measure.py`.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl import logging

from transformer_jax import sharding as shd
from transformer_jax.nn import attention
from transformer_jax.nn.attention import (
    causal_mask,
    combine_masks,
    dot_product_attention,
    kernel_attention,
    key_mask,
    resolve_kernel,
    segment_mask,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        jax.default_backend() != "gpu", reason="needs an NVIDIA GPU (JAX_PLATFORMS=cuda)"
    ),
]

B, N, H = 3, 4, 64  # Batch, heads, head dim (cuDNN takes multiples of 8).
FMHA = re.compile(r'custom_call_target="__cudnn\$(fmha\w*)"')

CASES = {
    # name: (query length T, key length S, mask, is_causal)
    "no mask, odd length (ViT: 196 patches + [CLS])": (197, 197, None, False),
    "key padding (encoder, BERT)": (40, 40, "keys", False),
    "causal (GPT)": (40, 40, None, True),
    "left padding + causal (decoder, left-padded prompts)": (40, 40, "left_keys", True),
    "packed segments (encoder rows)": (40, 40, "segments", False),
    "packed segments + causal (decoder rows)": (40, 40, "segments", True),
    "cross-attention, T != S, key padding": (40, 56, "keys", False),
    "cross-attention, odd T and S, key padding": (39, 57, "keys", False),
}


@pytest.fixture(autouse=True)
def on_the_gpu():
    """Not skipped means on the GPU: nothing here may pass on a CPU by accident."""
    assert jax.default_backend() == "gpu", jax.devices()
    assert jax.devices()[0].platform == "gpu"


def make_mask(kind: str | None, t: int, s: int):
    """The models' masks: keys `[B, 1, 1, S]` (right or left padding) or segments
    `[B, 1, T, S]` (packed rows, segment 0 padding); every row a different length."""
    if kind is None:
        return None
    if kind == "keys":
        lengths = jnp.array([s, s - 7, s // 2 + 1])
        return key_mask(jnp.arange(s)[None, :] < lengths[:, None])
    if kind == "left_keys":  # Row 2: its first queries see no key at all (output 0).
        pads = jnp.array([0, 5, 11])
        return key_mask(jnp.arange(s)[None, :] >= pads[:, None])
    assert kind == "segments" and t == s
    rows = [[1] * 15 + [2] * 20 + [0] * 5, [1] * 40, [1] * 7 + [2] * 7 + [3] * 20 + [0] * 6]
    ids = jnp.array(rows)
    return segment_mask(ids, ids)


def inputs(t: int, s: int, dtype):
    keys = jax.random.split(jax.random.key(t * 1000 + s), 4)
    q = jax.random.normal(keys[0], (B, t, N, H)).astype(dtype)
    k = jax.random.normal(keys[1], (B, s, N, H)).astype(dtype)
    v = jax.random.normal(keys[2], (B, s, N, H)).astype(dtype)
    cotangent = jax.random.normal(keys[3], (B, t, N, H))
    return q, k, v, cotangent


def out_and_grads(attend):
    """A jitted (q, k, v, mask, cotangent) -> (output, (dq, dk, dv)) of `attend`."""

    def run(q, k, v, mask, cotangent):
        out, vjp = jax.vjp(lambda q, k, v: attend(q, k, v, mask), q, k, v)
        return out, vjp(cotangent.astype(out.dtype))

    return jax.jit(run)


def reference(is_causal: bool):
    def attend(q, k, v, mask):
        causal = causal_mask(q.shape[1]) if is_causal else None
        return dot_product_attention(q, k, v, combine_masks(mask, causal))

    return out_and_grads(attend)


def cudnn(is_causal: bool):
    def attend(q, k, v, mask):
        return kernel_attention(q, k, v, mask, is_causal=is_causal, implementation="cudnn")

    return out_and_grads(attend)


def error(got, want) -> float:
    """Largest absolute difference over the largest magnitude of `want`."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-6))


def compiled_with_calls(fn, *args):
    """`fn` compiled for `args`, and the cuDNN attention custom calls of its program (sorted,
    distinct)."""
    compiled = fn.lower(*args).compile()
    return compiled, sorted(set(FMHA.findall(compiled.as_text())))


@pytest.mark.parametrize("case", list(CASES))
def test_cudnn_bfloat16_matches_the_reference(case):
    """bfloat16 through cuDNN's fused attention (its forward and backward calls in the
    program): within the error of the reference's own bfloat16 computation (or 2% of the
    largest value), both measured against the reference in float32 on the same inputs."""
    t, s, kind, is_causal = CASES[case]
    q, k, v, cotangent = inputs(t, s, jnp.bfloat16)
    mask = make_mask(kind, t, s)
    args = (q, k, v, mask, cotangent)
    kernel, calls = compiled_with_calls(cudnn(is_causal), *args)
    assert any("Backward" not in c for c in calls) and any("Backward" in c for c in calls), calls

    exact = reference(is_causal)(*(x.astype(jnp.float32) for x in (q, k, v)), mask, cotangent)
    rounded = reference(is_causal)(*args)
    got = kernel(*args)
    names = ("output", "dq", "dk", "dv")
    for name, g, r, e in zip(names, jax.tree.leaves(got), jax.tree.leaves(rounded),
                             jax.tree.leaves(exact), strict=True):  # fmt: skip
        assert g.dtype == jnp.bfloat16 and np.all(np.isfinite(np.asarray(g, np.float32))), name
        bound = max(3 * error(r, e), 2e-2)
        assert error(g, e) <= bound, f"{name}: {error(g, e):.4f} > {bound:.4f} ({case})"


@pytest.mark.parametrize("case", list(CASES))
def test_float32_falls_back_to_xla_with_the_reason(case, monkeypatch):
    """cuDNN's flash attention takes 16-bit inputs only: float32 runs XLA's attention (no
    cuDNN call in the program), says why in the log, and equals the reference."""
    logged = []
    monkeypatch.setattr(logging, "warning", lambda msg, *args: logged.append(msg % args))
    attention._log_fallback.cache_clear()  # Logged once per shape: log it again here.
    t, s, kind, is_causal = CASES[case]
    q, k, v, cotangent = inputs(t, s, jnp.float32)
    args = (q, k, v, make_mask(kind, t, s), cotangent)
    with jax.default_matmul_precision("highest"):  # No TF32 on either side.
        kernel, calls = compiled_with_calls(cudnn(is_causal), *args)
        assert calls == []
        got, want = kernel(*args), reference(is_causal)(*args)
    assert any("cuDNN cannot run" in line and "XLA" in line for line in logged), logged
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert error(g, w) <= 1e-4


def test_auto_picks_cudnn_for_bfloat16_on_the_gpu_mesh():
    mesh = shd.make_mesh({"data": 1, "fsdp": 1, "tensor": 1}, devices=jax.devices()[:1])
    with jax.set_mesh(mesh):
        assert resolve_kernel("auto", jnp.bfloat16) == "cudnn"
        assert resolve_kernel("auto", jnp.float32) == "xla"
