"""Paths of workdirs and caches: local folders and Cloud Storage (`gs://`) alike.

Every path is an `etils.epath.Path`, the type Orbax and TFDS use: local paths go through `os`,
`gs://` through gcsfs. Object stores differ from a disk in ways this module hides:

* there are no directories: `mkdir` does nothing, and a "directory" exists once a file is in it;
* an object write is atomic (readers see the old object or the new one), so no temp + rename;
* there is no append: gcsfs opens mode "a" as "w" (with a warning), losing what was there.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import struct
import time
import uuid
from typing import Any, Protocol, runtime_checkable

from etils import epath

_SCHEMES = ("gs", "s3", "az", "hf")  # What epath supports, besides local paths.
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_remote(path: str | os.PathLike) -> bool:
    """Whether `path` is a URI (`gs://bucket/...`) rather than a local path (or file://)."""
    text = os.fspath(path)
    return "://" in text and not text.startswith("file://")


def as_path(path: str | os.PathLike) -> epath.Path:
    """The `epath.Path` of a local path (`~` expanded, made absolute) or of a URI (untouched).

    Raises:
      ValueError: for a path with a "gs:" component (a URI that lost a slash, as
        `pathlib.Path("gs://b")` makes it, would be a local folder named "gs:"), or a scheme
        epath does not support.
      ImportError: for `gs://` when gcsfs is not installed.
    """
    text = os.fspath(path)
    match = _URI.match(text)
    if match and match.group(1).lower() == "file":
        text = text[len(match.group(0)) :]
    elif match:
        scheme = match.group(1).lower()
        if scheme not in _SCHEMES:
            raise ValueError(f"{text!r}: unsupported scheme {scheme}:// (use a local path or "
                             f"{', '.join(s + '://' for s in _SCHEMES)}).")  # fmt: skip
        if scheme == "gs" and importlib.util.find_spec("gcsfs") is None:
            raise ImportError(f"{text}: gs:// paths need gcsfs: pip install gcsfs")
        return epath.Path(scheme + text[len(scheme) :])
    parts = text.replace(os.sep, "/").split("/")
    lost = [p for p in parts if p.endswith(":") and p[:-1].lower() in _SCHEMES]
    if lost:
        raise ValueError(
            f"{text!r} looks like a URI that lost a slash ({lost[0]}/ instead of {lost[0]}//: "
            "pathlib.Path and os.path collapse '//'). Pass the URI as a string, e.g. 'gs://b/run'."
        )
    return epath.Path(os.path.abspath(os.path.expanduser(text)))


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Writes `data` so that readers never see half a file (temp + rename on local disks).

    Args:
      path: the file; its parent folders are created.
      data: the new content.
    """
    path = as_path(path)
    if is_remote(path):
        path.write_bytes(data)  # One object upload: atomic.
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """`write_bytes_atomic` of `text` in UTF-8."""
    write_bytes_atomic(path, text.encode("utf-8"))


def upload_tree(local: str | os.PathLike, dest: str | os.PathLike) -> None:
    """Copies every file under the local folder `local` to the same place under `dest`
    (local or remote), folders included."""
    dest = as_path(dest)
    for folder, _, files in sorted(os.walk(local)):
        for name in sorted(files):
            path = os.path.join(folder, name)
            target = dest / os.path.relpath(path, local)
            if not is_remote(target):
                target.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "rb") as f:
                target.write_bytes(f.read())


class LineAppender:
    """Appends lines to a text file (e.g. metrics.jsonl), keeping what it held before.

    Local files are opened in append mode. Object stores cannot append: the content is read
    once, kept in memory, and the whole object is rewritten at each `append` (fine for logs of
    a few MB; every append costs an upload of the file so far).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = as_path(path)
        self._remote = is_remote(self.path)
        self._file = None
        self._lines: list[str] = []
        if self._remote:
            if self.path.exists():
                self._lines = [self.path.read_text(encoding="utf-8")]
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def append(self, line: str) -> None:
        """Adds `line` and a newline, and makes it durable (flush, or upload)."""
        if self._file is not None:
            self._file.write(line + "\n")
            self._file.flush()
        else:
            self._lines.append(line + "\n")
            self.path.write_text("".join(self._lines), encoding="utf-8")

    def close(self) -> None:
        """Closes the local file (remote content is already written)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> LineAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@runtime_checkable
class EventWriter(Protocol):
    """What the training loop uses of a `tensorboardX.SummaryWriter`."""

    def add_scalar(self, tag: str, scalar_value: Any, global_step: Any = None) -> Any: ...
    def flush(self) -> Any: ...
    def close(self) -> Any: ...


class _ObjectEventWriter:
    """TensorBoard scalars for an object store: events are kept in memory, with no thread, and
    each `flush` uploads the events file so far (about 50 bytes a scalar) as one object.

    (tensorboardX's own gs:// writer needs google-cloud-storage and its `flush` does not wait
    for the events its thread has queued.)
    """

    def __init__(self, logdir: epath.Path):
        host, tag = socket.gethostname(), uuid.uuid4().hex[:8]
        self.path = logdir / f"events.out.tfevents.{int(time.time())}.{host}.{tag}"
        self._data = bytearray()
        self._uploaded = 0
        self._add(file_version="brain.Event:2")

    def _add(self, **fields: Any) -> None:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.record_writer import masked_crc32c

        data = Event(wall_time=time.time(), **fields).SerializeToString()
        header = struct.pack("<Q", len(data))
        for chunk in (header, data):
            self._data += chunk + struct.pack("<I", masked_crc32c(chunk))

    def add_scalar(self, tag: str, scalar_value: Any, global_step: Any = None) -> None:
        """Adds one scalar (sent at the next `flush` or `close`)."""
        from tensorboardX.summary import scalar

        self._add(step=int(global_step or 0), summary=scalar(tag, float(scalar_value)))

    def flush(self) -> None:
        """Uploads the events file if scalars were added since the last upload."""
        if len(self._data) != self._uploaded:
            self.path.write_bytes(bytes(self._data))
            self._uploaded = len(self._data)

    def close(self) -> None:
        self.flush()


def tensorboard_writer(logdir: str | os.PathLike) -> EventWriter:
    """A tensorboardX `SummaryWriter` for `logdir`, local or remote.

    Remote: a scalar-only writer (`add_scalar`, `flush`, `close`) whose events reach `logdir`
    at each `flush()` and at `close()`.
    """
    logdir = as_path(logdir)
    if is_remote(logdir):
        return _ObjectEventWriter(logdir)
    from tensorboardX import SummaryWriter

    return SummaryWriter(os.fspath(logdir))
