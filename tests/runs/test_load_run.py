"""`load_run`: one call from a workdir to its config, model, tokenizer and steps, with the
caller's expectations checked before anything heavy is read."""

import jax
import numpy as np
import pytest
from flax import nnx

from transformer_jax import runs
from transformer_jax.inference import Translator
from transformer_jax.runs import CheckpointError, Expect, load_run
from transformer_jax.serving_mesh import MeshError


def test_load_run_gives_config_model_tokenizer_and_steps(tiny_workdir):
    run = load_run(tiny_workdir, average_last=2)
    assert run.config.task == "translation" and run.steps == [20, 30]
    assert run.tokenizer.encode("one two") and run.mesh is None
    assert str(run.workdir) == str(tiny_workdir)
    # The same parameters a front end serves with.
    served = Translator.from_checkpoint(tiny_workdir, average_last=2)
    ours, theirs = (jax.tree.leaves(nnx.state(m, nnx.Param)) for m in (run.model, served.model))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_expect_refuses_another_task_or_model_by_name(tiny_workdir):
    expect = Expect("my tool", tasks=("classify",), needs="a classifier run.")
    with pytest.raises(CheckpointError) as error:
        load_run(tiny_workdir, expect=expect)
    message = str(error.value)
    assert "'translation' task with a 'encoder_decoder' model" in message
    assert message.endswith("my tool needs a classifier run.")
    load_run(tiny_workdir, expect=Expect("any", models=("encoder_decoder",)))  # Accepted.


def test_a_bad_mesh_fails_before_the_workdir_is_read(tmp_path):
    with pytest.raises(MeshError):
        load_run(tmp_path / "missing", mesh="fsdp=3")  # Not the missing folder's error.
    with pytest.raises(CheckpointError, match="workdir does not exist"):
        load_run(tmp_path / "missing")


def test_the_package_names_its_contract():
    assert runs.load_run is load_run and "Workdir" in dir(runs)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        runs.nothing  # noqa: B018
