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

Every task's solution must pass all its unit tests and a bare ``complete_task()`` must fail
at least one (:func:`verify`, AppWorld's evaluator in worker processes): checked in the build
for every task the verification manifest (:mod:`memtrials.envs.appworld.manifest`) does not
cover, and for a seeded sample of those it does.

The tasks themselves are defined in :mod:`memtrials.envs.appworld.tasks` (splits) and
:mod:`memtrials.envs.appworld.families` (one module per app), the people and
accounts both share in :mod:`memtrials.envs.appworld.cast`.  Everything is
deterministic in the seed.  Run it in its own process: AppWorld fixes ``APPWORLD_ROOT``
at first use and freezes the clock while a world is open.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from memtrials.envs.appworld.cast import APPS, BASE_TIME, FRIENDS, PASSWORDS, SUPERVISOR

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

    models = ModelCollection.load(to_db_home_path=":memory:memtrials-base", from_db_home_path=":memory:memtrials-base",
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


@dataclass
class BuildResult:
    """What :func:`build_root` made: one task-table row per task, the manifest entry of every
    task, the base world's digest, and the tasks AppWorld's evaluator verified in this build."""

    rows: list[dict]
    entries: dict[str, dict]
    world_digest: str
    verified: list[str]


def _save_chunk(root: str, seed: int, max_variants: int | None, families: list[str] | None,
                task_ids: list[str]) -> None:
    """Save ``task_ids`` of the task set in this process (a spawned worker of :func:`build_root`)."""
    from memtrials.envs.appworld import tasks as at

    set_root(root)
    wanted = set(task_ids)
    for spec in at.task_specs(seed, max_variants=max_variants, families=families):
        if spec.task_id in wanted:
            at.save_task(spec)


def _in_workers(fn: Any, chunks: list[tuple], workers: int) -> list[Any]:
    """``fn(*chunk)`` for every chunk, in ``workers`` spawned processes (or here when 1)."""
    if workers <= 1 or len(chunks) <= 1:
        return [fn(*chunk) for chunk in chunks]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: each worker opens AppWorld afresh (AppWorld fixes its root and freezes the clock per process)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return [f.result() for f in [pool.submit(fn, *chunk) for chunk in chunks]]


def build_root(root: str | os.PathLike, seed: int = 0, max_variants: int | None = None,
               families: list[str] | None = None, workers: int = 1, verified: Mapping[str, Any] | None = None,
               sample: int = 0) -> BuildResult:
    """Write the whole data root (or the first ``max_variants`` of every family, or only
    ``families``: for tests) in ``workers`` processes and verify it with AppWorld's evaluator.

    ``verified`` is the verification manifest (:mod:`memtrials.envs.appworld.manifest`): tasks it
    covers (same digest, AppWorld version, seed and base world) take their results from it,
    except ``sample`` tasks per split drawn afresh each build; every other task is verified
    now.  Without a manifest every task is verified."""
    from memtrials.envs.appworld import tasks as at
    from memtrials.envs.appworld.manifest import entry, sample_per_split, stale_tasks, task_digest, world_digest

    root = set_root(root)
    data = root / "data"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    t0 = os.times().elapsed  # AppWorld freezes time.time() while a world is open
    write_api_docs(data)
    write_base_dbs(data)
    specs = at.task_specs(seed, max_variants=max_variants, families=families)
    ids = [s.task_id for s in specs]
    n = max(1, min(int(workers), len(ids)))
    _in_workers(_save_chunk, [(str(root), seed, max_variants, families, ids[i::n]) for i in range(n)], n)
    t1 = os.times().elapsed
    world = world_digest(data)
    digests = {t: task_digest(data, t) for t in ids}
    stale = set(stale_tasks(verified, seed, world, digests))
    stale |= set(sample_per_split({s.task_id: s.split for s in specs}, sample, seed)) if sample else set()
    todo = [t for t in ids if t in stale]
    checks = verify(root, todo, workers=workers) if todo else {}
    log.info("appworld: %d tasks saved in %.0f s; %d verified by AppWorld's evaluator in %.0f s (%d workers), "
             "%d from the verification manifest", len(specs), t1 - t0, len(todo), os.times().elapsed - t1, workers,
             len(ids) - len(todo))
    entries, rows = {}, []
    for spec in specs:
        tid = spec.task_id
        entries[tid] = (entry(checks[tid], digests[tid], spec.split, spec.family) if tid in checks
                        else dict(verified["tasks"][tid]))  # type: ignore[index]
        rows.append({"task_id": tid, "split": spec.split, "type": spec.family, "source": "generated",
                     "apps": list(spec.apps), "difficulty": spec.difficulty,
                     "expects_answer": spec.answer is not None, "digest": digests[tid],
                     "num_tests": entries[tid]["num_tests"], "noop_failed_tests": entries[tid]["noop_failed_tests"],
                     "verified_by": "evaluator" if tid in checks else "manifest"})
    datasets = data / "datasets"
    datasets.mkdir(parents=True, exist_ok=True)
    for split in ("train", "practice", "eval"):
        (datasets / f"{split}.txt").write_text("\n".join(s.task_id for s in specs if s.split == split) + "\n")
    (datasets / "all.txt").write_text("\n".join(ids) + "\n")
    log.info("appworld: %d tasks in %s", len(specs), data)
    return BuildResult(rows=rows, entries=entries, world_digest=world, verified=todo)


def build(root: str | os.PathLike, seed: int = 0, max_variants: int | None = None,
          families: list[str] | None = None, workers: int = 1, verified: Mapping[str, Any] | None = None,
          sample: int = 0) -> list[dict]:
    """:func:`build_root`'s task-table rows (see :mod:`memtrials.envs.tasks`)."""
    return build_root(root, seed, max_variants, families, workers, verified, sample).rows


class TaskCheckFailed(RuntimeError):
    """An authored task is not solved by its own solution, or is passed by doing nothing."""


def _tests(info: Mapping[str, Any]) -> list[dict]:
    return [{"requirement": t["requirement"], "passed": bool(t["passed"])} for t in info.get("tests", [])]


def _verify_chunk(root: str, task_ids: list[str], experiment: str) -> tuple[dict[str, dict], list[str]]:
    """Verify ``task_ids`` in this process: (results per task, failure messages)."""
    from memtrials.envs.appworld.env import AppWorldEnv

    env = AppWorldEnv(root=Path(root), experiment=experiment)
    out: dict[str, dict] = {}
    failures: list[str] = []
    try:
        for task_id in task_ids:
            env.reset(task_id)
            for code in env.gold_actions(task_id):
                obs = env.step(code)
            env.reset(task_id)
            noop = env.step("apis.supervisor.complete_task()")
            out[task_id] = {"ok": bool(obs.won and not noop.won), "solution_passed": bool(obs.won),
                            "noop_passed": bool(noop.won), "num_tests": int(obs.info.get("num_tests", 0)),
                            "noop_failed_tests": sum(not t["passed"] for t in noop.info.get("tests", [])),
                            "solution_tests": _tests(obs.info), "noop_tests": _tests(noop.info)}
            if not obs.won:
                failed = [t["requirement"] for t in obs.info.get("tests", []) if not t["passed"]]
                failures.append(f"appworld task {task_id}: its solution fails {failed or 'to finish'}")
            elif noop.won:
                failures.append(f"appworld task {task_id}: passed by completing without doing anything")
    finally:
        env.close()
        shutil.rmtree(Path(root) / "experiments" / "outputs" / experiment, ignore_errors=True)
    return out, failures


def verify(root: Path, task_ids: list[str], workers: int = 1) -> dict[str, dict]:
    """Play every task's solution (must pass every unit test) and a bare ``complete_task()``
    (must fail at least one), in ``workers`` processes; return per task both outcomes, the
    number of unit tests, how many the bare completion fails, and each unit test's result of
    both.  Raise :class:`TaskCheckFailed` naming every task that fails a check."""
    workers = max(1, min(int(workers), len(task_ids)))
    chunks = [(str(root), task_ids[i::workers], f"memtrials-build-check-{i}") for i in range(workers)]
    results = _in_workers(_verify_chunk, chunks, workers)
    out = {k: v for res, _ in results for k, v in res.items()}
    failures = sorted(msg for _, fails in results for msg in fails)
    if failures:
        raise TaskCheckFailed("; ".join(failures))
    return {task_id: out[task_id] for task_id in task_ids}
