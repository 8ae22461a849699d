"""ALFWorld's planner expert (fast-downward) on one game, its plan played to ``won``.

The lowest of the ALFWorld modules: the adapter (:mod:`memtrials.envs.alfworld.env`) asks it
for the gold actions of a game without a stored walkthrough, and the generator's solver
(:mod:`memtrials.envs.alfworld.solve`) for every game but the two-object goal; it imports
neither, so the three form no cycle.
"""

from __future__ import annotations

import os
import threading

MAX_PLAN_STEPS = 80


def mangle(name: str) -> str:
    """ALFRED's mangling of ids into PDDL symbols (``|`` -> ``_bar_`` ...)."""
    for a, b in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        name = name.replace(a, b)
    return name


_engines = threading.local()


def _planner_engine():
    """(inner engine, planner expert), one per thread and process, reused across games.

    A new ``PddlEnv`` copies fast-downward's 33 MB library to a temporary file and loads it
    (about 0.1 s CPU and 0.5 s of disk a game, and the copy stays mapped); every ``load``
    re-initializes the library's task, as the adapter's engine reused across games relies on.
    """
    cached = getattr(_engines, "pair", None)
    if cached is None or cached[0] != os.getpid():
        import textworld
        from textworld.envs import PddlEnv
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredExpert, AlfredInfos

        inner = AlfredInfos(AlfredDemangler(PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True,
                                                                      extras=["gamefile"])), shuffle=False))
        cached = _engines.pair = (os.getpid(), inner, AlfredExpert(inner, expert_type="planner"))
    return cached[1], cached[2]


def planner_walkthrough(gamefile: str) -> list[str] | None:
    """ALFWorld's planner expert's plan for ``gamefile``, played in the same engine (with
    re-planning switched off) to ``won``; ``None`` if it finds none, is too long or loses."""
    from memtrials.envs.alfworld import speed as textworld_speed

    textworld_speed.install()  # memoized parsing in TextWorld's PDDL backend (same results, less CPU)
    inner, env = _planner_engine()
    try:
        env.load(gamefile)
        plan = [str(a) for a in (env.reset()["extra.expert_plan"] or [])]
    except Exception:  # the planner raises on games it cannot handle: unsolved
        return None
    if not plan or len(plan) > MAX_PLAN_STEPS:
        return None
    env.request_infos.policy_commands = False
    state = None
    for action in plan:
        if action not in (state or env.state)["admissible_commands"]:
            return None
        state, _, _ = inner.step(action)
    return plan if state is not None and state["won"] else None
