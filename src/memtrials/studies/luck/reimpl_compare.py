"""The comparison of the luck study's independent re-implementation (:mod:`.reimpl`) with
the registered output (*Lessons from Luck*, section 5.7 and Appendix H:
``REIMPL_COMPARISON.json``): the registered side's tables and per-world values, every
compared number with both values, their difference and tolerance, the answers files
checked against the records' lock, and rule ``luck_reimpl``'s entry (:func:`write_comparison`).

Only :func:`registered_outputs` imports the registered analysis (its per-world values).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from memtrials.io import atomic_write_json
from memtrials.studies.luck.reimpl import PANEL, RULE_KEYS, definitions, reimplement

log = logging.getLogger("memtrials.luck")

# comparison tolerances (absolute): estimates, interval limits, bounds and rates; p-values;
# every other field (counts, flags, words) must be equal
TOL_VALUE, TOL_P = 1e-9, 1e-6
P_FIELDS = ("p_t", "p_bet_pos", "p_bet_below", "p_t_holm", "p_bet_holm")
Q_FIELDS = ("n", "estimate", "lo", "hi", "degenerate", "p_t", "p_bet_pos", "p_bet_below", "robust_pos",
            "robust_below", "lower_bound", "upper_bound")
R_FIELDS = ("word", "detected", "suffix", "ceiling", "neutral_rate", "p_t_holm", "p_bet_holm", "bound_check",
            "label")
C_FIELDS = ("worse", "counted", "rate", "lo", "hi")


# -- the registered side ----------------------------------------------------------------------
def registered_outputs(analysis_dir: str | Path, answers: pd.DataFrame, worlds: pd.DataFrame) -> dict[str, Any]:
    """The registered analysis's tables (``results/luck/analysis``), its rules, and its per-world
    values of the six quantities per endpoint (the registered ``contrasts.world_values``; the
    registered analysis forms the panel's per-world values inline and does not write them)."""
    from memtrials.studies.luck.contrasts import CONTRAST_BY_NAME, world_values, y_matrix

    d = Path(analysis_dir)
    reg = json.loads((d / "registered.json").read_text(encoding="utf-8"))
    out: dict[str, Any] = {n: pd.read_parquet(d / f"{n}.parquet")
                           for n in ("quantities", "readings", "cell_rates", "coverage")}
    q = out["quantities"]
    out["quantities"] = q[(q.subset == "all") & q.quantity.isin(list(definitions()))]
    out["rules"], out["records_lock"] = pd.DataFrame([reg["rules"]]), reg.get("records_lock")
    ids, wv = list(worlds.world_id), []
    for m in pd.unique(answers.model):
        ym = y_matrix(answers[answers.model == m], ids)
        for name in definitions():
            wv.append(world_values(ym, CONTRAST_BY_NAME[name])[["value", "lower", "upper"]]
                      .reset_index().assign(unit=m, quantity=name))
    out["world_values"] = pd.concat(wv, ignore_index=True)
    return out


# -- the comparison ---------------------------------------------------------------------------
def _plain(x: Any) -> Any:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return None if math.isnan(float(x)) else float(x)
    return x


def _entry(table: str, unit: str, quantity: str, field: str, a: Any, b: Any) -> dict[str, Any]:
    a, b = _plain(a), _plain(b)
    tol = TOL_P if field in P_FIELDS else TOL_VALUE
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if numeric and not (isinstance(a, int) and isinstance(b, int)):
        diff: Any = abs(float(a) - float(b))
        agree, tolerance = diff <= tol, tol
    else:
        diff = abs(a - b) if numeric else None
        agree, tolerance = (a == b), "equal"
    return dict(table=table, unit=unit, quantity=quantity, field=field, registered=a, reimplementation=b,
                abs_diff=diff, tolerance=tolerance, agree=bool(agree))


def _table(name: str, reg: pd.DataFrame, new: pd.DataFrame, keys: Sequence[str], fields: Sequence[str],
           unit: Any, quantity: Any) -> list[dict[str, Any]]:
    m = reg.merge(new, on=list(keys), how="outer", suffixes=("_reg", "_new"), indicator=True)
    out = []
    for row in m.to_dict("records"):
        u, q = unit(row), quantity(row)
        side = row["_merge"]
        for f in fields:
            a = row.get(f"{f}_reg") if side != "right_only" else "absent"
            b = row.get(f"{f}_new") if side != "left_only" else "absent"
            out.append(_entry(name, u, q, f, a, b))
    return out


def _world_values(reg: pd.DataFrame, new: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    m = reg.merge(new, on=["unit", "quantity", "world_id"], how="right", suffixes=("_reg", "_new"))
    for (u, q), g in m.groupby(["unit", "quantity"], sort=True):
        if u == PANEL:
            continue
        for f in ("value", "lower", "upper"):
            a, b = g[f"{f}_reg"].to_numpy(float), g[f"{f}_new"].to_numpy(float)
            same_nan = np.isnan(a) == np.isnan(b)
            d = np.where(same_nan, np.abs(np.nan_to_num(a) - np.nan_to_num(b)), np.inf)
            bad = d > TOL_VALUE
            diff = float(d.max()) if len(d) else 0.0
            out.append(dict(table="world_values", unit=u, quantity=q, field=f,
                            registered={"worlds": int(len(a)), "complete": int((~np.isnan(a)).sum())},
                            reimplementation={"worlds": int(len(b)), "complete": int((~np.isnan(b)).sum())},
                            abs_diff=None if math.isinf(diff) else diff, tolerance=TOL_VALUE, agree=not bad.any(),
                            worlds_disagreeing=[dict(world_id=w, registered=_plain(x), reimplementation=_plain(y))
                                                for w, x, y in zip(g.world_id[bad], a[bad], b[bad])][:10]))
    return out


def compare(registered: Mapping[str, Any], reimplementation: Mapping[str, pd.DataFrame]) -> dict[str, Any]:
    """Every quantity per unit, both values, their difference, the tolerance and whether they
    agree; ``all_agree`` when every entry does.  ``registered`` as :func:`registered_outputs`."""
    R, N = registered, reimplementation
    entries = _table("quantities", R["quantities"], N["quantities"], ["unit", "quantity"], Q_FIELDS,
                     lambda x: x["unit"], lambda x: x["quantity"])
    entries += _table("readings", R["readings"], N["readings"], ["unit", "contrast"], R_FIELDS,
                      lambda x: x["unit"], lambda x: x["contrast"])
    entries += _table("cell_rates", R["cell_rates"], N["cell_rates"], ["unit", "decision", "outcome", "arm"],
                      C_FIELDS, lambda x: x["unit"], lambda x: f"{x['decision']}/{x['outcome']}/{x['arm']}")
    entries += _table("coverage", R["coverage"], N["coverage"], ["quantity", "complete_endpoints"],
                      ("worlds", "included"), lambda x: PANEL,
                      lambda x: f"{x['quantity']} worlds with {x['complete_endpoints']} complete endpoints")
    rr, nr = R["rules"].iloc[0], N["rules"].iloc[0]
    entries += [_entry("rules", "", k, "value", rr.get(k), nr.get(k)) for k in RULE_KEYS]
    entries += _world_values(R["world_values"], N["world_values"])
    entries += R.get("records", [])
    bad = [e for e in entries if not e["agree"]]
    by_table: dict[str, dict[str, int]] = {}
    for e in entries:
        t = by_table.setdefault(e["table"], {"compared": 0, "disagree": 0})
        t["compared"] += 1
        t["disagree"] += not e["agree"]
    return {
        "what": "independent re-implementation of the registered analysis of P2, P3m and their qualifiers "
                "(A2, L2, A3, L3), per endpoint and for the panel, compared with results/luck/analysis "
                "(src/memtrials/studies/luck/reimpl.py)",
        "tolerances": {"estimates, interval limits, bounds, rates (absolute)": TOL_VALUE,
                       "p-values (absolute)": TOL_P, "counts, flags, words": "equal"},
        "all_agree": not bad, "compared": len(entries), "disagreements": len(bad), "by_table": by_table,
        "not_compared": ["the panel's per-world values (formed inline by the registered analysis, not written; "
                         "the panel's n, estimates, intervals and the coverage table are compared)",
                         "secondary and remedy contrasts, Sus, cue splits, bootstrap, regret, lesson descriptives"],
        "disagreeing": bad, "entries": entries,
    }


def _records(paths: Sequence[str], lock: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The answers files read, checked against the records' lock when the run is locked."""
    if not lock:
        return []
    out = []
    for p in paths:
        got = hashlib.sha256(Path(p).read_bytes()).hexdigest()
        out.append(_entry("records", str(p), "sha256", "locked digest", lock["records"].get(str(p), "absent"), got))
    return out


def write_comparison(*, worlds: str, answers: Sequence[str], analysis_dir: str, rules: Mapping[str, Any],
                     out: str) -> dict[str, Any]:
    """Rule luck_reimpl: re-implement, compare with the registered output, write ``out`` atomically."""
    world_table = pd.read_parquet(worlds)
    answer_table = pd.concat([pd.read_parquet(p) for p in answers], ignore_index=True)
    reg = registered_outputs(analysis_dir, answer_table, world_table)
    reg["records"] = _records(answers, reg.get("records_lock"))
    result = compare(reg, reimplement(answer_table, world_table, rules))
    result["records_locked"] = bool(reg.get("records_lock"))
    atomic_write_json(out, result)
    if result["all_agree"]:
        log.info("re-implementation agrees with the registered analysis: %d comparisons", result["compared"])
    else:
        for e in result["disagreeing"][:20]:
            log.warning("re-implementation disagrees: %s %s %s %s: registered %s, re-implementation %s",
                        e["table"], e["unit"], e["quantity"], e["field"], e["registered"], e["reimplementation"])
    return result
