"""Run logs: a console progress line, `metrics.jsonl`, and TensorBoard events (no TensorFlow).

Only process 0 writes; other processes get a writer that does nothing.
"""

from __future__ import annotations

import json
import sys
import time

from transformer_jax import storage
from transformer_jax.runs.layout import Workdir


def format_duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class MetricsWriter:
    """Appends `{"step": ..., "split": ..., **metrics}` lines and TensorBoard scalars."""

    def __init__(self, workdir: Workdir, *, enabled: bool = True, total_steps: int = 0):
        self.enabled = enabled
        self.total_steps = total_steps
        self._tb = None
        self._file = None
        if enabled:
            workdir.path.mkdir(parents=True, exist_ok=True)
            self._file = storage.LineAppender(workdir.metrics)
            self._tb = storage.tensorboard_writer(workdir.tensorboard)

    def write(self, step: int, split: str, metrics: dict) -> None:
        if not self.enabled:
            return
        row = {"step": int(step), "split": split, "time": time.time()}
        # Numbers as floats; strings and lists (a confusion matrix) as they are, not plotted.
        scalars = {k: float(v) for k, v in metrics.items() if not isinstance(v, (str, list))}
        row.update({k: scalars.get(k, v) for k, v in metrics.items()})
        self._file.append(json.dumps(row))
        for k, v in scalars.items():
            self._tb.add_scalar(f"{split}/{k}", v, int(step))
        self._tb.flush()

    def progress(
        self, step: int, metrics: dict, steps_per_sec: float, unit: str = "tokens"
    ) -> None:
        """One console line: a bar, step, loss, learning rate, `unit`/s (e.g. tokens), the
        model FLOPs utilisation where the metrics have it, and ETA."""
        if not self.enabled:
            return
        total = max(self.total_steps, 1)
        done = int(20 * step / total)
        eta = (total - step) / steps_per_sec if steps_per_sec > 0 else 0.0
        line = (
            f"[{'#' * done}{'.' * (20 - done)}] step {step}/{total} | "
            f"loss {metrics['loss']:.4f} | lr {metrics['learning_rate']:.2e} | "
            f"{metrics[f'{unit}_per_sec']:,.0f} {'tok' if unit == 'tokens' else unit}/s | "
            + (f"MFU {metrics['mfu']:.1%} | " if "mfu" in metrics else "")
            + f"ETA {format_duration(eta)}"
        )
        print(line, file=sys.stderr, flush=True)

    def message(self, text: str) -> None:
        if self.enabled:
            print(text, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._tb is not None:
            self._tb.close()
