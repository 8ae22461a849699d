"""Offline ALFWorld game generator: ALFWorld-format games for the six task types, from a seed.

Each game is written as ALFWorld's own data is laid out,
``<root>/<split>/<task_type>-<Obj>-None-<Parent>-<scene>/trial_<n>/`` holding
``traj_data.json`` (``task_type``, ``pddl_params``) and ``game.tw-pddl`` (the domain
``alfred.pddl``, the grammar ``alfred.twl2`` with the goal filled in, the PDDL problem,
``solvable`` and ``walkthrough``), so ALFWorld's ``AlfredTWEnv`` and our adapter load them
like the official games.  The goal is ALFRED's own (``alfworld.gen.goal_library``); every
game is solved by ALFWorld's planner expert (fast-downward) -- except the two-object goal,
on which that planner takes minutes and ALFWorld's hand-coded expert loops: those are solved
by the generator's oracle (it knows where it put things), one admissible command at a time.
The walkthrough is replayed in the TextWorld engine until ``won`` before a game is kept.

Splits are drawn so that no (task type, target object, scene) triple occurs in two of
train / practice / eval; within a split the six task types are balanced.  Everything is
a function of ``seed`` and the split sizes.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from memtrials.envs.alfworld import scenes as sc
from memtrials.envs.alfworld.planner import mangle as _fix
from memtrials.envs.alfworld.solve import solve

SPLITS: tuple[str, ...] = ("train", "practice", "eval")
ATTEMPTS_PER_TRIPLE = 4


@dataclass(frozen=True)
class GameSpec:
    """What determines one generated game (its content is a function of these fields)."""

    split: str
    index: int
    task_type: str
    obj: str
    parent: str  # target receptacle type, or the lamp type for look_at_obj_in_light
    scene: int
    seed: str

    @property
    def task_id(self) -> str:
        """Path of the trial folder relative to the games root (the ALFWorld task id)."""
        return f"{self.split}/{self.task_type}-{self.obj}-None-{self.parent}-{self.scene}/trial_{self.index:05d}"


def candidate_triples() -> dict[str, list[tuple[str, int, tuple[str, ...]]]]:
    """Per task type, every feasible (object, scene, parents) over the wheel's scenes, sorted."""
    out: dict[str, list[tuple[str, int, tuple[str, ...]]]] = {t: [] for t in sc.TASK_TYPES}
    for number in sc.scene_numbers():
        scene = sc.load_scene(number)
        for task_type in sc.TASK_TYPES:
            for obj in scene.object_types:
                parents = sc.task_parents(scene, task_type, obj)
                if parents:
                    out[task_type].append((obj, number, tuple(parents)))
    return out


def _quotas(n: int, offset: int) -> dict[str, int]:
    k = len(sc.TASK_TYPES)
    return {t: n // k + (1 if (i - offset) % k < n % k else 0) for i, t in enumerate(sc.TASK_TYPES)}


PLAN_ORDER: tuple[str, ...] = ("eval", "practice", "train")
"""The order :func:`plan_specs` draws the splits in (a split's place shifts its quotas)."""


def type_counts(sizes: dict[str, int]) -> dict[str, dict[str, int]]:
    """Games per task type in each split that :func:`generate` makes for ``sizes``: the
    plan's quotas, which every game meets (a fallback keeps the task type, a game that
    cannot be built stops the generation), so known before any game exists."""
    return {split: _quotas(int(sizes.get(split, 0)), offset) for offset, split in enumerate(PLAN_ORDER)}


def plan_specs(seed: int, sizes: dict[str, int]) -> list[tuple[GameSpec, list[tuple[str, int, tuple[str, ...]]]]]:
    """The games of each split as (first-choice spec, fallback triples of the same task type).

    Eval is drawn first, then practice, then train; a (task type, object, scene) triple
    is used by one split only.  Eval and practice take one game per triple; train may
    take several games from its own triples when it needs more games than triples.
    """
    for split in sizes:
        if split not in SPLITS:
            raise ValueError(f"alfworld generator: unknown split {split!r} in sizes; use {SPLITS}")
    pools = candidate_triples()
    for t, pool in pools.items():
        random.Random(f"{seed}-{t}").shuffle(pool)
    cursor = {t: 0 for t in sc.TASK_TYPES}
    plan: list[tuple[GameSpec, list[tuple[str, int, tuple[str, ...]]]]] = []
    for offset, split in enumerate(PLAN_ORDER):
        n = int(sizes.get(split, 0))
        index = 0
        for t, quota in _quotas(n, offset).items():
            pool = pools[t]
            if split == "train":
                own = pool[cursor[t]:]
                if not own and quota:
                    raise ValueError(f"alfworld generator: no (object, scene) left for {t} in train")
                picks = [own[i % len(own)] for i in range(quota)]
                fallback = own
            else:
                if cursor[t] + quota > len(pool):
                    raise ValueError(
                        f"alfworld generator: {split} needs {quota} {t} triples but only "
                        f"{len(pool) - cursor[t]} are left; lower envs.alfworld.sizes.{split}"
                    )
                picks = pool[cursor[t]:cursor[t] + quota]
                cursor[t] += quota
                fallback = []
            for j, (obj, scene, parents) in enumerate(picks):
                rng = random.Random(f"{seed}-{split}-{t}-{j}")
                spec = GameSpec(split, index, t, obj, rng.choice(parents), scene, f"{seed}-{split}-{index}")
                plan.append((spec, fallback))
                index += 1
    return plan


def build_problem(spec: GameSpec, attempt: int = 0) -> tuple[str, dict, str]:
    """(PDDL problem, traj_data, goal text) of one game; deterministic in ``spec`` and ``attempt``."""
    from alfworld.gen.goal_library import gdict

    import alfworld.gen.constants as C

    rng = random.Random(f"{spec.seed}-{attempt}")
    scene = sc.load_scene(spec.scene)
    look = spec.task_type == "look_at_obj_in_light"
    target_parent = None if look else spec.parent
    tool = sc.TOOL_OF_TASK.get(spec.task_type)
    by_type: dict[str, list[sc.Receptacle]] = {}
    for r in scene.receptacles:
        by_type.setdefault(r.type, []).append(r)

    placed: list[tuple[str, str, sc.Receptacle]] = []  # (object id, type, receptacle)

    def place(kind: str, avoid: Iterable[str] = ()) -> None:
        homes = [r for r in scene.receptacles if sc.can_contain(r.type, kind) and r.type not in set(avoid)]
        placed.append((sc.synthetic_id(kind, rng), kind, rng.choice(homes)))

    n_target = rng.randint(2, 3) if spec.task_type == "pick_two_obj_and_place" else rng.randint(1, 2)
    for _ in range(n_target):
        place(spec.obj, avoid=[t for t in (target_parent, tool) if t])
    if look:
        stands = [r for r in scene.receptacles if r.type in sc.LAMP_STANDS]
        placed.append((sc.synthetic_id(spec.parent, rng), spec.parent, rng.choice(stands)))
    others = [o for o in scene.object_types if o != spec.obj
              and any(sc.can_contain(r.type, o) for r in scene.receptacles)]
    for kind in rng.sample(others, min(len(others), rng.randint(4, 9))):
        for _ in range(rng.randint(1, 2)):
            place(kind)

    rtypes = sorted(sc.static_receptacle_types())
    otypes = sorted(C.OBJECTS_SET - set(rtypes))
    start = f"loc|{rng.randint(-30, 30)}|{rng.randint(-30, 30)}|{rng.randint(0, 3)}|30"
    locations = sorted({r.location for r in scene.receptacles} | {start})
    objects = ["agent1 - agent"]
    objects += [f"{_fix(r.id)} - receptacle" for r in scene.receptacles]
    objects += [f"{_fix(oid)} - object" for oid, _, _ in placed]
    objects += [f"{_fix(loc)} - location" for loc in locations]
    objects += [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    init: list[str] = []
    for r in scene.receptacles:
        init.append(f"(receptacleType {_fix(r.id)} {r.type}Type)")
        init.append(f"(receptacleAtLocation {_fix(r.id)} {_fix(r.location)})")
        if r.type in C.OPENABLE_CLASS_SET:
            init.append(f"(openable {_fix(r.id)})")
    for oid, kind, r in placed:
        o = _fix(oid)
        init += [f"(objectType {o} {kind}Type)", f"(inReceptacle {o} {_fix(r.id)})",
                 f"(objectAtLocation {o} {_fix(r.location)})"]
        if kind in sc.LAMPS:
            init.append(f"(toggleable {o})")
            continue
        init.append(f"(pickupable {o})")
        for flag, ability in (("heatable", "Heatable"), ("coolable", "Coolable"),
                              ("cleanable", "Cleanable"), ("sliceable", "Sliceable")):
            if sc.has_ability(kind, ability):
                init.append(f"({flag} {o})")
    for rt in rtypes:
        for ot in sorted(C.VAL_RECEPTACLE_OBJECTS.get(rt, ())):
            if ot in otypes:
                init.append(f"(canContain {rt}Type {ot}Type)")
    init.append(f"(atLocation agent1 {_fix(start)})")
    goal = gdict[spec.task_type]["pddl"].format(
        obj=spec.obj, recep=spec.parent, toggle=spec.parent, mrecep="").replace("#", "-")
    problem = (f"(define (problem plan_{spec.split}_{spec.index})\n(:domain alfred)\n(:objects\n"
               + "\n".join(objects) + "\n)\n(:init\n" + "\n".join(init)
               + "\n(= (total-cost) 0)\n)\n" + goal.strip() + "\n")
    template = rng.choice(gdict[spec.task_type]["templates"])
    goal_text = template.format(obj=spec.obj.lower(), recep=spec.parent.lower(),
                                toggle=spec.parent.lower(), mrecep="")
    traj = {
        "task_type": spec.task_type,
        "task_id": spec.task_id,
        "scene": {"floor_plan": f"FloorPlan{spec.scene}", "scene_num": spec.scene},
        "pddl_params": {
            "object_target": spec.obj,
            "parent_target": "" if look else spec.parent,
            "toggle_target": spec.parent if look else "",
            "mrecep_target": "",
            "object_sliced": False,
        },
        "memtrials": {"generator": "memtrials.envs.alfworld.gen", "spec": asdict(spec),
                      "attempt": attempt, "goal_text": goal_text,
                      "placements": [[oid, kind, r.id] for oid, kind, r in placed]},
    }
    return problem, traj, goal_text


def game_data(problem: str, goal_text: str) -> dict:
    """The ``game.tw-pddl`` payload (walkthrough and solvability filled in later)."""
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    grammar = Path(ALFRED_TWL2_PATH).read_text().replace("UNKNOWN GOAL", goal_text)
    return {"pddl_domain": Path(ALFRED_PDDL_PATH).read_text(), "grammar": grammar,
            "pddl_problem": problem, "solvable": False, "walkthrough": None}


def write_game(root: Path, spec: GameSpec, attempt: int) -> list[str] | None:
    """Write one game under ``root``; keep it only if solvable (returns its walkthrough)."""
    problem, traj, goal_text = build_problem(spec, attempt)
    folder = root / spec.task_id
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "traj_data.json").write_text(json.dumps(traj, indent=1))
    data = game_data(problem, goal_text)
    gamefile = folder / "game.tw-pddl"
    gamefile.write_text(json.dumps(data))
    plan = solve(str(gamefile))
    if plan is None:
        shutil.rmtree(folder)
        parent = folder.parent
        if not any(parent.iterdir()):
            parent.rmdir()
        return None
    data["solvable"] = True
    data["walkthrough"] = plan
    gamefile.write_text(json.dumps(data))
    return plan


def _build_one(args: tuple[str, GameSpec, list]) -> dict:
    root_s, spec, fallback = args
    root = Path(root_s)
    tried = [spec]
    for attempt in range(ATTEMPTS_PER_TRIPLE):
        plan = write_game(root, spec, attempt)
        if plan is not None:
            return {"spec": spec, "attempt": attempt, "walkthrough": plan}
    # rare: fall back to another triple of the same task type that this split owns
    rng = random.Random(spec.seed)
    for obj, scene, parents in rng.sample(fallback, min(len(fallback), 8)):
        alt = GameSpec(spec.split, spec.index, spec.task_type, obj, rng.choice(parents), scene, spec.seed + "-alt")
        tried.append(alt)
        plan = write_game(root, alt, 0)
        if plan is not None:
            return {"spec": alt, "attempt": 0, "walkthrough": plan}
    raise RuntimeError(f"alfworld generator: no solvable game for {[t.task_id for t in tried]}")


def generate(root: str | os.PathLike, seed: int, sizes: dict[str, int], workers: int = 1) -> list[dict]:
    """Generate all games into ``root`` (emptied first); returns one record per game, in plan order."""
    root = Path(root)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    jobs = [(str(root), spec, fallback) for spec, fallback in plan_specs(seed, sizes)]
    if workers > 1 and len(jobs) > 1:
        # fork: the games are independent; a crashed worker raises BrokenProcessPool, never hangs
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
            results = list(pool.map(_build_one, jobs, chunksize=2))
    else:
        results = [_build_one(job) for job in jobs]
    return results


def records_to_rows(results: Sequence[dict]) -> list[dict]:
    """Task-table rows (see :mod:`memtrials.envs.tasks`) of generated games."""
    rows = []
    for r in results:
        spec: GameSpec = r["spec"]
        rows.append({"task_id": spec.task_id, "split": spec.split, "type": spec.task_type,
                     "source": "generated", "object": spec.obj, "parent": spec.parent,
                     "scene": spec.scene, "gold_steps": len(r["walkthrough"])})
    return rows
