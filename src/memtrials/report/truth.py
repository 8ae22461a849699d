"""Truth beside estimate: the planted truth joined to a table of estimates (known-answer runs).

A study run on the planted world with a planted agent (issue 38) knows the value of every
estimand from the declared planted function.  :func:`truth_beside` puts that value beside
each estimate (column :data:`TRUTH`, labelled :data:`TRUTH_LABEL` in captions) and marks
whether the estimate's 95 % interval holds it (:data:`COVERED`); :func:`coverage` summarises a
table (cells, covered, rate, mean bias); :func:`coverage_line` says it in one caption sentence.
Every study's planted tables use these, so a reader finds the truth in the same place.
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

TRUTH = "truth"
COVERED = "covered"
TRUTH_LABEL = "truth (planted)"
"""How a caption or header names the truth column: the value the planted function declares,
never an estimate from runs."""
PLANTED_NOTE = ("Known-answer run: a planted agent on the planted world. Column `truth` is the value the "
                "planted function declares (computed, not measured); `covered`: the 95 % interval holds it.")


def truth_beside(estimates: pd.DataFrame, truth: pd.DataFrame, keys: Sequence[str], *,
                 value: str = TRUTH, lo: str = "lo", hi: str = "hi", source: str = "truth table") -> pd.DataFrame:
    """``estimates`` with columns :data:`TRUTH` (``truth[value]`` matched on ``keys``) and
    :data:`COVERED` (``lo <= truth <= hi``).  Every estimate row must find exactly one truth
    row: a ValueError names the keys of the first row that does not (a truth that is missing
    is a wiring defect, not a blank)."""
    keys = list(keys)
    for frame, what, need in ((estimates, "estimates", keys + [lo, hi]), (truth, source, keys + [value])):
        missing = [c for c in need if c not in frame.columns]
        if missing:
            raise ValueError(f"truth_beside: {what} lacks column(s) {missing}")
    t = truth[keys + [value]].rename(columns={value: TRUTH})
    if t.duplicated(keys).any():
        dup = t.loc[t.duplicated(keys), keys].iloc[0].to_dict()
        raise ValueError(f"truth_beside: {source} has two rows for {dup}")
    est = estimates.drop(columns=[c for c in (TRUTH, COVERED) if c in estimates.columns])
    out = est.merge(t, on=keys, how="left", validate="many_to_one")
    if out[TRUTH].isna().any():
        row = out.loc[out[TRUTH].isna(), keys].iloc[0].to_dict()
        raise ValueError(f"truth_beside: no planted truth in {source} for {row}")
    out[COVERED] = (out[lo] <= out[TRUTH]) & (out[TRUTH] <= out[hi])
    return out


def coverage(table: pd.DataFrame, estimate: str = "estimate") -> dict[str, Any]:
    """``{"cells", "covered", "rate", "bias"}`` of a :func:`truth_beside` table (``bias``: the
    mean of estimate minus truth; ``rate`` None for an empty table)."""
    n = int(len(table))
    covered = int(table[COVERED].sum()) if n else 0
    bias = float((table[estimate] - table[TRUTH]).mean()) if n and estimate in table.columns else None
    return {"cells": n, "covered": covered, "rate": covered / n if n else None, "bias": bias}


def coverage_line(table: pd.DataFrame, estimate: str = "estimate") -> str:
    """One caption sentence: how many of the table's 95 % intervals hold the planted truth."""
    c = coverage(table, estimate)
    if not c["cells"]:
        return "No planted cells."
    return (f"The planted truth lies inside the 95 % interval in {c['covered']} of {c['cells']} cells "
            f"({c['rate']:.0%}); mean bias {c['bias']:+.3f}." if c["bias"] is not None else
            f"The planted truth lies inside the 95 % interval in {c['covered']} of {c['cells']} cells ({c['rate']:.0%}).")
