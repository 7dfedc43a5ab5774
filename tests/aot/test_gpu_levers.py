"""What each GPU lever promises, read in train steps compiled for an H100 without a GPU: fused
attention forward and backward where no dropout falls on the attention weights, no float32
`[B, N, T, S]` scores, matrix products over the vocabulary padded to a multiple of 128 and on
16-bit operands, and the dropout bits' generator the config names.

Needs the `gpu-aot` extra (XLA's GPU compiler and cuDNN); skipped without it. The paper-sized
models (GPT-2 small, BERT-base, the base Transformer, ViT-B/16) are compiled at a few rows per
step, each in a minute or more on two cores: `-m slow` deselects nothing, they are marked slow.
"""

import copy
import importlib
import re

import pytest

from benchmarks.aot_targets import paper_configs
from transformer_jax.aot import targets
from transformer_jax.aot.programs import plan
from transformer_jax.aot.report import GPU_OPTIONS
from transformer_jax.nn.layers import padded_vocab
from transformer_jax.training.validation import fit_batch_multiple

pytestmark = pytest.mark.skipif(
    not (targets.installed("jax_plugins.xla_cuda12") and targets.installed("nvidia.cudnn")),
    reason='needs the gpu-aot extra: pip install -e ".[gpu-aot]"',
)

FMHA = re.compile(r'custom_call_target="__cudnn\$(fmha\w*)"')
# An instruction's name and its (first) result shape; a cuBLAS call's operands, by name.
DEFINITION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*\(?(\w+\[[\d,]*\])", re.M)
GEMM = re.compile(
    r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\(?(\w+\[[\d,]*\]).*?custom-call\(([^)]*)\), "
    r'custom_call_target="__cublas\$[^"]*"',
    re.M,
)
SHAPE = re.compile(r"\b(f32|bf16|f16)\[([\d,]+)\]")


def bf16(name: str):
    """A tiny config of `name` in bfloat16 (the GPU default), its dropout on the residuals."""
    config = importlib.import_module(f"configs.{name}").get_config()
    config.model.dtype = "bfloat16"
    config.model.dropout_rate = 0.1
    config.mesh = {"data": 1, "fsdp": 1, "tensor": 1}
    return config


def paper(name: str, rows: int = 8):
    """A paper-sized config (benchmarks/aot_targets.py) at `rows` rows per step."""
    config = copy.deepcopy(paper_configs()[name])
    config.mesh = {"data": 1, "fsdp": 1, "tensor": 1}
    if config.task == "image_classify":
        config.data.batch_size = rows
    else:
        config.data.tokens_per_batch = rows * config.data.max_len
    return config


def train_step_hlo(config) -> str:
    """The optimised HLO text of `config`'s train step compiled for one H100."""
    target = targets.parse_target("h100x1")
    mesh = targets.target_mesh(target, dict(config.mesh))
    the_plan = plan(fit_batch_multiple(config, mesh.size), mesh, inference=False)
    (train,) = [p for p in the_plan.programs if p.name == "train step"]
    return train.lower().compile(GPU_OPTIONS).as_text()


def float32_scores(text: str, heads: int, length: int) -> list[str]:
    """float32 arrays shaped `[..., heads, length, length]` (attention scores or weights)."""
    found = []
    for dtype, dims in SHAPE.findall(text):
        shape = tuple(int(d) for d in dims.split(","))
        if dtype == "f32" and len(shape) >= 3 and shape[-3:] == (heads, length, length):
            found.append(f"{dtype}[{dims}]")
    return sorted(set(found))


def vocabulary_gemms(text: str, vocab: int) -> list[tuple[str, ...]]:
    """The operand types (A, B, then C when the product adds to an array) of every cuBLAS
    product with `vocab` along an axis of its result or operands (the optimised HLO names the
    operands; their shapes are where they are defined)."""
    shapes = dict(DEFINITION.findall(text))
    found = []
    for result, operands in GEMM.findall(text):
        names = [o.strip().lstrip("%") for o in operands.split(",")]
        arrays = [shapes.get(n, "") for n in names]
        found_dims = [ds for a in [result, *arrays] for _, ds in SHAPE.findall(a)]
        if vocab in (int(d) for ds in found_dims for d in ds.split(",")):
            found.append(tuple(SHAPE.findall(a)[0][0] for a in arrays if SHAPE.findall(a)))
    return found


def check_levers(config, text: str, *, heads: int, length: int, vocab: int | None) -> None:
    calls = sorted(set(FMHA.findall(text)))
    assert any("Backward" not in c for c in calls), calls  # Fused forward ...
    assert any("Backward" in c for c in calls), calls  # ... and backward.
    assert float32_scores(text, heads, length) == []
    if vocab is not None:
        padded = padded_vocab(vocab, "gpu")
        gemms = vocabulary_gemms(text, padded)
        assert gemms, "no cuBLAS product over the vocabulary found: the pattern needs a look"
        assert all("f32" not in operands[:2] for operands in gemms), gemms  # (C may be f32.)
        if padded != vocab:  # Every product over the vocabulary takes the padded one.
            assert vocabulary_gemms(text, vocab) == []


TINY = {  # config: (heads, sequence length in the step, vocabulary or None)
    "gpt_tiny": (4, 64, 260),
    "bert_tiny": (4, 64, 512),
    "tiny": (4, 32, 200),
}


@pytest.mark.parametrize("name", list(TINY))
def test_tiny_steps_pull_every_lever(name):
    heads, length, vocab = TINY[name]
    config = bf16(name)
    check_levers(config, train_step_hlo(config), heads=heads, length=length, vocab=vocab)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, heads, length, vocab",
    [("gpt2_small", 12, 1024, 50257), ("bert_base", 12, 512, 30522), ("vit_b16", 12, 197, None)],
)
def test_paper_sized_steps_pull_every_lever(name, heads, length, vocab):
    config = paper(name)
    check_levers(config, train_step_hlo(config), heads=heads, length=length, vocab=vocab)


@pytest.mark.slow
def test_the_base_transformer_step_has_no_float32_vocabulary_product():
    config = paper("base")
    text = train_step_hlo(config)
    assert FMHA.search(text)
    gemms = vocabulary_gemms(text, padded_vocab(config.data.vocab_size, "gpu"))
    assert gemms and all("f32" not in operands[:2] for operands in gemms), gemms


@pytest.mark.parametrize("impl, rbg_ops", [("threefry", False), ("rbg", True)])
def test_the_dropout_bits_come_from_the_generator_named(impl, rbg_ops):
    config = bf16("gpt_tiny")
    config.rng_impl = impl
    # XLA's GPU compiler expands RngBitGenerator into Philox's arithmetic; the instructions
    # keep the name of the operation they came from.
    assert ("rng_bit_generator" in train_step_hlo(config)) is rbg_ops


def test_attention_dropout_with_cudnn_named_is_refused_before_compiling():
    config = bf16("gpt_tiny")
    config.model.attention_kernel = "cudnn"
    config.model.attention_dropout_rate = 0.1
    with pytest.raises(ValueError, match=r"attention_kernel='cudnn' with attention_dropout_rate"):
        train_step_hlo(config)
