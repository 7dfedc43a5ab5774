"""Scaled dot-product attention and masks (§3.2.1) against naive references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.nn.attention import (
    causal_mask,
    check_dropout_kernel,
    combine_masks,
    dot_product_attention,
    dot_product_attention_weights,
    heads_first_attention,
    kernel_attention,
    padding_mask,
    resolve_kernel,
    segment_mask,
)

B, T, S, N, H = 2, 3, 5, 7, 11  # All different: a transposed axis cannot pass.


def _qkv(seed=0, dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(k1, (B, T, N, H), dtype)
    k = jax.random.normal(k2, (B, S, N, H), dtype)
    v = jax.random.normal(k3, (B, S, N, H), dtype)
    return q, k, v


def test_shapes_and_rows_sum_to_one():
    q, k, v = _qkv()
    out, w = dot_product_attention(q, k, v, return_weights=True)
    assert out.shape == (B, T, N, H)
    assert w.shape == (B, N, T, S)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-6)


def test_matches_naive_per_head_loop():
    q, k, v = _qkv(1)
    tokens = jnp.array([[5, 4, 3, 0, 0], [1, 2, 3, 4, 9]])
    mask = padding_mask(tokens)
    out = dot_product_attention(q, k, v, mask)
    qn, kn, vn, mn = map(np.asarray, (q, k, v, tokens != 0))
    for b in range(B):
        for n in range(N):
            logits = qn[b, :, n] @ kn[b, :, n].T / np.sqrt(H)  # [T, S]
            logits = np.where(mn[b][None], logits, -np.inf)
            p = np.exp(logits - logits.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            np.testing.assert_allclose(out[b, :, n], p @ vn[b, :, n], rtol=1e-5, atol=1e-5)


def test_fully_masked_row_is_finite_and_zero():
    q, k, v = _qkv(2)
    mask = jnp.zeros((B, 1, T, S), bool).at[:, :, 0].set(True)  # only query 0 sees keys
    out, w = dot_product_attention(q, k, v, mask, return_weights=True)
    assert np.isfinite(np.asarray(out)).all()
    np.testing.assert_array_equal(out[:, 1:], 0.0)
    np.testing.assert_allclose(w[:, :, 0].sum(-1), 1.0, rtol=1e-6)


def test_gradient_finite_with_masked_rows():
    q, k, v = _qkv(3)
    mask = jnp.zeros((B, 1, T, S), bool)
    g = jax.grad(lambda q: dot_product_attention(q, k, v, mask).sum())(q)
    assert np.isfinite(np.asarray(g)).all()


def test_bfloat16_close_to_float32():
    q, k, v = _qkv(4)
    ref = dot_product_attention(q, k, v)
    low = dot_product_attention(*(x.astype(jnp.bfloat16) for x in (q, k, v)))
    assert low.dtype == jnp.bfloat16
    np.testing.assert_allclose(low.astype(jnp.float32), ref, atol=5e-2)


def test_mask_builders():
    tokens = jnp.array([[7, 8, 0], [9, 0, 0]])
    np.testing.assert_array_equal(padding_mask(tokens)[:, 0, 0], tokens != 0)
    assert padding_mask(tokens).shape == (2, 1, 1, 3)
    c = causal_mask(4)
    assert c.shape == (1, 1, 4, 4)
    np.testing.assert_array_equal(c[0, 0], np.tril(np.ones((4, 4), bool)))
    seg = jnp.array([[1, 1, 2, 0]])
    m = segment_mask(seg, seg)[0, 0]
    expected = np.array(
        [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]], bool
    )  # padding attends nowhere
    np.testing.assert_array_equal(m, expected)
    both = combine_masks(causal_mask(4), segment_mask(seg, seg))
    np.testing.assert_array_equal(both[0, 0], np.tril(expected))
    assert combine_masks(None, None) is None


def test_attention_dropout_needs_key_and_keeps_expectation():
    q, k, v = _qkv(5)
    with pytest.raises(ValueError, match="rng"):
        dot_product_attention(q, k, v, dropout_rate=0.5, deterministic=False)
    out = dot_product_attention(
        q, k, v, dropout_rate=0.5, dropout_rng=jax.random.key(0), deterministic=False
    )
    assert not np.allclose(out, dot_product_attention(q, k, v))


def test_weights_function_matches_softmax():
    q, k, _ = _qkv(6)
    w = dot_product_attention_weights(q, k)
    ref = jax.nn.softmax(jnp.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(H), -1)
    np.testing.assert_allclose(w, ref, rtol=1e-5, atol=1e-6)


def _mask_kinds():
    """Every mask the decoders use, broadcastable to [B, N, T, S], and none."""
    tokens = jnp.array([[5, 4, 3, 0, 0], [1, 2, 3, 4, 9]])
    q_segments, kv_segments = jnp.array([[1, 1, 2], [1, 0, 0]]), jnp.array([[1, 1, 2, 2, 0]] * 2)
    causal = causal_mask(S)[:, :, S - T :]  # the last T queries of S positions
    no_keys = jnp.ones((B, 1, T, S), bool).at[:, :, 1].set(False)  # query 1 sees nothing
    return {
        "none": None,
        "padding": padding_mask(tokens),
        "causal": causal,
        "segments": segment_mask(q_segments, kv_segments),
        "padding+causal": combine_masks(padding_mask(tokens), causal),
        "a row with no keys": no_keys,
    }


@pytest.mark.parametrize("kind", list(_mask_kinds()))
def test_heads_first_attention_equals_the_reference(kind):
    """The decoding caches' layout [B, N, S, H] gives the reference's output to rounding."""
    q, k, v = _qkv(5)
    mask = _mask_kinds()[kind]
    expected = dot_product_attention(q, k, v, mask)
    out = heads_first_attention(q, k.swapaxes(1, 2), v.swapaxes(1, 2), mask)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", list(_mask_kinds()))
def test_kernel_attention_equals_the_reference(kind):
    """jax.nn.dot_product_attention (the XLA path; cuDNN needs a GPU) computes the reference's
    output and gradients to float32 rounding for every mask, cross-attention shapes (T != S)."""
    q, k, v = _qkv(7)
    mask = _mask_kinds()[kind]

    def loss(fn, q, k, v):
        return jnp.sum(jnp.sin(fn(q, k, v, mask)))

    def kernel(q, k, v, mask):
        return kernel_attention(q, k, v, mask, implementation="xla")

    np.testing.assert_allclose(
        kernel(q, k, v, mask), dot_product_attention(q, k, v, mask), rtol=1e-6, atol=1e-6
    )
    grads = jax.grad(lambda *a: loss(kernel, *a), argnums=(0, 1, 2))(q, k, v)
    expected = jax.grad(lambda *a: loss(dot_product_attention, *a), argnums=(0, 1, 2))(q, k, v)
    for got, want in zip(grads, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["none", "padding", "segments"])
def test_kernel_is_causal_equals_the_causal_mask(kind):
    """Self-attention (T = S): `is_causal` = the reference with `causal_mask` added, including a
    query whose only earlier keys are masked (output 0, as in the reference)."""
    q, k, v = _qkv(8)
    q = k + 0.5  # T = S
    tokens = jnp.array([[0, 4, 3, 2, 1], [1, 2, 3, 4, 0]])  # Row 0: query 0 has no visible key.
    segments = jnp.array([[1, 1, 2, 2, 0], [1, 2, 2, 3, 3]])
    mask = {
        "none": None,
        "padding": padding_mask(tokens),
        "segments": segment_mask(segments, segments),
    }[kind]
    expected = dot_product_attention(q, k, v, combine_masks(causal_mask(S), mask))
    out = kernel_attention(q, k, v, mask, is_causal=True, implementation="xla")
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="as many queries as keys"):
        kernel_attention(q[:, :T], k, v, None, is_causal=True)


def test_resolve_kernel_by_backend_and_dtype():
    assert resolve_kernel("auto", jnp.float32, "cpu") == "reference"
    assert resolve_kernel("auto", jnp.float32, "tpu") == "splash"
    assert resolve_kernel("auto", jnp.bfloat16, "gpu") == "cudnn"
    assert resolve_kernel("auto", jnp.float32, "gpu") == "xla"  # cuDNN flash takes 16-bit only
    assert resolve_kernel("xla", jnp.float32, "cpu") == "xla"
    with pytest.raises(ValueError, match="attention_kernel='flash' is not one of"):
        resolve_kernel("flash", jnp.float32)


@pytest.mark.parametrize("kind", ["none", "padding", "segments", "padding+causal"])
def test_padding_odd_lengths_for_cudnn_changes_nothing(kind):
    """cuDNN's backward pass takes only even lengths: the extra masked key and dropped query
    that `kernel_attention` adds for it (T = 3, S = 5 here) leave outputs and gradients as
    they were. Checked through XLA's implementation (cuDNN needs a GPU)."""
    from transformer_jax.nn.attention import _even_lengths

    q, k, v = _qkv(9)
    mask = _mask_kinds()[kind]
    if mask is not None:
        mask = jnp.broadcast_to(mask, (*mask.shape[:2], T, S))

    # A query with no key to attend to averages every value in XLA's kernel (kernel_attention
    # then outputs 0 for it): compare the queries that have keys.
    live = 1.0 if mask is None else jnp.any(mask, axis=-1).swapaxes(1, 2)[..., None]

    def padded(q, k, v):
        q2, k2, v2, m2 = _even_lengths(q, k, v, mask)
        assert q2.shape[1] % 2 == 0 and k2.shape[1] % 2 == 0
        out = jax.nn.dot_product_attention(q2, k2, v2, mask=m2, implementation="xla")
        return out[:, :T] * live

    def plain(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, mask=mask, implementation="xla") * live

    np.testing.assert_allclose(padded(q, k, v), plain(q, k, v), rtol=1e-6, atol=1e-6)
    grads = jax.grad(lambda *a: jnp.sum(jnp.sin(padded(*a))), argnums=(0, 1, 2))(q, k, v)
    want = jax.grad(lambda *a: jnp.sum(jnp.sin(plain(*a))), argnums=(0, 1, 2))(q, k, v)
    for got, expected in zip(grads, want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kernel", ["cudnn", "splash"])
def test_a_fused_kernel_asked_for_with_attention_dropout_is_refused(kernel):
    with pytest.raises(ValueError) as error:
        check_dropout_kernel(kernel, 0.1)
    message = str(error.value)
    assert f"attention_kernel='{kernel}' with attention_dropout_rate=0.1" in message
    assert f"jax {jax.__version__}" in message and "only 'reference'" in message
    assert "--config.model.attention_dropout_rate=0" in message


@pytest.mark.parametrize("kernel, rate", [("cudnn", 0.0), ("auto", 0.1), ("reference", 0.1)])
def test_kernels_that_train_with_or_without_dropout_pass(kernel, rate):
    check_dropout_kernel(kernel, rate)
