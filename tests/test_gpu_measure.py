"""benchmarks/gpu_measure.py, the one call that measures a GPU, checked on this CPU: its dry run
(every step but the install, tiny models), its install step, and its message without wheels."""

import hashlib
import json
import pathlib
import subprocess
import sys
import time
import zipfile

import pytest

from benchmarks import gpu_measure, gpu_results
from tests.train_runs import subprocess_env

ROOT = pathlib.Path(__file__).resolve().parents[1]
TRAIN_KEYS = {"params", "batch", "rows_tried", "compile_s", "step_ms", "items_per_s", "unit",
              "attention", "model_flops_per_step", "compiled_flops_per_step", "mfu", "mfu_source",
              "mfu_model", "grad_norm", "nonfinite_steps"}  # fmt: skip


@pytest.mark.slow
def test_dry_run_runs_every_step_and_case_on_the_cpu(tmp_path):
    results = gpu_measure.RESULTS
    before = results.stat().st_mtime_ns if results.exists() else None
    cmd = [sys.executable, "benchmarks/gpu_measure.py", "--dry_run", f"--out={tmp_path}",
           "--chip=h100", "--budget_s=300"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True,
                          timeout=400)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    result = json.loads((tmp_path / "gpu_measure.json").read_text())
    assert result["meta"]["dry_run"] and result["meta"]["device"]["peak_from"] == "--chip=h100"
    steps = {s["name"]: s for s in result["steps"]}
    # No install in a dry run; --only's default order: the translation models before the tests.
    assert list(steps) == ["imports", "throughput base,big", "tests",
                           "throughput decoding,gpt2_small,bert_base,vit_b16"]  # fmt: skip
    assert all(s["ok"] and s["seconds"] >= 0 for s in steps.values()), steps
    assert steps["imports"]["versions"]["flax"]  # What a failure there would be read against.
    tests = steps["tests"]  # On a CPU every GPU test skips, none fails.
    assert tests["skipped"] > 0 and tests["passed"] == tests["failed"] == 0

    rows = result["rows"]
    assert [r["case"] for r in rows] == [
        "base", "big", "decoding", "decoding", "gpt2_small", "bert_base", "vit_b16"]  # fmt: skip
    train = [r for r in rows if r["case"] != "decoding"]
    for row in train:
        assert TRAIN_KEYS <= set(row), row
        assert row["step_ms"] > 0 and row["model_flops_per_step"] > 0
        assert row["mfu"] is not None and row["mfu_source"] and row["nonfinite_steps"] == 0
        assert row["rows_tried"][-1]["fits"]
    assert train[-1]["unit"] == "image" and train[0]["unit"] == "token"
    assert [r["kind"] for r in rows[2:4]] == ["greedy", "beam 4"]
    assert all(r["items_per_s"] > 0 for r in rows[2:4])

    table = (tmp_path / "gpu_measure.md").read_text()
    assert "| case | what | batch |" in table and table in proc.stdout
    for case in gpu_measure.CASES:
        assert f"| {case} |" in table
    # A dry run leaves the measured figures alone.
    assert (results.stat().st_mtime_ns if results.exists() else None) == before


def test_only_runs_in_its_order_cases_together():
    assert gpu_measure.groups(["base", "big", "tests", "vit_b16", "decoding"]) == [
        ["base", "big"], ["tests"], ["vit_b16", "decoding"]]  # fmt: skip
    assert gpu_measure.groups(["tests"]) == [["tests"]]


def test_without_wheels_it_says_how_to_build_them(tmp_path):
    cmd = [sys.executable, "benchmarks/gpu_measure.py", f"--out={tmp_path}",
           f"--wheels={tmp_path / 'none'}"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout.count("\n") == 1 and "python benchmarks/gpu_wheels.py" in proc.stdout


def fake_wheel(folder: pathlib.Path) -> pathlib.Path:
    """A pure-Python wheel of a distribution nobody has: tj-gpu-measure-probe 1.0."""
    info = "tj_gpu_measure_probe-1.0.dist-info"
    files = {
        "tj_gpu_measure_probe.py": "VALUE = 42\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: tj-gpu-measure-probe\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    path = folder / "tj_gpu_measure_probe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


def test_install_takes_only_what_the_machine_lacks(tmp_path):
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    probe = fake_wheel(wheels)
    entries = [
        {"name": "tj-gpu-measure-probe", "version": "1.0", "file": probe.name,
         "sha256": hashlib.sha256(probe.read_bytes()).hexdigest()},
        # Installed here: left to the machine's own, so its file need not exist.
        {"name": "pytest", "version": "0", "file": "absent.whl", "sha256": ""},
    ]  # fmt: skip
    (wheels / "manifest.json").write_text(json.dumps({"wheels": entries}))
    done = gpu_measure.install_wheels(wheels, site)
    assert done["installed"] == ["tj-gpu-measure-probe==1.0"]
    assert [p.split()[0] for p in done["present"]] == ["pytest"]
    env = {**subprocess_env(), "PYTHONPATH": str(site)}
    check = [sys.executable, "-c", "import tj_gpu_measure_probe as p; print(p.VALUE)"]
    assert subprocess.run(check, env=env, capture_output=True, text=True).stdout == "42\n"

    probe.write_bytes(probe.read_bytes() + b" ")  # Not the file the manifest names.
    with pytest.raises(RuntimeError, match="differs from the manifest"):
        gpu_measure.install_wheels(wheels, site)
    (wheels / "manifest.json").unlink()
    with pytest.raises(gpu_measure.MissingWheels):
        gpu_measure.install_wheels(wheels, site)


def fake_child(tmp_path, crash_in: str, status):
    """A stand-in for `run_logged` running gpu_throughput.py: finishes every case of its --only
    until `crash_in`, where it ends with `status` (None: killed for time)."""
    calls = []

    def run(cmd, env, log, timeout):
        only = next(a for a in cmd if a.startswith("--only=")).removeprefix("--only=").split(",")
        out = pathlib.Path(next(a for a in cmd if a.startswith("--out=")).removeprefix("--out="))
        calls.append(only)
        rows = []
        for case in only:
            if case == crash_in:
                out.write_text(json.dumps({"meta": {}, "rows": rows, "running": case}))
                return status
            rows.append({"case": case, "items_per_s": 1.0})
        out.write_text(json.dumps({"meta": {"device": "x"}, "rows": rows, "running": None}))
        return 0

    return run, calls


@pytest.mark.parametrize("status", [-11, None])
def test_a_crash_loses_the_case_it_ended_in_not_the_run(tmp_path, monkeypatch, status):
    run, calls = fake_child(tmp_path, "big", status)
    monkeypatch.setattr(gpu_measure, "run_logged", run)
    deadline = time.monotonic() + 60
    rows, _ = gpu_measure.run_throughput(["base", "big", "vit_b16"], {}, tmp_path, deadline,
                                         True, None)  # fmt: skip
    assert [r["case"] for r in rows] == ["base", "big", "vit_b16"]
    assert "error" not in rows[0]
    if status is None:  # Out of time: what is left is not started again.
        assert calls == [["base", "big", "vit_b16"]]
        assert "ran out of time" in rows[1]["error"] and "not run" in rows[2]["error"]
    else:  # A crash: started again without the case it ended in.
        assert calls == [["base", "big", "vit_b16"], ["vit_b16"]]
        assert "exit status -11" in rows[1]["error"] and "error" not in rows[2]


def _call(rows, *, device="NVIDIA H200", dry_run=False, tests=None):
    steps = [{"name": "tests", "passed": tests, "ok": True}] if tests is not None else []
    return {"meta": {"dry_run": dry_run, "device": {"device": device}}, "steps": steps,
            "rows": rows}  # fmt: skip


def test_joining_calls_keeps_each_case_the_last_call_measured():
    first = _call([{"case": "base", "kind": "train step", "step_ms": 44.0},
                   {"case": "bert_base", "error": "not run (out of time)"}], tests=19)  # fmt: skip
    second = _call([{"case": "bert_base", "kind": "train step", "step_ms": 57.0}])
    third = _call([{"case": "base", "kind": "train step", "step_ms": 48.0}])
    joined = gpu_results.join([first, second, third])
    assert [(r["case"], r["step_ms"], r["call"]) for r in joined["rows"]] == [
        ("base", 48.0, 2), ("bert_base", 57.0, 1)]  # fmt: skip
    assert joined["tests"]["passed"] == 19 and joined["tests"]["call"] == 0
    assert len(joined["calls"]) == 3 and joined["device"]["device"] == "NVIDIA H200"
    with pytest.raises(ValueError, match="dry run"):
        gpu_results.join([first, _call([], dry_run=True)])
    with pytest.raises(ValueError, match="different devices"):
        gpu_results.join([first, _call([], device="NVIDIA H100 80GB HBM3")])
    with pytest.raises(ValueError, match="no gpu_measure.json"):
        gpu_results.join([])


def test_one_call_joins_into_the_layout_the_documents_read():
    call = _call([{"case": "base", "kind": "train step", "step_ms": 47.9}])
    call["meta"].pop("device")  # A call whose throughput never started has no device.
    joined = gpu_results.join([call])
    assert joined["rows"][0]["step_ms"] == 47.9 and joined["device"] == {}
