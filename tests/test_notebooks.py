"""The notebooks: each .py (jupytext percent) has its .ipynb in sync, all share one setup cell,
the README links each with an "Open in Colab" badge, and each runs top to bottom in the fast mode
in a fresh kernel, as on Colab (one device, working directory outside the repository)."""

import os
import pathlib
import re

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

from tests.train_runs import FAST_COMPILE
from transformer_jax.notebook import FAST_ENV

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
SYNC = "run `jupytext --sync notebooks/*.py` (pip install jupytext) and commit both files"
IDS = [p.stem for p in NOTEBOOKS]


def _cells(notebook) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def _code_cells(path: pathlib.Path) -> list[str]:
    return [c.source for c in jupytext.read(path).cells if c.cell_type == "code"]


def test_there_are_six_notebooks():
    assert IDS == [
        "01_attention",
        "02_translator",
        "03_gpt",
        "04_bert",
        "05_vit",
        "06_scaling_out",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_ipynb_is_in_sync_with_its_py(path):
    ipynb = path.with_suffix(".ipynb")
    assert ipynb.is_file(), f"{ipynb.name} is missing: {SYNC}"
    stored = nbformat.read(ipynb, as_version=4)
    assert _cells(stored) == _cells(jupytext.read(path)), f"{ipynb.name} differs: {SYNC}"
    for cell in stored.cells:  # Outputs stay out of git: diffs stay readable.
        assert cell.get("outputs", []) == [], f"{ipynb.name} stores outputs: clear them"
    assert stored.metadata["kernelspec"]["name"] == "python3"


def _setup_cell(path: pathlib.Path) -> str:
    """The first code cell with its CPU_DEVICES value (the one line that may differ) blanked."""
    return re.sub(r"^CPU_DEVICES = \d+", "CPU_DEVICES = N", _code_cells(path)[0], flags=re.M)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_starts_with_the_same_setup_cell(path):
    setup = _setup_cell(NOTEBOOKS[0])
    assert "environment_report()" in setup and "CPU_DEVICES = N" in setup
    assert _setup_cell(path) == setup, f"{path.name}: copy the setup cell of {NOTEBOOKS[0].name}"
    first = jupytext.read(path).cells[0]
    assert first.cell_type == "markdown" and f"notebooks/{path.stem}.ipynb" in first.source, (
        f"{path.name}: the first cell is the title with its Open in Colab badge"
    )


def test_readme_links_every_notebook_with_a_colab_badge():
    readme = (ROOT / "README.md").read_text()
    for path in NOTEBOOKS:
        badge = re.search(
            r"colab\.research\.google\.com/github/[\w.-]+/[\w.-]+/blob/main/notebooks/"
            + re.escape(path.stem + ".ipynb"),
            readme,
        )
        assert badge, f"README: no Open in Colab badge for {path.stem}.ipynb"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs_top_to_bottom_in_the_fast_mode(path, tmp_path):
    env = dict(os.environ)
    # One CPU device, as a Colab CPU runtime has; the tests' fast compilation, for every notebook:
    # most of a fast-mode run is compiling. Notebook 1's timings of attention against a recurrent
    # layer then run unoptimised code, but nothing here checks them: the test is that every cell
    # runs (with full optimisation that notebook took twice as long, mostly compiling).
    env["XLA_FLAGS"] = FAST_COMPILE
    env[FAST_ENV] = "1"
    env["MPLBACKEND"] = "agg"
    # The repository on the path, as the setup cell finds it in a clone; the kernel works in an
    # empty folder so that runs/ lands there.
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    notebook = jupytext.read(path)
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute(env=env)
