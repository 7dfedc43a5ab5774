"""Every measured figure in the documents agrees with the results file it is generated from
(benchmarks/figures.py), and the check catches a document that disagrees."""

import ast
import json
import re

import pytest

from benchmarks import figures


def test_no_document_has_a_stale_figure():
    stale = []
    for doc in figures.documents():
        _, changes = figures.refresh(doc.read_text(encoding="utf-8"))
        stale += [f"{doc.name}: {c}" for c in changes]
    assert not stale, "run python benchmarks/figures.py:\n" + "\n".join(stale)


def test_the_documents_hold_generated_figures():
    found = sum(
        len(figures.MARKER.findall(d.read_text(encoding="utf-8"))) for d in figures.documents()
    )
    assert found >= 10, found


def test_config_docstrings_are_checked_and_time_runs_only_with_markers():
    configs = [d for d in figures.documents() if d.parent.name == "configs"]
    assert {"default.py", "gpt_stdlib.py", "wmt14_en_de_base.py"} <= {d.name for d in configs}
    typed = re.compile(r"\b(about|in) [0-9.]+ ?(minutes|min|seconds|s|GiB)\b", re.IGNORECASE)
    for config in configs:
        doc = ast.get_docstring(ast.parse(config.read_text(encoding="utf-8"))) or ""
        assert not typed.search(figures.MARKER.sub("", doc)), f"{config.name}: {doc}"
    assert figures.MARKER.search((configs[0].parent / "default.py").read_text())


def test_a_changed_result_is_caught_and_rewritten(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"runs": [{"acc": 0.9029, "s": 1625.4}]}))
    text = ("accuracy <!--fig r.json:runs/0/acc:.2%-->90.29%<!--/fig--> in "
            "<!--fig r.json:runs/0/s:min-->27 min 5 s<!--/fig-->")  # fmt: skip
    assert figures.refresh(text, tmp_path) == (text, [])
    (tmp_path / "r.json").write_text(json.dumps({"runs": [{"acc": 0.9101, "s": 59.6}]}))
    new, changes = figures.refresh(text, tmp_path)
    assert changes == [
        "r.json:runs/0/acc: 90.29% -> 91.01%",
        "r.json:runs/0/s: 27 min 5 s -> 1 min 0 s",
    ]
    assert new == text.replace("90.29%<", "91.01%<").replace("27 min 5 s", "1 min 0 s")


@pytest.mark.parametrize(
    "marker, message",
    [
        ("<!--fig none.json:a:.2f-->1<!--/fig-->", "cannot be read"),
        ("<!--fig r.json:runs/1/acc:.2f-->1<!--/fig-->", "no '1'"),
        ("<!--fig r.json:runs:.2f-->1<!--/fig-->", "not a number"),
        ("<!--fig r.json:runs/0/acc:.2q-->1<!--/fig-->", "format '.2q'"),
        ("<!--fig r.json:runs/0/acc÷runs/0/zero:.2f-->1<!--/fig-->", "divides by zero"),
        ("<!--fig r.json:runs/0/acc÷runs:.2f-->1<!--/fig-->", "runs is"),
        ("<!--fig r.json:runs/0/acc−runs:.2f-->1<!--/fig-->", "runs is"),
        ("<!--fig r.json:runs/0/acc−runs/0/zero÷runs/0/acc:.2f-->1<!--/fig-->", "write one"),
    ],
)
def test_a_marker_that_names_no_figure_is_an_error(tmp_path, marker, message):
    (tmp_path / "r.json").write_text(json.dumps({"runs": [{"acc": 0.5, "zero": 0}]}))
    with pytest.raises(figures.FigureError, match=message):
        figures.refresh(marker, tmp_path)


def test_a_ratio_of_two_figures_is_derived_from_the_file(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"ms": {"f32": 0.48, "int8": 1.85}}))
    text = "<!--fig r.json:ms/f32÷ms/int8:.2f-->0<!--/fig-->x"
    new, changes = figures.refresh(text, tmp_path)
    assert new == "<!--fig r.json:ms/f32÷ms/int8:.2f-->0.26<!--/fig-->x"
    assert changes == ["r.json:ms/f32÷ms/int8: 0 -> 0.26"]


def test_a_difference_of_two_figures_is_derived_from_the_file(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"bleu": {"new": 23.5, "old": 20.25}}))
    new, _ = figures.refresh("<!--fig r.json:bleu/new−bleu/old:+.2f-->0<!--/fig-->", tmp_path)
    assert new == "<!--fig r.json:bleu/new−bleu/old:+.2f-->+3.25<!--/fig-->"
