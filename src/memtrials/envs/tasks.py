"""Task tables: every task id of an environment with its split, type and source, as data.

``results/tasks/{env}.parquet`` is the one table every study draws its tasks from, so that
a cell's tasks are fixed by the config and seed.  Schema (:data:`TASK_COLUMNS`):

* ``task_id``  -- what ``Env.reset`` takes;
* ``env``      -- ``alfworld`` | ``scienceworld`` | ``appworld`` | ``webshop``;
* ``split``    -- ScienceWorld ``train``/``dev``/``test`` (official variations); ALFWorld and
  AppWorld generated sets ``train``/``practice``/``eval``; official ALFWorld ``train``/
  ``eval_in_distribution``/``eval_out_of_distribution``; official AppWorld ``train``/``dev``/
  ``test_normal``/``test_challenge``; WebShop ``test`` (goals 0-499)/``practice``/``train``/``duplicate``; the planted world ``train``/``practice``/``test``;
* ``type``     -- ScienceWorld task name, ALFWorld task type, AppWorld scenario family, WebShop
  ``purchase`` (one stratum: a uniform draw; the category is in ``detail``), the planted world's
  three task types;
* ``source``   -- ``official`` or ``generated``;
* ``detail``   -- a JSON object of environment-specific fields (variation, scene, apps, ...).

:func:`select_tasks` is the one seeded stratified sampler (the history study's task lists);
:func:`sample_tasks` applies it per split (the environment check).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from memtrials.io import write_parquet

ENV_NAMES: tuple[str, ...] = ("alfworld", "scienceworld", "appworld", "webshop", "planted")
TASK_COLUMNS: dict[str, str] = {
    "task_id": "string",
    "env": "string",
    "split": "string",
    "type": "string",
    "source": "string",
    "detail": "string",
}
CORE = ("task_id", "split", "type", "source")


def make_table(env: str, rows: Iterable[Mapping]) -> pd.DataFrame:
    """A task table with the stable schema; extra keys of a row go into ``detail`` (JSON)."""
    records = []
    for row in rows:
        extra = {k: v for k, v in row.items() if k not in TASK_COLUMNS}
        records.append({
            "task_id": str(row["task_id"]), "env": env, "split": str(row["split"]),
            "type": str(row["type"]), "source": str(row["source"]),
            "detail": json.dumps(extra, sort_keys=True, default=str),
        })
    df = pd.DataFrame.from_records(records, columns=list(TASK_COLUMNS))
    df = df.astype(TASK_COLUMNS)
    if df["task_id"].duplicated().any():
        dup = df.loc[df["task_id"].duplicated(), "task_id"].iloc[0]
        raise ValueError(f"{env} task table: task id {dup!r} occurs twice")
    return df.reset_index(drop=True)


def write_table(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a task table atomically (zstd Parquet, temporary name, then ``os.replace``)."""
    write_parquet(df, path)


def load_tasks(name: str, path: str | os.PathLike | None = None) -> pd.DataFrame:
    """Read and check the task table of environment ``name`` (default ``results/tasks/{name}.parquet``)."""
    if name not in ENV_NAMES:
        raise ValueError(f"load_tasks: unknown environment {name!r}; expected one of {ENV_NAMES}")
    path = Path(path) if path is not None else Path("results/tasks") / f"{name}.parquet"
    if not path.exists():
        raise FileNotFoundError(
            f"task table {path} does not exist; build it with `snakemake {path}` "
            f"(rule env_tasks)"
        )
    df = pd.read_parquet(path)
    missing = [c for c in TASK_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"task table {path}: missing column(s) {missing}; rebuild it with `snakemake -R {path}`")
    envs = set(df["env"].unique())
    if envs - {name}:
        raise ValueError(f"task table {path}: holds tasks of {sorted(envs)}, expected only {name!r}")
    if df["task_id"].duplicated().any():
        raise ValueError(f"task table {path}: duplicated task ids, e.g. {df.loc[df['task_id'].duplicated(), 'task_id'].iloc[0]!r}")
    return df


def detail(row: Mapping) -> dict:
    """The environment-specific fields of one table row."""
    return json.loads(row["detail"]) if row.get("detail") else {}


def select_tasks(tasks: pd.DataFrame, n: int | None, split: str | Sequence[str] | None, seed: int,
                 source: str = "tasks table", fix: str | None = None) -> list[str]:
    """``n`` task ids of ``split`` (``None``: all of them), balanced over task types, in a seeded order.

    The one seeded stratified sampler.  Within a type the task ids are ordered by
    ``sha256(f"{seed}:{task_id}")``; the types are ordered by the same hash of their first
    id; then the types are visited round-robin, so a small ``n`` covers as many types as
    it can and a larger ``n`` extends the same list.  A pure function of the table, ``n``,
    ``split`` (one split, several pooled, or ``None`` for all) and ``seed``.

    Errors name ``source`` (the table), the split, its size and ``fix`` (what to change;
    a caller passes its config key).
    """
    missing = {"task_id", "split", "type"} - set(tasks.columns)
    if missing:
        raise ValueError(f"{source}: missing column(s) {sorted(missing)} (need task_id, split, type)")
    if n is not None and n < 0:
        raise ValueError(f"{source}: a negative number of tasks ({n}) requested")
    if split is None:
        df, label = tasks, "(all splits)"
    elif isinstance(split, str):
        df, label = tasks[tasks["split"] == split], repr(split)
    else:
        wanted = [str(s) for s in split]
        df, label = tasks[tasks["split"].astype(str).isin(wanted)], repr(wanted)
    if df.empty:
        splits = sorted(tasks["split"].astype(str).unique())
        raise ValueError(f"{source}: no tasks in split {label}; splits present: {splits}"
                         + (f"; {fix}" if fix else ""))
    if n is None:
        n = len(df)
    if n > len(df):
        raise ValueError(f"{source}: {n} tasks requested but split {label} has only {len(df)}; "
                         + (fix or f"ask for at most {len(df)} or choose a larger split"))

    def key(task_id: str) -> str:
        return hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()

    types = df["type"].astype(str)
    groups = [sorted(df.loc[types == typ, "task_id"].astype(str), key=lambda t: (key(t), t))
              for typ in sorted(types.unique())]
    groups.sort(key=lambda g: key(g[0]))
    out: list[str] = []
    depth = 0
    while len(out) < n:
        for g in groups:
            if depth < len(g) and len(out) < n:
                out.append(g[depth])
        depth += 1
    return out


def sample_tasks(df: pd.DataFrame, per_split: int, seed: int, splits: Iterable[str] | None = None,
                 source: str = "tasks table") -> pd.DataFrame:
    """A seeded sample of up to ``per_split`` tasks from each split (:func:`select_tasks`
    per split), as rows of ``df`` in the sampled order; splits without tasks are skipped."""
    parts = []
    for split in (sorted(df["split"].astype(str).unique()) if splits is None else splits):
        size = int((df["split"] == split).sum())
        if size == 0:
            continue
        ids = select_tasks(df, min(per_split, size), split, seed, source)
        parts.append(df.set_index("task_id", drop=False).loc[ids])
    return pd.concat(parts).reset_index(drop=True) if parts else df.iloc[0:0]


def check_disjoint(df: pd.DataFrame, key: Iterable[str], splits: Iterable[str]) -> None:
    """Raise if a value of ``key`` (columns or ``detail`` fields) occurs in two of ``splits``."""
    key = list(key)
    seen: dict[tuple, str] = {}
    for _, row in df.iterrows():
        if row["split"] not in set(splits):
            continue
        d = detail(row)
        k = tuple(row[c] if c in row.index else d.get(c) for c in key)
        other = seen.setdefault(k, row["split"])
        if other != row["split"]:
            raise ValueError(f"{row['env']} task table: {dict(zip(key, k))} occurs in both {other} and {row['split']}")
