"""The history study's headline for the scorecard (:mod:`memtrials.pipeline.scorecard`): at one
endpoint, Causal Transition minus Raw in full-rollout task success, paired by task over the
study's environments (the paired bootstrap of Table 2's comparison, ``history.analysis.n_boot``
resamples), from the two rollout cells of each environment."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.report.scorecard import Headline
from memtrials.studies.history import analysis as A
from memtrials.studies.history.workflow import HistoryWorkflow

STUDY = HistoryWorkflow.name
(HEADLINE,) = HistoryWorkflow.headline_quantities


def paired_headline(study: str, quantity: str, base: pd.DataFrame, other: pd.DataFrame, n_boot: int,
                    reading: str = "") -> Headline:
    """``other`` minus ``base`` (episodes with ``model``, ``env``, ``task_id``, ``won``) in
    percentage points, paired by task: the paired bootstrap interval, McNemar's p in the reading."""
    block = pd.concat([base.assign(condition="base"), other.assign(condition="other")], ignore_index=True)
    d = A.paired_vs(block, "base", "other", A.EPISODE_KEY, n_boot=n_boot) if len(base) and len(other) else \
        pd.DataFrame()
    if d.empty or int(d["n_pairs"].iloc[0]) == 0:
        return Headline.not_run(study, quantity, "no task played in both arms (their rollout files share no "
                                "(env, task_id)); rerun the cells on the same tasks")
    r = d.iloc[0]
    p = f"McNemar p = {r['p_mcnemar']:.3g}; discordant -/+ {int(r['base_only'])}/{int(r['other_only'])}"
    return Headline(study, quantity, 100 * float(r["diff"]), 100 * float(r["lo"]), 100 * float(r["hi"]), unit="pp",
                    interval=f"95% paired bootstrap over tasks ({n_boot} resamples)", n=int(r["n_pairs"]),
                    n_label="paired tasks", reading="; ".join(x for x in (reading, p) if x))


def read(paths: Sequence[str]) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in paths], ignore_index=True) if paths else pd.DataFrame()


def headline(model: str, inputs: Mapping[str, Sequence[str]], options: Mapping[str, Any]) -> list[Headline]:
    return [paired_headline(STUDY, HEADLINE, read(inputs["raw"]), read(inputs["causal"]), int(options["n_boot"]))]
