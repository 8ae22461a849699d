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
"""

from __future__ import annotations

import pandas as pd

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
