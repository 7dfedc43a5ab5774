"""Training configs with fields of the wrong type or out of range: every config file, every field
the run reads before training (the loop's, the mesh, the model section, the data's), refused by
`validate_train_config` with an error naming the field, before any data is read.

The property draws a config file, a field it has and a value that no run can use (a wrong type,
or a number outside the field's range); it bypasses ml_collections' own type checks (as a
Python config file can) by rebuilding the ConfigDict from a dict.
"""

from __future__ import annotations

import copy
import importlib
import math
import pathlib
import tempfile

import ml_collections
import pytest
from absl import flags
from hypothesis import given
from hypothesis import strategies as st

from tests.robustness.hostile import fuzz
from tests.test_config_overrides import parse
from tests.train_runs import run_train_py
from transformer_jax.data.images import idx
from transformer_jax.tasks.shared_fields import SEED_LIMIT
from transformer_jax.training import validate_train_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:the load_module:DeprecationWarning")
# Every config file that validates as shipped (configs/text.py names files of the user's).
CONFIGS = {
    p.stem: importlib.import_module(f"configs.{p.stem}").get_config().to_dict()
    for p in sorted((ROOT / "configs").glob("*.py"))
    if "def get_config" in p.read_text() and p.stem != "text"
}
# Configs whose data a system package provides (not the README's install) -> (the folder they
# read when no data field is set, the field that points elsewhere, the error's advice).
SYSTEM_DATA = {
    "vit_fashion_mnist": (
        "DEBIAN_FASHION_MNIST",
        "idx_dir",
        "apt-get install dataset-fashion-mnist",
    )
}
# Where the fuzzed configs read such data: an empty folder, so that the property runs alike with
# the package installed or not (validation checks the folder, the files are read by training).
STAND_IN = tempfile.TemporaryDirectory(prefix="stand_in_data_")

ints = st.integers(-(2**40), 2**40)
floats = st.floats(allow_nan=True, allow_infinity=True)
WRONG_TYPES = {  # The type of a field's value -> values of other types (never valid).
    int: st.one_of(
        floats.filter(lambda x: not float(x).is_integer()), st.text(max_size=3), st.booleans(),
        st.none(), st.lists(ints, max_size=2),
    ),
    float: st.one_of(st.text(max_size=3), st.booleans(), st.none(),
                     st.sampled_from([math.nan, math.inf, -math.inf])),
    bool: st.one_of(st.integers(0, 1), st.text(max_size=3), st.none()),
    str: st.one_of(ints, st.none(), st.text(max_size=4).map("x-".__add__)),  # x-: never a choice
}  # fmt: skip


def below(limit, *, floating=False, inclusive=False):
    """Numbers < limit (<= with inclusive)."""
    if floating:
        return st.floats(max_value=limit, exclude_max=not inclusive, allow_nan=False)
    return st.integers(max_value=limit if inclusive else limit - 1)


def outside_unit(*, zero_ok=True):
    """Floats outside [0, 1) (or (0, 1) without zero_ok)."""
    low = st.floats(max_value=0.0, exclude_max=zero_ok, allow_nan=False)
    return st.one_of(low, st.floats(min_value=1.0, allow_nan=False))


OUT_OF_RANGE = {  # field -> numbers of the right type that no run can use
    "seed": st.one_of(below(0), st.integers(min_value=SEED_LIMIT)),
    **{f: below(0, inclusive=True) for f in ("num_train_steps", "warmup_steps", "log_every",
       "eval_every", "checkpoint_every", "keep_checkpoints", "grad_accum_steps")},  # fmt: skip
    "lr_factor": below(0.0, floating=True, inclusive=True),
    "adam_b1": outside_unit(),
    "adam_b2": outside_unit(),
    "adam_eps": below(0.0, floating=True, inclusive=True),
    "grad_clip_norm": below(0.0, floating=True),
    "label_smoothing": outside_unit(),
    "mesh.data": st.one_of(st.just(0), below(-1)),
    "mesh.fsdp": st.one_of(st.integers(0, 0), below(-1), st.just(3)),  # 3 does not divide 8
    "mesh.tensor": st.one_of(st.just(0), below(-1), st.integers(9, 2**20)),
    "model.dropout_rate": outside_unit(),
    "model.attention_dropout_rate": outside_unit(),
    "model.layer_norm_eps": outside_unit(zero_ok=False),
    **{f"model.{f}": below(0, inclusive=True) for f in ("d_model", "num_heads", "d_ff",
       "num_layers", "max_len", "type_vocab_size", "patch_size", "vocab_size", "num_labels")},
    "model.num_encoder_layers": below(0),
    "model.num_decoder_layers": below(0),
    "model.pad_id": below(0),
    "data.vocab_size": below(16),
    "data.max_len": below(2),
    "data.batch_multiple": below(0, inclusive=True),
    "data.num_workers": below(0),
    "data.shuffle_seed": below(0),
    "data.spm_character_coverage": st.one_of(below(0.0, floating=True, inclusive=True),
                                             st.floats(min_value=1.0, exclude_min=True)),
}  # fmt: skip
# Fields whose type the property may break: everything read before training, whatever the data
# source. (Fields of other sources, like tfds_name for the embedded corpus, are never read.)
TYPED = [f for f in OUT_OF_RANGE if not f.startswith("data.")] + [
    "data.source", "data.vocab_size", "data.max_len", "data.batch_multiple", "data.num_workers",
    "data.shuffle_seed", "model.norm", "model.activation", "model.dtype", "model.positional",
    "model.pool", "model.position_embedding", "model.use_bias", "model.share_embeddings",
    "model.tie_output", "task", "rng_impl",
]  # fmt: skip


def get(tree: dict, path: str):
    for key in path.split("."):
        tree = tree[key]
    return tree


def has(tree: dict, path: str) -> bool:
    *parents, name = path.split(".")
    for key in parents:
        tree = tree.get(key, {})
    return name in tree


def with_value(name: str, path: str, value) -> ml_collections.ConfigDict:
    tree = copy.deepcopy(CONFIGS[name])
    if name in SYSTEM_DATA:
        tree["data"][SYSTEM_DATA[name][1]] = STAND_IN.name
    *parents, last = path.split(".")
    node = tree
    for key in parents:
        node = node[key]
    node[last] = value
    return ml_collections.ConfigDict(tree)


@st.composite
def hostile_field(draw):
    """(config file, field path, value no run can use)."""
    name = draw(st.sampled_from(sorted(CONFIGS)))
    tree = CONFIGS[name]
    path = draw(st.sampled_from([f for f in TYPED if has(tree, f)]))
    current = get(tree, path)
    kinds = []
    if current is not None or path == "model.vocab_size":
        kinds.append(WRONG_TYPES[type(current) if current is not None else int])
    if path in OUT_OF_RANGE:
        kinds.append(OUT_OF_RANGE[path])
    value = draw(st.one_of(*kinds).filter(lambda v: v is not None or current is not None))
    return name, path, value  # (None is fine for a field the data decides.)


@pytest.mark.parametrize("name", sorted(set(CONFIGS) - set(SYSTEM_DATA)))
def test_every_config_file_validates_as_shipped(name):
    validate_train_config(ml_collections.ConfigDict(CONFIGS[name]))


@pytest.mark.parametrize("installed", [True, False], ids=["package installed", "package absent"])
@pytest.mark.parametrize("name", sorted(SYSTEM_DATA))
def test_a_config_on_system_data_validates_or_says_how_to_get_it(name, installed, monkeypatch):
    """Whether this machine has the package or not, both cases run: the default folder is
    pointed at an empty folder (present) or at none (absent)."""
    default, field, advice = SYSTEM_DATA[name]
    monkeypatch.setattr(idx, default, STAND_IN.name if installed else "/nonexistent/system-data")
    config = ml_collections.ConfigDict(CONFIGS[name])
    if installed:
        validate_train_config(config)
        return
    with pytest.raises(ValueError) as error:
        validate_train_config(config)
    assert field in str(error.value) and advice in str(error.value)


@fuzz("config_fields")
@given(hostile_field())
def test_a_bad_field_is_refused_naming_it(case):
    name, path, value = case
    config = with_value(name, path, value)
    with pytest.raises(ValueError) as error:
        validate_train_config(config)
    named = "mesh" if path.startswith("mesh.") else path.rsplit(".", 1)[-1]
    assert named in str(error.value), (name, path, value, str(error.value))


@pytest.mark.parametrize("value", [None, "", "8", 2.5])
def test_a_bad_batch_multiple_is_named_under_gradient_accumulation(value):
    """gpt2_small accumulates gradients: the micro-batch check must not read a bad multiple."""
    assert CONFIGS["gpt2_small"]["grad_accum_steps"] > 1
    with pytest.raises(ValueError, match="batch_multiple"):
        validate_train_config(with_value("gpt2_small", "data.batch_multiple", value))


@pytest.mark.parametrize("name", ["tiny", "gpt_tiny", "bert_tiny", "vit_tiny"])
def test_d_model_not_divisible_by_num_heads_is_refused(name):
    config = with_value(name, "model.num_heads", 3 if CONFIGS[name]["model"]["d_model"] % 3 else 5)
    with pytest.raises(ValueError, match=r"d_model=\d+ is not divisible by num_heads"):
        validate_train_config(config)


@pytest.mark.parametrize(
    "config_file, override, message",
    [
        ("tiny", "model.dropout_rate=-0.1", "dropout_rate must be in [0, 1)"),
        ("tiny", "label_smoothing=1.0", "config.label_smoothing must be a number in [0, 1)"),
        ("tiny", "lr_factor=0", "config.lr_factor must be a finite number > 0"),
        ("tiny", "warmup_steps=0", "config.warmup_steps must be a positive integer"),
        ("tiny", "adam_b2=1.0", "config.adam_b2 must be a number in [0, 1)"),
        ("tiny", "adam_eps=0", "config.adam_eps must be a finite number > 0"),
        ("tiny", "seed=-1", "config.seed must be an integer in [0, 4294967294]"),
        ("tiny", "mesh.data=0", "config.mesh: mesh axis 'data' has size 0"),
        ("tiny", "mesh.tensor=3", "config.mesh: mesh {'data': -1, 'fsdp': 1, 'tensor': 3}: 8"),
        ("tiny", "model.d_model=30", "d_model=30 is not divisible by num_heads=4"),
        ("tiny", "data.num_buckets=1000", "data config field 'num_buckets'"),
        ("tiny", "data.spm_model_path=nowhere.model", "data config field 'spm_model_path'"),
        ("gpt_tiny", "sample_top_p=0", "config.sample_top_p must be a number in (0, 1]"),
        ("gpt_tiny", "model.layer_norm_eps=0", "layer_norm_eps must be in (0, 1)"),
        ("vit_tiny", "model.patch_size=0", "patch_size must be a positive integer"),
        ("vit_tiny", "test_time_shift=5", "config.test_time_shift must be an integer from 0 to 4"),
        ("bert_tiny", "model.norm=middle", "norm='middle' is not one of"),
        ("tiny", "profile_steps=59,3", "profile_steps=(59, 3) is outside the run's steps 1 to 60"),
        ("tiny", "profile_steps=10", "config.profile_steps=(10,): give the first step"),
        ("tiny", "chip_peak_flops=-1", "config.chip_peak_flops=-1.0 must be a finite number"),
        (
            "tiny",
            "model.attention_kernel=splash",
            "'splash' runs only on tpu, and this program is"
            " for cpu: use one of ['auto', 'reference', 'xla']",
        ),
        ("vit_tiny", "model.attention_kernel=cudnn", "'cudnn' runs only on gpu"),
    ],
)
def test_command_line_overrides_are_refused_naming_the_field(config_file, override, message):
    config = parse(ROOT / "configs" / f"{config_file}.py", f"--config.{override}")
    with pytest.raises(ValueError) as error:
        validate_train_config(config)
    assert message in str(error.value)


@pytest.mark.parametrize("override", ["seed=1.5", "model.d_model=wide", "data.pack=maybe"])
def test_command_line_values_of_the_wrong_type_are_refused_by_the_flag_parser(override):
    with pytest.raises(flags.IllegalFlagValueError, match=override.split("=")[0]):
        parse(ROOT / "configs" / "tiny.py", f"--config.{override}")


def test_train_py_refuses_a_bad_field_before_writing_anything(tmp_path):
    workdir = tmp_path / "run"
    proc = run_train_py(
        ["--config=configs/tiny.py", f"--workdir={workdir}",
         "--config.model.attention_dropout_rate=1.5"], timeout=300,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "attention_dropout_rate must be in [0, 1), got 1.5" in proc.stderr
    assert "Traceback" not in proc.stderr and "\nerror: " in f"\n{proc.stderr}"  # One line.
    assert not workdir.exists()  # Refused before the workdir, the tokenizer or a step.
