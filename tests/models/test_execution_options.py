"""Every model computes the same function however it is executed: attention kernel or reference,
layers scanned or unrolled, activations stored or rematerialised."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.models.decoder_only.config import DecoderOnlyConfig
from transformer_jax.models.encoder_decoder.config import EncoderDecoderConfig
from transformer_jax.models.encoder_only.config import EncoderOnlyConfig
from transformer_jax.models.registry import build_model
from transformer_jax.models.vit.config import VitConfig
from transformer_jax.nn.stacked import to_layout

TOKENS = jnp.array([[5, 9, 3, 7, 2, 0, 0], [4, 4, 8, 1, 6, 3, 2]])  # Row 0 is padded.
IMAGES = jax.random.normal(jax.random.key(3), (2, 8, 8, 1))


def _forward(name):
    """(config class preset, a forward pass of the model on fixed inputs)."""
    return {
        "encoder_decoder": (
            EncoderDecoderConfig.tiny,
            lambda m, **kw: m(TOKENS, TOKENS[:, ::-1], **kw),
        ),
        "decoder_only": (DecoderOnlyConfig.tiny, lambda m, **kw: m(TOKENS, **kw)),
        "encoder_only": (EncoderOnlyConfig.tiny, lambda m, **kw: m(TOKENS, **kw)),
        "vit": (VitConfig.tiny, lambda m, **kw: m(IMAGES, **kw)),
    }[name]


OPTIONS = {
    "xla kernel": dict(attention_kernel="xla"),
    "scanned layers": dict(scan_layers=True),
    "remat full": dict(remat="full"),
    "scanned, remat dots, xla kernel": dict(scan_layers=True, remat="dots", attention_kernel="xla"),
}


# Remat alone, and scan + remat + kernel together, on the encoder-decoder (both stacks,
# cross-attention); all at once on the others. (The kernel alone: tests/nn/test_attention.py and
# test_blocks.py; suite time.)
CASES = [
    ("encoder_decoder", option) for option in ("remat full", "scanned, remat dots, xla kernel")
]
CASES += [
    (name, "scanned, remat dots, xla kernel") for name in ("decoder_only", "encoder_only", "vit")
]


@pytest.mark.parametrize(("name", "option"), CASES)
def test_execution_option_computes_the_reference_function(name, option):
    """Same parameters, dropout on the residuals (same key): outputs and parameter gradients
    equal those of the reference execution (unrolled layers, reference attention, no remat)
    to float32 rounding. Scanned layers hold the same values, stacked on a layer axis."""
    preset, forward = _forward(name)
    models = {
        "reference": build_model(
            preset(attention_kernel="reference", dropout_rate=0.1), rngs=nnx.Rngs(0)
        ),
        option: build_model(preset(**OPTIONS[option], dropout_rate=0.1), rngs=nnx.Rngs(0)),
    }
    params = {k: nnx.state(m, nnx.Param) for k, m in models.items()}
    stacked = OPTIONS[option].get("scan_layers", False)
    converted = to_layout(params["reference"], stacked)
    assert jax.tree.structure(params[option]) == jax.tree.structure(converted)
    for got, want in zip(jax.tree.leaves(params[option]), jax.tree.leaves(converted), strict=True):
        np.testing.assert_array_equal(got, want)

    @functools.partial(jax.jit, static_argnums=1)
    def loss(params, kernel):
        model = nnx.merge(nnx.graphdef(models[kernel]), params)
        out = forward(model, rng=jax.random.key(1), deterministic=False)
        return jnp.sum(jnp.tanh(out)), out

    results = {k: jax.value_and_grad(loss, has_aux=True)(params[k], k) for k in models}
    (_, ref_out), ref_grads = results["reference"]
    (_, out), grads = results[option]
    grads = to_layout(grads, False)
    assert_close_in_float32(out, ref_out)
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads), strict=True):
        assert_close_in_float32(got, want)


def assert_close_in_float32(got, want):
    """Equal up to float32 rounding of sums in another order: each element within 1e-4 of the
    array's largest magnitude (about 800 float32 ulps of it; the executions differ by at most
    10 ulps of it on the CPUs and XLA flags tried, a wrong function by its size). A bound
    relative to each element alone fails on a small element that is the sum of large terms
    that cancel, by how much they cancel, which varies with the CPU's kernels."""
    scale = float(np.max(np.abs(want)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale + 1e-30)


def test_attention_weights_still_returned_with_a_kernel():
    """Asking for the attention maps runs the reference equation, whatever the kernel."""
    model = build_model(DecoderOnlyConfig.tiny(attention_kernel="xla"), rngs=nnx.Rngs(0))
    logits, weights = model(TOKENS, return_attention=True)
    assert len(weights) == 2 and weights[0].shape == (2, 4, 7, 7)
    np.testing.assert_allclose(weights[0].sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(logits, model(TOKENS), rtol=1e-5, atol=1e-5)


STACKS = {"encoder_decoder": 2, "decoder_only": 1, "encoder_only": 1, "vit": 1}


@pytest.mark.parametrize("name", sorted(STACKS))
def test_full_pass_runs_every_attention_on_the_kernel_and_scans_every_stack(name, monkeypatch):
    """Without attention maps asked for, every attention sublayer goes through the kernel, and
    with `scan_layers` every stack is one loop (the encoder-decoder once computed its encoder's
    maps in every full pass, which kept that stack unrolled and on the reference equation)."""
    import transformer_jax.nn.multi_head as multi_head

    preset, forward = _forward(name)
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return kernel(*args, **kwargs)

    kernel = multi_head.kernel_attention
    monkeypatch.setattr(multi_head, "kernel_attention", counted)
    cfg = preset(attention_kernel="xla")
    forward(build_model(cfg, rngs=nnx.Rngs(0)))
    layers = sum(getattr(cfg, f, 0) for f in ("num_encoder_layers", "num_layers"))
    layers += 2 * getattr(cfg, "num_decoder_layers", 0)  # self- and cross-attention
    assert len(calls) == layers

    scanned = build_model(preset(scan_layers=True), rngs=nnx.Rngs(0))
    hlo = jax.jit(lambda m: forward(m)).lower(scanned).as_text()
    assert hlo.count("stablehlo.while") == STACKS[name]
