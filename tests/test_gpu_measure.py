"""benchmarks/gpu_measure.py, the one call that measures a GPU, checked on this CPU: its dry run
(every step but the install, tiny models), its install step, and its message without wheels;
and its --ablate: the cases' order and levers, its dry run, its refusal without a GPU, its
table; gpu_throughput.py's levers."""

import hashlib
import json
import pathlib
import re
import subprocess
import sys
import time
import types
import zipfile

import jax
import jax.numpy as jnp
import pytest

from benchmarks import gpu_measure, gpu_results, gpu_throughput
from tests.train_runs import subprocess_env
from transformer_jax.nn import precision

ROOT = pathlib.Path(__file__).resolve().parents[1]
TRAIN_KEYS = {"params", "batch", "rows_tried", "compile_s", "step_ms", "items_per_s", "unit",
              "attention", "model_flops_per_step", "compiled_flops_per_step", "mfu", "mfu_source",
              "mfu_model", "grad_norm", "nonfinite_steps"}  # fmt: skip


@pytest.mark.slow(seconds=60)
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


@pytest.mark.slow(seconds=15)
def test_ablate_dry_run_measures_each_case_with_its_levers(tmp_path):
    results = gpu_measure.ABLATION_RESULTS
    before = results.stat().st_mtime_ns if results.exists() else None
    # Two cases of the list (each child compiles a step: about 20 s of CPU): a lever that
    # changes the compiled step's key type, and the profile.
    cases = ["bert_base:rng=rbg", "gpt2_small:profile"]
    cmd = [sys.executable, "benchmarks/gpu_measure.py", "--ablate", "--dry_run",
           f"--out={tmp_path}", "--chip=h100", f"--cases={','.join(reversed(cases))}"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True,
                          timeout=400)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    result = json.loads((tmp_path / "ablation.json").read_text())
    assert result["meta"]["dry_run"] and result["meta"]["left_out"] == []
    assert result["meta"]["budget_s"] == gpu_measure.ABLATE_BUDGET_S
    rows = result["rows"]
    assert [r["case"] for r in rows] == cases  # ABLATION's order, not --cases'.
    for row in rows:
        assert row["ok"] and row["case"].startswith(row["model"] + ":"), row
        assert row["step_ms"] > 0 and row["items_per_s"] > 0 and row["mfu"] is not None
        assert row["attention"] and row["seconds"] > 0
    assert [r["levers"] for r in rows] == [{"rng": "rbg"}, {}]
    assert rows[1]["profiled_steps"] == 3
    assert list((tmp_path / "profile").rglob("*.xplane.pb"))  # The trace TensorBoard reads.

    table = (tmp_path / "ablation.md").read_text()
    assert table == gpu_measure.ablation_table(result) + "\n" and table in proc.stdout
    # A dry run leaves the measured figures alone.
    assert (results.stat().st_mtime_ns if results.exists() else None) == before


def test_ablation_cases_come_most_valuable_first_defaults_before_levers():
    names = [c.name for c in gpu_measure.ABLATION]
    assert len(set(names)) == len(names)
    assert names[0] == "gpt2_small:default" and names[-1] == "gpt2_small:profile"
    models = [c.model for c in gpu_measure.ABLATION[:-1]]
    assert models == sorted(models, key=models.index)  # Each model's cases together,
    assert [m for i, m in enumerate(models) if m not in models[:i]] == [
        "gpt2_small", "bert_base", "base", "big", "vit_b16"]  # fmt: skip
    for model in set(models):  # its default first.
        assert names[models.index(model)] == f"{model}:default"
    for case in gpu_measure.ABLATION:  # Every lever is one gpu_throughput.py knows.
        assert gpu_throughput.parse_levers(list(case.levers)).keys() == dict(
            lever.split("=", 1) for lever in case.levers).keys()  # fmt: skip
        assert case.model in gpu_throughput.TRAIN and 0 < case.limit_s <= 120
    flags = {c.lever: c.xla_flags for c in gpu_measure.ABLATION if c.xla_flags}
    assert flags == {"triton_gemm=off": "--xla_gpu_enable_triton_gemm=false",
                     "command_buffer=off": "--xla_gpu_enable_command_buffer="}  # fmt: skip


def fake_cases(clock, fail: str = ""):
    """A stand-in for `run_logged` running gpu_throughput.py for one case: each call takes its
    whole timeout on `clock`; the case whose --only and --lever match `fail` hangs (None)."""
    calls = []

    def run(cmd, env, log, timeout):
        args = dict(a.removeprefix("--").split("=", 1) for a in cmd[2:] if "=" in a)
        levers = [a.removeprefix("--lever=") for a in cmd if a.startswith("--lever=")]
        calls.append({"only": args["only"], "levers": levers, "xla": env.get("XLA_FLAGS"),
                      "profile": args.get("profile_steps"), "timeout": timeout})  # fmt: skip
        clock[0] += timeout
        if f"{args['only']}:{','.join(levers)}" == fail:
            return None
        row = {"case": args["only"], "step_ms": 10.0, "items_per_s": 100.0, "unit": "token",
               "mfu": 0.25, "attention": "cudnn fmha"}  # fmt: skip
        pathlib.Path(args["out"]).write_text(json.dumps({"meta": {"device": "x"}, "rows": [row]}))
        return 0

    return run, calls


def test_ablation_runs_every_case_alone_with_its_levers(tmp_path, monkeypatch):
    clock = [0.0]
    run, calls = fake_cases(clock, fail="gpt2_small:head=f32")
    monkeypatch.setattr(gpu_measure, "run_logged", run)
    monkeypatch.setattr(gpu_measure, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    saved = []
    env = {"XLA_FLAGS": "--inherited"}
    rows, _ = gpu_measure.run_ablation(gpu_measure.ABLATION, env, tmp_path, 10_000, True, None,
                                       lambda rows, meta: saved.append(len(rows)))  # fmt: skip
    assert [r["case"] for r in rows] == [c.name for c in gpu_measure.ABLATION]
    assert saved[:3] == [1, 2, 3]  # Written as each case finishes.
    for case, call, row in zip(gpu_measure.ABLATION, calls, rows, strict=True):
        assert call["only"] == case.model and call["levers"] == list(case.levers)
        assert call["timeout"] == case.limit_s
        assert call["xla"] == f"--inherited {case.xla_flags}".strip()
        assert call["profile"] == (str(case.profile_steps) if case.profile_steps else None)
        levers = dict(lever.split("=", 1) for lever in case.levers)
        assert row["levers"] == levers | ({"xla_flags": case.xla_flags} if case.xla_flags else {})
        assert row["model"] == case.model and row["lever"] == case.lever
    hung = rows[2]  # It costs its own row, and the next case runs.
    assert not hung["ok"] and "ran past its limit of 90 s" in hung["error"]
    assert all(r["ok"] for r in rows if r is not hung)


def test_ablation_cut_short_records_what_it_left_out(tmp_path, monkeypatch):
    clock = [0.0]
    run, calls = fake_cases(clock)
    monkeypatch.setattr(gpu_measure, "run_logged", run)
    monkeypatch.setattr(gpu_measure, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    first, second, third = gpu_measure.ABLATION[:3]
    deadline = first.limit_s + second.limit_s + third.limit_s - 1  # The third no longer fits.
    rows, _ = gpu_measure.run_ablation(gpu_measure.ABLATION, {}, tmp_path, deadline, True, None)
    assert len(calls) == 2 and len(rows) == len(gpu_measure.ABLATION)
    assert [r["ok"] for r in rows[:3]] == [True, True, False]
    assert all(r["error"] == gpu_measure.LEFT_OUT for r in rows[2:])
    (triton,) = [r for r in rows if r["lever"] == "triton_gemm=off"]
    assert triton["levers"] == {"xla_flags": "--xla_gpu_enable_triton_gemm=false"}


def test_ablate_without_a_gpu_refuses_in_one_line(tmp_path):
    if gpu_measure.has_gpu():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "out"
    cmd = [sys.executable, "benchmarks/gpu_measure.py", "--ablate", f"--out={out}",
           f"--wheels={tmp_path / 'none'}"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr == ""
    assert proc.stdout.count("\n") == 1 and "No GPU" in proc.stdout
    assert "--ablate --dry_run" in proc.stdout
    assert not out.exists()  # Before anything: no wheels asked for, no folder made.


def test_a_lever_it_does_not_know_is_refused_naming_the_known_ones(monkeypatch, capsys):
    argv = ["gpu_throughput.py", "--out=unused.json", "--lever=flash=1"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        gpu_throughput.main()
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "unknown lever 'flash'" in error
    for name in ("attention_dropout=RATE", "head=f32", "rng=threefry|rbg|unsafe_rbg", "rows=N"):
        assert name in error
    with pytest.raises(ValueError, match="rng takes threefry"):
        gpu_throughput.parse_levers(["rng=philox"])
    with pytest.raises(ValueError, match="in \\[0, 1\\)"):
        gpu_throughput.parse_levers(["attention_dropout=1.5"])
    assert gpu_throughput.parse_levers(["attention_dropout=0.1", "rows=8"]) == {
        "attention_dropout": 0.1, "rows": 8}  # fmt: skip


def test_head_lever_puts_the_backward_products_in_float32(monkeypatch):
    # Restored after the test: the lever patches the library for the rest of its process.
    monkeypatch.setattr(precision, "_low_precision_backward", precision._low_precision_backward)

    def backward_operands():
        def loss(x, w):
            return precision.einsum_f32_out("BD,VD->BV", x, w).sum()

        x, w = jnp.ones((3, 5), jnp.bfloat16), jnp.ones((7, 5), jnp.float32)
        text = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, w).as_text()
        # "... : (tensor<3x7xbf16>, tensor<7x5xbf16>) -> tensor<3x5xf32>": the operands' types.
        types_ = [line.rsplit(":", 1)[-1].split("->")[0] for line in text.splitlines()
                  if "dot_general" in line]  # fmt: skip
        return set(re.findall(r"tensor<[\dx]+x(\w+)>", " ".join(types_)))

    assert backward_operands() == {"bf16"}
    gpu_throughput.apply_levers({}, {"head": "f32"})
    assert backward_operands() == {"f32"}


def test_ablation_table_reads_each_lever_against_its_model_default():
    def row(model, lever, items_per_s=None, mfu=None, unit="token", error=None):
        if error:
            return {"model": model, "lever": lever, "ok": False, "error": error}
        return {"model": model, "lever": lever, "ok": True, "items_per_s": items_per_s,
                "mfu": mfu, "unit": unit, "attention": "cudnn fmha"}  # fmt: skip

    result = {"rows": [
        row("gpt2_small", "default", 200_000.0, 0.2),
        row("gpt2_small", "attention_dropout=0.1", 150_000.0, 0.15),
        row("gpt2_small", "head=f32", error="exit 1; its log ends:\nOOM | here"),
        row("bert_base", "default", error=gpu_measure.LEFT_OUT),
        row("bert_base", "rng=rbg", 1000.0, None),
        row("vit_b16", "default", 2922.4, 0.315, unit="image"),
    ]}  # fmt: skip
    assert gpu_measure.ablation_table(result).splitlines() == [
        "| model | lever | per second | MFU | change | attention |",
        "|---|---|---|---|---|---|",
        "| gpt2_small | default | 200,000 tokens | 20.0% | reference | cudnn fmha |",
        "| gpt2_small | attention_dropout=0.1 | 150,000 tokens | 15.0% | -25.0% | cudnn fmha |",
        "| gpt2_small | head=f32 | not measured: exit 1; its log ends: OOM / here | | | |",
        "| bert_base | default | not measured: not run (out of time) | | | |",
        "| bert_base | rng=rbg | 1,000 tokens |  | (no default row) | cudnn fmha |",
        "| vit_b16 | default | 2,922 images | 31.5% | reference | cudnn fmha |",
    ]
