"""Layer-stacked parameters (`scan_layers`): the layout, its conversion, decoding through layer
views, and checkpoints that restore into either layout for training and for inference."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import PartitionSpec as P

from transformer_jax import sharding as shd
from transformer_jax.inference import decoding, generator
from transformer_jax.inference.decoding import beam_search, greedy_decode
from transformer_jax.models.decoder_only.config import DecoderOnlyConfig
from transformer_jax.models.encoder_decoder.config import EncoderDecoderConfig
from transformer_jax.models.registry import abstract_model, build_model
from transformer_jax.nn.stacked import stacked_layout, to_layout
from transformer_jax.runs import reading
from transformer_jax.runs.checkpoints import Checkpoints
from transformer_jax.runs.layout import Workdir
from transformer_jax.training.state import abstract_with_shardings, create_train_state

SRC = jnp.array([[5, 9, 3, 7, 2, 0], [4, 4, 8, 1, 6, 3]])


def _leaves_equal(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def test_stacked_parameters_have_a_layer_axis_and_convert_both_ways():
    cfg = EncoderDecoderConfig.tiny(num_encoder_layers=3)
    unrolled = nnx.state(build_model(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    stacked = nnx.state(build_model(cfg.replace(scan_layers=True), rngs=nnx.Rngs(0)), nnx.Param)
    w1 = stacked["encoder"]["layers"]["ffn"]["w1"]
    assert w1.shape == (3, 32, 64)
    assert w1.get_metadata()["logical_axes"] == ("layers", "embed", "mlp")
    assert stacked_layout(stacked) is True and stacked_layout(unrolled) is False
    _leaves_equal(to_layout(unrolled, True), stacked)  # same seed, same values
    _leaves_equal(to_layout(stacked, False), unrolled)
    _leaves_equal(to_layout(stacked, True), stacked)  # already there: unchanged


def test_abstract_targets_convert_with_their_shardings():
    """A restore target (shapes with shardings) of one layout becomes the other's: the layer
    axis is never split, the other axes keep their mesh axes."""
    mesh = shd.make_mesh({"fsdp": 4, "tensor": 2})
    _, abstract = abstract_model(EncoderDecoderConfig.tiny(scan_layers=True))
    shardings = shd.param_shardings(abstract, mesh)
    target = jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract, shardings
    )
    w1 = target["decoder"]["layers"]["ffn"]["w1"].get_value()
    assert w1.sharding.spec == P(None, "fsdp", "tensor")
    per_layer = to_layout(target, False)
    w1 = per_layer["decoder"]["layers"][1]["ffn"]["w1"].get_value()
    assert w1.shape == (32, 64) and w1.sharding.spec == P("fsdp", "tensor")
    back = to_layout(per_layer, True)["decoder"]["layers"]["ffn"]["w1"].get_value()
    assert back.shape == (2, 32, 64) and back.sharding.spec == P(None, "fsdp", "tensor")


def test_scanned_model_decodes_like_the_unrolled_one():
    """Cached decoding runs the stacked blocks one by one (layer views): same tokens and
    scores as the unrolled model of the same seed, greedy and beam."""
    cfg = EncoderDecoderConfig.tiny(vocab_size=40)
    models = [build_model(cfg.replace(scan_layers=s), rngs=nnx.Rngs(0)) for s in (False, True)]
    greedy = [greedy_decode(m, SRC, max_len=6) for m in models]
    np.testing.assert_array_equal(greedy[0][0], greedy[1][0])
    np.testing.assert_allclose(greedy[0][1], greedy[1][1], rtol=1e-5, atol=1e-5)
    beams = [beam_search(m, SRC, beam_size=2, max_len=6) for m in models]
    np.testing.assert_array_equal(beams[0][0], beams[1][0])


def _lines_inside_loops(hlo: str) -> list[str]:
    """The instructions of a compiled program's while-loop bodies (and what they call)."""
    bodies, called = {}, {}
    name = None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if head:
            name = head.group(1)
            bodies[name], called[name] = [], set()
        elif name:
            bodies[name].append(line)
            called[name] |= set(re.findall(r"(?:calls|body|to_apply)=%([\w.\-]+)", line))
    loops = {b for lines in bodies.values() for line in lines
             for b in re.findall(r"body=%([\w.\-]+)", line)}  # fmt: skip
    seen, todo = set(), list(loops)
    while todo:
        comp = todo.pop()
        if comp not in seen:
            seen.add(comp)
            todo.extend(called.get(comp, ()))
    return [line for comp in seen for line in bodies.get(comp, [])]


def test_decoding_loops_slice_a_scanned_stack_once():
    """Decoding slices each layer's weights out of a scanned stack once, before the loop
    (`nn.unstacked`): XLA on CPU otherwise copied every layer's weights at every step. No
    instruction inside a decoding loop (encoder-decoder greedy and beam, GPT generation) makes
    an array of a feed-forward weight's shape (reading the loop's parameters is fine)."""
    cfg = EncoderDecoderConfig.tiny(vocab_size=40, d_ff=72, scan_layers=True)  # w1 [32, 72]
    model = build_model(cfg, rngs=nnx.Rngs(0))
    weight_shapes = ("f32[32,72]", "f32[72,32]")
    src = SRC.astype(jnp.int32)
    programs = {
        "greedy": decoding._sample_compiled.lower(
            model,
            src,
            jax.random.key(0),
            jnp.float32(1e-30),
            jnp.int32(0),
            max_len=40,
            greedy=True,
            use_cache=True,
            bos_id=2,
            eos_id=1,
        ),
        "beam": decoding._beam_compiled.lower(
            model,
            src,
            jnp.float32(0.6),
            beam_size=2,
            max_len=40,
            use_cache=True,
            early_stopping=True,
            bos_id=2,
            eos_id=1,
        ),
    }
    gpt = build_model(
        DecoderOnlyConfig.tiny(vocab_size=40, d_ff=72, scan_layers=True), rngs=nnx.Rngs(0)
    )
    graphdef, params = nnx.split(gpt)
    prompt = jnp.array([[2, 5, 6], [2, 7, 8]], jnp.int32)
    programs["gpt"] = generator._generate.lower(
        graphdef, params, prompt, jnp.zeros(2, jnp.int32), jnp.zeros(2, bool),
        jax.random.key(0), jnp.float32(1.0), jnp.int32(0), jnp.float32(1.0),
        cache_len=40, max_new=30, greedy=True,
    )  # fmt: skip
    for name, lowered in programs.items():
        inside = _lines_inside_loops(lowered.compile().as_text())
        assert any(" dot(" in line or "fusion(" in line for line in inside), name  # found loops
        copies = [
            line
            for line in inside
            if re.search(
                rf"= ({'|'.join(map(re.escape, weight_shapes))})\S* (?!parameter|get-tuple)", line
            )
        ]
        assert not copies, (name, copies[:2])


@pytest.mark.parametrize("saved_scanned", [False, True])
def test_a_checkpoint_restores_into_the_other_layout(tmp_path, saved_scanned):
    """A run may switch `scan_layers` when it resumes, and a workdir serves either way: the
    train state (parameters and Adam's moments) and the inference parameters restore from a
    checkpoint saved in the other layout, in the target's shardings."""
    mesh = shd.make_mesh({"fsdp": 4, "tensor": 2})
    tx = optax.adam(1e-3)
    cfg = EncoderDecoderConfig.tiny(vocab_size=40)
    _, saved, _ = create_train_state(cfg.replace(scan_layers=saved_scanned), tx, mesh, seed=0)
    saved = saved.replace(opt_state=jax.tree.map(lambda x: x + 1, saved.opt_state))
    workdir = Workdir.at(tmp_path)
    ckpt = Checkpoints(workdir)
    ckpt.save(3, saved, {"position": 7}, {"seed": 0}, force=True)
    ckpt.wait()

    other = cfg.replace(scan_layers=not saved_scanned)
    _, fresh, shardings = create_train_state(other, tx, mesh, seed=1)
    state, data, _ = ckpt.restore(abstract_with_shardings(jax.eval_shape(lambda: fresh), shardings))
    ckpt.close()
    assert data == {"position": 7}
    _leaves_equal(state, to_layout(saved, not saved_scanned))
    for got, want in zip(jax.tree.leaves(state), jax.tree.leaves(shardings), strict=True):
        assert got.sharding == want

    _, abstract = abstract_model(other)
    p_shard = shd.param_shardings(abstract, mesh)
    params = reading.restore_params(workdir, 3, abstract, p_shard)
    _leaves_equal(params, state.params)
