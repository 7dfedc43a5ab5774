"""transformer_jax.notebook: the notebooks' fast mode, device simulation and environment report."""

import pathlib
import re

import jax
import pytest

from transformer_jax.notebook import (
    FAST_ENV,
    choose,
    environment_report,
    fast_mode,
    simulate_cpu_devices,
)

PYPROJECT = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"
VERSION = re.search(r'^version = "(.+)"$', PYPROJECT.read_text(), re.M)[1]


@pytest.mark.parametrize("value", ["1", "true", "Yes", " on "])
def test_fast_mode_on(monkeypatch, value):
    monkeypatch.setenv(FAST_ENV, value)
    assert fast_mode() and choose(full=900, fast=40) == 40


@pytest.mark.parametrize("value", [None, "", "0", "false", "off"])
def test_fast_mode_off(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(FAST_ENV, raising=False)
    else:
        monkeypatch.setenv(FAST_ENV, value)
    assert not fast_mode() and choose(full=900, fast=40) == 900


def test_fast_mode_rejects_what_it_cannot_read(monkeypatch):
    monkeypatch.setenv(FAST_ENV, "fastest")
    with pytest.raises(ValueError, match=r"TRANSFORMER_JAX_FAST='fastest'.*set it to 1"):
        fast_mode()


def test_environment_report_names_versions_devices_and_mode(monkeypatch):
    monkeypatch.setenv(FAST_ENV, "1")
    report = environment_report()
    assert f"transformer_jax {VERSION}" in report and f"jax {jax.__version__}" in report
    assert f"{jax.device_count()} device(s)" in report and "mode: fast" in report


def test_simulate_cpu_devices_after_jax_started():
    have = len(jax.devices("cpu"))  # the test session started JAX already
    simulate_cpu_devices(1)  # nothing asked: fine
    simulate_cpu_devices(have)  # what it has: a re-run of a setup cell is harmless
    with pytest.raises(RuntimeError, match=rf"started with {have} CPU device.*restart the runtime"):
        simulate_cpu_devices(have + 3)
    with pytest.raises(ValueError, match="at least one device"):
        simulate_cpu_devices(0)
