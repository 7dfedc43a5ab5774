"""Every attention case of the models compiled for an H100 without a GPU: cuDNN's fused
attention where it can express the mask, XLA's where it cannot (with the reason logged).

Needs the `gpu-aot` extra (XLA's GPU compiler and cuDNN); skipped without it.
"""

import importlib
import importlib.util
import re

import jax
import jax.numpy as jnp
import pytest
from absl import logging
from flax import nnx

from transformer_jax import sharding as shd
from transformer_jax.aot import compile_config, targets
from transformer_jax.nn.attention import causal_mask, segment_mask
from transformer_jax.nn.multi_head import MultiHeadAttention

pytestmark = pytest.mark.skipif(
    not (targets.installed("jax_plugins.xla_cuda12") and targets.installed("nvidia.cudnn")),
    reason='needs the gpu-aot extra: pip install -e ".[gpu-aot]"',
)

B, T, S, D, N = 4, 24, 40, 64, 4  # Head dim 16; T != S for cross-attention.
FMHA = re.compile(r'custom_call_target="__cudnn\$(fmha\w*)"')


@pytest.fixture(scope="module")
def mesh():
    devices = targets.target_devices(targets.parse_target("h100x1"))
    return shd.make_mesh({"data": 1}, devices=devices)


def spec(shape, dtype, mesh):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=shd.replicated(mesh))


def compiled_calls(fn, mesh, *args) -> list[str]:
    """The cuDNN attention custom calls of `fn` compiled for the H100 (sorted, distinct)."""
    with jax.set_mesh(mesh):
        text = jax.jit(fn).lower(*args).compile().as_text()
    return sorted(set(FMHA.findall(text)))


def attention(dropout_rate=0.0, d_model=D, num_heads=N):
    module = MultiHeadAttention(
        d_model, num_heads, dropout_rate=dropout_rate, dtype=jnp.bfloat16, rngs=nnx.Rngs(0)
    )
    graphdef, params = nnx.split(module)
    return graphdef, jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)


def train_and_forward(graphdef, params, mesh, x_q, x_kv, mask, is_causal, rng=None):
    """Forward + backward of the summed output (what a train step compiles)."""

    def loss(params, x_q, x_kv, mask):
        model = nnx.merge(graphdef, params)
        out, _ = model(
            x_q, x_kv, mask, is_causal=is_causal, rng=rng,
            deterministic=rng is None, return_weights=False,
        )  # fmt: skip
        return out.astype(jnp.float32).sum()

    params = jax.tree.map(lambda x: spec(x.shape, x.dtype, mesh), params)
    return compiled_calls(jax.grad(loss), mesh, params, x_q, x_kv, mask)


CASES = {
    # name: (query length, key length, mask shape maker, is_causal)
    "padding (encoder, BERT)": (T, T, lambda: (B, 1, 1, T), False),
    "causal (GPT)": (T, T, None, True),
    "padding + causal (decoder, left-padded prompts)": (T, T, lambda: (B, 1, 1, T), True),
    "packed rows (segment ids) + causal": (T, T, lambda: (B, 1, T, T), True),
    "cross-attention, T != S, padding": (T, S, lambda: (B, 1, 1, S), False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_mask_compiles_to_cudnn_forward_and_backward(mesh, case):
    t, s, mask_shape, is_causal = CASES[case]
    graphdef, params = attention()
    mask = None if mask_shape is None else spec(mask_shape(), jnp.bool_, mesh)
    calls = train_and_forward(
        graphdef, params, mesh,
        spec((B, t, D), jnp.float32, mesh), spec((B, s, D), jnp.float32, mesh), mask, is_causal,
    )  # fmt: skip
    assert any(c.startswith("fmha") and "Backward" not in c for c in calls), calls
    assert any("Backward" in c for c in calls), calls


def test_dropout_on_attention_weights_runs_the_reference_and_compiles(mesh):
    graphdef, params = attention(dropout_rate=0.1)
    x = spec((B, T, D), jnp.float32, mesh)
    calls = train_and_forward(
        graphdef, params, mesh, x, x, spec((B, 1, 1, T), jnp.bool_, mesh), True,
        rng=jax.random.key(0),
    )  # fmt: skip
    assert calls == []  # jax's cuDNN attention takes no dropout: the written-out equation


def test_decoding_with_a_cache_compiles(mesh):
    graphdef, params = attention()
    params = jax.tree.map(lambda x: spec(x.shape, x.dtype, mesh), params)

    def step(params, x, padding):
        model = nnx.merge(graphdef, params)
        cache = model.init_cache(B, T)
        out, cache = model.cached(x, cache, padding)  # the prompt, then one token
        out, cache = model.cached(x[:, :1], cache, padding)
        return out, cache.index

    compiled_calls(step, mesh, params, spec((B, 8, D), jnp.float32, mesh),
                   spec((B, 1, 1, T), jnp.bool_, mesh))  # fmt: skip


def test_a_head_dim_cudnn_cannot_take_falls_back_to_xla_with_the_reason(mesh, monkeypatch):
    logged = []
    monkeypatch.setattr(logging, "warning", lambda msg, *args: logged.append(msg % args))
    graphdef, params = attention(d_model=36, num_heads=3)  # head dim 12: not a multiple of 8
    x = spec((B, T, 36), jnp.float32, mesh)
    calls = train_and_forward(
        graphdef, params, mesh, x, x, spec((B, 1, 1, T), jnp.bool_, mesh), False
    )
    assert calls == []
    assert any("head dim must be" in line and "XLA" in line for line in logged), logged


def test_the_mask_case_a_full_mask_broadcast_is_what_fixed(mesh):
    """jax's cuDNN attention refuses the models' [B, 1, 1, S] padding mask as it is: the
    broadcast over queries in `kernel_attention` is what lets it compile."""
    q = spec((B, T, N, D // N), jnp.bfloat16, mesh)
    mask = spec((B, 1, 1, T), jnp.bool_, mesh)
    with pytest.raises(ValueError, match="Bias must have same seq length"):
        compiled_calls(
            lambda q, m: jax.nn.dot_product_attention(q, q, q, mask=m, implementation="cudnn"),
            mesh, q, mask,
        )  # fmt: skip
    assert causal_mask(3).shape == (1, 1, 3, 3)  # the masks the models build, for reference
    assert segment_mask(jnp.ones((2, 3), int), jnp.ones((2, 5), int)).shape == (2, 1, 3, 5)


@pytest.mark.parametrize(
    "name", ["tiny", "gpt_tiny", "bert_tiny", "bert_classify_tiny", "vit_tiny"]
)
def test_every_model_trains_through_cudnn_in_bfloat16(name):
    """The default bfloat16 GPU path of each model (encoder-decoder with packed rows, GPT,
    BERT pretraining and classification, a ViT with an odd number of tokens) compiles, its
    train step on cuDNN's fused attention forward and backward."""
    config = importlib.import_module(f"configs.{name}").get_config()
    config.model.dtype = "bfloat16"
    config.mesh = {"data": 2, "fsdp": 2, "tensor": 2}
    result = compile_config(config, "h100x8", inference=False)
    assert result.problems == []
    assert result.plan.kernel == "cudnn"
    train, evaluation = result.results
    assert train.attention.startswith("cudnn") and "Backward" in train.attention
    assert evaluation.attention.startswith("cudnn")
    assert train.cost_estimated and train.flops > 0  # the GPU compiler gives no cost analysis
