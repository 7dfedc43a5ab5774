"""Downloads the wheels the GPU machine lacks into benchmarks/gpu_wheels/ (git-ignored).

    python benchmarks/gpu_wheels.py        # on a machine with the package index

The GPU machine that `benchmarks/gpu_measure.py` runs on (one H100 or H200, x86-64, Python
3.12, no network) has jax with its CUDA plugin, flax, optax, orbax-checkpoint, chex, numpy,
etils, absl-py, jaxtyping, sentencepiece, sacrebleu, tqdm, matplotlib, safetensors, tokenizers
and transformers, and none of `WHEELS`. Each is pinned at the version installed where this
script runs (the one the tests here ran against) and fetched as a wheel for CPython 3.12 on
manylinux x86-64 (`py3-none-any` for pure Python), without its dependencies: those it needs
beyond the machine's own are in the list too. The folder travels with the working tree to the
GPU machine, 64 MiB in all: the script fails when tree and wheels together would not fit.

Not needed there, so not fetched: tensorflow-datasets (with importlib_resources and h5py, which
it imports) and gcsfs. No code path of the GPU run imports them: the WMT configs read TFDS only
in their input pipeline, which `gpu_measure.py` never builds (it makes random batches of the
configs' shapes), and nothing there writes to gs://.

Writes `manifest.json` beside the wheels: each wheel's distribution, version, file, size,
sha256 and why the GPU run needs it; `gpu_measure.py` installs from it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOLDER = ROOT / "benchmarks" / "gpu_wheels"
MANIFEST = "manifest.json"
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux2014_x86_64")
CARRY_LIMIT = 64 * 2**20  # What may travel to the GPU machine: working tree and wheels.

# Distribution -> why the GPU run needs it (the machine lacks all of these).
WHEELS = {
    "ml-collections": "configs/*.py and the training loop (ConfigDict)",
    "grain": "the input pipelines (transformer_jax.data.epochs), imported with the tasks",
    "array-record": "imported by grain",
    "attrs": "imported by grain",
    "cloudpickle": "imported by grain",
    "portpicker": "imported by grain",
    "num2words": "the embedded number corpus of configs/tiny.py (the GPU train run)",
    "tensorboardX": "train.py's TensorBoard log",
    "pytest": "the GPU tests",
    "pluggy": "imported by pytest",
    "iniconfig": "imported by pytest",
    "pytest-xdist": "pyproject.toml's pytest options (--dist)",
    "execnet": "imported by pytest-xdist",
    "beartype": "tests/conftest.py checks every shape annotation at run time",
}


def download(name: str, version: str, folder: pathlib.Path) -> pathlib.Path:
    """Fetches `name==version` as a CPython 3.12 manylinux x86-64 (or pure-Python) wheel."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    before = set(folder.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", PYTHON_VERSION, "--implementation", "cp", *platforms,
           "--quiet", "-d", str(folder), f"{name}=={version}"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"pip download {name}=={version} failed:\n{proc.stderr[-2000:]}")
    new = set(folder.glob("*.whl")) - before
    key = _normalise(name)
    matches = [p for p in new | before if _normalise(p.name.split("-")[0]) == key
               and p.name.split("-")[1] == version]  # fmt: skip
    if len(matches) != 1:
        raise SystemExit(f"expected one wheel of {name}=={version} in {folder}, found {matches}")
    return matches[0]


def _normalise(name: str) -> str:
    """A distribution name as wheel file names spell it (PEP 427: runs of -_. become _)."""
    return "_".join(part for part in name.lower().replace("-", "_").replace(".", "_").split("_")
                    if part)  # fmt: skip


def tree_bytes() -> int:
    """Bytes of the working tree that travels: tracked and untracked files git does not ignore."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split("\0")  # fmt: skip
    return sum((ROOT / f).stat().st_size for f in files if f and (ROOT / f).is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", default=str(FOLDER), help="Where the wheels go.")
    args = parser.parse_args()
    folder = pathlib.Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.whl"):
        stale.unlink()
    entries = []
    for name, why in WHEELS.items():
        version = importlib.metadata.version(name)
        path = download(name, version, folder)
        data = path.read_bytes()
        entries.append({"name": name, "version": version, "file": path.name,
                        "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                        "why": why})  # fmt: skip
        print(f"{path.name:<60} {len(data) / 2**20:6.2f} MiB  ({why})")
    total = sum(e["bytes"] for e in entries)
    tree = tree_bytes()
    manifest = {"python_version": PYTHON_VERSION, "platforms": list(PLATFORMS),
                "total_bytes": total, "wheels": entries}  # fmt: skip
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    print(
        f"{len(entries)} wheels, {total / 2**20:.1f} MiB; with the working tree "
        f"({tree / 2**20:.1f} MiB): {(total + tree) / 2**20:.1f} of "
        f"{CARRY_LIMIT / 2**20:.0f} MiB. Wrote {folder / MANIFEST}"
    )
    if total + tree > CARRY_LIMIT:
        raise SystemExit("too large to travel to the GPU machine: drop what the run does not need")


if __name__ == "__main__":
    main()
