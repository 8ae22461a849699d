"""No evaluation task in any training file (section 6.1, 6.4: training data from tasks
disjoint from the evaluation tasks).

The calibrator's labels and datasets and the joint actor's SFT data all come from rollouts on
``calibrator.splits`` (the training splits, refused at parse time when equal to
``history.splits``); the evaluation rollouts (history's Raw / Causal cells, the Calibrator,
Table 9 and joint-actor cells) run on history's tasks.  :func:`leaks` reads the (env,
task_id) pairs of both kinds of file and names every training file that holds an evaluation
task; the report refuses to write when there is one (:func:`check_disjoint`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd


def task_pairs(path: str | Path) -> set[tuple[str, str]]:
    """The (env, task_id) pairs a file holds: an episode / labels / dataset Parquet table (columns
    ``env`` and ``task_id``) or a chat JSONL dataset (keys ``env`` and ``task_id`` per line)."""
    p = Path(path)
    if p.suffix == ".jsonl":
        out = set()
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                row = json.loads(line)
                if "env" not in row or "task_id" not in row:
                    raise ValueError(f"{p}: line {n} has no env / task_id key (rebuild it with this code)")
                out.add((str(row["env"]), str(row["task_id"])))
        return out
    df = pd.read_parquet(p)
    missing = {"env", "task_id"} - set(df.columns)
    if missing:
        raise ValueError(f"{p}: no column(s) {sorted(missing)} (rebuild it with this code)")
    return {(str(e), str(t)) for e, t in zip(df["env"], df["task_id"])}


def leaks(evaluation: Iterable[str | Path], training: Iterable[str | Path]) -> dict[str, list[tuple[str, str]]]:
    """Training file -> the evaluation (env, task_id) pairs it holds (only files with any)."""
    seen: set[tuple[str, str]] = set()
    for p in evaluation:
        seen |= task_pairs(p)
    out = {}
    for p in training:
        shared = sorted(task_pairs(p) & seen)
        if shared:
            out[str(p)] = shared
    return out


def check_disjoint(evaluation: Sequence[str | Path], training: Sequence[str | Path]) -> str:
    """Raise ``ValueError`` naming the files when a training file holds an evaluation task; else
    a one-line summary (the numbers of tasks on each side)."""
    bad = leaks(evaluation, training)
    if bad:
        first = "; ".join(f"{p}: {v[:3]}" for p, v in list(bad.items())[:3])
        raise ValueError(f"calibrator: {len(bad)} training file(s) hold evaluation tasks ({first}); their source "
                         "rollouts must run on calibrator.splits, disjoint from history.splits")
    ev = set().union(*[task_pairs(p) for p in evaluation]) if evaluation else set()
    tr = set().union(*[task_pairs(p) for p in training]) if training else set()
    return (f"training and evaluation tasks disjoint: {len(tr)} training task(s) in {len(training)} file(s), "
            f"{len(ev)} evaluation task(s) in {len(evaluation)} file(s)")
