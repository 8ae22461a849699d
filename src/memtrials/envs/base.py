"""The one small interface every environment (ALFWorld, ScienceWorld, AppWorld, WebShop) offers.

Studies score *success* (``won``, the environment's own flag), not progress.
State restore is by deterministic replay of an action prefix (``restore``), checked
against the observations that were recorded when the prefix was first played.
Also what the environments share around it: where an environment's data lives (the
project's generated data or the official data: :func:`data_root`, :func:`official_data`,
:func:`official_data_help`) and the check of a replay's recorded observations
(:func:`check_replay`).
"""

from __future__ import annotations

import abc
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence


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


def official_data_help(env: str, variable: str, folder: str, download: str) -> str:
    """The error for official data that is not there, as the environment is now: ``variable``
    unset, or set to a folder without ``folder`` (the path under it the loader opens); the fix
    names ``download``, the command that fetches the data, and the overlay that asks for it."""
    value = os.environ.get(variable)
    if not value:
        what = f"the environment variable {variable} is not set"
    else:
        what = f"{Path(value) / folder} does not exist ({variable}={value})"
    return (f"{env}: official data requested (envs.{env}.source: official, e.g. by "
            f"config/presets/official-data.yaml) but {what}; run `{download}` on a machine with internet "
            f"and `export {variable}=<folder>` (the one holding {folder}) before snakemake, "
            f"or use envs.{env}.source: generated")


def official_data(variable: str, folder: str = "", holding: str = "") -> Path | None:
    """The official data's folder ``$variable/<folder>`` if the environment variable is set and
    that folder (with a ``holding`` folder inside, when named) exists, else ``None``."""
    value = os.environ.get(variable)
    if not value:
        return None
    root = Path(value) / folder
    return root if (root / holding).is_dir() else None


def data_root(root: str | os.PathLike | None, official: bool, official_root: Callable[[], Path | None],
              missing: Callable[[], str], generated: str) -> Path:
    """The data folder an environment opens: ``root`` if given; else with ``official`` the
    official data (``official_root()``; FileNotFoundError with ``missing()``, the problem and
    its fix, when it is not there); else the project's ``generated`` data."""
    if root is None:
        if official:
            off = official_root()
            if off is None:
                raise FileNotFoundError(missing())
            root = off
        else:
            root = Path(generated)
    return Path(root)


def check_replay(actions: Sequence[str], expected: Sequence[str] | None) -> None:
    """A ValueError unless ``expected`` (the observations recorded after each action) is
    absent or as long as ``actions``."""
    if expected is not None and len(expected) != len(actions):
        raise ValueError(
            f"restore: {len(actions)} actions but {len(expected)} expected observations"
        )


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

    def restore(self, task_id: str, actions: Sequence[str], expected: Sequence[str] | None = None) -> Observation:
        """Reach the state after ``actions`` by replay from ``reset(task_id)``.

        ``expected`` are the observation texts recorded after each action (same length as
        ``actions``); if given, every replayed observation must equal its record, else
        :class:`RestoreMismatch` names the first step that differs.
        """
        obs = self.reset(task_id)
        check_replay(actions, expected)
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
