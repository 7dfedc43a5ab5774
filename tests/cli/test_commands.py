"""The command lines as a user meets them: the `transformer-jax` console command installed by
`pip install -e .`, the same command as `python -m transformer_jax`, `python train.py`, absl
flag errors and help, and the translate
command's refusal of an output longer than the model's positions."""

import importlib
import importlib.metadata
import importlib.util
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from tests.train_runs import subprocess_env
from transformer_jax import cli
from transformer_jax.cli import evaluate, translate

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _console_command() -> pathlib.Path:
    (entry,) = [
        e for e in importlib.metadata.entry_points(group="console_scripts")
        if e.name == "transformer-jax"
    ]  # fmt: skip
    assert entry.value == "transformer_jax.cli:main"
    script = pathlib.Path(sys.executable).parent / "transformer-jax"
    assert script.is_file(), f"{script}: reinstall with pip install -e ."
    return script


def _run(cmd, cwd=ROOT, stdin="", timeout=300):
    return subprocess.run(
        cmd, cwd=cwd, env=subprocess_env(), input=stdin, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def test_console_command_lists_and_runs_the_subcommands(tmp_path):
    script = _console_command()
    proc = _run([str(script), "--help"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in cli.COMMANDS:
        assert f"  {name} " in proc.stdout
    proc = _run([str(script), "fill-mask", f"--workdir={tmp_path / 'none'}", "--text=a [MASK]"])
    assert proc.returncode == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert "workdir does not exist" in proc.stderr and "Traceback" not in proc.stderr
    proc = _run([str(script), "translte"])
    assert proc.returncode == 2 and "'translte' is not a subcommand" in proc.stderr


def test_console_train_reads_configs_from_another_folder(tmp_path):
    """The configs import `configs.common`: that works from any working directory."""
    cmd = [str(_console_command()), "train", f"--config={ROOT / 'configs' / 'tiny.py'}"]
    proc = _run([*cmd, f"--workdir={tmp_path / 'run'}", "--config.model.d_modle=8"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: a --config override does not fit the config: 'd_modle'")
    assert 'Did you mean "d_model"' in proc.stderr and "Traceback" not in proc.stderr


def test_python_dash_m_of_the_package_is_the_console_command(tmp_path):
    proc = _run([sys.executable, "-m", "transformer_jax", "translate", "--help"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m transformer_jax translate --workdir=DIR")
    assert "--beam_size:" in proc.stdout and proc.stderr == ""
    proc = _run([sys.executable, "-m", "transformer_jax", "--help"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m transformer_jax SUBCOMMAND [flags]")
    for name in cli.COMMANDS:
        assert f"  {name} " in proc.stdout
    proc = _run([sys.executable, "-m", "transformer_jax", "fill-mask", "--workdir=w", "--topk=2"])
    assert proc.returncode == 2 and "Unknown command line flag 'topk'" in proc.stderr
    assert "usage: python -m transformer_jax fill-mask --workdir=DIR" in proc.stderr


@pytest.mark.parametrize("name", [n for n in cli.COMMANDS if n != "train"])
def test_each_subcommand_is_one_cli_module_with_no_alias_beside_it(name):
    module = cli.COMMANDS[name][0]
    assert importlib.import_module(f"transformer_jax.cli.{module}").COMMAND.run
    # The `python -m transformer_jax.NAME` aliases went in 0.2.0 (CHANGELOG.md).
    assert importlib.util.find_spec(f"transformer_jax.{module}") is None


def test_train_py_runs_the_train_command(tmp_path):
    proc = _run([sys.executable, "train.py", f"--workdir={tmp_path}", "--config.seed=-1"])
    assert proc.returncode == 1 and "config.seed must be an integer" in proc.stderr


LIBTPU_NOISE = ("host bounds", "worker hostname", "Source Location Trace", "E0000")


def test_training_starts_quietly_with_every_extra_installed(tmp_path):
    """No libtpu start-up errors on a machine without a TPU (the aot extra installs libtpu).

    Run as a user runs it: without the tests' JAX_PLATFORMS=cpu (which never loads libtpu), and
    with libtpu's lock file lifted: only the process that takes it prints the errors, so another
    JAX process alive on the machine (another test's) would hide them."""
    cmd = [sys.executable, "train.py", "--config=configs/tiny.py",
           f"--workdir={tmp_path / 'run'}", "--config.num_train_steps=1",
           "--config.eval_every=1", "--config.test_sentences=0"]  # fmt: skip
    env = subprocess_env(ALLOW_MULTIPLE_LIBTPU_LOAD="1")
    env.pop("JAX_PLATFORMS", None)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for noise in LIBTPU_NOISE:
        assert noise not in proc.stderr + proc.stdout, proc.stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "Flag --workdir must have a value other than None"),
        (["--workdir=w", "--beam_sise=2"], "Unknown command line flag 'beam_sise'. Did you mean"),
        (["--workdir=w", "--beam_size=two"], "flag --beam_size=two: invalid literal for int()"),
        (["--workdir=w", "extra.txt"], "unexpected arguments ['extra.txt']"),
    ],
)
def test_bad_flags_exit_2_with_one_error_and_the_usage(argv, message, capsys):
    assert translate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err
    assert err.splitlines()[1].startswith("usage: python -m transformer_jax translate")


def test_help_shows_the_docstring_and_every_flag(capsys):
    assert translate.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m transformer_jax translate --workdir=DIR")
    assert "Reads one sentence per line" in out
    for flag in ("workdir", "step", "average_last", "beam_size", "alpha", "max_len", "mesh"):
        assert f"--{flag}:" in out, flag
    assert "--flagfile" not in out  # absl's own flags are not the command's


def test_translate_refuses_an_output_longer_than_the_positions(tiny_workdir, capsys):
    argv = [f"--workdir={tiny_workdir}", "--max_len=100000"]
    assert translate.main(argv) == 1
    err = capsys.readouterr().err
    assert "--max_len=100000 is more than the model's 32 positions" in err, err
    assert "pass --max_len <= 32" in err and err.count("\n") == 1


def test_evaluate_names_a_config_its_task_cannot_read(tiny_workdir, tmp_path, capsys):
    workdir = pathlib.Path(shutil.copytree(tiny_workdir, tmp_path / "run"))
    config = json.loads((workdir / "config.json").read_text())
    del config["data"]["spm_model_path"]
    (workdir / "config.json").write_text(json.dumps(config))
    assert evaluate.main([f"--workdir={workdir}", "--max_sentences=2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {workdir / 'config.json'}: the translation task cannot read")
    assert "'spm_model_path'" in err and err.count("\n") == 1


def test_train_names_a_missing_optional_package_in_one_line(tmp_path):
    """Without scikit-learn the digits cannot load: one line naming the extra to install."""
    code = (
        "import sys; sys.modules['sklearn'] = None; from transformer_jax.cli.train import run; "
        f"run(['--config=configs/vit_tiny.py', '--workdir={tmp_path / 'run'}'])"
    )
    proc = _run([sys.executable, "-c", code])
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith("error: data.source='digits' needs scikit-learn")
    assert "pip install 'transformer_jax[vision]'" in proc.stderr and "Traceback" not in proc.stderr


def test_evaluate_needs_the_runs_own_tokenizer(tiny_workdir, tmp_path, capsys):
    """A missing tokenizer.model is named; the task must not train a new one in its place."""
    workdir = pathlib.Path(shutil.copytree(tiny_workdir, tmp_path / "run"))
    (workdir / "tokenizer.model").unlink()
    assert evaluate.main([f"--workdir={workdir}", "--max_sentences=2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {workdir / 'tokenizer.model'}: tokenizer.model is missing")
    assert not (workdir / "tokenizer.model").exists()


def test_the_command_table_of_the_docs_lists_every_command():
    table = (ROOT / "docs" / "cli.md").read_text()
    for name in cli.COMMANDS:
        assert f"| `transformer-jax {name}` |" in table, name
