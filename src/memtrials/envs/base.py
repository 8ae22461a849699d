"""The one small interface every environment (ALFWorld, ScienceWorld, AppWorld) offers.

Studies score *success* (``won``, the environment's own flag), not progress.
State restore is by deterministic replay of an action prefix (``restore``), checked
against the observations that were recorded when the prefix was first played.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Sequence


@dataclass(frozen=True)
class Observation:
    """What the agent sees after ``reset`` or ``step``.

    ``admissible`` is ``None`` where the environment has no action list (AppWorld)
    or where it was not requested (ScienceWorld fetches it only on demand).
    ``info`` carries environment-specific extras (e.g. AppWorld per-test results,
    the ScienceWorld ambiguity option chosen) that a record may keep.
    """

    text: str
    step: int
    reward: float = 0.0
    score: float = 0.0
    done: bool = False
    won: bool = False
    admissible: tuple[str, ...] | None = None
    info: dict[str, Any] = field(default_factory=dict)


class RestoreMismatch(RuntimeError):
    """Replaying an action prefix did not reproduce the recorded observations."""


class Env(abc.ABC):
    """A reusable environment: one engine start, many tasks (no world start per episode)."""

    name: str = "env"

    @abc.abstractmethod
    def reset(self, task_id: str) -> Observation:
        """Start ``task_id`` from its initial state and return the first observation (step 0)."""

    @abc.abstractmethod
    def step(self, action: str) -> Observation:
        """Execute ``action``; an inadmissible action is a step too, as the engine treats it."""

    @abc.abstractmethod
    def task_description(self) -> str:
        """The goal text of the current task (what the actor prompt shows as the task)."""

    def admissible_actions(self) -> tuple[str, ...] | None:
        """The current admissible actions, fetched on demand; ``None`` if the engine has none."""
        return None

    def restore(
        self,
        task_id: str,
        actions: Sequence[str],
        expected: Sequence[str] | None = None,
    ) -> Observation:
        """Reach the state after ``actions`` by replay from ``reset(task_id)``.

        ``expected`` are the observation texts recorded after each action (same length as
        ``actions``); if given, every replayed observation must equal its record, else
        :class:`RestoreMismatch` names the first step that differs.
        """
        obs = self.reset(task_id)
        if expected is not None and len(expected) != len(actions):
            raise ValueError(
                f"restore: {len(actions)} actions but {len(expected)} expected observations"
            )
        for i, action in enumerate(actions):
            obs = self.step(action)
            if expected is not None and obs.text != expected[i]:
                raise RestoreMismatch(
                    f"{self.name} task {task_id!r}: replay diverged at step {i + 1} "
                    f"(action {action!r}): got {obs.text[:200]!r}, recorded {expected[i][:200]!r}"
                )
        return obs

    def gold_actions(self, task_id: str) -> list[str]:
        """The environment's own solution of ``task_id`` (gold path, walkthrough, ground-truth code)."""
        raise NotImplementedError(f"{self.name}: no gold actions")

    def random_action(self, rng: Any) -> str:
        """One uniformly random action now (from ``rng``, a ``random.Random``): by default an
        admissible action; environments without an action list override this."""
        actions = self.admissible_actions()
        if not actions:
            raise RuntimeError(f"{self.name}: no admissible actions to draw a random action from")
        return str(rng.choice(sorted(actions)))

    def close(self) -> None:
        """Release the engine (JVM, worlds, temporary files)."""

    def __enter__(self) -> "Env":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
