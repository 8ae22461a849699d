"""The AI2-THOR scenes that ship in the alfworld wheel, read as a catalog for the game generator.

Each of the 120 ``FloorPlan<N>`` layouts (kitchens 1-30, living rooms 201-230, bedrooms
301-330, bathrooms 401-430) comes with ``-openable.json`` (receptacle instances and the
agent pose in front of each) and ``-objects.json`` (the object types present).  Static
receptacle types listed in ``-objects.json`` but without an instance in ``-openable.json``
(stove burners, toasters, coffee machines, garbage cans, toilets, ...) get one instance with
a synthetic, per-scene deterministic id.  Which object may go in which receptacle, and
which objects are heatable/coolable/cleanable/toggleable, comes from ALFRED's own tables
(``alfworld.gen.constants``).
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from pathlib import Path

TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "pick_two_obj_and_place",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
)
LAMPS: tuple[str, ...] = ("DeskLamp", "FloorLamp")
# Receptacles a lamp may stand on (ALFRED's tables list no receptacle for lamps).
LAMP_STANDS: tuple[str, ...] = ("Desk", "SideTable", "Dresser", "DiningTable", "CoffeeTable", "Shelf", "TVStand")
# Where the state-change task types do their work (fixed by alfred.pddl's actions).
TOOL_OF_TASK: dict[str, str] = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}
ABILITY_OF_TASK: dict[str, str] = {
    "pick_clean_then_place_in_recep": "Cleanable",
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
}


@dataclass(frozen=True)
class Receptacle:
    """One static receptacle instance: ALFRED id (``Cabinet|+00.68|+00.50|-02.20``), type, location."""

    id: str
    type: str
    location: str


@dataclass(frozen=True)
class Scene:
    """One AI2-THOR floor plan: its receptacles and the pickupable/lamp object types present."""

    number: int
    receptacles: tuple[Receptacle, ...]
    object_types: tuple[str, ...]
    lamps: tuple[str, ...]

    @property
    def receptacle_types(self) -> frozenset[str]:
        return frozenset(r.type for r in self.receptacles)

    @property
    def room(self) -> str:
        return {0: "kitchen", 2: "livingroom", 3: "bedroom", 4: "bathroom"}[self.number // 100]


def _constants():  # imported lazily: alfworld is heavy and creates ~/.cache/alfworld
    import alfworld.gen.constants as constants

    return constants


def layouts_dir() -> Path:
    """The ``alfworld/gen/layouts`` folder of the installed wheel."""
    import alfworld.gen

    return Path(alfworld.gen.__file__).parent / "layouts"


@functools.lru_cache(maxsize=None)
def static_receptacle_types() -> frozenset[str]:
    c = _constants()
    return frozenset(c.RECEPTACLES - set(c.MOVABLE_RECEPTACLES))


@functools.lru_cache(maxsize=None)
def pickupable_types() -> frozenset[str]:
    """Object types ALFRED lets the agent carry (no sliced pieces, no static receptacles)."""
    c = _constants()
    kinds: set[str] = set().union(*c.VAL_RECEPTACLE_OBJECTS.values())
    return frozenset(k for k in kinds if not k.endswith("Sliced")) - static_receptacle_types()


def can_contain(recep_type: str, obj_type: str) -> bool:
    """ALFRED's table of which object types a receptacle type may hold."""
    return obj_type in _constants().VAL_RECEPTACLE_OBJECTS.get(recep_type, ())


def has_ability(obj_type: str, ability: str) -> bool:
    """``ability`` in Heatable, Coolable, Cleanable, Toggleable, Sliceable."""
    return obj_type in _constants().VAL_ACTION_OBJECTS[ability]


def _receptacle_type(alfred_id: str) -> str:
    parts = alfred_id.split("|")
    return parts[-1] if len(parts) == 5 else parts[0]  # Sink|x|y|z|SinkBasin -> SinkBasin


def _location(pose: list[float]) -> str:
    x, z, rot, horizon = pose
    return f"loc|{round(x / 0.25)}|{round(z / 0.25)}|{round(rot / 90) % 4}|{round(horizon)}"


def synthetic_id(kind: str, rng: random.Random) -> str:
    """An ALFRED-style id ``Kind|+x.xx|+y.yy|+z.zz`` for an object or receptacle we place."""
    x, y, z = rng.uniform(-4, 4), rng.uniform(0, 2), rng.uniform(-4, 4)
    return f"{kind}|{x:+06.2f}|{y:+06.2f}|{z:+06.2f}"


@functools.lru_cache(maxsize=None)
def load_scene(number: int) -> Scene:
    """Read one floor plan of the wheel; a precise error if its files are missing or malformed."""
    base = layouts_dir()
    openable_path = base / f"FloorPlan{number}-openable.json"
    objects_path = base / f"FloorPlan{number}-objects.json"
    try:
        openable = json.loads(openable_path.read_text())
        present = json.loads(objects_path.read_text())
    except (OSError, ValueError) as exc:
        raise RuntimeError(
            f"alfworld scene {number}: cannot read {openable_path} / {objects_path} ({exc}); "
            "reinstall alfworld==0.4.2 (the layouts ship in its wheel)"
        ) from exc
    static = static_receptacle_types()
    receps: list[Receptacle] = []
    for rid in sorted(openable):
        kind = _receptacle_type(rid)
        if kind in static:
            receps.append(Receptacle(rid, kind, _location(openable[rid])))
    have = {r.type for r in receps}
    rng = random.Random(f"scene-{number}")
    for kind in sorted(set(present) & static - have):
        n = 4 if kind == "StoveBurner" else 1
        for _ in range(n):
            rid = synthetic_id(kind, rng)
            loc = f"loc|{rng.randint(-20, 20)}|{rng.randint(-20, 20)}|{rng.randint(0, 3)}|30"
            receps.append(Receptacle(rid, kind, loc))
    objects = tuple(sorted(set(present) & pickupable_types()))
    lamps = tuple(sorted(set(present) & set(LAMPS)))
    return Scene(number, tuple(receps), objects, lamps)


@functools.lru_cache(maxsize=None)
def scene_numbers() -> tuple[int, ...]:
    """All floor plans whose layout files ship in the wheel."""
    names = {p.name.split("-")[0] for p in layouts_dir().glob("FloorPlan*-openable.json")}
    return tuple(sorted(int(n[len("FloorPlan"):]) for n in names))


def task_parents(scene: Scene, task_type: str, obj: str) -> list[str]:
    """The target receptacle types (or lamp types, for look_at_obj_in_light) of one candidate."""
    if obj not in scene.object_types:
        return []
    homes = [r for r in scene.receptacle_types if can_contain(r, obj)]
    if task_type == "look_at_obj_in_light":
        stands = scene.receptacle_types & set(LAMP_STANDS)
        return sorted(scene.lamps) if stands and homes else []
    tool = TOOL_OF_TASK.get(task_type)
    if tool is not None:
        if tool not in scene.receptacle_types or not has_ability(obj, ABILITY_OF_TASK[task_type]):
            return []
    parents = sorted(r for r in homes if r != tool)
    # the object must also be placeable somewhere other than its target at the start
    return [p for p in parents if any(h not in (p, tool) for h in homes)]
