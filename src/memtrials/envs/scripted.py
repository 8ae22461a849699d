"""Scripted agents for checking the environments: a gold agent and a random agent.

Design: an agent is an object with ``begin(env, task_id)`` (called *before*
``env.reset``; the gold agent fetches its plan there, since ScienceWorld loads the task with
its gold path to produce it) and ``act(obs) -> str | None`` (``None`` = give up).
:func:`run_episode` plays one episode and returns an :class:`Episode`.

* :class:`GoldAgent` plays ``env.gold_actions(task_id)``: the ScienceWorld gold path, the
  ALFWorld walkthrough (stored in the game, or ALFWorld's planner), the AppWorld
  ground-truth solution code (one code action ending in ``complete_task``).
* :class:`RandomAgent` plays ``env.random_action(rng)``: a uniformly random admissible
  action (ScienceWorld, ALFWorld) or a random API call / ``complete_task`` (AppWorld).

:func:`gold_actions` is a shorthand for ``env.gold_actions(task_id)``.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from memtrials.envs.base import Env, Observation


def gold_actions(env: Env, task_id: str) -> list[str]:
    """The gold action sequence of ``task_id`` in ``env``."""
    return env.gold_actions(task_id)


@dataclass
class Episode:
    """What one scripted episode did."""

    task_id: str
    agent: str
    won: bool
    score: float
    steps: int
    done: bool
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    seconds: float = 0.0


class GoldAgent:
    """Plays the environment's own solution, then stops."""

    name = "gold"

    def __init__(self) -> None:
        self._plan: list[str] = []

    def begin(self, env: Env, task_id: str) -> None:
        self._plan = list(env.gold_actions(task_id))

    def act(self, obs: Observation) -> str | None:
        return self._plan.pop(0) if self._plan else None


class RandomAgent:
    """Uniformly random actions from a seeded generator (seed and task id fix the episode)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._env: Env | None = None
        self._rng = random.Random(seed)

    def begin(self, env: Env, task_id: str) -> None:
        self._env = env
        self._rng = random.Random(f"{self.seed}-{task_id}")

    def act(self, obs: Observation) -> str | None:
        assert self._env is not None, "RandomAgent.act before begin"
        return self._env.random_action(self._rng)


def run_episode(env: Env, agent: GoldAgent | RandomAgent, task_id: str, max_steps: int = 50) -> Episode:
    """Play ``agent`` on ``task_id`` until done, the agent stops, or ``max_steps``."""
    t0 = os.times().elapsed  # not time.*: AppWorld freezes the process clock while a world is open
    agent.begin(env, task_id)
    obs = env.reset(task_id)
    ep = Episode(task_id, agent.name, False, 0.0, 0, False)
    while not obs.done and ep.steps < max_steps:
        action = agent.act(obs)
        if action is None:
            break
        obs = env.step(action)
        ep.actions.append(str(obs.info.get("replay_action", action)))
        ep.observations.append(obs.text)
        ep.steps += 1
    ep.won, ep.score, ep.done = bool(obs.won), float(obs.score), bool(obs.done)
    ep.seconds = os.times().elapsed - t0
    return ep
