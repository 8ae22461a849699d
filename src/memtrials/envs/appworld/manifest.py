"""The verification manifest of the authored AppWorld task set (``verification.json`` beside this module).

Every authored task is verified by AppWorld's own evaluator: its solution must pass every
unit test and a bare ``apis.supervisor.complete_task()`` must fail at least one
(:func:`memtrials.envs.appworld.data.verify`).  Doing that for all 318 tasks takes a quarter
of an hour on two cores, so the result is kept in a manifest checked into the repository:
per task the digest of what the build wrote for it (its ``data/tasks/<id>/`` folder: DB
changes against the base world, ground truth, solution, ``evaluation.py``), the outcome of
the solution and of the bare completion, and each unit test's result; beside them the
AppWorld version, the seed and the digest of the base world (base DBs and API docs).

The data rule (``env_appworld_data``) re-verifies with the evaluator only the tasks whose
digest differs from the manifest (all of them when the AppWorld version, the seed or the
base world differ), plus a seeded sample per split, so that every build still runs the
evaluator; every other task's results come from the manifest.  Re-verify everything and
rewrite the manifest with (:mod:`memtrials.envs.appworld.verify`)::

    .venv/bin/python -m memtrials.envs.appworld.verify --all --write

(``--workers N`` processes; without ``--all`` only changed tasks are verified; without
``--write`` nothing is written and the command fails when the manifest is stale.)
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Mapping

MANIFEST = Path(__file__).resolve().with_name("verification.json")  # checked in beside the code it verifies
COMMAND = ".venv/bin/python -m memtrials.envs.appworld.verify --all --write"


def appworld_version() -> str:
    """The installed AppWorld distribution's version."""
    from importlib.metadata import version

    return version("appworld")


def _hash_files(h: Any, folder: Path, files: Iterable[Path]) -> None:
    for path in sorted(files):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")


def task_digest(data: str | os.PathLike, task_id: str) -> str:
    """SHA-256 of every file the build wrote for ``task_id`` (relative path and bytes)."""
    folder = Path(data) / "tasks" / task_id
    if not folder.is_dir():
        raise FileNotFoundError(f"appworld: no task folder {folder}")
    h = hashlib.sha256()
    _hash_files(h, folder, [p for p in folder.rglob("*") if p.is_file()])
    return h.hexdigest()


def world_digest(data: str | os.PathLike) -> str:
    """SHA-256 of the base world every task starts from: the base DBs' SQL dumps and the API docs."""
    data = Path(data)
    h = hashlib.sha256()
    for db in sorted((data / "base_dbs").glob("*.db")):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            h.update(db.name.encode() + b"\0" + "\n".join(con.iterdump()).encode() + b"\0")
        finally:
            con.close()
    docs = data / "api_docs"
    _hash_files(h, docs, [p for p in docs.rglob("*") if p.is_file()])
    return h.hexdigest()


def load_manifest(path: str | os.PathLike) -> dict[str, Any]:
    """Read a verification manifest; a missing or malformed file is an error naming the fix."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"appworld verification manifest {path} does not exist; make it with `{COMMAND}`")
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc}); remake it with `{COMMAND}`") from exc
    missing = [k for k in ("appworld", "seed", "world_digest", "tasks") if k not in manifest]
    if missing:
        raise ValueError(f"{path}: missing key(s) {missing}; remake it with `{COMMAND}`")
    return manifest


def stale_tasks(manifest: Mapping[str, Any] | None, seed: int, world: str, digests: Mapping[str, str]) -> list[str]:
    """Tasks whose verification the manifest does not cover: all of them under another AppWorld
    version, seed or base world (or no manifest), else those missing or with another digest."""
    if manifest is None or manifest["appworld"] != appworld_version() or int(manifest["seed"]) != int(seed) \
            or manifest["world_digest"] != world:
        return list(digests)
    known = manifest["tasks"]
    return [t for t, d in digests.items() if t not in known or known[t]["digest"] != d or not known[t]["ok"]]


def sample_per_split(splits: Mapping[str, str], n: int, seed: int) -> list[str]:
    """``n`` tasks of every split, drawn with a seeded RNG (in the given task order)."""
    by_split: dict[str, list[str]] = {}
    for task_id, split in splits.items():
        by_split.setdefault(split, []).append(task_id)
    rng = random.Random(f"appworld-verify-sample-{seed}")
    chosen = {t for split in sorted(by_split) for t in rng.sample(by_split[split], min(n, len(by_split[split])))}
    return [t for t in splits if t in chosen]


def entry(check: Mapping[str, Any], digest: str, split: str, family: str) -> dict[str, Any]:
    """One task's manifest entry from a :func:`~memtrials.envs.appworld.data.verify` result
    (each unit test's result keyed by its requirement, which is unique within a task)."""
    return {"digest": digest, "split": split, "family": family, "ok": bool(check["ok"]),
            "solution_passed": bool(check["solution_passed"]), "noop_passed": bool(check["noop_passed"]),
            "num_tests": int(check["num_tests"]), "noop_failed_tests": int(check["noop_failed_tests"]),
            "solution_tests": {t["requirement"]: bool(t["passed"]) for t in check["solution_tests"]},
            "noop_tests": {t["requirement"]: bool(t["passed"]) for t in check["noop_tests"]}}


def write_manifest(path: str | os.PathLike, seed: int, world: str, entries: Mapping[str, Mapping[str, Any]]) -> None:
    """Write the manifest atomically (sorted keys, one line per task)."""
    path = Path(path)
    head = {"about": "AppWorld's evaluator on every authored task (memtrials.envs.appworld.verify); "
                     f"remake with `{COMMAND}`",
            "appworld": appworld_version(), "seed": int(seed), "world_digest": world}
    lines = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    tasks = [f"  {json.dumps(t)}: {json.dumps(entries[t], sort_keys=True)}" for t in sorted(entries)]
    text = "{\n" + "\n".join(lines) + '\n "tasks": {\n' + ",\n".join(tasks) + "\n }\n}\n"
    json.loads(text)  # well-formed
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
