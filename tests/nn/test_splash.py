"""Splash attention (the TPU kernel) against the reference attention, in Pallas interpret mode.

Every mask the models give attention: none, key padding (encoders, BERT), cross-attention with
T != S, causal, causal + padding (left-padded prompts), packed segments (self and cross) and
segments + padding; forward and gradients, float32 and bfloat16. Lengths are odd and not
multiples of 128, so the padding to the kernel's blocks is exercised; one case spans several
blocks.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.nn import attention, splash
from transformer_jax.nn.attention import (
    Segments,
    as_dense,
    causal_mask,
    combine_masks,
    dot_product_attention,
    kernel_attention,
    key_mask,
    resolve_kernel,
    segment_mask,
    splash_segments,
)

B, N, H = 2, 3, 8


def _qkv(t, s, dtype, seed=0):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    return (
        jax.random.normal(k1, (B, t, N, H), dtype),
        jax.random.normal(k2, (B, s, N, H), dtype),
        jax.random.normal(k3, (B, s, N, H), dtype),
    )


def _segments(lengths, total):
    """Segment ids of a packed row: segments of `lengths`, then padding (0)."""
    ids = np.concatenate([np.full(n, i + 1) for i, n in enumerate(lengths)])
    return np.pad(ids, (0, total - len(ids)))


def _cases():
    """(T, S, mask, is_causal) for every mask kind."""
    keys = jnp.asarray(np.arange(45)[None] < np.array([[45], [29]]))  # row 1: 16 padded keys
    left = jnp.asarray(np.arange(37)[None] >= np.array([[0], [9]]))  # row 1: 9 left-padded
    tgt = jnp.asarray(np.stack([_segments([10, 17], 37), _segments([37], 37)]))
    src = jnp.asarray(np.stack([_segments([20, 12], 45), _segments([30], 45)]))
    return {
        "none": (37, 37, None, False),
        "padding": (45, 45, key_mask(keys), False),
        "cross T != S": (37, 45, key_mask(keys), False),
        "causal": (37, 37, None, True),
        "padding + causal": (37, 37, key_mask(left), True),
        "segments": (37, 37, Segments(tgt, tgt), False),
        "segments + causal": (37, 37, Segments(tgt, tgt), True),
        "segments cross": (37, 45, Segments(tgt, src), False),
        "segments + padding": (37, 37, combine_masks(Segments(tgt, tgt), key_mask(left)), True),
        "several blocks": (300, 300, None, True),
    }


CASES = _cases()


def _reference(q, k, v, mask, is_causal):
    if is_causal:
        mask = combine_masks(causal_mask(q.shape[1]), mask)
    return dot_product_attention(q, k, v, as_dense(mask))


def _splash(q, k, v, mask, is_causal):
    q_ids, kv_ids = splash_segments(mask, q.shape[0])
    out = splash.splash_attention(
        q, k, v, q_segments=q_ids, kv_segments=kv_ids, is_causal=is_causal, interpret=True
    )
    # A query with no key it may attend to is 0 in the reference (kernel_attention does this).
    dense = as_dense(combine_masks(causal_mask(q.shape[1]), mask) if is_causal else mask)
    if dense is None:
        return out
    any_key = jnp.any(dense, axis=-1).swapaxes(1, 2)[..., None]
    return jnp.where(any_key, out, 0)


# Every kind in both dtypes, but the multi-block walk only in float32 (the same walk in both).
PAIRS = [
    (k, d)
    for k in CASES
    for d in ("float32", "bfloat16")
    if (k, d) != ("several blocks", "bfloat16")
]


@pytest.mark.parametrize(("kind", "dtype"), PAIRS)
def test_splash_equals_the_reference(kind, dtype):
    """Forward and gradients w.r.t. q, k and v: 1e-5 in float32; bfloat16 inputs (whose
    reference also computes in bfloat16 around a float32 softmax) to bfloat16 rounding."""
    t, s, mask, is_causal = CASES[kind]
    dtype = jnp.dtype(dtype)
    q, k, v = _qkv(t, s, dtype)
    tol = 1e-5 if dtype == jnp.float32 else 3e-2
    got = _splash(q, k, v, mask, is_causal)
    want = _reference(q, k, v, mask, is_causal)
    assert got.dtype == dtype
    np.testing.assert_allclose(
        np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol
    )

    cotangent = jax.random.normal(jax.random.key(9), got.shape, dtype)

    def grads(fn):
        return jax.grad(
            lambda q, k, v: jnp.sum((fn(q, k, v, mask, is_causal) * cotangent).astype(jnp.float32)),
            argnums=(0, 1, 2),
        )(q, k, v)

    for name, g, w in zip("qkv", grads(_splash), grads(_reference), strict=True):
        g, w = np.asarray(g, np.float32), np.asarray(w, np.float32)
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=f"d{name}")


def test_padded_lengths_and_blocks():
    assert [splash.padded_length(n) for n in (1, 128, 129, 197, 512)] == [128, 128, 256, 256, 512]
    assert [splash.block_size(n) for n in (128, 256, 384, 512, 1024)] == [128, 256, 128, 512, 512]
    sizes = splash.block_sizes(384, 1024)
    assert (sizes.block_q, sizes.block_kv, sizes.block_q_dq, sizes.block_kv_dkv) == (
        128,
        512,
        128,
        512,
    )


def test_auto_is_splash_on_tpus_only_and_splash_elsewhere_is_refused():
    assert resolve_kernel("auto", jnp.float32, "tpu") == "splash"
    assert resolve_kernel("auto", jnp.bfloat16, "tpu") == "splash"
    assert resolve_kernel("auto", jnp.bfloat16, "gpu") == "cudnn"
    assert resolve_kernel("auto", jnp.float32, "cpu") == "reference"
    assert resolve_kernel("splash", jnp.float32, "tpu") == "splash"
    for platform in ("cpu", "gpu"):
        with pytest.raises(ValueError, match=f"only on tpu, and this program is for {platform}"):
            resolve_kernel("splash", jnp.float32, platform)
    with pytest.raises(ValueError, match="'cudnn'"):  # GPUs: the kernels that apply are named
        resolve_kernel("splash", jnp.float32, "gpu")
    with pytest.raises(ValueError, match="only on gpu"):
        resolve_kernel("cudnn", jnp.float32, "cpu")


def test_a_mask_splash_cannot_take_falls_back_to_xla(monkeypatch):
    """A dense mask that varies per query some other way than segments: XLA's attention runs,
    the same numbers, and the reason is logged once per shape."""
    logged = []
    monkeypatch.setattr(attention, "_log_fallback", lambda *a: logged.append(a))
    q, k, v = _qkv(5, 5, jnp.float32)
    tokens = jnp.array([[1, 1, 2, 2, 0], [1, 2, 2, 3, 3]])
    mask = segment_mask(tokens, tokens)  # dense, [B, 1, T, S]
    out = kernel_attention(q, k, v, mask, implementation="splash")
    np.testing.assert_allclose(out, dot_product_attention(q, k, v, mask), rtol=1e-5, atol=1e-6)
    assert logged and logged[0][0] == "splash" and "neither keys nor segments" in logged[0][-1]


def test_segments_combine_like_their_dense_masks():
    """`Segments` AND a key mask stays factored and equals the dense AND; with a causal mask
    the result is dense."""
    ids = jnp.array([[1, 1, 2, 2, 0], [1, 2, 2, 3, 3]])
    keys = key_mask(jnp.array([[True, False, True, True, True], [True] * 5]))
    both = combine_masks(Segments(ids, ids), keys)
    assert isinstance(both, Segments)
    np.testing.assert_array_equal(both.dense(), jnp.logical_and(segment_mask(ids, ids), keys))
    dense = combine_masks(causal_mask(5), Segments(ids, ids))
    np.testing.assert_array_equal(dense, jnp.logical_and(causal_mask(5), segment_mask(ids, ids)))
