"""Counting steps whose loss or gradient was not finite, and stopping after too many in a row.

The train step itself skips such an update (parameters and optimizer state stay as they were,
see `train_step`) and reports `nonfinite`; the loop feeds each step's flag here.
"""

from __future__ import annotations

import logging


class NonFiniteError(FloatingPointError):
    """Too many steps in a row had a NaN/Inf loss or gradient; the message says what to do."""


class NonFiniteCounter:
    """Consecutive non-finite steps; `update` raises `NonFiniteError` at `limit` in a row."""

    def __init__(self, limit: int):
        self.limit = limit
        self.in_a_row = 0
        self.total = 0
        self.first = None  # The first step of the current run of non-finite steps.

    def update(self, step: int, nonfinite: float, ckpt=None) -> None:
        """Records whether `step` (1-based) was skipped for a non-finite loss or gradient.

        Args:
          step: the step's number.
          nonfinite: the step's `nonfinite` metric (1.0 skipped, 0.0 applied).
          ckpt: the run's `Checkpoints`, to name the last checkpoint in the error.
        """
        if not nonfinite:
            self.in_a_row, self.first = 0, None
            return
        self.total += 1
        self.in_a_row += 1
        self.first = step if self.first is None else self.first
        logging.warning("step %d: non-finite loss or gradient; the update was skipped.", step)
        if self.in_a_row < self.limit:
            return
        saved = ""
        if ckpt is not None:
            ckpt.wait()
            latest = ckpt.latest_step()
            saved = (
                f" The newest checkpoint, step {latest} in {ckpt.workdir.checkpoints}, holds "
                f"the parameters before these steps; rerunning the same command resumes from it."
                if latest is not None
                else " No checkpoint was saved yet."
            )
        raise NonFiniteError(
            f"steps {self.first}-{step}: {self.in_a_row} steps in a row had a NaN or Inf loss "
            f"or gradient (config.max_nonfinite_steps={self.limit}); their updates were skipped "
            f"and training stopped.{saved} Lower the learning rate (config.lr_factor), raise "
            f"config.warmup_steps, set config.grad_clip_norm, or look for broken inputs in the "
            f"data at these steps."
        )
