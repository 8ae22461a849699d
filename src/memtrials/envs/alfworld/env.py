"""ALFWorld (``alfworld==0.4.2``, TextWorld engine) behind the :class:`~memtrials.envs.base.Env` interface.

The engine is ALFWorld's own TextWorld environment: ``textworld``'s ``PddlEnv`` wrapped in
``AlfredDemangler`` (object names such as "apple 1") and ``AlfredInfos``, the same wrapper
chain ``AlfredTWEnv.init_env`` registers, without its gym batching (one game per object,
no subprocesses).  A task id is the path of a game's trial folder relative to the data
root, e.g. ``eval/pick_heat_then_place_in_recep-Apple-None-CounterTop-1/trial_00003``.

Data roots: the project's generated games (``resources/alfworld/games``, see
:mod:`memtrials.envs.alfworld.gen`) or, with ``ALFWORLD_DATA`` set to a folder holding the
official ``json_2.1.1`` data, the official splits ``train``, ``valid_seen``
(``eval_in_distribution``) and ``valid_unseen`` (``eval_out_of_distribution``, 134 games).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from memtrials.envs.base import Env, Observation, data_root, official_data, official_data_help

# Official folder names of ALFWorld's three splits under $ALFWORLD_DATA/json_2.1.1.
OFFICIAL_SPLITS: dict[str, str] = {
    "train": "train",
    "eval_in_distribution": "valid_seen",
    "eval_out_of_distribution": "valid_unseen",
}


# Games per official split after ALFWorld's own filter (solvable, no movable/Sliced): what a
# complete download holds; another count is logged (an incomplete or altered download).
OFFICIAL_SIZES: dict[str, int] = {"train": 3553, "eval_in_distribution": 140, "eval_out_of_distribution": 134}
OFFICIAL_FILES: tuple[str, ...] = ("traj_data.json", "game.tw-pddl")
"""What the loader reads in every official game folder (``<split>/<task>/trial_*/``)."""

log = logging.getLogger(__name__)


def official_help() -> str:
    """What is wrong with ``$ALFWORLD_DATA`` (unset, or without ``json_2.1.1``) and the fix."""
    return official_data_help("alfworld", "ALFWORLD_DATA", "json_2.1.1", "alfworld-download --data-dir <folder>")


def official_root() -> Path | None:
    """``$ALFWORLD_DATA/json_2.1.1`` if the variable is set and the folder exists, else ``None``."""
    return official_data("ALFWORLD_DATA", folder="json_2.1.1")


def game_dirs(root: str | os.PathLike) -> list[Path]:
    """Every playable game under ``root``, as ALFWorld's ``AlfredTWEnv.collect_game_files`` keeps them.

    A game counts if its folder has ``traj_data.json`` and a ``game.tw-pddl`` with
    ``solvable: true``, and its path has no ``movable``/``Sliced`` (unsupported by ALFWorld).
    """
    out = []
    for traj in sorted(Path(root).rglob("traj_data.json")):
        folder = traj.parent
        if "movable" in str(folder) or "Sliced" in str(folder):
            continue
        game = folder / "game.tw-pddl"
        if not game.exists():
            continue
        try:
            if not json.loads(game.read_text()).get("solvable"):
                continue
        except ValueError as exc:
            raise ValueError(f"alfworld: {game} is not valid JSON ({exc}); regenerate it") from exc
        out.append(folder)
    return out


class AlfworldEnv(Env):
    """One TextWorld engine per object, reused across games; ``reset`` reloads only on a new game.

    Options: ``root`` (folder the task ids are relative to; default the generated games, or
    the official data when ``official=True``), ``max_steps`` (``done`` after that many steps).
    The admissible commands come with every observation (TextWorld computes them anyway).
    Several instances may be used from several threads (engine calls are serialized) or
    from a process pool (in parallel).
    """

    name = "alfworld"
    # TextWorld's PDDL grammar/parser keeps module-level state and is not thread-safe: engine
    # calls of all instances in one process are serialized (processes run in parallel).
    _engine_lock = threading.Lock()

    def __init__(self, root: str | os.PathLike | None = None, official: bool = False,
                 max_steps: int | None = None) -> None:
        import textworld
        from textworld.envs import PddlEnv
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

        from memtrials.envs.alfworld import speed as textworld_speed

        textworld_speed.install()  # memoized parsing in TextWorld's PDDL backend (same results, less CPU)
        self.root = data_root(root, official, official_root, official_help, "resources/alfworld/games")
        self.max_steps = max_steps
        infos = textworld.EnvInfos(admissible_commands=True, won=True, extras=["gamefile"])
        self.engine = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
        self._loaded: str | None = None
        self._task_id: str | None = None
        self._desc = ""
        self._step = 0
        self._admissible: tuple[str, ...] = ()

    def gamefile(self, task_id: str) -> Path:
        """The ``game.tw-pddl`` of ``task_id``; a precise error if it is missing."""
        path = self.root / task_id / "game.tw-pddl"
        if not path.exists():
            raise FileNotFoundError(
                f"alfworld: no game {path} for task id {task_id!r} (root {self.root}); "
                "take ids from results/tasks/alfworld.parquet and build the games with "
                "`snakemake resources/alfworld/games.parquet`"
            )
        return path

    def forget_game(self) -> None:
        """Make the next :meth:`reset` load its game file afresh, even that of the game loaded now
        (a game file rewritten in place)."""
        self._loaded = None

    def reset(self, task_id: str) -> Observation:
        path = str(self.gamefile(task_id))
        with self._engine_lock:
            if self._loaded != path:
                self.engine.load(path)
                self._loaded = path
            state = self.engine.reset()
        text = str(state.feedback)
        marker = "Your task is to: "
        self._desc = text[text.index(marker):].strip() if marker in text else ""
        self._task_id = task_id
        self._step = 0
        self._admissible = tuple(state["admissible_commands"])
        return Observation(text=text, step=0, admissible=self._admissible, info={"task_id": task_id})

    def step(self, action: str) -> Observation:
        if self._task_id is None:
            raise RuntimeError("alfworld: step() before reset(task_id)")
        with self._engine_lock:
            state, score, done = self.engine.step(action)
        self._step += 1
        won = bool(state["won"])
        done = bool(done) or won or (self.max_steps is not None and self._step >= self.max_steps)
        self._admissible = tuple(state["admissible_commands"])
        return Observation(text=str(state.feedback), step=self._step, reward=float(score), score=float(score),
                           done=done, won=won, admissible=self._admissible)

    def task_description(self) -> str:
        return self._desc

    def admissible_actions(self) -> tuple[str, ...] | None:
        return self._admissible if self._task_id is not None else None

    def gold_actions(self, task_id: str) -> list[str]:
        """The game's stored walkthrough; for games without one, ALFWorld's planner expert's plan."""
        data: dict[str, Any] = json.loads(self.gamefile(task_id).read_text())
        walk = data.get("walkthrough")
        if walk:
            return [str(a) for a in walk]
        from memtrials.envs.alfworld.planner import planner_walkthrough

        plan = planner_walkthrough(str(self.gamefile(task_id)))
        if plan is None:
            raise RuntimeError(f"alfworld: ALFWorld's planner found no plan for {task_id!r}")
        return plan

    def close(self) -> None:
        try:
            self.engine.close()
        except Exception:
            pass


def check_official_layout(root: str | os.PathLike) -> None:
    """Stop unless each of ALFWorld's three split folders under ``root`` (``json_2.1.1``) holds
    playable games: a folder that is missing, holds no ``<task>/trial_*`` folders, or whose games
    lack a file the loader reads (:data:`OFFICIAL_FILES`) raises FileNotFoundError naming the
    folder, what is missing and the fix.  Games lacking them beside playable ones are skipped, as
    ALFWorld's own ``AlfredTWEnv.collect_game_files`` skips them, with a warning."""
    root = Path(root)
    fix = ("fetch the complete data again with `alfworld-download --data-dir <folder>` (its three archives put "
           "traj_data.json, the PDDL files and game.tw-pddl in every trial folder of json_2.1.1) and point "
           "ALFWORLD_DATA at that folder")
    for split, folder in OFFICIAL_SPLITS.items():
        if not (root / folder).is_dir():
            raise FileNotFoundError(f"alfworld: official data {root} has no {folder}/ folder (split {split}); {fix}")
    for folder in OFFICIAL_SPLITS.values():
        where = root / folder
        trials = sorted(p for p in where.glob("*/trial_*") if p.is_dir())
        if not trials:
            raise FileNotFoundError(f"alfworld: official split folder {where} holds no game folders "
                                    f"(<task>/trial_*/); {fix}")
        lacking = {name: [t for t in trials if not (t / name).is_file()] for name in OFFICIAL_FILES}
        missing = {name: ts for name, ts in lacking.items() if ts}
        if not missing:
            continue
        said = "; ".join(f"{len(ts)} of {len(trials)} game folders lack {name} (e.g. {ts[0]})"
                         for name, ts in missing.items())
        if not game_dirs(where):
            raise FileNotFoundError(f"alfworld: official split folder {where} has no playable game: {said}; {fix}")
        log.warning("alfworld: %s: %s; those games are skipped, as ALFWorld skips them", where, said)


def task_rows(root: str | os.PathLike, official: bool = False) -> list[dict]:
    """One task-table row per playable game under ``root``.

    Generated games: split = the first folder (train / practice / eval).  Official data:
    ``train``, ``valid_seen`` and ``valid_unseen`` become ``train``,
    ``eval_in_distribution`` and ``eval_out_of_distribution``; other folders are left out;
    the layout is checked first (:func:`check_official_layout`).
    """
    root = Path(root)
    if official:
        check_official_layout(root)
    by_folder = {v: k for k, v in OFFICIAL_SPLITS.items()}
    rows = []
    for folder in game_dirs(root):
        rel = folder.relative_to(root)
        split = rel.parts[0]
        if official:
            if split not in by_folder:
                continue
            split = by_folder[split]
        traj = json.loads((folder / "traj_data.json").read_text())
        params = traj.get("pddl_params", {})
        game = json.loads((folder / "game.tw-pddl").read_text())
        rows.append({
            "task_id": rel.as_posix(), "split": split, "type": traj["task_type"],
            "source": "official" if official else "generated",
            "object": params.get("object_target", ""),
            "parent": params.get("parent_target") or params.get("toggle_target", ""),
            "scene": traj.get("scene", {}).get("scene_num"),
            "gold_steps": len(game.get("walkthrough") or []),
        })
    if official:
        for split, size in OFFICIAL_SIZES.items():
            n = sum(r["split"] == split for r in rows)
            if n != size:
                log.warning("alfworld: official split %s holds %d playable games under %s; ALFWorld's "
                            "release holds %d (a partial or altered download?)", split, n, root, size)
    return rows
