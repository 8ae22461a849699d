"""The anti-persistence study's headline for the scorecard (:mod:`memtrials.pipeline.scorecard`):
at one endpoint, Anti-Persistence minus Trajectory memory in held-out success (percentage
points), from each job's final-round evaluation (:func:`.analysis.final_round`, the main
table's), paired by (benchmark, seed, held-out task) over the endpoint's benchmarks and
seeds, with a paired bootstrap (``scorecard.n_boot`` resamples)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.report.scorecard import Headline
from memtrials.stats import paired_bootstrap
from memtrials.studies.antipersist import analysis
from memtrials.studies.antipersist.workflow import AntipersistWorkflow

STUDY = AntipersistWorkflow.name
(QUANTITY,) = AntipersistWorkflow.headline_quantities
KEY = ["env", "seed_index", "task_id"]


def success_by_task(paths: Sequence[str]) -> pd.Series:
    """Final-round held-out success per (env, seed, task): the mean over the task's episodes."""
    ev = pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True) if paths else pd.DataFrame()
    if ev.empty:
        return pd.Series(dtype=float)
    last = analysis.final_round(ev)
    return last.assign(w=last["won"].astype(float)).groupby(KEY)["w"].mean()


def headline(model: str, inputs: Mapping[str, Sequence[str]], options: Mapping[str, Any]) -> list[Headline]:
    n_boot = int(options["n_boot"])
    both = pd.concat([success_by_task(inputs["trajectory"]).rename("base"),
                      success_by_task(inputs["antipersist"]).rename("ap")], axis=1, join="inner").dropna()
    if both.empty:
        return [Headline.not_run(STUDY, QUANTITY, "no held-out task evaluated under both designs on the same "
                                 "benchmark and seed; rerun both designs' jobs")]
    iv = paired_bootstrap(both["base"].to_numpy(), both["ap"].to_numpy(), n_boot=n_boot)
    seeds = both.reset_index()[["env", "seed_index"]].drop_duplicates()
    return [Headline(STUDY, QUANTITY, 100 * iv.estimate, 100 * iv.lo, 100 * iv.hi, unit="pp",
                     interval=f"95% paired bootstrap over (benchmark, seed, task) pairs ({n_boot} resamples)",
                     n=iv.n, n_label=f"paired tasks over {len(seeds)} benchmark x seed stream(s)")]
