"""Own labelled examples from TSV files: `label<TAB>text` or `label<TAB>text_a<TAB>text_b`.

Every line of a file must have the same number of fields; blank lines are skipped. The classes
are the training file's labels, sorted; an eval or test label that training never saw is an
error naming the line.
"""

from __future__ import annotations

from transformer_jax.data.classify.examples import Example, LabelledSplits
from transformer_jax.data.files import read_text, split_lines


def read_tsv_rows(path: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank line; 2 or 3 fields, the same on every line."""
    rows, width = [], None
    for number, line in enumerate(split_lines(read_text(path)), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) not in (2, 3) or not all(f.strip() for f in fields):
            raise ValueError(
                f"{path}:{number}: expected 'label<TAB>text' or 'label<TAB>text_a<TAB>text_b' "
                f"with no empty field, got {len(fields)} field(s): {line[:80]!r}."
            )
        if width is not None and len(fields) != width:
            kind = "pairs" if width == 3 else "single texts"
            raise ValueError(
                f"{path}:{number}: {len(fields)} fields, but earlier lines have {width} "
                f"({kind}). A pair needs both texts; every line must have the same layout."
            )
        width = len(fields)
        rows.append((number, fields))
    if not rows:
        raise ValueError(f"{path}: no examples (every line is blank).")
    return rows


def tsv_dataset(train: str, eval_path: str, test: str | None) -> LabelledSplits:
    """The examples of the three files, labelled by the training file's classes."""
    paths = {"train": train, "eval": eval_path, "test": test}
    rows = {split: read_tsv_rows(path) for split, path in paths.items() if path is not None}
    widths = {split: len(r[0][1]) for split, r in rows.items()}
    if len(set(widths.values())) > 1:
        raise ValueError(
            f"the TSV files disagree on single texts vs pairs (fields per line: {widths})."
        )
    names = tuple(sorted({fields[0] for _, fields in rows["train"]}))
    if len(names) < 2:
        raise ValueError(f"{train}: only one label {names}; classification needs at least 2.")
    index = {name: i for i, name in enumerate(names)}
    splits = {"test": []}
    for split, split_rows in rows.items():
        examples = []
        for number, fields in split_rows:
            if fields[0] not in index:
                raise ValueError(
                    f"{paths[split]}:{number}: label {fields[0]!r} is not among the training "
                    f"labels {list(names)}."
                )
            b = fields[2] if len(fields) == 3 else None
            examples.append(Example(fields[1], b, index[fields[0]]))
        splits[split] = examples
    return LabelledSplits(names, splits)
