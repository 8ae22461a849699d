"""Design of the anti-persistence study: designs, task pools, rounds, seeds, actor settings.

*More Memory, Worse Agents* (the anti-persistence paper): per benchmark, ``rounds`` rounds
of ``round_size`` training tasks (10 x 50 in the paper), the memory learning as it goes;
held-out evaluation with the memory frozen; three seeds.  A **design** is one memory
(or none) with its settings:

- the four memory designs of the paper: ``trajectory``, ``abstraction``, ``joint``,
  ``antipersist`` (the mode bandit), and ``antipersist-persisted`` (the same synthesized
  text kept: keep versus discard);
- the selector ablations: ``fixed-<mode>`` for each mode alone, ``random`` (a uniform
  mode per task);
- the baselines: ``react`` (no memory), ``reflexion``, ``expel``, ``autorefine``;
- the sweeps (``antipersist.sweeps``): ``antipersist-gamma-<g>`` and
  ``antipersist-lambda-<l>``, the bandit with one setting changed; a point equal to the
  main selector's setting is not a design of its own: its row is the main design's cells.

Task pools come from the task tables (:func:`memtrials.envs.tasks.select_tasks`, seeded
and balanced over task types): ``train_tasks`` of ``train_split`` and ``eval_tasks`` of
``eval_split`` per environment (ScienceWorld: 5 and 2 variations of each of its 30 task
types, i.e. 150 and 60; ALFWorld: the 134 held-out games; WebShop: 100 held-out
instructions of the test split, goals 0-499, and a training pool of 500 from the train
split: docs/antipersist.md).  The training stream visits
the pool in passes, each pass in its own seeded order, cut into rounds: a pool smaller
than ``rounds x round_size`` is met again in later rounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd

from memtrials.agent.actor import ActorSettings
from memtrials.envs.tasks import select_tasks
from memtrials.memory.base import FixedView
from memtrials.seeds import order_key

if TYPE_CHECKING:
    from memtrials.llm import Client

MODES = ("none", "imitation", "strategic", "corrective")
MEMORY_DESIGNS = ("trajectory", "abstraction", "joint", "antipersist", "antipersist-persisted")
ABLATIONS = tuple(f"fixed-{m}" for m in MODES) + ("random",)
BASELINES = ("react", "reflexion", "expel", "autorefine")
DESIGNS = MEMORY_DESIGNS + ABLATIONS + BASELINES
LINEAGE_DESIGNS = ("abstraction", "joint")
"""The designs that store abstractions with their lineage (the error-reproduction evidence)."""
ENVS = ("alfworld", "scienceworld", "webshop", "planted")  # planted: the known-answer run
ACTOR_KEYS = ("mode", "max_actions", "max_output_tokens", "max_listed_actions", "listing")
LABELS = {
    "react": "ReAct", "reflexion": "Reflexion", "expel": "ExpeL", "autorefine": "AutoRefine",
    "trajectory": "Trajectory", "abstraction": "Abstraction", "joint": "Joint",
    "antipersist": "Anti-Persistence", "antipersist-persisted": "Anti-Persistence (persisted)",
    "random": "Random mode", **{f"fixed-{m}": f"Fixed: {m}" for m in MODES},
}


def sweep_points(sweeps: Mapping[str, Any], selector: Mapping[str, Any]) -> list[tuple[str, float, str]]:
    """``(key, value, design)`` of every sweep point when ``sweeps.enabled``, in the config's order:
    a point equal to the main selector's setting (``selector.gamma`` / ``selector.lam``) is the
    main Anti-Persistence design itself, so its design is ``antipersist`` (the same cells, not a
    re-run with other draws); any other point is ``antipersist-<key>-<value>``."""
    if not sweeps["enabled"]:
        return []
    main = {"gamma": float(selector["gamma"]), "lambda": float(selector["lam"])}
    return [(key, float(v), "antipersist" if float(v) == main[key] else f"antipersist-{key}-{v}")
            for key in ("gamma", "lambda") for v in sweeps[key]]


def sweep_designs(sweeps: Mapping[str, Any], selector: Mapping[str, Any]) -> list[str]:
    """The extra designs the sweeps need (values as written in the config): the points that
    differ from the main design (:func:`sweep_points`)."""
    return [d for _, _, d in sweep_points(sweeps, selector) if d != "antipersist"]


def sweep_of(design: str) -> tuple[str, float] | None:
    """``("gamma", 0.99)`` for ``antipersist-gamma-0.99``; None for other designs."""
    for key in ("gamma", "lambda"):
        prefix = f"antipersist-{key}-"
        if design.startswith(prefix):
            return key, float(design[len(prefix):])
    return None


def label(design: str) -> str:
    sw = sweep_of(design)
    if sw is not None:
        return f"Anti-Persistence ({'γ' if sw[0] == 'gamma' else 'λ'} = {design.rsplit('-', 1)[1]})"
    return LABELS.get(design, design)


def pool(tasks: pd.DataFrame, split: str, n: int | None, seed: int, source: str, key: str) -> list[str]:
    """``n`` task ids of ``split`` (None: all), type-balanced; errors name the config ``key``."""
    size = int((tasks["split"] == split).sum())
    return select_tasks(tasks, None if n is None else int(n), split, seed, source,
                        fix=f"set {key} to at most {size} (or null: all)")


def training_order(train: Sequence[str], rounds: int, round_size: int, seed: int) -> list[list[str]]:
    """The tasks of each round: passes over the pool, each in its own seeded order."""
    need = rounds * round_size
    order: list[str] = []
    p = 0
    while len(order) < need:
        order += sorted(train, key=lambda t: (order_key(seed, f"pass{p}", t), t))
        p += 1
    return [order[r * round_size:(r + 1) * round_size] for r in range(rounds)]


def actor_settings(model: str, actor: Mapping[str, Any]) -> ActorSettings:
    """The actor of every design: ReAct-style, the raw history of its episode (no view)."""
    unknown = sorted(set(actor) - set(ACTOR_KEYS))
    if unknown:
        raise ValueError(f"antipersist.actor: unknown key(s) {unknown}; allowed: {', '.join(ACTOR_KEYS)}")
    return ActorSettings(model=model, view="raw", fmt="block", **dict(actor))


class NoMemory:
    """ReAct's memory: nothing stored, nothing served (the stream still runs through it)."""

    kind = "none"
    calls: dict[str, tuple[str, str]] = {}
    """No calls of its own (as :attr:`memtrials.memory.expel.ExpeLMemory.calls`)."""

    def frozen(self) -> FixedView:
        return FixedView(None)

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        return None

    def state(self) -> dict[str, Any]:
        return {}

    def load(self, state: Mapping[str, Any]) -> None:
        if state:
            raise ValueError(f"react keeps no memory; got a state with keys {sorted(state)}")
