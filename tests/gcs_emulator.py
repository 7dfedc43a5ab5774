"""A local Cloud Storage emulator for tests: `gs://` paths without Google credentials.

`GcsEmulator` runs the `gcp-storage-emulator` package (in memory) in a subprocess on a free
127.0.0.1 port, creates one bucket, and points every client the project uses at it:

* gcsfs (so `etils.epath.Path("gs://...")`): `STORAGE_EMULATOR_HOST`, anonymous token
  (`FSSPEC_GCS_TOKEN=anon`), and `GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`: gcsfs' default
  filesystem otherwise asks the gRPC Storage Control API for the bucket type, which the
  emulator does not serve (60 s timeout per call, then a fallback to the plain filesystem).
* TensorStore (Orbax's array writer): `TENSORSTORE_GCS_HTTP_URL` and a fixed bearer token in
  `GOOGLE_AUTH_TOKEN_FOR_TESTING` (else it looks for credentials or a metadata server).
* google-cloud-storage (tensorboardX's `gs://` writer): `STORAGE_EMULATOR_HOST` (anonymous).

The subprocess fills gaps of the emulator that the clients hit: the JSON API's `moveTo` (gcsfs'
rename; added as copy + delete), the `ifGenerationMatch`/`ifGenerationNotMatch` preconditions
(412/304) and the `x-goog-generation` header on reads, which TensorStore's OCDBT store needs
(without them Orbax fails with "Malformed StorageGeneration" once a checkpoint has many arrays).

Use the session fixture: `from tests.gcs_emulator import gcs_bucket` in a test module (or in
conftest.py), then take `gcs_bucket` (a `gs://NAME` string) as a test argument.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

# Read by gcsfs when it is first imported: set it here too, in case no fixture ran yet.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


def _serve(bucket: str) -> None:
    """Subprocess body: serve `bucket` on a free port, print the port, serve until stdin closes."""
    import logging
    import threading
    from http import HTTPStatus, server

    from gcp_storage_emulator import server as emu
    from gcp_storage_emulator.exceptions import NotFound
    from gcp_storage_emulator.handlers import objects

    logging.disable(logging.CRITICAL)  # Every request logs; client hang-ups print tracebacks.

    def move(request, response, storage, *args, **kwargs):
        params = request.params
        try:
            obj = objects._copy(
                request.base_url, storage, params["bucket_name"], params["object_id"],
                params["bucket_name"], params["dest_object_id"],
            )  # fmt: skip
            storage.delete_file(params["bucket_name"], params["object_id"])
            response.json(obj)
        except NotFound:
            response.status = HTTPStatus.NOT_FOUND

    def generation(storage, bucket, name):
        try:
            return int(storage.get_file_obj(bucket, name)["generation"])
        except NotFound:
            return None

    def conditional(handler, *, write):
        """Honours ifGenerationMatch / ifGenerationNotMatch, as TensorStore's writes need."""

        def wrapped(request, response, storage, *args, **kwargs):
            query, params = request.query, request.params
            bucket = params["bucket_name"]
            name = params.get("object_id") or query.get("name", [None])[0]
            match = query.get("ifGenerationMatch", [None])[0]
            not_match = query.get("ifGenerationNotMatch", [None])[0]
            if name is not None and (match is not None or not_match is not None):
                current = generation(storage, bucket, name)
                if match is not None and current != (int(match) or None):
                    response.status = HTTPStatus.PRECONDITION_FAILED
                    return None
                if not_match is not None and current == int(not_match):
                    response.status = (
                        HTTPStatus.PRECONDITION_FAILED if write else HTTPStatus.NOT_MODIFIED
                    )
                    return None
            result = handler(request, response, storage, *args, **kwargs)
            if not write and name is not None and response.status in (HTTPStatus.OK, 206):
                if (current := generation(storage, bucket, name)) is not None:
                    response["x-goog-generation"] = str(current)  # TensorStore reads it.
                    response["x-goog-metageneration"] = "1"
            return result

        return wrapped

    wrappers = {
        objects.get: conditional(objects.get, write=False),
        objects.download: conditional(objects.download, write=False),
        objects.insert: conditional(objects.insert, write=True),
        objects.delete: conditional(objects.delete, write=True),
    }
    route = r"^/storage/v1/b/(?P<bucket_name>[-.\w]+)/o/(?P<object_id>.*[^/]+)/moveTo/o/"
    route += r"(?P<dest_object_id>.*[^/]+)$"
    emu.HANDLERS = ((route, {"POST": move}),) + tuple(
        (regex, {method: wrappers.get(f, f) for method, f in methods.items()})
        for regex, methods in emu.HANDLERS
    )
    lock = threading.Lock()  # The emulator's storage is not thread-safe: one request at a time.
    handle = emu.Router.handle

    def locked_handle(self, method):
        with lock:
            handle(self, method)

    emu.Router.handle = locked_handle

    class Server(server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128  # TensorStore opens many connections at once.

        def handle_error(self, request, client_address):  # Client hang-ups: not our problem.
            pass

    srv = emu.create_server("127.0.0.1", 0, in_memory=True, default_bucket=bucket)
    httpd = Server(("127.0.0.1", 0), lambda *a: emu.RequestHandler(srv._storage, *a))
    print(httpd.server_address[1], flush=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    sys.stdin.read()  # Returns when the test process closes the pipe or dies: then exit.


class GcsEmulator:
    """An emulator subprocess and the environment variables that send clients to it."""

    def __init__(self, bucket: str | None = None):
        self.bucket = bucket or f"test-{uuid.uuid4().hex[:12]}"
        self._proc: subprocess.Popen | None = None
        self._saved_env: dict[str, str | None] = {}
        self.port = 0

    @property
    def url(self) -> str:
        """The bucket as a `gs://NAME` URL."""
        return f"gs://{self.bucket}"

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that send gcsfs, TensorStore and google-cloud-storage here."""
        host = f"http://127.0.0.1:{self.port}"
        return {
            "STORAGE_EMULATOR_HOST": host,
            "FSSPEC_GCS_TOKEN": "anon",
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
            "TENSORSTORE_GCS_HTTP_URL": host,
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator-token",
        }

    def start(self) -> GcsEmulator:
        """Start the emulator, and set `env` in this process (undone by `stop`)."""
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), self.bucket],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self._proc.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError(f"the GCS emulator did not start (printed {line!r}).")
        self.port = int(line)
        for key, value in self.env.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        _reset_gcs_clients()
        return self

    def stop(self) -> None:
        """Stop the emulator and restore the environment."""
        if self._proc is not None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
            self._proc.stdout.close()
            self._proc = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        _reset_gcs_clients()

    def __enter__(self) -> GcsEmulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _reset_gcs_clients() -> None:
    """Make gcsfs, fsspec and epath pick up the current environment on their next `gs://` use."""
    import fsspec
    import gcsfs.core

    token = os.environ.get("FSSPEC_GCS_TOKEN")
    for protocol in ("gs", "gcs"):
        conf = fsspec.config.conf.setdefault(protocol, {})
        if token:
            conf["token"] = token
        else:
            conf.pop("token", None)
        if os.environ.get("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT") == "false":
            # gcsfs may have been imported (with its extended filesystem) before we got here.
            fsspec.register_implementation(protocol, gcsfs.core.GCSFileSystem, clobber=True)
    gcsfs.core.GCSFileSystem.clear_instance_cache()
    try:
        from etils.epath import backend

        backend.fsspec_backend._get_filesystem.cache_clear()
    except (ImportError, AttributeError):
        pass


def list_objects(url: str) -> list[str]:
    """The `gs://` URLs of the objects under `url`, asked of the emulator directly (no gcsfs)."""
    import json
    import urllib.parse
    import urllib.request

    bucket, _, prefix = url.removeprefix("gs://").partition("/")
    query = urllib.parse.urlencode({"prefix": prefix})
    host = os.environ["STORAGE_EMULATOR_HOST"]
    with urllib.request.urlopen(f"{host}/storage/v1/b/{bucket}/o?{query}", timeout=10) as r:
        items = json.load(r).get("items", [])
    return sorted(f"gs://{bucket}/{item['name']}" for item in items)


@pytest.fixture(scope="session")
def gcs_bucket() -> Iterator[str]:
    """A `gs://NAME` bucket on a local emulator, for the whole test session."""
    with GcsEmulator() as emulator:
        yield emulator.url


if __name__ == "__main__":
    _serve(sys.argv[1])
