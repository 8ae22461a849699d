"""The calibrator's known-answer table (issue 38): the label chain's estimates on the
planted world with the planted calibrator, each with its 95 % interval and the planted truth
(:func:`memtrials.studies.history.calibrator.planted.truth`) beside it.

Rows: the generator's CALIBRATE share and the helpful share of its experiences; per kind the
screen's pass rate, the pair outcomes (win, loss) over every recipient's pair, the mean q(E)
and the label rule's CALIBRATE share among screened candidates; over all contexts the share of
CALIBRATE targets of each variant.  Shares carry Wilson intervals, the mean q(E) Student's t
on its support [-R, R].
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.report.truth import truth_beside
from memtrials.stats import t_interval, wilson_interval
from memtrials.studies.history.calibrator.planted import KINDS, PlantedCalibrator, experience_kind, truth


def _share(quantity: str, hits: pd.Series, level: float) -> dict[str, Any]:
    k, n = int(hits.sum()), int(hits.size)
    iv = wilson_interval(k, n, level)
    return {"quantity": quantity, "n": n, "estimate": iv.estimate, "lo": iv.lo, "hi": iv.hi, "interval": "Wilson"}


def estimates(labels: pd.DataFrame, compares: Sequence[pd.DataFrame], recipients: int,
              level: float = 0.95) -> pd.DataFrame:
    """One row per quantity: n, estimate, lo, hi (module docstring)."""
    lab = labels.assign(kind=[experience_kind(e) if isinstance(e, str) else None for e in labels["experience"]])
    cal = lab[lab["decision"] == "CALIBRATE"]
    rows = [_share("generator CALIBRATE", lab["decision"] == "CALIBRATE", level),
            _share("helpful share of E", cal["kind"] == "helpful", level)]
    pairs = pd.concat(list(compares), ignore_index=True) if compares else pd.DataFrame(columns=["context_id", "outcome"])
    kind_of = dict(zip(lab["context_id"], lab["kind"]))
    pairs = pairs.assign(kind=pairs["context_id"].map(kind_of))
    for k in KINDS:
        scr = cal[(cal["kind"] == k) & cal["screened"].astype(bool)]
        rows.append(_share(f"screen pass | {k}", scr["screen_passed"].astype(bool), level))
        pk = pairs[pairs["kind"] == k]
        rows.append(_share(f"win | {k}", pk["outcome"] == "win", level))
        rows.append(_share(f"loss | {k}", pk["outcome"] == "loss", level))
        passed = scr[scr["screen_passed"].astype(bool)]
        iv = t_interval(passed["q"].astype(float).to_numpy(), (-recipients, recipients), level)
        rows.append({"quantity": f"q(E) | {k}", "n": int(len(passed)), "estimate": iv.estimate, "lo": iv.lo,
                     "hi": iv.hi, "interval": "t"})
        rows.append(_share(f"target CALIBRATE | screened {k}", passed["target_full"] == "CALIBRATE", level))
    for v in ("full", "screen_only"):
        valid = lab[lab[f"target_{v}"].notna()]
        rows.append(_share(f"target CALIBRATE ({v})", valid[f"target_{v}"] == "CALIBRATE", level))
    return pd.DataFrame(rows)


def known_table(labels: pd.DataFrame, compares: Sequence[pd.DataFrame], params: Mapping[str, Any],
                recipients: int, level: float = 0.95) -> pd.DataFrame:
    """:func:`estimates` with the planted truth beside each (``truth``, ``covered``)."""
    t = truth(PlantedCalibrator.from_params(params), recipients)
    truth_df = pd.DataFrame({"quantity": list(t), "truth": list(t.values())})
    return truth_beside(estimates(labels, compares, recipients, level), truth_df, ["quantity"],
                        source="calibrator planted truth")
