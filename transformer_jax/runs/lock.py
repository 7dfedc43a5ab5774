"""One training run per workdir: `workdir/run.lock`, and the first write a run makes.

Two `train.py` runs on one workdir would interleave checkpoints and logs and corrupt both. The
first thing a run does is take the lock; a second run refuses with a message naming the first
(host, process id, command, start time).

* Local workdirs: an exclusive `fcntl.flock` on `run.lock`. The kernel drops it when the process
  ends in any way (SIGKILL included), so a crashed run never leaves it stuck.
* Object stores (`gs://`) have no locks: `run.lock` is a lease whose holder rewrites it every
  `heartbeat_s` seconds. A lease not renewed for `stale_after_s` is taken over (the run that held
  it is dead); a fresh one makes the new run refuse, saying when it would go stale.

Taking the lock is also the probe for an unwritable workdir: it fails before the first step,
with the path and the reason, rather than at the first checkpoint an hour later.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import uuid

import jax
import numpy as np

from transformer_jax import storage
from transformer_jax.runs.layout import Workdir

LOCK_NAME = "run.lock"


class WorkdirBusyError(RuntimeError):
    """Another run holds the workdir; the message names it and what to do."""


class WorkdirNotWritableError(OSError):
    """The workdir cannot be created or written; the message names the path and the reason."""


def holder_info(token: str) -> dict:
    """What a lock file says about the run that holds it."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "command": " ".join(sys.argv)[:500],
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "heartbeat": time.time(),
        "token": token,
    }


def describe(info: dict) -> str:
    """`pid 123 on host h (command ...), started ...` from a lock file's fields."""
    return (
        f"pid {info.get('pid', '?')} on host {info.get('host', '?')} "
        f"(`{info.get('command', '?')}`, started {info.get('started', '?')})"
    )


def _not_writable(workdir: Workdir, error: BaseException) -> WorkdirNotWritableError:
    return WorkdirNotWritableError(
        f"cannot write to the workdir {workdir}: {error}. Training writes its config, "
        f"checkpoints and logs there: pass a --workdir you can write to (and check free space)."
    )


class WorkdirLock:
    """The lock of one run on `workdir`; `acquire()` before writing anything, `release()` at
    the end (or use it as a context manager)."""

    def __init__(self, workdir: Workdir, *, heartbeat_s: float = 60.0, stale_after_s: float = 300):
        self.workdir = workdir
        self.path = workdir.path / LOCK_NAME
        self.remote = storage.is_remote(workdir.path)
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.token = uuid.uuid4().hex
        self._fd: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --------------------------------------------------------------------------- public
    def acquire(self) -> WorkdirLock:
        """Takes the lock.

        Raises:
          WorkdirBusyError: another live run holds it.
          WorkdirNotWritableError: the workdir cannot be created or written.
        """
        try:
            self.workdir.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise _not_writable(self.workdir, e) from e
        if self.remote:
            self._acquire_lease()
        else:
            self._acquire_flock()
        return self

    def release(self) -> None:
        """Gives the lock up (a no-op when not held)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._fd is not None:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        elif self.remote and self._holds_lease():
            try:
                self.path.unlink()
            except OSError:
                pass  # The lease goes stale by itself.

    def __enter__(self) -> WorkdirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ---------------------------------------------------------------------------- local
    def _acquire_flock(self) -> None:
        import fcntl

        try:
            fd = os.open(os.fspath(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise _not_writable(self.workdir, e) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            other = self._read_info(fd)
            os.close(fd)
            raise WorkdirBusyError(
                f"{self.workdir} is in use by another training run: {describe(other)}. Wait for "
                f"it to finish, stop it (kill {other.get('pid', 'PID')}), or pass another "
                f"--workdir."
            ) from None
        try:
            data = json.dumps(holder_info(self.token), indent=1).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
        except OSError as e:  # Disk full, read-only file system.
            os.close(fd)
            raise _not_writable(self.workdir, e) from e
        self._fd = fd

    @staticmethod
    def _read_info(fd: int) -> dict:
        try:
            return json.loads(os.pread(fd, 65536, 0).decode() or "{}")
        except (OSError, ValueError):
            return {}

    # --------------------------------------------------------------------------- remote
    def _read_lease(self) -> dict | None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        try:
            info = json.loads(text)
        except ValueError:
            return {}  # Unreadable: treated as stale.
        return info if isinstance(info, dict) else {}

    def _holds_lease(self) -> bool:
        info = self._read_lease()
        return bool(info) and info.get("token") == self.token

    def _write_lease(self) -> None:
        storage.write_text_atomic(self.path, json.dumps(holder_info(self.token), indent=1))

    def _acquire_lease(self) -> None:
        info = self._read_lease()
        if info and info.get("token") != self.token:
            age = time.time() - float(info.get("heartbeat", 0))
            if age < self.stale_after_s:
                raise WorkdirBusyError(
                    f"{self.workdir} is in use by another training run: {describe(info)}, "
                    f"last heartbeat {age:.0f} s ago. Wait for it to finish or stop it. If that "
                    f"run is dead, its lease goes stale {self.stale_after_s - age:.0f} s from "
                    f"now (or delete {self.path}); or pass another --workdir."
                )
        try:
            self._write_lease()
        except OSError as e:
            raise _not_writable(self.workdir, e) from e
        # Two runs that found the lease free at once both wrote it: the last write won.
        time.sleep(0.5)
        if not self._holds_lease():
            raise WorkdirBusyError(
                f"{self.workdir}: another training run took the workdir at the same moment "
                f"({describe(self._read_lease() or {})}). Pass another --workdir."
            )
        self._thread = threading.Thread(target=self._heartbeat, daemon=True, name="run.lock")
        self._thread.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                self._write_lease()
            except OSError:
                pass  # A missed heartbeat: the next one may succeed.


@contextlib.contextmanager
def lock_workdir(workdir: Workdir):
    """Holds the workdir's lock for the `with` block (in a multi-process run process 0 takes
    it, and every process learns whether it could)."""
    lock = WorkdirLock(workdir)
    error = None
    if jax.process_index() == 0:
        try:
            lock.acquire()
        except (WorkdirBusyError, OSError) as e:
            error = e
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        ok = multihost_utils.broadcast_one_to_all(np.int32(error is None))
        if ok == 0 and error is None:
            error = WorkdirBusyError(f"process 0 could not lock {workdir}: see its log.")
    if error is not None:
        raise error
    try:
        yield
    finally:
        lock.release()
