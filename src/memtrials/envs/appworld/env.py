"""AppWorld (``appworld==0.1.3.post1``) behind the :class:`~memtrials.envs.base.Env` interface.

An action is Python code run by ``world.execute`` against the app APIs (``apis.<app>.<api>``);
its output is the observation.  The agent ends a task with
``apis.supervisor.complete_task(answer=...)`` (or without an answer); the episode is then
``done`` and AppWorld's own evaluator runs: ``won`` is its pass/fail, ``score`` the share of
unit tests passed (0-100), and ``obs.info["tests"]`` lists every unit test with its outcome
(the per-test feedback of the playbook study; ``obs.info["passed"]`` is the pass/fail).

Data roots: the project-authored task set under ``resources/appworld`` (built by
:mod:`memtrials.envs.appworld.data`), or with ``official=True`` the official data under
``$APPWORLD_ROOT`` (``train``, ``dev``, ``test_normal``, ``test_challenge``).  AppWorld fixes
its root per process at first use, and freezes the process clock (freezegun) at the task's
date while a world is open: time agent-side work with ``os.times().elapsed``, and run
AppWorld environments with different roots in different processes.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import textwrap
from pathlib import Path
from typing import Any

from memtrials.envs.base import Env, Observation, data_root, official_data, official_data_help

OFFICIAL_SPLITS: tuple[str, ...] = ("train", "dev", "test_normal", "test_challenge")
GENERATED_SPLITS: tuple[str, ...] = ("train", "practice", "eval")
OFFICIAL_SIZES: dict[str, int] = {"test_normal": 168}
"""Tasks of the official splits whose size is published (the AppWorld paper's Test-Normal), counted
before the task table is built (:func:`memtrials.envs.catalog.split_size`)."""
OFFICIAL_TASK_FILES: tuple[str, ...] = ("specs.json", "dbs", "ground_truth")
"""What AppWorld reads in every task folder ``data/tasks/<id>/`` (its ``Task.save`` writes these)."""
OFFICIAL_DATA_FOLDERS: tuple[str, ...] = ("tasks", "datasets", "base_dbs", "api_docs")
"""What an AppWorld root's ``data/`` holds: the tasks, the split listings, the apps' base
databases and API docs (``appworld download data`` puts all four there)."""


def official_help() -> str:
    """What is wrong with ``$APPWORLD_ROOT`` (unset, or without ``data/tasks``) and the fix."""
    return official_data_help("appworld", "APPWORLD_ROOT", "data/tasks", "appworld download data --root <folder>")


def official_root() -> Path | None:
    """``$APPWORLD_ROOT`` if it holds ``data/tasks``, else ``None``."""
    return official_data("APPWORLD_ROOT", holding="data/tasks")


def _activate_root(root: Path) -> None:
    from appworld.common.path_store import path_store

    current = os.environ.get("APPWORLD_ROOT")
    if current and Path(current).resolve() != root.resolve() and getattr(_activate_root, "used", False):
        raise RuntimeError(
            f"appworld: this process already uses APPWORLD_ROOT={current}; AppWorld caches its paths, "
            f"so open {root} in another process"
        )
    os.environ["APPWORLD_ROOT"] = str(root.resolve())
    path_store.update_root(str(root.resolve()))
    _activate_root.used = True  # type: ignore[attr-defined]


_SERIAL = itertools.count(1)
"""Numbers the default experiment names of this process's objects."""


class AppWorldEnv(Env):
    """One AppWorld world at a time per object (closed on the next ``reset``).

    Options: ``root`` (AppWorld root holding ``data/``; default ``resources/appworld``),
    ``official`` (use ``$APPWORLD_ROOT``), ``max_steps`` (``done`` after that many code
    actions, then evaluated), ``experiment`` (AppWorld's output folder name under
    ``<root>/experiments/outputs``; default None: a name of this object's own, removed on
    :meth:`close`.  AppWorld writes and deletes ``tasks/<id>/evaluation`` under it at every
    evaluation, so two objects sharing a name that play the same task at once, in two jobs of
    a run or two episodes of one job, removed each other's files: FileNotFoundError).
    """

    name = "appworld"

    def __init__(self, root: str | os.PathLike | None = None, official: bool = False,
                 max_steps: int | None = None, experiment: str | None = None) -> None:
        self.root = data_root(root, official, official_root, official_help, "resources/appworld")
        if not (self.root / "data" / "tasks").is_dir():
            raise FileNotFoundError(
                f"appworld: no task data under {self.root / 'data' / 'tasks'}; build it with "
                "`snakemake resources/appworld/tasks.parquet` (rule env_appworld_data)"
                + ("" if not official else "; " + official_help())
            )
        _activate_root(self.root)
        self.max_steps = max_steps
        self._own_experiment = experiment is None
        self.experiment = experiment if experiment is not None else f"memtrials-{os.getpid()}-{next(_SERIAL)}"
        self.world: Any = None
        self._last_eval: dict[str, Any] | None = None
        self._task_id: str | None = None
        self._step = 0
        self._desc = ""

    def _close_world(self) -> None:
        if self.world is not None:
            self.world.close()
            self.world = None

    def reset(self, task_id: str) -> Observation:
        from appworld import AppWorld

        if not (self.root / "data" / "tasks" / task_id).is_dir():
            raise FileNotFoundError(
                f"appworld: no task {task_id!r} under {self.root / 'data' / 'tasks'}; "
                "take ids from results/tasks/appworld.parquet"
            )
        self._close_world()
        self._last_eval = None
        self.world = AppWorld(task_id=task_id, experiment_name=self.experiment, random_seed=100)
        task = self.world.task
        self._desc = str(task.instruction)
        self._task_id = task_id
        self._step = 0
        sup = task.supervisor
        text = (f"Task: {self._desc}\nSupervisor: {sup.first_name} {sup.last_name} "
                f"({sup.email}, {sup.phone_number}). Date: {task.datetime}.")
        return Observation(text=text, step=0, info={"task_id": task_id, "apps": list(task.app_descriptions)})

    def step(self, action: str) -> Observation:
        if self.world is None or self._task_id is None:
            raise RuntimeError("appworld: step() before reset(task_id), or after the episode ended")
        calls = self.world.requester.request_tracker.requests
        n0 = len(calls)
        output = str(self.world.execute(action))
        self._step += 1
        calls = self.world.requester.request_tracker.requests
        # Ask the engine whether the task is complete only after a POST to the supervisor app
        # (complete_task is one); every API call passes the request tracker, so none is missed.
        new = calls[n0:] if len(calls) >= n0 else calls
        posted = any(c["method"] == "post" and "supervisor" in c["url"] for c in new)
        completed = bool(self.world.task_completed()) if posted else False
        done = completed or (self.max_steps is not None and self._step >= self.max_steps)
        info: dict[str, Any] = {"completed": completed}
        won, score = False, 0.0
        if done:
            result = self.evaluate()
            info.update(result)
            won, score = result["passed"], result["pass_percentage"]
            self._close_world()  # unfreezes the process clock between episodes
        return Observation(text=output, step=self._step, reward=float(won), score=score, done=done,
                           won=won, info=info)

    def evaluate(self) -> dict[str, Any]:
        """AppWorld's evaluator on the current world: pass/fail and every unit test's outcome.

        After the episode ended (the world is closed then) this is the final evaluation.
        """
        if self.world is None:
            if self._last_eval is not None:
                return self._last_eval
            raise RuntimeError("appworld: evaluate() before reset(task_id)")
        self.world.save_logs()
        tracker = self.world.evaluate(suppress_errors=True)
        tests = [{"requirement": p["requirement"], "passed": True, "trace": ""} for p in tracker.passes]
        tests += [{"requirement": f["requirement"], "passed": False, "trace": f.get("trace", "")}
                  for f in tracker.failures]
        self._last_eval = {"passed": bool(tracker.success), "pass_percentage": float(tracker.pass_percentage),
                           "num_tests": int(tracker.num_tests), "tests": tests}
        return self._last_eval

    def task_description(self) -> str:
        return self._desc

    def admissible_actions(self) -> tuple[str, ...] | None:
        return None

    def random_action(self, rng: Any) -> str:
        """A random API lookup, account listing, or ``complete_task`` with a random answer or none."""
        apps = ["simple_note", "todoist", "venmo", "splitwise", "spotify", "gmail", "phone"]
        roll = rng.random()
        if roll < 0.4:
            return f"print(apis.api_docs.show_api_descriptions(app_name={rng.choice(apps)!r}))"
        if roll < 0.7:
            return "print(apis.supervisor.show_account_passwords())"
        if roll < 0.85:
            return f"apis.supervisor.complete_task(answer={rng.randint(0, 99)})"
        return "apis.supervisor.complete_task()"

    def gold_actions(self, task_id: str) -> list[str]:
        """The ground-truth solution as one code action (its ``solution(apis, requester)`` body)."""
        gt = self.root / "data" / "tasks" / task_id / "ground_truth"
        for name in ("solution.py", "compiled_solution.py"):
            path = gt / name
            if path.exists():
                return [solution_body(path.read_text())]
        raise FileNotFoundError(f"appworld: task {task_id!r} has no solution code in {gt} (minimal ground truth)")

    def close(self) -> None:
        self._close_world()
        if self._own_experiment:  # the object's own output folder: nothing reads it after the episode
            shutil.rmtree(self.root / "experiments" / "outputs" / self.experiment, ignore_errors=True)


def solution_body(code: str) -> str:
    """The body of ``def solution(apis, requester):`` as top-level code (canary lines dropped)."""
    lines = [ln for ln in code.splitlines() if "canary" not in ln.lower()]
    text = "\n".join(lines)
    m = re.search(r"^def solution\([^)]*\):\s*\n", text, flags=re.M)
    if m is None:
        raise ValueError("appworld: solution code has no `def solution(...)`")
    body = text[m.end():]
    return textwrap.dedent(body).strip() + "\n"


def check_official_layout(root: str | os.PathLike) -> dict[str, list[str]]:
    """The task ids of each official split listed under ``root/data/datasets``, after checking
    the root holds what AppWorld reads: the four folders of :data:`OFFICIAL_DATA_FOLDERS`, at
    least one split listing, and for every listed task its folder with
    :data:`OFFICIAL_TASK_FILES`.  Anything missing raises FileNotFoundError naming the folder,
    what is missing and the fix.  A split without a listing is left out (a root may hold some)."""
    data = Path(root) / "data"
    fix = ("fetch the complete data again with `appworld download data --root <folder>` and point APPWORLD_ROOT "
           "at that folder (the one holding data/)")
    absent = [name for name in OFFICIAL_DATA_FOLDERS if not (data / name).is_dir()]
    if absent:
        raise FileNotFoundError(f"appworld: official root {root} lacks data/{', data/'.join(absent)}; {fix}")
    listed = {split: [ln.strip() for ln in (data / "datasets" / f"{split}.txt").read_text().splitlines() if ln.strip()]
              for split in OFFICIAL_SPLITS if (data / "datasets" / f"{split}.txt").is_file()}
    if not listed:
        raise FileNotFoundError(f"appworld: official root {root} lists no split: {data / 'datasets'} holds none of "
                                f"{', '.join(s + '.txt' for s in OFFICIAL_SPLITS)}; {fix}")
    for split, ids in listed.items():
        lacking = {name: [t for t in ids if not (data / "tasks" / t / name).exists()] for name in OFFICIAL_TASK_FILES}
        said = "; ".join(f"{len(ts)} of its {len(ids)} tasks lack {name} (e.g. {data / 'tasks' / ts[0] / name})"
                         for name, ts in lacking.items() if ts)
        if not ids:
            said = "it lists no task"
        if said:
            raise FileNotFoundError(f"appworld: official split {split} ({data / 'datasets' / f'{split}.txt'}): "
                                    f"{said}; {fix}")
    return listed


def task_rows(root: str | os.PathLike | None = None, official: bool = False) -> list[dict]:
    """One task-table row per task listed in ``data/datasets/<split>.txt`` (official data:
    the layout checked first, :func:`check_official_layout`)."""
    # official: the official data, whatever ``root`` says
    root = data_root(None if official else root, official, official_root, official_help, "resources/appworld")
    data = root / "data"
    if official:
        check_official_layout(root)
    rows = []
    for split in (OFFICIAL_SPLITS if official else GENERATED_SPLITS):
        listing = data / "datasets" / f"{split}.txt"
        if not listing.exists():
            if official:
                continue
            raise FileNotFoundError(f"appworld: {listing} is missing; rebuild with rule env_appworld_data")
        for task_id in [ln.strip() for ln in listing.read_text().splitlines() if ln.strip()]:
            gt = data / "tasks" / task_id / "ground_truth"
            meta = json.loads((gt / "metadata.json").read_text()) if (gt / "metadata.json").exists() else {}
            answer = json.loads((gt / "answer.json").read_text()) if (gt / "answer.json").exists() else None
            apps_file = gt / "required_apps.json"
            apps = json.loads(apps_file.read_text()) if apps_file.exists() else []
            rows.append({"task_id": task_id, "split": split,
                         "type": meta.get("family") or task_id.split("_")[0],
                         "source": "official" if official else "generated",
                         "difficulty": meta.get("difficulty"), "expects_answer": answer is not None,
                         "apps": apps})
    return rows
