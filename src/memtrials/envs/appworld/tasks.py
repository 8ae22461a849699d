"""The project-authored AppWorld task set: 30 task families over seven apps, 318 tasks.

The families live in :mod:`memtrials.envs.appworld.families` (one module per app or pair of
apps, each with a table of its families: answer kind, difficulty, instruction).  This
module assigns every family to ONE split, as AppWorld's official scenarios are (a family's
variants all sit in the same split; variants differ only in seeded values), and writes a
task with AppWorld's own ``Task.save``.

=========  ========  ========  =========================================================================
split      families  variants  families (apps)
=========  ========  ========  =========================================================================
train      10        9 each    note_tag_count, note_create (simple_note); todo_complete (todoist);
                               venmo_balance (venmo); split_create_group (splitwise);
                               phone_add_contact, phone_earliest_alarm (phone);
                               fs_count_ext, fs_create_file (file_system); spot_like_song (spotify)
practice   6         10 each   note_latest_title; todo_most_open; venmo_pay; phone_alarm_create;
                               fs_sum_csv; spot_playlist_count
eval       14        12 each   note_delete_tag, note_append; todo_open_count, todo_add_task;
                               venmo_received; split_group_count, split_group_size;
                               phone_contact_count, phone_alarm_disable; fs_delete_ext, fs_move_file;
                               spot_make_playlist, spot_longest_song, spot_playlist_size
=========  ========  ========  =========================================================================

90 train, 60 practice and 168 eval tasks; answer-expecting and state-changing families in
every split; difficulty 1-3.  Ids are ``hs<family without underscores>_<variant>``
(variant 1..n); the ten families of the first, 30-task set keep their ids and worlds for
variants 1-3 (their splits changed: a family is no longer spread over three splits).
Each task has an ``evaluation.py`` run by AppWorld's own evaluator with one unit test per
requirement (task completed, answer matches / no answer given, the intended records
changed, nothing else changed), and a straight-line solution (``solution.py``) that the
gold agent executes.
"""

from __future__ import annotations

import json
import random
import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable

from memtrials.envs.appworld.cast import PASSWORDS, SUPERVISOR, TASK_DATETIME
from memtrials.envs.appworld.families import files, money, notes, phone, spotify, todo
from memtrials.envs.appworld.families.common import EVAL_HEAD, dt as _dt

FAMILIES: dict[str, Callable[[random.Random], dict]] = {
    **notes.FAMILIES, **todo.FAMILIES, **money.FAMILIES, **phone.FAMILIES, **files.FAMILIES, **spotify.FAMILIES,
}
SPLIT_FAMILIES: dict[str, tuple[str, ...]] = {
    "train": ("note_tag_count", "note_create", "todo_complete", "venmo_balance", "split_create_group",
              "phone_add_contact", "phone_earliest_alarm", "fs_count_ext", "fs_create_file", "spot_like_song"),
    "practice": ("note_latest_title", "todo_most_open", "venmo_pay", "phone_alarm_create", "fs_sum_csv",
                 "spot_playlist_count"),
    "eval": ("note_delete_tag", "note_append", "todo_open_count", "todo_add_task", "venmo_received",
             "split_group_count", "split_group_size", "phone_contact_count", "phone_alarm_disable",
             "fs_delete_ext", "fs_move_file", "spot_make_playlist", "spot_longest_song", "spot_playlist_size"),
}
VARIANTS: dict[str, int] = {"train": 9, "practice": 10, "eval": 12}
SPLIT_OF_FAMILY: dict[str, str] = {f: split for split, fams in SPLIT_FAMILIES.items() for f in fams}


@dataclass
class TaskSpec:
    """One authored task: what the world holds, what is asked, how it is checked and solved."""

    task_id: str
    split: str
    family: str
    apps: tuple[str, ...]
    difficulty: int
    instruction: str
    answer: Any
    setup: Callable[[Any, dict], None]
    solution: str
    checks: str
    public: dict = field(default_factory=dict)


def task_id(family: str, variant: int) -> str:
    """AppWorld-style id of 0-based ``variant`` of ``family``."""
    return f"hs{family.replace('_', '')}_{variant + 1}"


def task_specs(seed: int = 0, max_variants: int | None = None,
               families: list[str] | tuple[str, ...] | None = None) -> list[TaskSpec]:
    """All authored tasks (or the first ``max_variants`` of each family, or only ``families``),
    deterministic in ``seed``."""
    unknown = sorted(set(families or ()) - set(FAMILIES))
    if unknown:
        raise ValueError(f"appworld tasks: unknown families {unknown}; known: {', '.join(FAMILIES)}")
    if set(SPLIT_OF_FAMILY) != set(FAMILIES) or len(SPLIT_OF_FAMILY) != sum(map(len, SPLIT_FAMILIES.values())):
        raise RuntimeError("appworld tasks: every family must be listed in exactly one split of SPLIT_FAMILIES")
    specs = []
    for family, make in FAMILIES.items():
        if families is not None and family not in families:
            continue
        split = SPLIT_OF_FAMILY[family]
        n = VARIANTS[split] if max_variants is None else min(max_variants, VARIANTS[split])
        for v in range(n):
            rng = random.Random(f"{seed}-{family}-{v}")
            specs.append(TaskSpec(task_id=task_id(family, v), split=split, family=family, **make(rng)))
    return specs


def evaluation_code(spec: TaskSpec) -> str:
    body = textwrap.indent((EVAL_HEAD + spec.checks).strip("\n"), "    ")
    return ("def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):\n"
            + body + "\n")


def solution_code(spec: TaskSpec) -> str:
    return "def solution(apis, requester):\n" + textwrap.indent(spec.solution, "    ")


def save_task(spec: TaskSpec) -> None:
    """Write one task with AppWorld's own ``Task.save`` (DBs as changes against base_dbs)."""
    from appworld.apps import get_all_apps
    from appworld.apps.admin.models import MainUserMunch
    from appworld.collections.models import ModelCollection
    from appworld.common.constants import DB_VERSION
    from appworld.common.path_store import path_store
    from appworld.ground_truth import GroundTruth
    from appworld.task import Task

    import os

    apps = get_all_apps(skip_admin=True)
    models = ModelCollection.load(from_db_home_path=os.path.join(path_store.data, "base_dbs"),
                                  to_db_home_path=f":memory:memtrials-task-{spec.task_id}",
                                  load_apps=[*apps, "admin"])
    sup = models.supervisor
    s = sup.Supervisor.create_save(**SUPERVISOR)
    for app, password in PASSWORDS.items():
        sup.AccountPassword.create_save(supervisor_id=s.id, account_name=app, password=password)
    sup.Task.create_save(supervisor_id=s.id, instruction=spec.instruction, status=None, answer="null")
    spec.setup(models, {})
    task = Task(id=spec.task_id, instruction=spec.instruction, supervisor=MainUserMunch(**SUPERVISOR),
                datetime=_dt(TASK_DATETIME), allowed_apps=apps, db_version=DB_VERSION, model_collection=models)
    solution = solution_code(spec)
    task.ground_truth = GroundTruth(
        task_id=spec.task_id, required_apps=list(spec.apps), public_data=spec.public, private_data={},
        answer=spec.answer, evaluation_code=evaluation_code(spec), solution_code=solution,
        compiled_solution_code=solution, generator_code="", test_data=None,
        # num_solution_code_lines given: AppWorld would otherwise count them with black (not installed)
        metadata={"difficulty": spec.difficulty, "num_solution_code_lines": len(spec.solution.splitlines()),
                  "mode": "full",
                  "family": spec.family, "split": spec.split,
                  "source": "memtrials.envs.appworld.tasks", "instruction": json.dumps(spec.instruction)},
    )
    import appworld.ground_truth as gt_module

    # GroundTruth.save ends by formatting the folder with ruff (not a dependency here);
    # the code we write is already formatted, so that step is skipped.
    run_ruff, gt_module.run_ruff = gt_module.run_ruff, lambda *a, **k: None
    try:
        task.save(delete_if_exists=True, save_ground_truth=True, ground_truth_mode="full",
                  model_collection_format="changes")
    finally:
        gt_module.run_ruff = run_ruff
    task.close()
