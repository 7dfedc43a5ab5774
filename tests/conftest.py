"""Test set-up: fake 8 CPU devices so that every sharding path runs on a laptop."""

import gc
import os
import pathlib
import tempfile

import pytest

from tests.train_runs import device_flags, run_train_py, train_once, trained_once

os.environ.setdefault("XLA_FLAGS", device_flags(8))
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Compile each program once per machine: the tests (and the train.py subprocesses and notebook
# kernels they start, which inherit these) compile the same tiny models again and again. The
# cache is keyed by the program and the jax/XLA versions.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", os.path.join(tempfile.gettempdir(), "transformer_jax_jit_cache")
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

# Check every jaxtyping shape annotation at run time, throughout the test suite: a function that
# returns or receives an array of the wrong shape fails the test that called it. Each function's
# checks are built at its first call (tests/lazy_typecheck.py).
from tests import lazy_typecheck  # noqa: E402

lazy_typecheck.install("transformer_jax")

_ROOT = pathlib.Path(__file__).resolve().parents[1]
TINY_STEPS = (10, 20, 30)  # The checkpoints that `tiny_workdir` keeps.


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `slow` run first, the longest first (`slow(seconds=N)`, default 30).

    pytest-xdist's worksteal hands each worker a contiguous share of this order and lets an idle
    worker take the tail of another's queue: with the long tests at the head, the last tests of
    the run are short ones and no core waits on a long test that started late.
    """

    def weight(item: pytest.Item) -> float:
        mark = item.get_closest_marker("slow")
        return -float(mark.kwargs.get("seconds", 30)) if mark else 0.0

    items.sort(key=weight)  # Stable: collection order within equal weights.


def pytest_collection_finish(session: pytest.Session) -> None:
    """Moves what collection imported (the package, jax, flax, the test modules: millions of
    objects that live as long as the worker) out of the garbage collector's reach: each of its
    full collections, which tracing's many small objects set off, then walks only the tests'."""
    gc.freeze()


@pytest.fixture(scope="session")
def tiny_workdir(tmp_path_factory) -> pathlib.Path:
    """A tiny train.py run (packed rows: one compiled step) with checkpoints at 10, 20 and 30.

    Trained once per session in a subprocess on one device (about 20 s); the tests restore it
    onto their 8 fake devices, which also checks loading across device counts.
    """
    return trained_once(tmp_path_factory, "tiny_run", _train_tiny)


def _train_tiny(workdir: pathlib.Path) -> None:
    cmd = [
        "--config=configs/tiny.py",
        f"--workdir={workdir}",
        "--config.num_train_steps=30",
        "--config.checkpoint_every=10",
        "--config.keep_checkpoints=3",
        "--config.eval_every=30",
        "--config.eval_bleu_sentences=0",
        "--config.test_sentences=0",
        "--config.data.pack=True",
    ]
    proc = run_train_py(cmd)
    if proc.returncode:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


@pytest.fixture(scope="session")
def tiny_lm_workdir(tmp_path_factory) -> pathlib.Path:
    """A tiny language-model run of configs/gpt_tiny.py (byte tokens, the stdlib corpus, 20
    steps, checkpoints at 10 and 20), trained once per session in a subprocess (about 15 s)."""
    return trained_once(
        tmp_path_factory, "tiny_lm_run", lambda w: train_once(w, "configs/gpt_tiny.py")
    )


@pytest.fixture(scope="session")
def tiny_bert_workdir(tmp_path_factory) -> pathlib.Path:
    """A tiny BERT pretraining run of configs/bert_tiny.py (the stdlib corpus, a 512-piece
    tokenizer, 20 steps), trained once per session in a subprocess (about 15 s)."""
    return trained_once(
        tmp_path_factory, "tiny_bert_run", lambda w: train_once(w, "configs/bert_tiny.py")
    )


@pytest.fixture(scope="session")
def tiny_classifier(tmp_path_factory, tiny_bert_workdir) -> pathlib.Path:
    """configs/bert_classify_tiny.py (a pair classifier) fine-tuned from the tiny BERT run, with
    its baselines, trained once per session in a subprocess (about 15 s)."""
    return trained_once(
        tmp_path_factory,
        "tiny_cls",
        lambda w: train_once(
            w,
            "configs/bert_classify_tiny.py",
            f"--config.init_from={tiny_bert_workdir}",
            "--config.baselines=True",
        ),
    )
