"""The supplement's descriptive tables (*Lessons from Luck*, Appendix H: "anomalies with
the providers' finish reasons, regret ... availability weighting"): what the registered
analysis does not test but a reader of the records needs.

- :func:`anomalies`: every lesson that is missing or was cut at the token cap, and every
  reader answer that was recovered or is invalid, with its finish reason, error and the
  start of its raw text.
- :func:`regret`: per cell, the mean over counted answers of ``Y x (r_better - r_worse)``,
  the log's success-rate gap the reader gave up by naming the worse tool.  The paper's
  supplement reports a regret without defining it in the text we have; this definition is
  ours.  The panel row is the mean of the endpoints' values.
- :func:`bootstrap_table`: percentile bootstrap intervals (resampling worlds) of the
  primaries, qualifiers and Sus, beside the registered t intervals.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as _st

PANEL = "panel"
RAW_CHARS = 200


def _text(v: object) -> str:
    return v if isinstance(v, str) else ""


def anomalies(answers: pd.DataFrame, lessons: pd.DataFrame | None) -> pd.DataFrame:
    """Missing or truncated lessons and recovered or invalid answers, one row each."""
    rows = []
    if lessons is not None and len(lessons):
        odd = lessons[(lessons.status != "ok") | (lessons.finish_reason == "length")]
        for r in odd.itertuples():
            rows.append({"unit": r.model, "kind": "lesson", "world_id": r.world_id,
                         "cell": f"{r.instruction}/{r.decision}/{r.outcome}",
                         "status": r.status if r.status != "ok" else "ok (cut at max_tokens)",
                         "finish_reason": _text(r.finish_reason), "error": "",
                         "raw": _text(r.lesson)[:RAW_CHARS]})
    odd = answers[answers.status.isin(["recovered", "invalid"])]
    for r in odd.itertuples():
        rows.append({"unit": r.model, "kind": "answer", "world_id": r.world_id,
                     "cell": f"{r.decision}/{r.outcome}/{r.arm}", "status": r.status,
                     "finish_reason": _text(r.finish_reason), "error": _text(r.error),
                     "raw": _text(r.raw)[:RAW_CHARS]})
    cols = ["unit", "kind", "world_id", "cell", "status", "finish_reason", "error", "raw"]
    return pd.DataFrame(rows, columns=cols)


def regret(answers: pd.DataFrame, worlds: pd.DataFrame) -> pd.DataFrame:
    """Per endpoint x decision x outcome x arm (and the panel): mean regret of the counted
    answers, in success-rate points of the log."""
    w = worlds.set_index("world_id")
    gap = (w.better_successes - w.worse_successes) / w.n_runs
    a = answers[answers.y.notna()].copy()
    a["regret"] = a.y * a.world_id.map(gap)
    keys = ["decision", "outcome", "arm"]
    per = (a.groupby(["model", *keys], sort=True).regret.agg(["mean", "size"]).reset_index()
           .rename(columns={"model": "unit", "mean": "regret", "size": "counted"}))
    if per.empty:
        return per
    panel = per.groupby(keys, sort=True).agg(regret=("regret", "mean"), counted=("counted", "sum")).reset_index()
    panel.insert(0, "unit", PANEL)
    return pd.concat([per, panel], ignore_index=True)


# the supplement's bootstrap: a percentile interval of the mean over complete worlds,
# resampling worlds (fixed resamples and seed, so a rerun writes the same numbers)
BOOTSTRAP_QUANTITIES = ("P2", "A2", "L2", "P3m", "A3", "L3", "Sus")
N_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def bootstrap_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (scipy.stats.bootstrap); NaN if empty."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return math.nan, math.nan
    if np.all(v == v[0]):
        return float(v[0]), float(v[0])
    r = _st.bootstrap((v,), np.mean, n_resamples=N_RESAMPLES, confidence_level=level, method="percentile",
                      vectorized=True, random_state=np.random.default_rng(BOOTSTRAP_SEED))
    return float(r.confidence_interval.low), float(r.confidence_interval.high)


def bootstrap_table(values: dict[tuple[str, str], pd.Series], level: float) -> pd.DataFrame:
    """``values[(unit, quantity)]``: per-world values (NaN: incomplete) -> one row each."""
    rows = []
    for (unit, q), v in values.items():
        lo, hi = bootstrap_interval(v.dropna().to_numpy(), level)
        rows.append({"unit": unit, "quantity": q, "n": int(v.notna().sum()), "estimate": float(v.mean()),
                     "boot_lo": lo, "boot_hi": hi})
    return pd.DataFrame(rows, columns=["unit", "quantity", "n", "estimate", "boot_lo", "boot_hi"])
