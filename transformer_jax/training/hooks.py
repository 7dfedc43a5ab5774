"""The training loop's periodic actions: each registered with how often it runs, each testable
alone.

    hooks = Hooks()
    hooks.add("log", train_log, every=config.log_every)
    hooks.add("evaluate", evaluation, every=config.eval_every, when_stopping="skip")
    hooks.add("checkpoint", saver, every=config.checkpoint_every, when_stopping="run")
    ...
    hooks.run(StepEnd(step, final, state, metrics))  # after each step, in registration order

An action is due at every `every`-th step and at the run's last step. When the run is stopping
(a preemption: the step is saved and the run returns), an action registered with
`when_stopping="skip"` does not run (an evaluation would delay the save), one with "run" runs
even off its period (the save itself), and the others follow their period as usual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

WhenStopping = Literal["usual", "skip", "run"]


@dataclasses.dataclass
class StepEnd:
    """What the actions see after a step; an action may set `stopping` (a preemption).

    Attributes:
      step: the steps done (1 after the first).
      final: whether it is the run's last step.
      state: the train state after the step.
      metrics: the step's metrics (device arrays, maybe not computed yet).
      stopping: save this step and return.
      signalled: whether this process has received a stop signal not yet agreed on by every
        process (what `when_stopping="skip"` also skips for).
    """

    step: int
    final: bool
    state: Any
    metrics: dict
    stopping: bool = False
    signalled: Callable[[], bool] = lambda: False


@dataclasses.dataclass(frozen=True)
class Hook:
    """One registered action (see the module doc)."""

    name: str
    action: Callable[[StepEnd], None]
    every: int
    when_stopping: WhenStopping = "usual"

    def due(self, end: StepEnd) -> bool:
        """Whether the action runs after this step."""
        periodic = end.step % self.every == 0 or end.final
        if self.when_stopping == "skip":
            return periodic and not (end.stopping or end.signalled())
        if self.when_stopping == "run":
            return periodic or end.stopping
        return periodic


class Hooks:
    """The actions, run in the order they were added."""

    def __init__(self):
        self._hooks: list[Hook] = []

    def add(
        self,
        name: str,
        action: Callable[[StepEnd], None],
        every: int = 1,
        *,
        when_stopping: str = "usual",  # A WhenStopping; checked here, with a message.
    ) -> None:
        """Registers `action` to run every `every` steps (and at the last step).

        Raises:
          ValueError: `every` is not a positive integer, or `when_stopping` is unknown.
        """
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError(f"hook {name!r}: every={every!r} must be an integer >= 1.")
        if when_stopping not in ("usual", "skip", "run"):
            raise ValueError(
                f"hook {name!r}: when_stopping={when_stopping!r}; use 'usual', 'skip' or 'run'."
            )
        self._hooks.append(Hook(name, action, every, when_stopping))

    @property
    def names(self) -> list[str]:
        return [h.name for h in self._hooks]

    def run(self, end: StepEnd) -> None:
        """Runs every action due after `end.step`, in order."""
        for hook in self._hooks:
            if hook.due(end):
                hook.action(end)
