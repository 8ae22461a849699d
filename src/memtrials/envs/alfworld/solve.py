"""Solving generated ALFWorld games: ALFWorld's planner expert
(:mod:`memtrials.envs.alfworld.planner`), or the generator's oracle.

Every game the generator keeps is solved here and the solution is played in the TextWorld
engine until it reports ``won``.  ALFWorld's fast-downward planner expert solves five task
types in about a second; on the two-object goal it takes minutes and ALFWorld's hand-coded
expert loops (it returns to the receptacle of the first object), so those games are solved
by an oracle that reads the generator's record of where it put things and takes only
commands the engine lists as admissible.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from memtrials.envs.alfworld import scenes as sc
from memtrials.envs.alfworld.planner import MAX_PLAN_STEPS, mangle, planner_walkthrough


_engines = threading.local()


def _oracle_env(root: Path):
    """One adapter per thread and process, reused across games (as the planner's engine is): a
    new one copies and loads fast-downward's 33 MB library (~0.1 s CPU, ~0.5 s of disk)."""
    from memtrials.envs.alfworld.env import AlfworldEnv

    cached = getattr(_engines, "env", None)
    if cached is None or cached[0] != os.getpid():
        cached = _engines.env = (os.getpid(), AlfworldEnv(root=str(root)))
    env = cached[1]
    env.root = Path(root)
    env.forget_game()  # a retried attempt rewrites the same game file: always load it afresh
    return env


def oracle_walkthrough(gamefile: str) -> list[str] | None:
    """A plan from the generator's own knowledge of where things are, played in the engine.

    Every command is taken only if the engine lists it as admissible, and the plan counts
    only if the engine then reports ``won``.  Used for the two-object goal, on which
    ALFWorld's planner takes minutes and its hand-coded expert loops.
    """
    folder = Path(gamefile).parent
    traj = json.loads((folder / "traj_data.json").read_text())
    spec = traj["memtrials"]["spec"]
    placements = traj["memtrials"]["placements"]
    root = folder.parents[2]
    env = _oracle_env(root)
    obs = env.reset(str(folder.relative_to(root)))
    infos = {key.lower(): info.name for key, info in env.engine._entity_infos.items()}

    class _Names(dict):  # PDDL symbols are case-insensitive; the engine keeps them lower-cased
        def __missing__(self, key: str) -> str:
            return infos[key.lower()]

    name = _Names()
    scene = sc.load_scene(int(spec["scene"]))
    openable = {r.id for r in scene.receptacles if r.type in ("Fridge", "Cabinet", "Microwave", "Drawer", "Safe", "Box")}
    plan: list[str] = []
    opened: set[str] = set()
    state = {"obs": obs}

    def do(command: str, optional: bool = False) -> bool:
        if command not in (state["obs"].admissible or ()):
            if optional:
                return True
            return False
        state["obs"] = env.step(command)
        plan.append(command)
        return True

    def visit(rid: str) -> bool:
        ok = do(f"go to {name[mangle(rid)]}", optional=True)
        if ok and rid in openable and rid not in opened:
            opened.add(rid)
            ok = do(f"open {name[mangle(rid)]}")
        return ok

    task_type, obj, parent = spec["task_type"], spec["obj"], spec["parent"]
    targets = [(oid, rid) for oid, kind, rid in placements if kind == obj]
    count = 2 if task_type == "pick_two_obj_and_place" else 1
    dest = sorted((r for r in scene.receptacles if r.type == parent), key=lambda r: name[mangle(r.id)])
    for oid, rid in targets[:count]:
        o = name[mangle(oid)]
        if not (visit(rid) and do(f"take {o} from {name[mangle(rid)]}")):
            return None
        if task_type == "look_at_obj_in_light":
            lamp_id, _, stand = next(p for p in placements if p[1] == parent)
            if not (visit(stand) and do(f"use {name[mangle(lamp_id)]}")):
                return None
            continue
        tool = sc.TOOL_OF_TASK.get(task_type)
        if tool is not None:
            verb = {"SinkBasin": "clean", "Microwave": "heat", "Fridge": "cool"}[tool]
            t = next(r for r in scene.receptacles if r.type == tool)
            if not (do(f"go to {name[mangle(t.id)]}", optional=True) and do(f"{verb} {o} with {name[mangle(t.id)]}")):
                return None
        if not dest or not (visit(dest[0].id) and do(f"move {o} to {name[mangle(dest[0].id)]}")):
            return None
    return plan if state["obs"].won else None


# ALFWorld's planner is slow (minutes) on the two-object goal and its hand-coded expert
# loops on it; the generator's oracle (checked by the engine) solves those games.
EXPERT_OF_TASK = {t: "planner" for t in sc.TASK_TYPES} | {"pick_two_obj_and_place": "oracle"}


def solve(gamefile: str) -> list[str] | None:
    """A walkthrough of one generated game, checked by play in the engine to ``won``;
    ``None`` if unsolved.  Two-object goals use the oracle, which plays as it plans; the
    others ALFWorld's planner (:func:`~memtrials.envs.alfworld.planner.planner_walkthrough`).
    """
    from memtrials.envs.alfworld import speed as textworld_speed

    textworld_speed.install()  # memoized parsing in TextWorld's PDDL backend (same results, less CPU)
    folder = Path(gamefile).parent
    task_type = json.loads((folder / "traj_data.json").read_text())["task_type"]
    if EXPERT_OF_TASK.get(task_type, "planner") == "oracle":
        plan = oracle_walkthrough(gamefile)
        return plan if plan and len(plan) <= MAX_PLAN_STEPS else None
    return planner_walkthrough(gamefile)
