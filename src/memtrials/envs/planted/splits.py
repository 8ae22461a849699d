"""The planted world's task table: ``sizes[split]`` tasks per split, spread evenly over the
three task types (:data:`~memtrials.envs.planted.world.TASK_TYPES`).

Splits as WebShop's (:mod:`memtrials.envs.webshop.splits`): ``train`` (memories grow, sources
of training labels), ``practice`` (choices among candidates), ``test`` (evaluation).  Task ids
name their split, so no task is in two splits; a task's content is a function of its id alone.
"""

from __future__ import annotations

from typing import Any, Mapping

from memtrials.envs.planted.world import TASK_TYPES, make_task, task_id

SPLITS: tuple[str, ...] = ("train", "practice", "test")
SOURCE = "generated"


def task_rows(sizes: Mapping[str, int]) -> list[dict[str, Any]]:
    """One row per task: ``sizes`` maps each split of :data:`SPLITS` to its number of tasks."""
    unknown = sorted(set(sizes) - set(SPLITS))
    if unknown:
        raise ValueError(f"envs.planted.sizes: unknown split(s) {unknown}; allowed: {', '.join(SPLITS)}")
    types = sorted(TASK_TYPES)
    rows = []
    for split in SPLITS:
        for i in range(int(sizes.get(split, 0))):
            typ = types[i % len(types)]
            tid = task_id(split, typ, i // len(types))
            task = make_task(tid)
            rows.append({"task_id": tid, "split": split, "type": typ, "source": SOURCE,
                         "steps": len(task.steps), "actions": [len(s.actions) for s in task.steps]})
    return rows


def split_size(sizes: Mapping[str, int], split: str | None, types: Any = None) -> int:
    """Tasks of ``split`` (``None``: all), of ``types`` when given, without building rows."""
    wanted = None if types is None else {str(t) for t in types}
    n_types = len(TASK_TYPES)
    total = 0
    for s in (SPLITS if split is None else [split]):
        n = int(sizes.get(s, 0))
        for j, typ in enumerate(sorted(TASK_TYPES)):
            if wanted is None or typ in wanted:
                total += n // n_types + (1 if j < n % n_types else 0)
    return total
