"""libtpu_env: a machine without TPU chips is told it is no TPU host; a TPU VM is left alone."""

import os

import pytest

from transformer_jax import libtpu_env


@pytest.fixture
def clean_env(monkeypatch):
    for name in libtpu_env.NO_TPU_HOST:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_without_chips_the_host_is_alone(clean_env):
    clean_env.setattr(libtpu_env, "tpu_chips_here", lambda: False)
    libtpu_env.quiet_libtpu()
    assert {k: os.environ.get(k) for k in libtpu_env.NO_TPU_HOST} == libtpu_env.NO_TPU_HOST


def test_a_tpu_vm_and_values_already_set_are_left_alone(clean_env):
    clean_env.setattr(libtpu_env, "tpu_chips_here", lambda: True)
    libtpu_env.quiet_libtpu()
    assert not any(k in os.environ for k in libtpu_env.NO_TPU_HOST)
    clean_env.setattr(libtpu_env, "tpu_chips_here", lambda: False)
    clean_env.setenv("TPU_HOST_BOUNDS", "2,2,1")
    libtpu_env.quiet_libtpu()
    assert os.environ["TPU_HOST_BOUNDS"] == "2,2,1"
    assert os.environ["TPU_WORKER_HOSTNAMES"] == "localhost"
