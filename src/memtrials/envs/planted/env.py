""":class:`PlantedEnv`: the planted world behind the :class:`~memtrials.envs.base.Env` interface.

Pure Python, no data, a step in microseconds; restore is the base class's replay.  Success
(``won``) comes after the last step's right action; ``score`` is the share of steps done.
"""

from __future__ import annotations

from memtrials.envs.base import Env, Observation
from memtrials.envs.planted.world import Task, cue, make_task


class PlantedEnv(Env):
    """The planted world (:mod:`memtrials.envs.planted.world`); ``max_steps``: the episode's cap
    (``None``: none; the actor's own budget applies)."""

    name = "planted"
    thread_safe = True

    def __init__(self, max_steps: int | None = None) -> None:
        self.max_steps = max_steps
        self._task: Task | None = None
        self._k = 0
        self._t = 0
        self._done = False

    def _require(self) -> Task:
        if self._task is None:
            raise RuntimeError("planted: step before reset")
        return self._task

    def _progress(self) -> str:
        task = self._require()
        return f"(step {self._k + 1} of {len(task.steps)})"

    def _obs(self, text: str, reward: float = 0.0, won: bool = False) -> Observation:
        task = self._require()
        done = won or (self.max_steps is not None and self._t >= self.max_steps)
        self._done = done
        return Observation(text=text, step=self._t, reward=reward, score=self._k / len(task.steps),
                           done=done, won=won, admissible=None if done else task.steps[self._k].actions,
                           info={"planted_step": self._k})

    def reset(self, task_id: str) -> Observation:
        self._task = make_task(task_id)
        self._k, self._t, self._done = 0, 0, False
        return self._obs(f"{self._task.goal} {cue(self._task, 0)} {self._progress()}")

    def step(self, action: str) -> Observation:
        task = self._require()
        if self._done:
            raise RuntimeError(f"planted task {task.task_id}: step after the episode ended")
        self._t += 1
        action = str(action).strip()
        if action == task.steps[self._k].right:
            self._k += 1
            if self._k == len(task.steps):
                return self._obs("Accepted. All steps are done: the task is complete.", reward=1.0, won=True)
            return self._obs(f"Accepted. {cue(task, self._k)} {self._progress()}")
        return self._obs(f"Nothing happens: {action!r} is not right here. {cue(task, self._k)} {self._progress()}")

    def task_description(self) -> str:
        return self._require().goal

    def admissible_actions(self) -> tuple[str, ...] | None:
        task = self._require()
        return None if self._done else task.steps[self._k].actions

    def gold_actions(self, task_id: str) -> list[str]:
        return [s.right for s in make_task(task_id).steps]
