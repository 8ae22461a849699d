"""Task tables: every task id of an environment with its split, type and source, as data.

``results/tasks/{env}.parquet`` is the one table every study draws its tasks from, so that
a cell's tasks are fixed by the config and seed.  Schema (:data:`TASK_COLUMNS`):

* ``task_id``  -- what ``Env.reset`` takes;
* ``env``      -- ``alfworld`` | ``scienceworld`` | ``appworld``;
* ``split``    -- ScienceWorld ``train``/``dev``/``test`` (official variations); ALFWorld and
  AppWorld generated sets ``train``/``practice``/``eval``; official ALFWorld ``train``/
  ``eval_in_distribution``/``eval_out_of_distribution``; official AppWorld ``train``/``dev``/
  ``test_normal``/``test_challenge``;
* ``type``     -- ScienceWorld task name, ALFWorld task type, AppWorld scenario family;
* ``source``   -- ``official`` or ``generated``;
* ``detail``   -- a JSON object of environment-specific fields (variation, scene, apps, ...).

:func:`sample_tasks` draws a fixed, seeded sample per split.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Mapping

import pandas as pd

from hindsight.files import write_parquet

ENV_NAMES: tuple[str, ...] = ("alfworld", "scienceworld", "appworld")
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


def sample_tasks(df: pd.DataFrame, per_split: int, seed: int, splits: Iterable[str] | None = None) -> pd.DataFrame:
    """A seeded sample of up to ``per_split`` tasks from each split, stratified by type where possible.

    Within a split, types are visited round-robin in a seeded order and a seeded shuffle
    picks the task of each type, so a small sample still spans the task types.
    """
    import random

    parts = []
    for split in (sorted(df["split"].unique()) if splits is None else splits):
        sub = df[df["split"] == split]
        if sub.empty:
            continue
        groups = {t: g.sample(frac=1.0, random_state=seed).index.tolist()
                  for t, g in sub.groupby("type", sort=True)}
        order = sorted(groups)
        random.Random(f"{seed}-{split}").shuffle(order)
        picked: list[int] = []
        while len(picked) < min(per_split, len(sub)):
            for t in order:
                if groups[t] and len(picked) < per_split:
                    picked.append(groups[t].pop(0))
        parts.append(df.loc[picked])
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
