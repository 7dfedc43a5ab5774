"""A run's logged metrics: the rows of `metrics.jsonl` (written by
`transformer_jax.training.metrics_writer`), read back by split."""

from __future__ import annotations

import json
import os

from transformer_jax.runs.layout import Workdir


def read_metrics(workdir: str | os.PathLike) -> dict[str, list[dict]]:
    """Rows of `metrics.jsonl` grouped by split; a step logged twice keeps its last row."""
    path = Workdir.at(workdir).metrics
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: is {workdir} a training workdir?")
    by_split: dict[str, dict[int, dict]] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{number}: not a JSON line ({e}).") from e
        by_split.setdefault(row["split"], {})[row["step"]] = row
    return {split: [rows[s] for s in sorted(rows)] for split, rows in by_split.items()}
