"""Checkpoints, configs and tokenizers are read without pickle or eval.

(a) The source of the package, train.py and the configs uses no pickle-like deserializer, no
eval/exec, no unsafe yaml and no `allow_pickle=True`.
(b) A workdir whose files are pickles that would create a marker file when unpickled: loading it
for inference and resuming training raise clean errors (or ignore a file they never read), and
the marker is never created.
"""

from __future__ import annotations

import ast
import pathlib
import pickle
import re
import shutil

import pytest

from configs import tiny
from tests.robustness.hostile import run_cli
from transformer_jax.cli import translate
from transformer_jax.inference.classifier import Classifier
from transformer_jax.inference.translator import Translator
from transformer_jax.runs.layout import CheckpointError
from transformer_jax.training import train_and_evaluate

# A restore that fails on a damaged file leaves Orbax coroutines that are never awaited; Python
# reports them when they are garbage-collected (in this process only: a CLI exits cleanly).
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = sorted(
    [*(ROOT / "transformer_jax").rglob("*.py"), ROOT / "train.py", *(ROOT / "configs").glob("*.py")]
)
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "marshal", "shelve",
                  "jsonpickle", "joblib", "torch"}  # fmt: skip
UNSAFE_CALLS = {"eval", "exec"}  # (stdlib_gather imports the stdlib by name: not a file.)
UNSAFE_ATTRIBUTES = {"load", "loads", "unsafe_load", "full_load", "read_pickle", "Unpickler"}


def unsafe_uses(path: pathlib.Path) -> list[str]:
    """`file:line: what` for every unsafe deserialization in one source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names
                      if a.name.split(".")[0] in UNSAFE_MODULES]  # fmt: skip
        elif (
            isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES
        ):
            found.append(f"{where}: from {node.module} import ...")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in UNSAFE_CALLS:
                found.append(f"{where}: {func.id}(...)")
            owner = getattr(func, "value", None)
            owner = owner.id if isinstance(owner, ast.Name) else None
            if owner in {"yaml", "pd", "pandas"} and func.attr in UNSAFE_ATTRIBUTES:
                found.append(f"{where}: {owner}.{func.attr}(...)")
            for keyword in node.keywords:
                if keyword.arg == "allow_pickle" and not (
                    isinstance(keyword.value, ast.Constant) and keyword.value.value is False
                ):
                    found.append(f"{where}: allow_pickle={ast.unparse(keyword.value)}")
    return found


def test_the_scan_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import pickle\nfrom dill import loads\neval('1')\nimport yaml\nyaml.load(s)\n"
                   "np.load(f, allow_pickle=True)\nnp.load(f, allow_pickle=False)\n")  # fmt: skip
    assert [f.split(": ", 1)[1] for f in unsafe_uses(bad)] == [
        "import pickle", "from dill import ...", "eval(...)", "yaml.load(...)",
        "allow_pickle=True",
    ]  # fmt: skip


def test_no_pickle_eval_or_unsafe_yaml_in_the_source():
    assert len(SOURCES) > 50
    assert [use for path in SOURCES for use in unsafe_uses(path)] == []


# ------------------------------------------------------------------------- pickled workdir files
class _Payload:
    """Unpickling this creates `marker` (opening it for writing), and does nothing else."""

    def __init__(self, marker: pathlib.Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "UNPICKLED"
    payload = pickle.dumps(_Payload(path))
    pickle.loads(payload).close()  # The payload works: unpickling creates the marker ...
    assert path.exists()
    path.unlink()  # ... which each test checks is never created again.
    yield path, payload
    assert not path.exists(), "a workdir file was unpickled"


def copy_run(source: pathlib.Path, tmp_path: pathlib.Path, *, cache: bool = False):
    target = tmp_path / "run"
    ignored = ["tensorboard", "eval"] + ([] if cache else ["cache"])
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*ignored))
    return target


STEP = "checkpoints/30"
PICKLED_FILES = [
    "config.json", "model.json", "tokenizer.model", "tokenizer.json",
    f"{STEP}/_CHECKPOINT_METADATA", f"{STEP}/state/_METADATA", f"{STEP}/state/_sharding",
    f"{STEP}/state/manifest.ocdbt", f"{STEP}/state/array_metadatas/process_0",
    f"{STEP}/meta/metadata", f"{STEP}/data/metadata",
]  # fmt: skip
NOT_READ_FOR_INFERENCE = {  # Inference reads the parameters and, as JSON, the run identity in
    "tokenizer.json", f"{STEP}/_CHECKPOINT_METADATA",  # meta/metadata: nothing else of Orbax's.
    f"{STEP}/data/metadata",
}  # fmt: skip


@pytest.mark.parametrize("file", PICKLED_FILES)
def test_a_pickle_in_a_workdir_is_never_unpickled_by_inference(
    tiny_workdir, tmp_path, marker, file
):
    workdir = copy_run(tiny_workdir, tmp_path)
    (workdir / file).write_bytes(marker[1])
    if file in NOT_READ_FOR_INFERENCE:
        Translator.from_checkpoint(workdir)  # A file inference never reads.
    else:
        with pytest.raises(CheckpointError):
            Translator.from_checkpoint(workdir)
    code, _, err = run_cli(translate.main, [f"--workdir={workdir}", "--beam_size=1"], b"nine\n")
    assert code == (0 if file in NOT_READ_FOR_INFERENCE else 1) and "Traceback" not in err, err


def test_a_pickled_labels_json_is_never_unpickled(tiny_classifier, tmp_path, marker):
    workdir = copy_run(tiny_classifier, tmp_path)
    (workdir / "labels.json").write_bytes(marker[1])
    with pytest.raises(CheckpointError, match="labels.json"):
        Classifier.from_checkpoint(workdir)


@pytest.mark.parametrize(
    ("file", "message"),
    [
        ("tokenizer.model", "tokenizer.model: not a SentencePiece model"),
        ("tokenizer.json", "tokenizer.json: not the JSON object"),
        ("cache/tokens-*/src_ids.npy", "a damaged cache of tokenized text"),
        ("cache/tokens-*/meta.json", "a damaged cache of tokenized text"),
    ],
)
def test_a_pickle_in_a_workdir_is_never_unpickled_when_resuming(
    tiny_workdir, tmp_path, marker, file, message
):
    workdir = copy_run(tiny_workdir, tmp_path, cache=True)
    (target,) = workdir.glob(file)
    target.write_bytes(marker[1])
    config = tiny.get_config()
    config.num_train_steps = 30  # Nothing to train: the run only resumes.
    with pytest.raises(ValueError, match=re.escape(message)):
        train_and_evaluate(config, str(workdir))
