"""tests/train_runs.py's PyProcess: a script forked from the preloaded server sees what a fresh
`python SCRIPT` sees (argv, sys.path, environment, working directory, streams, exit status),
and a run whose environment changes what an import read starts a fresh interpreter."""

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from tests import train_runs
from tests.train_runs import PyProcess, subprocess_env

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    print(json.dumps({"argv": sys.argv, "path": sys.path, "cwd": os.getcwd(),
                      "env": dict(os.environ), "jax": "jax" in sys.modules}))
    print("to stderr", file=sys.stderr)
    if sys.argv[1] == "exit":
        sys.exit(int(sys.argv[2]) if sys.argv[2].isdigit() else sys.argv[2])
    if sys.argv[1] == "raise":
        raise RuntimeError("raised")
    if sys.argv[1] == "wait":
        import time
        time.sleep(60)
    """
)


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text(SCRIPT)
    return path


def _fresh(script, args, env, cwd):
    return subprocess.run(
        [sys.executable, str(script), *args], env=env, cwd=cwd, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    "args, code, err",
    [
        (["ok"], 0, ""),
        (["exit", "4"], 4, ""),
        (["exit", "bye"], 1, "bye"),
        (["raise"], 1, "RuntimeError: raised"),
    ],  # fmt: skip
)
def test_a_forked_script_sees_what_a_fresh_one_sees(script, tmp_path, args, code, err):
    env = subprocess_env(devices=2, PYTHONPATH=str(tmp_path / "lib"), EXTRA="1")
    forked = PyProcess(script, args, env, cwd=tmp_path)
    out, forked_err = forked.communicate(timeout=60)
    fresh = _fresh(script, args, env, tmp_path)
    assert (forked.returncode, fresh.returncode) == (code, code)
    assert forked_err.startswith("to stderr\n") and err in forked_err and err in fresh.stderr
    seen, want = json.loads(out), json.loads(fresh.stdout)
    assert seen["jax"], "not forked from the preloaded server"
    assert not want["jax"]
    for key in ("argv", "path", "cwd"):
        assert seen[key] == want[key], key
    # What the preloaded modules set when imported stays, as in a fresh process that imports
    # them (train.py does, first thing); nothing else differs.
    extra = {k for k, v in seen["env"].items() if want["env"].get(k) != v}
    assert extra <= set(train_runs._set_at_import), extra
    assert {k: v for k, v in want["env"].items() if seen["env"].get(k) != v} == {}


def test_an_import_time_variable_starts_a_fresh_interpreter(script):
    run = PyProcess(script, ["ok"], subprocess_env(JAX_ENABLE_X64="1"))
    out, _ = run.communicate(timeout=60)
    assert run.returncode == 0 and not json.loads(out)["jax"]


def test_signals_and_timeouts_reach_the_forked_process(script):
    run = PyProcess(script, ["wait"])
    with pytest.raises(subprocess.TimeoutExpired):
        run.communicate(timeout=0.5)
    assert run.poll() is None
    run.send_signal(signal.SIGTERM)
    run.wait(timeout=30)
    assert run.returncode == -signal.SIGTERM
