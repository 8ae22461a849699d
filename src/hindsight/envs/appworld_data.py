"""Build an offline AppWorld data root (``<root>/data``) with a project-authored task set.

``appworld download data`` needs the network and no package ships the tasks, so this
module writes what AppWorld's own loaders read, with AppWorld's own code:

* ``data/api_docs/standard/<app>.json`` -- ``ApiDocCollection.build()`` from the app code;
* ``data/base_dbs/<app>.db`` -- the apps' SQL schemas (``ModelCollection.load(create_db=True)``)
  holding one supervisor (``admin.MainUser``), their friends, and their accounts in the
  apps the tasks use;
* ``data/tasks/<id>/`` -- ``Task.save`` with the task's DBs stored as *changes* against
  ``base_dbs`` (so ``save_state``/``load_state`` restore the right world) and a
  ``GroundTruth`` (answer, public data, ``evaluation.py`` run by AppWorld's evaluator,
  solution code);
* ``data/datasets/{train,practice,eval,all}.txt``.

Before the root is kept, every task's solution must pass all its unit tests and a bare
``complete_task()`` must fail at least one (:func:`verify`, in worker processes).

The tasks themselves are defined in :mod:`hindsight.envs.appworld_tasks` (splits) and
:mod:`hindsight.envs.appworld_families` (one module per app), the people and
accounts both share in :mod:`hindsight.envs.appworld_cast`.  Everything is
deterministic in the seed.  Run it in its own process: AppWorld fixes ``APPWORLD_ROOT``
at first use and freezes the clock while a world is open.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from hindsight.envs.appworld_cast import APPS, BASE_TIME, FRIENDS, PASSWORDS, SUPERVISOR

log = logging.getLogger(__name__)


def set_root(root: str | os.PathLike) -> Path:
    """Point AppWorld at ``root`` (must happen before AppWorld resolves any path in this process)."""
    root = Path(root).resolve()
    os.environ["APPWORLD_ROOT"] = str(root)
    from appworld.common.path_store import path_store

    path_store.update_root(str(root))
    return root


def write_api_docs(data: Path) -> None:
    """The standard-format API docs of every app (what ``Task.load`` reads)."""
    from appworld.collections.api_docs import ApiDocCollection
    from appworld.common.constants import CANARY_STRING

    docs = ApiDocCollection.build()
    folder = data / "api_docs" / "standard"
    folder.mkdir(parents=True, exist_ok=True)
    for app_name, api_name_to_docs in docs.items():
        payload = {name: dict(doc) | {"canary_string": CANARY_STRING} for name, doc in api_name_to_docs.items()}
        (folder / f"{app_name}.json").write_text(json.dumps(payload, indent=1, default=str))


def _dt(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


def write_base_dbs(data: Path) -> None:
    """The base world: the supervisor, three friends, and accounts in :data:`APPS`."""
    from appworld.apps import get_all_apps
    from appworld.collections.models import ModelCollection

    models = ModelCollection.load(to_db_home_path=":memory:hindsight-base", from_db_home_path=":memory:hindsight-base",
                                  load_apps=get_all_apps(), create_db=True)
    admin = models.admin
    people = [SUPERVISOR, *FRIENDS]
    for person in people:
        admin.MainUser.create_save(**person)
    main = admin.MainUser.find_one(email=SUPERVISOR["email"])
    for app in APPS:
        admin.AccountPassword.create_save(main_user_id=main.id, account_name=app, password=PASSWORDS[app])
    created = _dt(BASE_TIME)
    for app in APPS:
        user_model = models[app].User
        for person in people:
            fields = {"first_name": person["first_name"], "last_name": person["last_name"], "email": person["email"],
                      "password": PASSWORDS[app] if person is SUPERVISOR else person["first_name"].lower() + "-pass-1",
                      "created_at": created, "last_logged_in": created, "verified": True}
            if app == "venmo":
                fields["venmo_balance"] = 250.0 if person is SUPERVISOR else 100.0
            if app == "phone":  # phone accounts are keyed by phone number and hold no email
                fields = {k: v for k, v in fields.items() if k not in ("email", "verified")}
                fields["phone_number"] = person["phone_number"]
            user_model.create_save(**fields)
    base = data / "base_dbs"
    base.mkdir(parents=True, exist_ok=True)
    models.save(db_home_path=str(base), format="full", delete_if_exists=True)
    models.close()


def build(root: str | os.PathLike, seed: int = 0, max_variants: int | None = None,
          families: list[str] | None = None, workers: int = 1) -> list[dict]:
    """Write the whole data root (or the first ``max_variants`` of every family, or only
    ``families``: for tests), verified in ``workers`` processes; return one manifest row per
    task (see :mod:`hindsight.envs.tasks`)."""
    from hindsight.envs import appworld_tasks as at

    root = set_root(root)
    data = root / "data"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    write_api_docs(data)
    write_base_dbs(data)
    specs = at.task_specs(seed, max_variants=max_variants, families=families)
    rows = []
    t0 = os.times().elapsed  # AppWorld freezes time.time() while a world is open
    for spec in specs:
        at.save_task(spec)
        rows.append({"task_id": spec.task_id, "split": spec.split, "type": spec.family, "source": "generated",
                     "apps": list(spec.apps), "difficulty": spec.difficulty,
                     "expects_answer": spec.answer is not None})
    t1 = os.times().elapsed
    checks = verify(root, [s.task_id for s in specs], workers=workers)
    log.info("appworld: %d tasks saved in %.0f s, verified by AppWorld's evaluator in %.0f s (%d workers)",
             len(specs), t1 - t0, os.times().elapsed - t1, workers)
    for row in rows:
        row.update(checks[row["task_id"]])
    datasets = data / "datasets"
    datasets.mkdir(parents=True, exist_ok=True)
    for split in ("train", "practice", "eval"):
        ids = [s.task_id for s in specs if s.split == split]
        (datasets / f"{split}.txt").write_text("\n".join(ids) + "\n")
    (datasets / "all.txt").write_text("\n".join(s.task_id for s in specs) + "\n")
    log.info("appworld: %d tasks in %s", len(specs), data)
    return rows


class TaskCheckFailed(RuntimeError):
    """An authored task is not solved by its own solution, or is passed by doing nothing."""


def _verify_chunk(root: str, task_ids: list[str], experiment: str) -> tuple[dict[str, dict], list[str]]:
    """Verify ``task_ids`` in this process: (unit-test counts per task, failure messages)."""
    from hindsight.envs.appworld import AppWorldEnv

    env = AppWorldEnv(root=Path(root), experiment=experiment)
    out: dict[str, dict] = {}
    failures: list[str] = []
    try:
        for task_id in task_ids:
            env.reset(task_id)
            for code in env.gold_actions(task_id):
                obs = env.step(code)
            if not obs.won:
                failed = [t["requirement"] for t in obs.info.get("tests", []) if not t["passed"]]
                failures.append(f"appworld task {task_id}: its solution fails {failed or 'to finish'}")
                continue
            env.reset(task_id)
            noop = env.step("apis.supervisor.complete_task()")
            if noop.won:
                failures.append(f"appworld task {task_id}: passed by completing without doing anything")
                continue
            out[task_id] = {"num_tests": int(obs.info["num_tests"]),
                            "noop_failed_tests": sum(not t["passed"] for t in noop.info["tests"])}
    finally:
        env.close()
        shutil.rmtree(Path(root) / "experiments" / "outputs" / experiment, ignore_errors=True)
    return out, failures


def verify(root: Path, task_ids: list[str], workers: int = 1) -> dict[str, dict]:
    """Play every task's solution (must pass every unit test) and a bare ``complete_task()``
    (must fail at least one), in ``workers`` processes; return per task the number of unit
    tests and how many the bare completion fails.  Raise :class:`TaskCheckFailed` naming
    every task that fails a check."""
    workers = max(1, min(int(workers), len(task_ids)))
    chunks = [task_ids[i::workers] for i in range(workers)]
    if workers == 1:
        results = [_verify_chunk(str(root), task_ids, "hindsight-build-check")]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: each worker opens AppWorld afresh (AppWorld fixes its root and freezes the clock per process)
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_verify_chunk, str(root), chunk, f"hindsight-build-check-{i}")
                       for i, chunk in enumerate(chunks)]
            results = [f.result() for f in futures]
    out = {k: v for res, _ in results for k, v in res.items()}
    failures = sorted(msg for _, fails in results for msg in fails)
    if failures:
        raise TaskCheckFailed("; ".join(failures))
    return {task_id: out[task_id] for task_id in task_ids}
