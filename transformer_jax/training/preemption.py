"""Preemption: SIGTERM (how TPU VMs, GKE and most schedulers announce it) means "save and exit".

One process: a Python SIGTERM handler sets a flag that the loop reads after every step.

Several processes: SIGTERM usually reaches one host first. JAX's preemption service (started
by `jax.distributed.initialize`) catches it, tells the other processes through the coordination
service, and agrees with them on one step at which `reached_preemption_sync_point(step)`
returns True on every process: they all save that same step and exit together. The loop must
then ask at every step, on every process, from the same starting step.
"""

from __future__ import annotations

import logging
import signal
import threading

import jax


class Preemption:
    """Install at the start of a run (before anything slow); ask `reached(step)` every step."""

    def __init__(self):
        self._requested = False
        self._previous = None
        self.multi_process = jax.process_count() > 1
        if self.multi_process:
            return  # JAX's preemption service owns SIGTERM (see the module doc).
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum, frame):
        del signum, frame
        logging.warning("SIGTERM received: saving a checkpoint before exiting.")
        self._requested = True

    @property
    def requested(self) -> bool:
        """Whether this process received SIGTERM (single process only; see `reached`)."""
        return self._requested

    def reached(self, step: int) -> bool:
        """Whether to save `step` and stop: the same answer on every process.

        Multi-process runs must call this at every step on every process.
        """
        if self.multi_process:
            from jax.experimental import multihost_utils

            return multihost_utils.reached_preemption_sync_point(step)
        return self._requested

    def restore_handler(self) -> None:
        """Puts back the SIGTERM handler that was there before (the default: terminate)."""
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None
