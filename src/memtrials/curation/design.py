"""The practice round's design: per episode a practice task and a random inclusion per block.

Source: *Reliable Memory from Unstable Growth*, Section 3.2 ("Randomized inclusion"):
episode ``i`` plays task ``x_i`` and includes block ``j`` with ``z_ij ~ Bernoulli(1/2)``,
independently over blocks and of the task; the agent is served the included blocks'
lessons.  The choice among candidates (Section 3.3) scores every candidate on *fresh*
practice episodes: :func:`choice_episodes` draws them from a separate stream, so no
estimate episode is reused.

Every episode's draws come from its own generator,
``numpy.random.default_rng(SeedSequence([seed, stream, episode]))``, in a fixed order
(task index, actor seed, then one uniform per block), so any episode can be rebuilt
alone (:func:`practice_episode`) and a longer round extends a shorter one unchanged.

Choices the paper leaves open, made here:
- ``task_order="cycle"`` (default) plays the tasks in the given order, episode ``i`` on
  task ``i mod T``: every task appears ``floor(n/T)`` or ``ceil(n/T)`` times, which keeps
  every task in the leave-one-task-out fit; ``"draw"`` draws each task uniformly with
  replacement, the paper's i.i.d. wording.  The inclusions are independent of the task in
  both, so the estimand is the same;
- each episode also carries an actor sampling seed (``actor_seed``) from its generator;
- served lessons keep the playbook's order, whatever blocks are included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from memtrials.curation.blocks import Blocks
from memtrials.io import write_parquet

#: Streams of episode draws: the estimate round and the candidates' scoring never share one.
STREAMS: dict[str, int] = {"estimate": 0, "choice": 1}

#: Columns every design has, before the block columns of :func:`block_columns`.
DESIGN_COLUMNS: tuple[str, ...] = ("episode", "task_id", "actor_seed")

TaskOrder = Literal["cycle", "draw"]


def block_columns(m: int) -> list[str]:
    """The inclusion columns ``z0 .. z{m-1}`` (1 = the block is served)."""
    return [f"z{j}" for j in range(m)]


def design_schema(m: int) -> pa.Schema:
    """The Parquet schema of a practice round over ``m`` blocks (``m = 0``: a choice round)."""
    return pa.schema([pa.field("episode", pa.int64(), nullable=False),
                      pa.field("task_id", pa.string(), nullable=False),
                      pa.field("actor_seed", pa.int64(), nullable=False),
                      *[pa.field(c, pa.int8(), nullable=False) for c in block_columns(m)]])


def episode_rng(seed: int, stream: str, episode: int) -> np.random.Generator:
    """The generator of one episode's draws."""
    if stream not in STREAMS:
        raise ValueError(f"stream {stream!r}: expected one of {sorted(STREAMS)}")
    return np.random.default_rng(np.random.SeedSequence([int(seed), STREAMS[stream], int(episode)]))


def _check(tasks: Sequence[str], m: int, p: float, seed: int, task_order: str) -> list[str]:
    ids = [str(t) for t in tasks]
    if not ids:
        raise ValueError("tasks: the practice round needs at least one practice task")
    if len(set(ids)) != len(ids):
        raise ValueError("tasks: duplicate task ids; list each practice task once (task_order decides repeats)")
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
        raise ValueError(f"m (number of blocks): expected an integer >= 0, got {m!r}")
    if not 0 < p < 1:
        raise ValueError(f"p (inclusion probability): must lie in (0, 1), got {p}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    if task_order not in ("cycle", "draw"):
        raise ValueError(f"task_order {task_order!r}: expected 'cycle' or 'draw'")
    return ids


def _episode(ids: list[str], episode: int, m: int, p: float, seed: int, stream: str,
             task_order: str) -> dict[str, object]:
    if episode < 0:
        raise ValueError(f"episode {episode}: episode indices start at 0")
    rng = episode_rng(seed, stream, episode)
    drawn = int(rng.integers(len(ids)))  # always drawn, so the later draws do not depend on task_order
    actor_seed = int(rng.integers(2**31 - 1))
    z = (rng.random(m) < p).astype(np.int8)
    task = ids[drawn] if task_order == "draw" else ids[episode % len(ids)]
    return {"episode": int(episode), "task_id": task, "actor_seed": actor_seed,
            **{c: int(v) for c, v in zip(block_columns(m), z)}}


def practice_episode(tasks: Sequence[str], episode: int, m: int, *, seed: int, p: float = 0.5,
                     task_order: TaskOrder = "cycle") -> dict[str, object]:
    """One estimate episode alone: the same row :func:`practice_round` gives for ``episode``."""
    ids = _check(tasks, m, p, seed, task_order)
    return _episode(ids, episode, m, p, seed, "estimate", task_order)


def _frame(rows: list[dict[str, object]], m: int) -> pd.DataFrame:
    cols = [*DESIGN_COLUMNS, *block_columns(m)]
    frame = pd.DataFrame(rows, columns=cols)
    frame = frame.astype({"episode": "int64", "actor_seed": "int64", **{c: "int8" for c in block_columns(m)}})
    frame["task_id"] = frame["task_id"].astype(str)
    return frame


def practice_round(tasks: Sequence[str], n_episodes: int, m: int, *, seed: int, p: float = 0.5,
                   task_order: TaskOrder = "cycle", start: int = 0) -> pd.DataFrame:
    """Episodes ``start .. start+n-1`` of the estimate round: task, actor seed, ``z0..z{m-1}``.

    Columns: :data:`DESIGN_COLUMNS` then :func:`block_columns` (schema :func:`design_schema`).
    """
    ids = _check(tasks, m, p, seed, task_order)
    if n_episodes < 0 or start < 0:
        raise ValueError(f"n_episodes ({n_episodes}) and start ({start}) must be >= 0")
    rows = [_episode(ids, i, m, p, seed, "estimate", task_order) for i in range(start, start + n_episodes)]
    return _frame(rows, m)


def choice_episodes(tasks: Sequence[str], n_episodes: int, *, seed: int,
                    task_order: TaskOrder = "cycle") -> pd.DataFrame:
    """Fresh practice episodes (own stream) on which every candidate is scored: task and actor seed."""
    ids = _check(tasks, 0, 0.5, seed, task_order)
    if n_episodes < 0:
        raise ValueError(f"n_episodes ({n_episodes}) must be >= 0")
    return _frame([_episode(ids, i, 0, 0.5, seed, "choice", task_order) for i in range(n_episodes)], 0)


def inclusion_matrix(design: pd.DataFrame, m: int) -> np.ndarray:
    """The (episodes x m) 0/1 matrix of a design, for :mod:`memtrials.stats.inclusion`."""
    missing = [c for c in block_columns(m) if c not in design.columns]
    if missing:
        raise ValueError(f"design: no columns {missing}; was it drawn over {m} blocks?")
    return design[block_columns(m)].to_numpy(dtype=np.int64)


def served_lessons(blocks: Blocks, inclusion: Sequence[int] | np.ndarray) -> list[str]:
    """The lesson ids an inclusion serves: the included blocks' lessons, in playbook order."""
    z = np.asarray(inclusion).ravel()
    if z.size != blocks.m:
        raise ValueError(f"inclusion: {z.size} entries for a playbook of {blocks.m} blocks")
    if not np.isin(z, (0, 1)).all():
        raise ValueError("inclusion: every entry must be 0 or 1")
    return [lid for lid, b in zip(blocks.lesson_ids, blocks.labels) if z[b] == 1]


def write_design(design: pd.DataFrame, m: int, path: str | Path) -> Path:
    """Write a practice (or choice, ``m = 0``) round as Parquet with :func:`design_schema`, atomically."""
    cols = [*DESIGN_COLUMNS, *block_columns(m)]
    if list(design.columns) != cols:
        raise ValueError(f"design: columns {list(design.columns)}, expected {cols}")
    return write_parquet(design, path, schema=design_schema(m))
