"""The shared residual Block and Stack, and the one KV cache every decoder uses."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.nn import (
    Block,
    BlockSpec,
    KVCache,
    MemoryKV,
    Stack,
    blocks,
    reorder_cache,
    repeat_cache,
)

# All different: batch 3, length 7, memory 5, heads 2, model dim 12.
B, T, S, N, D = 3, 7, 5, 2, 12


def _spec(**kw):
    return BlockSpec(**{**dict(d_model=D, num_heads=N, d_ff=20, causal=True), **kw})


def _x(seed, length=T):
    return jax.random.normal(jax.random.key(seed), (B, length, D))


@pytest.mark.parametrize("kernel", ["reference", "xla"])
@pytest.mark.parametrize("causal", [True, False])
def test_causal_flag_decides_whether_the_future_is_seen(causal, kernel):
    block = Block(_spec(causal=causal, attention_kernel=kernel), rngs=nnx.Rngs(0))
    x = _x(1)
    ref, weights = block(x, None, return_weights=True)
    changed, _ = block(x.at[:, -1].add(1.0), None)  # Without weights: the kernel runs.
    past_unchanged = np.allclose(changed[:, :-1], ref[:, :-1], atol=1e-6)
    assert past_unchanged == causal
    upper = np.triu(np.asarray(weights["self"]), k=1)
    assert (np.abs(upper).max() == 0.0) == causal
    assert block(x, None)[1] == {}  # Weights only when asked for.


def test_cross_attention_is_optional_and_needs_memory():
    encoder_block = Block(_spec(causal=False), rngs=nnx.Rngs(0))
    assert not hasattr(encoder_block, "cross_attn")
    decoder_block = Block(_spec(cross_attention=True), rngs=nnx.Rngs(0))
    out, weights = decoder_block(_x(1), None, memory=_x(2, S), return_weights=True)
    assert out.shape == (B, T, D) and weights["cross"].shape == (B, N, T, S)
    with pytest.raises(ValueError, match="needs memory"):
        decoder_block(_x(1), None)


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("prefill", [1, 4])
def test_cached_decoding_equals_the_full_pass(norm, prefill):
    """A prompt of `prefill` positions in one call, then one position per call (GPT-style and
    encoder-decoder alike), gives the full causal pass's outputs."""
    stack = Stack(_spec(norm=norm, cross_attention=True), 2, rngs=nnx.Rngs(0))
    x, memory = _x(1), _x(2, S)
    full, _ = stack(x, None, memory=memory)
    caches = stack.init_cache(B, T + 2, memory)
    out, caches = stack.decode(x[:, :prefill], caches)
    outs = [out]
    for t in range(prefill, T):
        out, caches = stack.decode(x[:, t : t + 1], caches)
        outs.append(out)
    np.testing.assert_allclose(jnp.concatenate(outs, 1), full, atol=1e-5, rtol=1e-5)
    assert all(int(c["self"].index) == T for c in caches)


def test_kv_cache_update_mask_and_reorder():
    cache = KVCache.empty(B, 6, N, D // N, jnp.float32)
    k = jnp.ones((B, 2, N, D // N))
    cache, live = cache.update(k, 2 * k)
    chex.assert_shape([cache.key, cache.value], (B, N, 6, D // N))  # Heads first.
    np.testing.assert_array_equal(cache.value[:, :, :2], 2.0)  # Written at positions 0 and 1,
    np.testing.assert_array_equal(cache.value[:, :, 2:], 0.0)  # nothing after them.
    chex.assert_shape(live, (1, 1, 2, 6))
    assert int(cache.index) == 2
    np.testing.assert_array_equal(live[0, 0], [[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0]])
    cache = cache.replace(key=cache.key.at[1].set(7.0))
    memory = MemoryKV(jnp.zeros((B, N, S, D // N)), jnp.zeros((B, N, S, D // N)))
    tree = {"self": cache, "cross": memory, "src_mask": jnp.ones((B, S), bool)}
    moved = reorder_cache(tree, jnp.array([1, 1, 0]))
    assert float(moved["self"].key[0, 0, 0, 0]) == 7.0 and float(moved["self"].key[2, 0, 0, 0]) == 1
    assert moved["cross"] is memory and moved["src_mask"] is tree["src_mask"]


def test_bad_norm_is_refused():
    with pytest.raises(ValueError, match="norm must be one of"):
        Block(_spec(norm="middle"), rngs=nnx.Rngs(0))


def test_beams_share_one_memory_row_per_input():
    """After `repeat_cache` the self-attention cache has K rows per input and the memory one;
    K beam rows attending to that one row equal attention to a memory copied K times."""
    k = 3
    block = Block(_spec(cross_attention=True), rngs=nnx.Rngs(0))
    memory = _x(2, S)
    cross_mask = jnp.ones((B, 1, 1, S), bool).at[0, ..., -2:].set(False)
    cache = repeat_cache(block.init_cache(B, 4, memory), k)
    assert cache["self"].key.shape[0] == B * k and cache["cross"].key.shape[0] == B
    copied = block.init_cache(B * k, 4, jnp.repeat(memory, k, axis=0))
    x = _x(3, 1)
    x = jnp.repeat(x, k, axis=0) + jnp.arange(B * k)[:, None, None] * 0.1  # beams differ
    shared, _ = block.decode(x, cache, cross_mask=cross_mask)
    expected, _ = block.decode(x, copied, cross_mask=jnp.repeat(cross_mask, k, axis=0))
    np.testing.assert_allclose(shared, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("norm", "barriers"), [("pre", 3), ("post", 0)])
def test_pre_ln_stack_stores_its_residual_gradient_once_per_layer(norm, barriers):
    """On one CPU device an unrolled pre-LN stack's backward pass holds one conditional per
    layer (`gradient_barrier`), which stops XLA recomputing the residual gradient's sum in
    every layer; post-LN needs none. The gradient is unchanged (the barrier is the identity)."""
    stack = Stack(_spec(norm=norm), 3, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(stack)

    def loss(params, x):
        return jnp.sum(jnp.sin(nnx.merge(graphdef, params)(x, None)[0]))

    compiled = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(params, _x(0)).compile().as_text()
    assert compiled.count(" conditional(") == barriers
    x = _x(1)
    np.testing.assert_array_equal(
        jax.grad(lambda x: jnp.sum(jnp.sin(blocks.gradient_barrier(x)) * x))(x),
        jax.grad(lambda x: jnp.sum(jnp.sin(x) * x))(x),
    )
