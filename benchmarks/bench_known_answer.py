"""Known-answer benchmark: every study's planted runs at a larger size, coverage and bias per study.

Each study that plays the planted world exposes ``known_answer(size: int, seed: int) ->
pandas.DataFrame`` (one row per estimated cell: at least ``estimand``, ``estimate``, ``lo``,
``hi``, ``truth``, ``covered``; made with :func:`memtrials.report.truth.truth_beside`), with
``size`` tasks (or worlds) per cell, the planted agent's calls going through the real client
and an in-memory or temporary cache.  :data:`REGISTRY` names them; a study adds one line.

Prints per study and estimand: cells, coverage of the planted truth by the 95 % intervals,
mean bias (estimate minus truth) and mean interval width, over ``--seeds`` repetitions;
the last line is the worst study's coverage.

    python benchmarks/bench_known_answer.py [--size 300] [--seeds 5] [--studies history ...]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

REGISTRY: dict[str, str] = {
    # study: "<module>:<callable>" exposing known_answer(size, seed) -> DataFrame
    "luck": "memtrials.studies.luck.known:bench",
    "calibrator": "memtrials.studies.history.calibrator.known:bench",
    "history": "memtrials.studies.history.known_answer:known_answer",
    "playbook": "memtrials.studies.playbook.known_answer:benchmark",
    "antipersist": "memtrials.studies.antipersist.known_answer:benchmark",
}


def run(study: str, size: int, seeds: int):
    import pandas as pd

    module, _, name = REGISTRY[study].partition(":")
    fn = getattr(importlib.import_module(module), name)
    frames = []
    for seed in range(seeds):
        df = fn(size, seed)
        frames.append(df.assign(seed=seed))
    return pd.concat(frames, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=300, help="tasks (or worlds) per cell")
    ap.add_argument("--seeds", type=int, default=5, help="repetitions with other seeds")
    ap.add_argument("--studies", nargs="*", default=None, help=f"of {sorted(REGISTRY)} (default: all)")
    args = ap.parse_args(argv)
    studies = args.studies or sorted(REGISTRY)
    unknown = sorted(set(studies) - set(REGISTRY))
    if unknown:
        print(f"unknown studies {unknown}; registered: {sorted(REGISTRY)}", file=sys.stderr)
        return 2
    worst = None
    for study in studies:
        t0 = time.perf_counter()
        df = run(study, args.size, args.seeds)
        secs = time.perf_counter() - t0
        df["bias"] = df["estimate"] - df["truth"]
        df["width"] = df["hi"] - df["lo"]
        by = df.groupby("estimand").agg(cells=("covered", "size"), coverage=("covered", "mean"),
                                        bias=("bias", "mean"), width=("width", "mean"))
        print(f"== {study}: size {args.size}, {args.seeds} seeds, {secs:.1f} s")
        print(by.to_string(float_format=lambda x: f"{x:.3f}"))
        cov = float(df["covered"].mean())
        print(f"{study}: coverage {cov:.3f} over {len(df)} cells, mean |bias| {df['bias'].abs().mean():.4f}")
        worst = cov if worst is None else min(worst, cov)
    print(f"worst coverage: {worst:.3f}" if worst is not None else "no study registered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
