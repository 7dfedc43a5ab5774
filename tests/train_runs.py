"""Running train.py for tests: one subprocess (one device unless asked), its stderr kept in the
workdir; and the environment of every process the tests start."""

import atexit
import fcntl
import gc
import io
import json
import multiprocessing
import os
import pathlib
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Sequence

_ROOT = pathlib.Path(__file__).resolve().parents[1]
# The tests' programs are tiny: compiling them costs more than running them. Level 0 skips
# LLVM's optimisations, and XLA's older loop emitters (use_fusion_emitters=false) compile a
# train step in about half the time of the MLIR fusion emitters: both choose how the CPU code
# is generated, not what it computes (within float32 rounding, which the tolerances allow).
# conftest.py sets them for the test processes; the processes they start inherit them.
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def device_flags(devices: int) -> str:
    """XLA_FLAGS for a process of the tests with `devices` CPU devices."""
    count = f"--xla_force_host_platform_device_count={devices} " if devices > 1 else ""
    return count + FAST_COMPILE


def subprocess_env(devices: int = 1, **extra: str) -> dict[str, str]:
    """The tests' environment for a child process (train.py, a CLI, a worker): `devices` CPU
    devices (one unless the test is about sharding: compiling for 8 costs about twice as much),
    the fast-compile flag, the shared compilation cache (inherited), and `extra`."""
    return {**os.environ, "XLA_FLAGS": device_flags(devices), **extra}


# What train.py imports before it reads a flag, and the loop's TensorBoard writer: a process
# forked from a server that has imported them starts without importing them again (PyProcess).
_PRELOAD = ["absl.app", "ml_collections.config_flags", "transformer_jax.cli.common",
            "transformer_jax.training", "tensorboardX"]  # fmt: skip
# Read by the modules above when they are imported: a run asking for other values of these
# starts a fresh interpreter instead. XLA_FLAGS is read when a backend starts, after the fork.
_READ_AT_IMPORT = ("JAX_", "PYTHON", "TPU_", "LIBTPU", "TF_", "TFDS_", "GRAIN_", "ABSL_")
_server_env: dict[str, str] | None = None  # os.environ when this process started its server
_fresh_path: list[str] | None = None  # sys.path of a fresh interpreter, after its script's dir
_set_at_import: list[str] = []  # The variables that importing _PRELOAD sets in a fresh one


class PyProcess:
    """`python SCRIPT ARGS` in `env` (default: one device) from `cwd`, in the background: the
    part of subprocess.Popen the tests use, with stdout and stderr kept in files (a chatty run
    never blocks on a full pipe).

    The process is forked from a server (multiprocessing's forkserver) that imported what
    train.py imports, started once per test process: the run then differs from a fresh
    `python SCRIPT` only in not importing those modules itself. Where `env` changes a variable
    that a preloaded module read when it was imported, a fresh interpreter runs instead.
    """

    def __init__(
        self,
        script: pathlib.Path,
        args: Sequence[str],
        env: dict[str, str] | None = None,
        cwd: pathlib.Path = _ROOT,
    ):
        env = subprocess_env() if env is None else env
        self.args = [sys.executable, str(script), *map(str, args)]
        self._dir = tempfile.TemporaryDirectory()
        out, err = pathlib.Path(self._dir.name, "stdout"), pathlib.Path(self._dir.name, "stderr")
        self._out, self._err = out, err
        out.touch()
        err.touch()
        server_env = _start_server()
        changed = {k for k in env.keys() | server_env.keys() if env.get(k) != server_env.get(k)}
        if any(k.startswith(_READ_AT_IMPORT) for k in changed - {"PYTHONPATH"}):
            with open(out, "w") as o, open(err, "w") as e:
                self._popen = subprocess.Popen(self.args, cwd=cwd, env=env, stdout=o, stderr=e)
            self._child = None
        else:
            extra = env.get("PYTHONPATH", "").split(os.pathsep)
            path = [str(pathlib.Path(script).parent), *filter(None, extra), *_fresh_path]
            ctx = multiprocessing.get_context("forkserver")
            self._child = ctx.Process(
                target=_run_script,
                args=(self.args[1:], env, _set_at_import, path, str(cwd), str(out), str(err)),
            )
            self._child.start()
            self._popen = None
        self.pid = self._popen.pid if self._popen else self._child.pid

    @property
    def stderr(self) -> io.StringIO:
        """What the run has written to stderr so far, to `.read()` as from Popen's pipe."""
        return io.StringIO(self._err.read_text())

    def poll(self) -> int | None:
        return self._popen.poll() if self._popen else self._child.exitcode

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        if self._popen:
            return self._popen.wait(timeout)
        self._child.join(timeout)
        if self._child.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._child.exitcode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Waits for the end (subprocess.TimeoutExpired after `timeout` s, the run left
        running); returns (stdout, stderr)."""
        self.wait(timeout)
        return self._out.read_text(), self._err.read_text()


class TrainPy(PyProcess):
    """`python train.py ARGS` (see PyProcess)."""

    def __init__(
        self, args: Sequence[str], env: dict[str, str] | None = None, cwd: pathlib.Path = _ROOT
    ):
        super().__init__(_ROOT / "train.py", args, env, cwd)


def run_train_py(
    args: Sequence[str],
    env: dict[str, str] | None = None,
    cwd: pathlib.Path = _ROOT,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """`python train.py ARGS` (as TrainPy) to its end: stdout and stderr as text, the exit
    status as a process gives it. Killed after `timeout` s (subprocess.TimeoutExpired)."""
    run = TrainPy(args, env, cwd)
    try:
        out, err = run.communicate(timeout)
    except subprocess.TimeoutExpired:
        run.kill()
        run.wait()
        raise
    return subprocess.CompletedProcess(run.args, run.returncode, out, err)


def _start_server() -> dict[str, str]:
    """Sets up this process's forkserver (once); returns the environment it starts with."""
    global _server_env, _fresh_path, _set_at_import
    if _server_env is None:
        _server_env = dict(os.environ)
        multiprocessing.set_forkserver_preload(_PRELOAD)
        probe = (
            "import importlib, json, os, sys; path, before = sys.path[1:], dict(os.environ)\n"
            f"for name in {_PRELOAD!r}: importlib.import_module(name)\n"
            "print(json.dumps([path, [k for k, v in os.environ.items() if before.get(k) != v]]))"
        )
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
        _fresh_path, _set_at_import = json.loads(out.stdout)
    return _server_env


def _run_script(argv, env, set_at_import, path, cwd, out, err) -> None:
    """In the forked child: the environment, sys.path, working directory, argv and standard
    streams of `python SCRIPT ARGS`; runs the script as __main__ and exits as Python would."""
    gc.freeze()  # The preloaded modules live as long as the run: no collection walks them.
    imported = {k: os.environ[k] for k in set_at_import if k in os.environ}
    os.environ.clear()
    os.environ.update({**imported, **env})  # What the imports set (libtpu_env...), unless env does
    os.chdir(cwd)
    sys.path[:] = path
    sys.argv = list(argv)
    for fd, name in ((1, out), (2, err)):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    code = 0
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - reported as the interpreter reports it
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    threading._shutdown()  # Non-daemon threads end before the interpreter does.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def train_once(
    workdir: pathlib.Path, config: str, *overrides: str, devices: int = 1
) -> pathlib.Path:
    """Runs train.py (run_train_py) on `devices` CPU devices (one by default); keeps its
    stderr in workdir/train.stderr."""
    args = [f"--config={config}", f"--workdir={workdir}", *overrides]
    proc = run_train_py(args, subprocess_env(devices))
    if proc.returncode:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    (workdir / "train.stderr").write_text(proc.stderr)
    return workdir


def trained_once(
    tmp_path_factory, name: str, train: Callable[[pathlib.Path], object]
) -> pathlib.Path:
    """A workdir that `train(workdir)` fills, trained once per test session however many
    pytest-xdist workers run it: the first worker to ask trains it in a folder the workers share
    (under a lock), and every worker gets its own copy, so tests that write into their workdir
    (evaluate's outputs) never meet another worker's writes. Without xdist: trained in place."""
    own = tmp_path_factory.mktemp(name)
    if "PYTEST_XDIST_WORKER" not in os.environ:
        train(own)
        return own
    shared = tmp_path_factory.getbasetemp().parent / f"trained_once_{name}"
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes (or the worker dies).
        if not (shared / ".trained").exists():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            train(shared)
            (shared / ".trained").touch()
    shutil.copytree(shared, own, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".trained"))
    return own
