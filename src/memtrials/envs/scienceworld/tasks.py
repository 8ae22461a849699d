"""ScienceWorld's task ids (``"<task-name>:<variation>"``) and its rows of the task table.

The ids cover the official 30 tasks and their train/dev/test variations (e.g. ``"boil:3"``);
:func:`task_rows` reads them from a running engine
(:class:`~memtrials.envs.scienceworld.env.ScienceWorldEnv`) for :mod:`memtrials.envs.build`.
"""

from __future__ import annotations

from typing import Protocol


class TaskSource(Protocol):
    """What :func:`task_rows` reads of a running engine (a ``ScienceWorldEnv`` has both)."""

    def task_names(self) -> tuple[str, ...]: ...

    def variations(self, task_name: str) -> dict[str, list[int]]: ...


def parse_task_id(task_id: str) -> tuple[str, int]:
    """Split ``"boil:3"`` into ``("boil", 3)``; a precise error for anything else."""
    name, sep, var = str(task_id).rpartition(":")
    if not sep or not name or not var.isdigit():
        raise ValueError(
            f"scienceworld: task id {task_id!r} is not '<task-name>:<variation>' "
            "(e.g. 'boil:3'); take ids from results/tasks/scienceworld.parquet"
        )
    return name, int(var)


def make_task_id(task_name: str, variation: int) -> str:
    """The canonical task id of one ScienceWorld variation."""
    return f"{task_name}:{int(variation)}"


def task_rows(env: TaskSource) -> list[dict]:
    """One task-table row per official (task, variation): split = the official train/dev/test."""
    rows = []
    for num, name in enumerate(env.task_names()):
        for split, variations in env.variations(name).items():
            for var in variations:
                rows.append({"task_id": make_task_id(name, var), "split": split, "type": name,
                             "source": "official", "variation": var, "task_num": num})
    return rows
