"""A `transformer-jax serve` process for the tests: started on a free port, waited for until
ready, stopped with a signal."""

from __future__ import annotations

import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import httpx

from tests.train_runs import subprocess_env

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_ANNOUNCE = re.compile(r"serving on (http://\S+?):? ")


class ServerProcess:
    """`python -m transformer_jax serve` with `args` on a free port (one CPU device).

    Attributes:
      url: http://127.0.0.1:PORT once started.
      lines: everything the process printed (stdout and stderr), as it comes.
    """

    def __init__(self, *args: str, env: dict | None = None):
        cmd = [sys.executable, "-m", "transformer_jax", "serve", "--port=0", *args]
        self.proc = subprocess.Popen(
            cmd, cwd=_ROOT, env={**subprocess_env(), **(env or {})}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.lines: list[str] = []
        self.url: str | None = None
        self._announced = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            match = _ANNOUNCE.search(line)
            if match and self.url is None:
                self.url = match.group(1)
                self._announced.set()
        self._announced.set()

    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self, timeout: float = 300) -> ServerProcess:
        """Waits for /readyz to answer 200; raises with the server's output otherwise."""
        deadline = time.monotonic() + timeout
        self._announced.wait(timeout)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited {self.proc.returncode}:\n{self.output()}")
            if self.url is not None:
                try:
                    if httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.2)
        raise AssertionError(f"the server was not ready in {timeout} s:\n{self.output()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Sends `sig` and waits for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
