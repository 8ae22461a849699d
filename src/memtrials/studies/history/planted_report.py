"""The history study's planted table: each estimate of the planted cells beside its truth.

Table ``planted_views`` (one row per estimand and condition), made by the same analysis as
the panel's tables (:mod:`.analysis`: Wilson intervals, the paired bootstrap against Raw on
the same tasks) from the planted agent's rollout cells, joined with the truth that
:mod:`.planted_truth` computes from the declared policy (:func:`memtrials.report.truth.truth_beside`):

* ``success``: share of episodes won (Wilson 95 %);
* ``change_vs_raw``: the condition's success minus Raw's on the same tasks (paired bootstrap 95 %);
* ``repetition``: among steps whose previous action failed (the observation says so), the
  share that repeat that action (Wilson 95 %).

The cells must have played exactly the configured task list (``history.seed``,
``history.planted.tasks_per_cell``): any other list is a wiring defect and an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import pandas as pd

from memtrials.report.truth import PLANTED_NOTE, coverage_line, truth_beside
from memtrials.studies.history import analysis as A
from memtrials.studies.history.design import CONDITION_LABELS, read_tasks
from memtrials.studies.history.planted_cells import PLANTED_ENV
from memtrials.studies.history.planted_truth import truth_table

if TYPE_CHECKING:
    from memtrials.studies.history.report import Report

FAILED_PREFIX = "Nothing happens: '"
ESTIMANDS = ("success", "change_vs_raw", "repetition")


def repetition_counts(steps: pd.DataFrame) -> pd.DataFrame:
    """Per condition: steps whose previous action failed (``n``) and those repeating it (``k``)."""
    s = steps.sort_values(["episode_id", "step"]).copy()
    s["prev_action"] = s.groupby("episode_id")["action"].shift(1)
    after = s[s["obs_before"].astype(str).str.startswith(FAILED_PREFIX) & s["prev_action"].notna()]
    rows = [{"condition": c, "k": int((g["action"] == g["prev_action"]).sum()), "n": len(g)}
            for c, g in after.groupby("condition", sort=True)]
    return pd.DataFrame(rows, columns=["condition", "k", "n"])


def estimates(eps: pd.DataFrame, steps: pd.DataFrame, conditions: list[str], n_boot: int) -> pd.DataFrame:
    """The planted cells' estimates, one row per (estimand, condition): ``n``, ``estimate``, ``lo``, ``hi``."""
    rows = []
    reps = repetition_counts(steps).set_index("condition") if len(steps) else pd.DataFrame(columns=["k", "n"])
    for c in conditions:
        g = eps[eps["condition"] == c]
        r = A.rate(int(g["won"].sum()), len(g))
        rows.append({"estimand": "success", "condition": c, "n": r["n"], "estimate": r["rate"],
                     "lo": r["lo"], "hi": r["hi"]})
        if c != "raw":
            d = A.paired_vs(eps, "raw", c, ["task_id"], n_boot=n_boot).iloc[0]
            rows.append({"estimand": "change_vs_raw", "condition": c, "n": int(d["n_pairs"]),
                         "estimate": d["diff"], "lo": d["lo"], "hi": d["hi"]})
        k, n = (int(reps.loc[c, "k"]), int(reps.loc[c, "n"])) if c in reps.index else (0, 0)
        r = A.rate(k, n)
        rows.append({"estimand": "repetition", "condition": c, "n": n, "estimate": r["rate"],
                     "lo": r["lo"], "hi": r["hi"]})
    return pd.DataFrame(rows)


def planted_table(eps: pd.DataFrame, steps: pd.DataFrame, tasks: list[str], sl: Mapping[str, Any],
                  n_boot: int) -> pd.DataFrame:
    """Estimates of the planted cells beside the declared truth (module docstring)."""
    conditions = list(sl["conditions"])
    if "raw" not in conditions:
        raise ValueError("history.planted.conditions: the planted table compares with raw; list raw")
    for c in conditions:
        played = sorted(eps.loc[eps["condition"] == c, "task_id"].astype(str))
        if played != sorted(tasks):
            raise ValueError(f"planted cell {sl['model']}/{PLANTED_ENV}/{c}: played {len(played)} tasks that are not "
                             f"the configured list of {len(tasks)} (history.seed, history.planted.tasks_per_cell): "
                             "a cell ran other tasks than its baseline; rerun it")
    declared = sl["declared"]
    truth = truth_table(tasks, conditions, int(sl["actor"]["max_actions"]), declared["p_right"], declared["repeat"])
    est = estimates(eps, steps, conditions, n_boot)
    out = truth_beside(est, truth, ["estimand", "condition"], value="truth", source="the declared planted policy")
    out.insert(2, "label", [CONDITION_LABELS.get(c, c) for c in out["condition"]])
    return out


def planted_part(rep: "Report", cells: tuple[pd.DataFrame, pd.DataFrame], tasks_path: str,
                 sl: Mapping[str, Any], n_boot: int) -> pd.DataFrame:
    """Write table ``planted_views`` (and return it)."""
    eps, steps = cells
    tasks = read_tasks(tasks_path, int(sl["tasks_per_cell"]), sl["split"], int(sl["seed"]), PLANTED_ENV)
    table = planted_table(eps, steps, tasks, sl, n_boot)
    succ = table[table["estimand"] == "success"]
    by_est = " > ".join(succ.sort_values("estimate", ascending=False)["label"])
    by_truth = " > ".join(succ.sort_values("truth", ascending=False)["label"])
    caption = (f"{PLANTED_NOTE} History views played by the planted agent `{sl['model']}` (planted, not a real "
               f"model) on {len(tasks)} planted test tasks per condition, {int(sl['actor']['max_actions'])} actions "
               "each: success (Wilson 95 %), change from Raw on the same tasks (paired bootstrap 95 %), and the "
               "rate of repeating an action that just failed (Wilson 95 %). The truth follows from the declared "
               f"policy in config/models.yaml (memtrials.studies.history.planted_truth). {coverage_line(table)} "
               f"Success by estimate: {by_est}; by planted truth: {by_truth}.")
    rep.table("planted_views", table, caption)
    return table
