"""Every model's tiny config compiled for a TPU slice on this CPU: train, eval and serving
programs, with the memory, FLOPs, collectives and attention the compiler reports.

Needs the `aot` extra (libtpu), which the README's test command installs. Each TPU compile
costs seconds of the suite (a tiny train step with splash's kernels: 10 to 40 s on one core),
so each program is compiled once: the docs' command compiles the tiny config's, and the
command line runs in this process where a child process would prove nothing more.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from configs import bert_classify_tiny, bert_tiny, gpt_tiny, tiny, vit_tiny
from tests.test_docs import command_lines, package_command
from transformer_jax.aot import OutOfMemoryError, compile_config, fit_config, report
from transformer_jax.aot.programs import Program
from transformer_jax.aot.targets import parse_target, target_mesh
from transformer_jax.cli import compile as compile_cli

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None,
    reason='needs the aot extra: pip install -e ".[aot]"',
)
ROOT = pathlib.Path(__file__).resolve().parents[2]
MESH = {"data": 2, "fsdp": 2, "tensor": 2}  # every axis of the mesh in use
SERVING = {
    "tiny": ["greedy decoding", "beam-4 decoding"],
    "gpt_tiny": ["sampling"],
    "bert_tiny": ["fill-mask"],
    "bert_classify_tiny": ["forward"],
    "vit_tiny": ["forward"],
}
CONFIGS = {"tiny": tiny, "gpt_tiny": gpt_tiny, "bert_tiny": bert_tiny,
           "bert_classify_tiny": bert_classify_tiny, "vit_tiny": vit_tiny}  # fmt: skip
# The encoder-decoder with Marian's options, at no extra compile: its logits bias is one more
# vocab-sharded parameter (tensor=2) in the train step on a v4, forward and gradient.
MODEL_FIELDS = {"tiny": dict(positional="sinusoidal_halves", activation="silu", logits_bias=True)}
# The configs' one layer, except GPT's two: with one, its sampling prefill feeds no attention
# output to the token it samples, and XLA removes that program's splash call.
THREE_AXIS_FIELDS = {"gpt_tiny": dict(num_layers=2)}


# The tiny config's programs are the docs' command's: `test_the_command_of_the_docs_runs`.
@pytest.mark.slow(seconds=15)
@pytest.mark.parametrize("name", [n for n in CONFIGS if n != "tiny"])
def test_tiny_configs_compile_for_a_tpu_slice_on_a_three_axis_mesh(name):
    config = CONFIGS[name].get_config()
    config.mesh = MESH
    config.model.update(THREE_AXIS_FIELDS.get(name, {}))
    check_three_axis_report(name, compile_config(config, "v5e-8"))


def check_three_axis_report(name, result):
    """`result`, the config `name` compiled for a v5e-8 on MESH, has every program of its
    task, with splash attention, memory, FLOPs and the collectives of the three axes."""
    assert result.problems == []
    assert [r.name for r in result.results] == ["train step", "eval step", *SERVING[name]]
    assert result.plan.kernel == "splash"  # the TPU's choice, made on this CPU host
    assert dict(result.plan.mesh.shape) == MESH
    assert result.plan.param_bytes > 0 and result.plan.optimizer_bytes > 0
    for r in result.results:  # splash runs in every program: forward, and its gradients
        want = "splash fwd+dq+dkv" if r.name == "train step" else "splash fwd"
        assert r.attention == want, r.name
        assert r.argument_bytes > 0 and r.total_bytes > r.argument_bytes - r.alias_bytes
        assert r.flops is not None and r.flops > 0 and not r.cost_estimated
        assert report.roofline_seconds(r, result.target) > 0
    train = result.results[0]
    assert train.collectives.get("all-gather", 0) > 0  # fsdp gathers the parameters
    assert train.collectives.get("all-reduce", 0) > 0  # the gradients
    assert "train step" in result.text and "TPU v5e" in result.text


# The other TPU generations, each with models chosen so that every model's train step (which
# holds all three splash kernels) compiles on one of them besides v5e, where every program of
# every model compiles above. Each compile costs seconds of the suite: the configs' one layer
# (a side) runs every kernel a deeper model runs.
OTHER_TPUS = {"v4-8": ["tiny", "vit_tiny"], "v5p-8": ["gpt_tiny"], "v6e-8": ["bert_tiny"]}


@pytest.mark.slow(seconds=15)
@pytest.mark.parametrize(
    ("target", "name"), [(t, n) for t, names in OTHER_TPUS.items() for n in names]
)
def test_splash_runs_on_every_tpu_generation(target, name):
    """Splash is the train step's attention on v4, v5p and v6e too, forward and both backward
    kernels: chosen from the target's devices, never from this CPU host."""
    config = CONFIGS[name].get_config()
    config.mesh = {"data": -1, "fsdp": 1, "tensor": 2}
    config.model.update(MODEL_FIELDS.get(name, {}))
    result = compile_config(config, target, inference=False, only=("train step",))
    assert result.problems == []
    assert result.plan.kernel == "splash"
    assert [(r.name, r.attention) for r in result.results] == [("train step", "splash fwd+dq+dkv")]


@pytest.mark.slow(seconds=15)
def test_a_plan_too_large_for_the_chip_says_by_how_much_and_what_to_change():
    config = tiny.get_config()
    config.data.vocab_size = 2_000_000  # 16 GiB of embeddings and 32 of Adam: not on a v5e
    config.model.update(d_model=2048, num_heads=8)
    result = compile_config(config, "v5e-1", inference=False)
    assert len(result.problems) == 2  # train and eval steps
    message = str(result.problems[0])
    assert "the train step needs" in message and "more than 15.75 GiB" in message
    assert "--config.mesh.fsdp=N" in message and "--config.model.remat=full" in message


def test_memory_beyond_the_chip_is_an_error_where_the_compiler_does_not_refuse():
    target = parse_target("h100x1")
    fits = report.Compiled("train step", 1.0, 2**30, 0, 0, 70 * 2**30, 0, None, None, {}, "x", 1,
                           "token")  # fmt: skip
    report.check_fits(fits, target)
    too_big = report.Compiled("train step", 1.0, 2**30, 0, 0, 80 * 2**30, 0, None, None, {},
                              "x", 1, "token")  # fmt: skip
    with pytest.raises(OutOfMemoryError, match=r"needs 81.00 GiB per device, 6.49 GiB more"):
        report.check_fits(too_big, target)


def compile_command(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "transformer_jax", "compile", *args],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600,
    )  # fmt: skip


@pytest.mark.slow(seconds=25)
def test_the_command_prints_the_table_and_takes_overrides():
    done = compile_command(
        "--config=configs/tiny.py", "--target=v5e-4", "--mesh=fsdp=2", "--noinference",
        "--config.model.dtype=bfloat16", "--measured_step_s=0.001", "--top_hbm=4",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # libtpu's start-up errors on a machine without a TPU are silenced.
    for noise in ("host bounds", "worker hostname", "Source Location Trace", "E0000"):
        assert noise not in done.stderr + done.stdout, done.stderr
    assert "mesh {'data': 2, 'fsdp': 2, 'tensor': 1}" in done.stdout
    assert "dtype bfloat16" in done.stdout and "train step" in done.stdout
    assert "of the chip's peak" in done.stdout  # the measured step's utilisation
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[1:3] == ["FLOP", "time"])
    assert lines[header].split()[3:] == [
        "HBM", "time", "bound", "bound", "by", "MFU", "ceiling", "all", "memories"
    ]  # fmt: skip
    assert [line.split()[:2] for line in lines[header + 1 : header + 3]] == [
        ["train", "step"], ["eval", "step"]]  # fmt: skip
    # The MFU ceiling, then the cost analysis' time (every memory, on-chip included).
    assert all(line.split()[-3].endswith("%") for line in lines[header + 1 : header + 3])
    for program in ("train step", "eval step"):  # each with its 4 largest HBM consumers
        at = lines.index(next(x for x in lines if x.startswith(f"{program}: the 4 largest HBM")))
        rows = lines[at + 1 : at + 5]
        assert all(row.startswith("  ") for row in rows) and any("jit(" in r for r in rows), rows


@pytest.mark.slow(seconds=40)
def test_the_command_of_the_docs_runs(monkeypatch, capsys):
    """docs/cli.md's compile example, as written there (the tiny config on a v5e-8 with every
    axis in use), run in this process: its report is the tiny config's of
    `test_tiny_configs_compile_for_a_tpu_slice_on_a_three_axis_mesh`, compiled once for both."""
    lines = command_lines((ROOT / "docs" / "cli.md").read_text(encoding="utf-8"))
    commands = [c for c in map(package_command, lines) if c is not None]
    (args,) = [a for n, a in commands if n == "compile" and "--config=configs/tiny.py" in a]
    reports = []

    def compile_and_keep(*args, **kwargs):
        reports.append(compile_config(*args, **kwargs))
        return reports[-1]

    monkeypatch.setattr(compile_cli, "compile_config", compile_and_keep)
    monkeypatch.chdir(ROOT)
    code = compile_cli.main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "mesh {'data': 2, 'fsdp': 2, 'tensor': 2}" in out and "train step" in out
    (result,) = reports
    assert result.text in out
    check_three_axis_report("tiny", result)


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--target=v5e-7"], 1, "not a known accelerator. Known: v4-N"),
        (["--target=v5e-8", "--mesh=data=3"], 1, "does not fit v5e-8 (8 devices)"),
        (["--target=v5e-8", "--config.model.d_modl=8"], 2, "does not fit the config"),
        (["--target=v5e-8", "--mesh=tensor"], 1, "is not axis=size"),
        (["--target=v5e-8", "--top_hbm=-1"], 2, "--top_hbm=-1: -1 is not a non-negative"),
    ],
)
def test_bad_input_is_one_error_line(args, code, message, monkeypatch, capsys):
    # In this process (the command's exit code is main's return value; a traceback would be an
    # exception here): `test_the_command_prints_the_table_and_takes_overrides` starts the
    # command's own process.
    monkeypatch.chdir(ROOT)
    done = compile_cli.main(["--config=configs/tiny.py", *args])
    out, err = capsys.readouterr()
    assert done == code, err
    assert message in err and err.count("\n") <= 2, err  # The error, and the usage line.
    assert "Traceback" not in err


@pytest.mark.slow(seconds=30)
def test_fit_moves_on_to_the_first_setting_that_fits():
    config = tiny.get_config()
    # 1.3e9 parameters (two feed-forward layers of 1024 x 327,680), 20 GiB with Adam's moments.
    # The TPU compiler's time grows with the arrays each device gathers: over 32 devices
    # these compile in half the time (or less) that an embedding table of 1.4e9 over 8 takes.
    config.model.update(d_model=1024, d_ff=327_680, num_heads=8, num_encoder_layers=1,
                        num_decoder_layers=1)  # fmt: skip
    config.data.tokens_per_batch = 1024  # A row per device.
    name, overrides, result = fit_config(config, "v5e-32")
    assert name == "fsdp"  # data parallel does not fit a 16 GiB chip, fsdp over 32 does
    assert overrides["mesh"] == {"data": 1, "fsdp": -1, "tensor": 1}
    assert dict(result.plan.mesh.shape) == {"data": 1, "fsdp": 32, "tensor": 1}
    assert [r.name for r in result.results] == ["train step"] and result.problems == []


def test_target_programs_are_not_written_to_the_persistent_cache(monkeypatch):
    """A program compiled for a TPU cannot be loaded on this CPU host: an entry in JAX's
    persistent cache (which the tests' processes use) would only warn at each later read."""
    from jax._src import compilation_cache  # The cache's writer: no public hook counts writes.

    writes, put = [], compilation_cache.put_executable_and_time

    def put_and_count(key, name, *args, **kwargs):
        writes.append(name)
        return put(key, name, *args, **kwargs)

    monkeypatch.setattr(compilation_cache, "put_executable_and_time", put_and_count)
    threshold = jax.config.jax_persistent_cache_min_compile_time_secs
    target = parse_target("v5e-1")
    mesh = target_mesh(target, {"data": -1, "fsdp": 1, "tensor": 1})
    spec = jax.ShapeDtypeStruct((8, 128), jnp.float32, sharding=NamedSharding(mesh, P()))
    program = Program("double", lambda: jax.jit(lambda x: 2 * x).lower(spec), 8, "row")
    result = report.compile_program(program, target, "xla")
    assert result.flops and writes == []
    # Programs for this host are cached as before.
    assert jax.config.jax_persistent_cache_min_compile_time_secs == threshold
