"""Where a run's time goes: the logged model FLOPs utilisation (`mfu`) and the profiler trace
of `config.profile_steps`, on CPU (a peak given in `config.chip_peak_flops` stands in for a
TPU's or GPU's)."""

import gzip
import json
import pathlib
import types

import jax
import jax.numpy as jnp
import ml_collections
import pytest
from etils import epath

from configs import tiny
from tests.gcs_emulator import gcs_bucket  # noqa: F401 (fixture)
from tests.train_runs import run_train_py, subprocess_env
from transformer_jax.aot.targets import CHIPS
from transformer_jax.runs.layout import Workdir
from transformer_jax.runs.lock import WorkdirNotWritableError
from transformer_jax.training import profiling
from transformer_jax.training.validation import check_profiling_fields

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN = [  # six steps, a train line every two, no decoding
    "--config=configs/tiny.py", "--config.num_train_steps=6", "--config.log_every=2",
    "--config.eval_every=6", "--config.checkpoint_every=6", "--config.eval_bleu_sentences=0",
    "--config.test_sentences=0", "--config.chip_peak_flops=1e12",
]  # fmt: skip


@pytest.mark.parametrize(
    "kind, chip",
    [
        ("TPU v4", "v4"), ("TPU v5 lite", "v5e"), ("TPU v5e", "v5e"), ("TPU v5", "v5p"),
        ("TPU v5p", "v5p"), ("TPU v6 lite", "v6e"), ("TPU v6e", "v6e"),
        ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
        ("NVIDIA H100 PCIe", None), ("NVIDIA GH200 480GB", None), ("TPU v4 lite", None),
        ("cpu", None),
    ],
)  # fmt: skip
def test_device_kinds_map_to_the_chip_table(kind, chip):
    assert profiling.chip_peak(kind) == (CHIPS[chip].peak_bf16_flops if chip else None)


def test_mfu_and_the_flops_of_a_compiled_step():
    assert profiling.mfu(1e12, 0.01, 2e14) == pytest.approx(0.5)
    a = jax.ShapeDtypeStruct((96, 40), jnp.float32)
    b = jax.ShapeDtypeStruct((40, 24), jnp.float32)
    compiled = jax.jit(lambda a, b: a @ b).lower(a, b).compile()
    assert profiling.step_flops(compiled) == pytest.approx(2 * 96 * 40 * 24, rel=0.01)


def _config(**fields) -> ml_collections.ConfigDict:
    config = tiny.get_config()
    config.update(fields)
    return config


def test_the_peak_comes_from_the_config_or_the_chip_table(monkeypatch):
    messages = []
    assert profiling.Utilisation.for_run(_config(), messages.append).peak is None  # CPU
    assert profiling.Utilisation.for_run(_config(chip_peak_flops=3e12), print).peak == 3e12
    fake = [types.SimpleNamespace(platform="tpu", device_kind="TPU v5 lite")]
    monkeypatch.setattr(jax, "devices", lambda *a: fake)
    assert profiling.Utilisation.for_run(_config(), messages.append).peak == 197e12
    fake[0].device_kind = "TPU v9"
    assert profiling.Utilisation.for_run(_config(), messages.append).peak is None
    assert messages == [
        "mfu is not reported: the chip table (transformer_jax/aot/targets.py) has no peak for "
        "'TPU v9'; set config.chip_peak_flops to one device's peak bf16 FLOP/s to see it."
    ]
    assert profiling.Utilisation(None).window(1.0) == {}


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"profile_steps": (0, 5)}, r"profile_steps=\(0, 5\) is outside the run's steps 1 to 60"),
        ({"profile_steps": (3, 0)}, r"the count >= 1"),
        ({"profile_steps": (58, 4)}, r"the last step traced \(61\) <= config.num_train_steps"),
        ({"profile_steps": (10,)}, r"profile_steps=\(10,\): give the first step"),
        ({"profile_steps": (1.5, 2)}, r"e.g. --config.profile_steps=10,5"),
        ({"chip_peak_flops": -1.0}, r"chip_peak_flops=-1.0 must be a finite number >= 0"),
        ({"chip_peak_flops": float("inf")}, r"chip_peak_flops=inf must be"),
    ],
)
def test_bad_profiling_fields_are_refused_naming_them(fields, message):
    config = ml_collections.ConfigDict({"num_train_steps": 60, **fields})
    with pytest.raises(ValueError, match=message):
        check_profiling_fields(config)


def test_windows_of_a_resumed_run_and_an_unwritable_folder(tmp_path):
    workdir, said = Workdir.at(tmp_path), []
    config = _config(profile_steps=(10, 5))
    assert profiling.Profiler.for_run(_config(), workdir, 0) is None  # off: (0, 0)
    assert profiling.Profiler.for_run(config, workdir, 20, said.append) is None
    assert said == ["config.profile_steps=(10, 5) ended before step 21, where this resumed run "
                    "starts: no trace is taken."]  # fmt: skip
    resumed = profiling.Profiler.for_run(config, workdir, 12, said.append)
    assert (resumed.first, resumed.last) == (13, 14)  # the rest of the window
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "profile").write_text("a file where the folder goes")
    with pytest.raises(WorkdirNotWritableError, match=r"config.profile_steps=\(10, 5\): cannot "
                       r"write the profile folder .*profile_steps=0,0"):  # fmt: skip
        profiling.Profiler.for_run(config, Workdir.at(blocked), 0)


def _trace_events(folder: pathlib.Path) -> list[dict]:
    (trace,) = folder.glob("plugins/profile/*/*.trace.json.gz")  # not perfetto_trace.json.gz
    return json.loads(gzip.open(trace).read())["traceEvents"]


def _traced(folder, steps, fail_at=None):
    """Runs `steps` calls of a small jit under a Profiler of `folder` (first 2, count 2)."""
    f = jax.jit(lambda x: jnp.tanh(x @ x))
    x = jnp.ones((64, 64))
    profiler = profiling.Profiler(2, 2, folder)
    try:
        for step in range(1, steps + 1):
            with profiler.step(step):
                if step == fail_at:
                    raise RuntimeError("a failing step")
                x = f(x)
            profiler.finished(step, x)
    finally:
        profiler.close()


def test_a_failing_step_inside_the_window_still_writes_the_trace(tmp_path):
    with pytest.raises(RuntimeError, match="a failing step"):
        _traced(epath.Path(tmp_path), 4, fail_at=3)
    steps = {e["args"]["step_num"] for e in _trace_events(tmp_path) if e.get("name") == "train"}
    assert steps == {"2", "3"}  # step 3 began, then failed
    jax.profiler.start_trace(str(tmp_path / "again"))  # No trace was left running.
    jax.profiler.stop_trace()


def test_a_trace_reaches_a_gs_workdir(gcs_bucket, tmp_path):  # noqa: F811
    folder = epath.Path(f"{gcs_bucket}/run/profile")
    _traced(folder, 4)
    names = sorted(p.name for p in folder.glob("plugins/profile/*/*"))
    assert [n for n in names if n.endswith(".xplane.pb")] and "perfetto_trace.json.gz" in names
    local = tmp_path / "copy"
    for path in folder.glob("plugins/profile/*/*.trace.json.gz"):
        (local / "plugins/profile/run").mkdir(parents=True, exist_ok=True)
        (local / "plugins/profile/run" / path.name).write_bytes(path.read_bytes())
    names = {e.get("name") for e in _trace_events(local)}
    assert "train" in names


def _train(workdir, *args, check=True):
    # JAX_LOG_COMPILES is read when jax is imported: a fresh interpreter (see PyProcess).
    proc = run_train_py([f"--workdir={workdir}", *RUN, *args], subprocess_env(JAX_LOG_COMPILES="1"))
    if check and proc.returncode:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def test_a_run_logs_mfu_and_traces_its_profile_steps(tmp_path):
    proc = _train(tmp_path, "--config.profile_steps=2,3")
    # The step's FLOPs come from the program the loop runs: compiled once.
    assert proc.stderr.count("Compiling jit(train_step)") == 1, proc.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["split"] == "train"]
    assert [r["step"] for r in train] == [2, 4, 6] and all(r["mfu"] > 0 for r in train)
    # mfu and tokens/s divide by the same seconds: FLOPs per step = mfu x peak x seconds / 2
    # steps, seconds = tokens / tokens_per_sec, the same for every window of equal batches.
    flops = [r["mfu"] * 1e12 * r["tokens"] / r["tokens_per_sec"] / 2 for r in train]
    assert max(flops) == pytest.approx(min(flops), rel=1e-6) and flops[0] > 1e6
    assert proc.stderr.count("| MFU ") == 3
    profile = tmp_path / "profile"
    assert f"profile of steps 2-4 written to {profile}" in proc.stderr
    assert list(profile.glob("plugins/profile/*/*.xplane.pb"))
    events = _trace_events(profile)
    steps = {e["args"]["step_num"] for e in events if e.get("name") == "train"}
    assert steps == {"2", "3", "4"}
    assert any("train_step" in e.get("name", "") for e in events)

    # Resumed at step 6 with a window across it: the steps after 6 are traced.
    again = _train(tmp_path, "--config.num_train_steps=8", "--config.profile_steps=6,2")
    assert f"profile of steps 7-7 written to {profile}" in again.stderr
    assert len(list(profile.glob("plugins/profile/*/*.xplane.pb"))) == 2


def test_an_unwritable_profile_folder_stops_the_run_before_training(tmp_path):
    (tmp_path / "profile").write_text("a file where the folder goes")
    proc = _train(tmp_path, "--config.profile_steps=2,3", check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "error: config.profile_steps=(2, 3): cannot write the profile folder" in proc.stderr
    assert "Traceback" not in proc.stderr and "step 1/" not in proc.stderr
    assert "Compiling jit(train_step)" not in proc.stderr
