"""ScienceWorld (``scienceworld==1.2.3``) behind the :class:`~memtrials.envs.base.Env` interface.

Task ids are ``"<task-name>:<variation>"`` (e.g. ``"boil:3"``) over the official 30 tasks
and their train/dev/test variations (:mod:`memtrials.envs.scienceworld.tasks`).  Stepping uses
the fast server path (``server.step`` + ``getScore`` + ``getCompleted``, about 30x faster than
the package's ``env.step``, which also builds the valid-action list, look and inventory every step);
the admissible actions are fetched only when :meth:`admissible_actions` is called, once per
state (kept until the next step or reset).

The valid-action list is a Java list of ~400-2,800 strings; iterating it through py4j costs a
socket round trip per item (~390 ms wall, 33 ms Python + 184 ms JVM CPU a step on boil:0).
With the join (``join_admissible``) :meth:`admissible_actions` instead joins it in the JVM
(``java.lang.String.join`` with ``"\x1f"``, :data:`JOIN_SEP`) and splits the one string: the same
strings in the same order (~180 ms wall, 2 + 78 ms CPU; the rest is the engine computing the
list).  If the split does not give the list's ``size()`` items (an action holding the separator)
it takes the items one by one.

**On by default** through the config (``envs.scienceworld.join_admissible: true``): a rule's
process reads it (:func:`configure`, called by :func:`memtrials.pipeline.rule_entry.run_rule` next to the
fork servers' setting) and exports it as ``MEMTRIALS_SCIENCEWORLD_JOIN`` (:data:`JOIN_SWITCH`),
which every ScienceWorld object of the process reads when built with ``join_admissible=None``
and which process-backed children (spawned or forked) inherit.  A process that never read the
config (a bare ``ScienceWorldEnv()`` in a script or a test) and has no such variable takes the
items one by one; ``join_admissible=True``/``False`` decides for one object.  The join changes
no output: the history golden cells (tests/history/test_history_unchanged.py) are made with it.

Every object's JVM starts with a constant identity hash
(:data:`memtrials.envs.scienceworld.engine.JVM_OPTIONS`), so the same actions in a fresh process
give the same observations and action lists, byte for byte (:mod:`memtrials.envs.scienceworld.engine`).

``won`` is the engine's own completion flag (``getCompleted``); a failed task ends with
score -100 and ``done``.  ``score`` is on the engine's 0-100 scale and ``reward`` is its
change since the previous step (the engine's convention).

Ambiguity prompts (:mod:`memtrials.envs.scienceworld.ambiguity`) list options in an order that
can change between runs, so a numeric answer is not replayable by itself.
:meth:`ScienceWorldEnv.step` therefore records the chosen option's text in
``obs.info["chosen_option"]`` and ``obs.info["replay_action"]`` (``"@option <text>"``),
accepts that form (or the option text itself) as an action, and :meth:`restore` maps a
recorded numeric answer to the option with the recorded text.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from memtrials.envs.base import Env, Observation, RestoreMismatch, check_replay
from memtrials.envs.scienceworld import jvm as scienceworld_jvm
from memtrials.envs.scienceworld.ambiguity import OPTION_PREFIX, parse_options, same_observation
from memtrials.envs.scienceworld.engine import JVM_OPTIONS, lent_engine_class, own_engine_class, start_engine
from memtrials.envs.scienceworld.tasks import parse_task_id

JOIN_SEP = "\x1f"
JOIN_SWITCH = "MEMTRIALS_SCIENCEWORLD_JOIN"


def join_enabled() -> bool:
    """True when ``MEMTRIALS_SCIENCEWORLD_JOIN`` is ``1``/``true``/``yes``/``on`` (read per object
    built with ``join_admissible=None``; :func:`configure` sets it from the config)."""
    return os.environ.get(JOIN_SWITCH, "0").strip().lower() in ("1", "true", "yes", "on")


def configure(config: Any) -> None:
    """Set this process's join (and its children's) from ``envs.scienceworld.join_admissible``,
    and its shared JVMs from ``envs.scienceworld.shared_jvm`` (:mod:`.scienceworld_jvm`)."""
    on = config["envs"]["scienceworld"]["join_admissible"]
    if not isinstance(on, bool):
        raise ValueError(f"envs.scienceworld.join_admissible must be true or false, got {on!r}")
    os.environ[JOIN_SWITCH] = "1" if on else "0"
    scienceworld_jvm.configure(config)


class ScienceWorldEnv(Env):
    """One JVM per object, reused across tasks; ``reset`` loads the variation afresh.

    Options: ``simplification`` (comma-separated ScienceWorld simplifications, ``""`` for
    none; ``"easy"`` is ScienceWorld's preset), ``max_steps`` (``done`` once this many
    steps were taken; ``None`` leaves the budget to the caller), ``join_admissible`` (fetch the
    valid-action list as one joined string; ``None``: this process's setting, :func:`join_enabled`).

    Steps of different objects may run at once in threads (``thread_safe``; :class:`EnvPool`
    runs them without its lock): each object has its own JVM and py4j gateway and no state is
    shared between objects (tests/envs/test_pool.py checks that the pool overlaps them).
    """

    name = "scienceworld"
    thread_safe = True  # each object drives its own JVM over its own gateway (EnvPool runs them unlocked)

    def __init__(self, simplification: str = "", max_steps: int | None = None,
                 join_admissible: bool | None = None, shared_jvm: tuple[str, float] | bool | None = None) -> None:
        import logging

        # the engine logs every load, py4j every (double) shutdown, at INFO: keep logs readable
        for noisy in ("scienceworld", "py4j"):
            logging.getLogger(noisy).setLevel(logging.WARNING)

        self.simplification = simplification
        self.max_steps = max_steps
        self._lease: Any = None
        shared = scienceworld_jvm.settings() if shared_jvm is None else (
            {"dir": shared_jvm[0], "idle_s": shared_jvm[1]} if shared_jvm else None)
        self.engine = None
        if shared is not None:
            try:
                self._lease = scienceworld_jvm.borrow(shared["dir"], shared["idle_s"], JVM_OPTIONS)
                self.engine = lent_engine_class()(self._lease.port)
            except Exception as exc:  # noqa: BLE001  (anything: start an own JVM, as without sharing)
                if self._lease is not None:
                    self._lease.release()
                    self._lease = None
                logging.getLogger(__name__).warning(
                    "scienceworld: no shared JVM (%s); starting this environment's own", exc)
        if self.engine is None:
            self.engine = start_engine(own_engine_class())
        self.server = self.engine.server
        self._task_names = tuple(self.engine.get_task_names())
        self._task_id: str | None = None
        self._step = 0
        self._score = 0.0
        self._last_text = ""
        self._desc = ""
        self._closed = False
        self._valid: tuple[str, ...] | None = None  # the valid-action list of the current state
        gateway = getattr(self.engine, "_gateway", None)  # scienceworld 1.2.3's py4j gateway
        join = join_enabled() if join_admissible is None else bool(join_admissible)
        self._join = gateway.jvm.java.lang.String.join if gateway is not None and join else None

    # -- the interface -------------------------------------------------------------------
    def task_names(self) -> tuple[str, ...]:
        """The official task names, in the engine's order."""
        return self._task_names

    def _load(self, task_id: str, gold: bool = False) -> None:
        name, var = parse_task_id(task_id)
        if name not in self._task_names:
            raise ValueError(
                f"scienceworld: unknown task {name!r} in task id {task_id!r}; "
                f"known tasks: {', '.join(self._task_names)}"
            )
        self._valid = None
        self.engine.load(name, var, self.simplification, generateGoldPath=gold)

    def reset(self, task_id: str) -> Observation:
        self._load(task_id)
        self.server.reset()
        self._valid = None
        text = str(self.server.step("look around"))
        self._task_id = task_id
        self._step = 0
        self._score = 0.0
        self._last_text = text
        self._desc = str(self.server.getTaskDescription())
        return Observation(text=text, step=0, info={"task_id": task_id})

    def step(self, action: str) -> Observation:
        if self._task_id is None:
            raise RuntimeError("scienceworld: step() before reset(task_id)")
        info: dict[str, Any] = {}
        sent = action
        options = parse_options(self._last_text)
        if options is not None:
            sent, chosen = self._resolve_choice(action, options)
            if chosen is not None:
                info["chosen_option"] = chosen
                info["replay_action"] = OPTION_PREFIX + chosen
        self._valid = None
        text = str(self.server.step(sent))
        score = float(round(100 * self.server.getScore()))
        won = bool(self.server.getCompleted())
        reward = score - self._score
        self._score = score
        self._step += 1
        done = won or score < 0 or (self.max_steps is not None and self._step >= self.max_steps)
        self._last_text = text
        return Observation(text=text, step=self._step, score=score, reward=reward,
                           done=done, won=won, info=info)

    @staticmethod
    def _resolve_choice(action: str, options: list[str]) -> tuple[str, str | None]:
        """Map an answer to a pending ambiguity prompt to (index to send, chosen option text)."""
        a = action.strip()
        if a.startswith(OPTION_PREFIX):
            text = a[len(OPTION_PREFIX):]
            if text not in options:
                raise RestoreMismatch(
                    f"scienceworld: recorded option {text!r} is not among the offered options {options}"
                )
            return str(options.index(text)), text
        if a in options:
            return str(options.index(a)), a
        if a.isdigit() and int(a) < len(options):
            return a, options[int(a)]
        return action, None

    def task_description(self) -> str:
        return self._desc

    def admissible_actions(self) -> tuple[str, ...] | None:
        """The valid action-object combinations now (~80 ms CPU, mostly the engine's; fetched on
        demand, once per state)."""
        if self._task_id is None:
            return None
        options = parse_options(self._last_text)
        if options is not None:
            return tuple(str(i) for i in range(len(options)))
        if self._valid is None:
            self._valid = self._fetch_valid()
        return self._valid

    def _fetch_valid(self) -> tuple[str, ...]:
        """The engine's valid-action list in its order: one joined string, else item by item."""
        items = self.server.getValidActionObjectCombinations()
        if self._join is not None:
            n = int(items.size())
            if n == 0:
                return ()
            joined = str(self._join(JOIN_SEP, items)).split(JOIN_SEP)
            if len(joined) == n:
                return tuple(joined)
        return tuple(str(a) for a in items)

    def restore(self, task_id: str, actions: Sequence[str], expected: Sequence[str] | None = None) -> Observation:
        """Replay ``actions``; numeric answers to ambiguity prompts follow the recorded option text.

        With ``expected`` (the recorded observation after each action), an answer ``"k"`` to a
        prompt is mapped to the option that was listed ``k``-th in the *recorded* prompt, and
        two prompts match when they offer the same options in any order.  Without it, only
        actions in the ``"@option <text>"`` form (``obs.info["replay_action"]``) replay exactly.
        """
        check_replay(actions, expected)
        obs = self.reset(task_id)
        for i, action in enumerate(actions):
            act = action
            if expected is not None and i > 0 and action.strip().isdigit():
                recorded = parse_options(expected[i - 1])
                k = int(action.strip())
                if recorded is not None and k < len(recorded):
                    act = OPTION_PREFIX + recorded[k]
            obs = self.step(act)
            if expected is not None and not same_observation(obs.text, expected[i]):
                raise RestoreMismatch(
                    f"scienceworld task {task_id!r}: replay diverged at step {i + 1} "
                    f"(action {action!r}): got {obs.text[:200]!r}, recorded {expected[i][:200]!r}"
                )
        return obs

    # -- extras --------------------------------------------------------------------------
    def gold_actions(self, task_id: str) -> list[str]:
        """ScienceWorld's own gold action sequence for ``task_id`` (loads the task with it)."""
        self._load(task_id, gold=True)
        seq = [str(a) for a in self.server.getGoldActionSequence()]
        self._task_id = None  # the next reset() reloads without the gold path
        return seq

    def variations(self, task_name: str) -> dict[str, list[int]]:
        """The official train/dev/test variation indices of one task."""
        self.engine.load(task_name, 0, self.simplification)
        return {
            "train": sorted(int(v) for v in self.server.getVariationsTrain()),
            "dev": sorted(int(v) for v in self.server.getVariationsDev()),
            "test": sorted(int(v) for v in self.server.getVariationsTest()),
        }

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self.engine.close()
            except Exception:  # the JVM may already be gone at interpreter exit
                pass
            if self._lease is not None:  # the borrowed JVM goes back to the machine's idle ones
                self._lease.release()

