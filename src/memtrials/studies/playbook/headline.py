"""The playbook study's headline for the scorecard (:mod:`memtrials.pipeline.scorecard`): at one
endpoint, RBC minus Whole and RBC minus No playbook in evaluation score (0-100), over the
endpoint's standard-growth settings, paired by evaluation task.

Scores as in Table 1 (:mod:`.analysis`): a task's score is the mean over its seeds of success
(the purchase reward on WebShop), x 100; RBC serves the candidate its practice choice named,
Whole is the mean over the cut runs' whole playbooks (per task), No playbook the ``none``
candidate.  Each (setting, task) gives one paired difference; the estimate is their mean (with
the same tasks in every setting, Table 1's mean over settings) and the interval a paired
bootstrap over them (``scorecard.n_boot`` resamples)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.report.scorecard import Headline
from memtrials.stats import paired_bootstrap
from memtrials.studies.playbook import analysis as an
from memtrials.studies.playbook.records import scores
from memtrials.studies.playbook.workflow import PlaybookWorkflow

STUDY = PlaybookWorkflow.name
OVER_WHOLE, OVER_NONE = PlaybookWorkflow.headline_quantities


def task_scores(paths: Sequence[str]) -> dict[tuple, pd.Series]:
    """(setting, candidate) -> 100 x mean score over seeds, per task."""
    out = {}
    for p in paths:
        ep = pd.read_parquet(p)
        if ep.empty:
            continue
        out[(an.setting_of(p), str(ep["candidate"].iloc[0]))] = \
            100.0 * ep.assign(y=scores(ep)).groupby("task_id")["y"].mean()
    return out


def pairs(choices: Sequence[str], evals: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Per comparison (Whole, No playbook): one row per (setting, task) with RBC's and the
    other arm's task score, on the tasks both were scored on."""
    ts = task_scores(evals)
    rows: dict[str, list[pd.DataFrame]] = {"Whole": [], "No playbook": []}
    for path in choices:
        key, ch = an.setting_of(path), an.read_json(path)
        rbc = ts.get((key, str(ch["rbc"]["chosen"])))
        whole = [ts[(key, f"whole:{r}")] for r in an.cut_runs(ch) if (key, f"whole:{r}") in ts]
        arms = {"Whole": pd.concat(whole, axis=1).mean(axis=1) if whole else None, "No playbook": ts.get((key, "none"))}
        for name, base in arms.items():
            if rbc is None or base is None:
                continue
            both = pd.concat([base.rename("base"), rbc.rename("rbc")], axis=1, join="inner").dropna()
            rows[name].append(both.assign(setting=" · ".join(key)))
    return {k: pd.concat(v) if v else pd.DataFrame(columns=["base", "rbc", "setting"]) for k, v in rows.items()}


def headline(model: str, inputs: Mapping[str, Sequence[str]], options: Mapping[str, Any]) -> list[Headline]:
    n_boot = int(options["n_boot"])
    out = []
    for quantity, arm in ((OVER_WHOLE, "Whole"), (OVER_NONE, "No playbook")):
        d = pairs(inputs["choice"], inputs["eval"])[arm]
        if d.empty:
            out.append(Headline.not_run(STUDY, quantity, f"no evaluation task scored under both RBC's choice and "
                                        f"{arm} in {model}'s settings; see results/playbook/tables/candidates"))
            continue
        iv = paired_bootstrap(d["base"].to_numpy(), d["rbc"].to_numpy(), n_boot=n_boot)
        out.append(Headline(STUDY, quantity, iv.estimate, iv.lo, iv.hi, unit="points",
                            interval=f"95% paired bootstrap over (setting, task) pairs ({n_boot} resamples)",
                            n=iv.n, n_label=f"tasks in {d['setting'].nunique()} setting(s)"))
    return out
