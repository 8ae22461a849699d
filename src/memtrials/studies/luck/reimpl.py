"""An independent re-implementation of the luck study's registered analysis of the two
primaries and their qualifiers, and its comparison with the registered output
(*Lessons from Luck*, section 4; section 5.7 and Appendix H: ``REIMPL_COMPARISON.json``).

Written from the paper's definitions, not from the registered code: nothing here calls
``contrasts``, ``inference``, ``analysis`` or ``memtrials.stats`` (only
:func:`registered_outputs`, which reads the registered side, imports the registered
per-world values).  Where it can, it takes other means than the registered analysis:

- ``Y`` from each answer's ``first_tool`` and the world's tool names (the records' ``y``
  column is not read): 1 for the worse tool, 0 for the better, not counted otherwise or
  when the answer is neither valid nor recovered (section 4, "Outcome");
- one pandas pivot table of ``Y`` per world and cell, reindexed to every world of the
  worlds table; a contrast is a matrix product whose NaN marks an incomplete world, and
  its missing-data bounds add ``min(0, c)`` / ``max(0, c)`` per missing cell;
- the t interval from ``scipy.stats.t.interval``; the two-sided t p-value from the t
  statistic and the t distribution's survival function; the degenerate rule of a constant
  sample as the paper states it (its t-test decided exactly, as ``docs/luck.md`` records);
- the betting wealth as a sum of ``log1p``; Holm's step-down written out for the
  registered family of the two primaries (the registered code uses statsmodels; a primary
  without a complete world stays in the family as p = 1, as ``docs/luck.md`` records);
- cell rates and Wilson intervals from statsmodels' ``proportion_confint``; the panel's
  rate is the mean of the endpoints' rates with Wilson's interval at the mean's effective
  sample size (``docs/luck.md``, "Panel cell rates").

Not recomputed: the secondary and remedy contrasts, Sus, the cue splits, the bootstrap,
regret, lesson descriptives (the registered supplement has them).
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
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from memtrials.io import atomic_write_json

log = logging.getLogger("memtrials.luck")

PANEL = "panel"
PRIMARIES = ("P2", "P3m")
QUALIFIERS = {"P2": ("A2", "L2"), "P3m": ("A3", "L3")}
# (decision, adverse outcome, benign outcome): the adverse cell holds the chance outcome
DESIGN = {"P2": ("good", "failure", "success"), "P3m": ("bad", "success", "failure")}
COUNTED = ("valid", "recovered")
RULE_KEYS = ("level", "alpha", "robust_alpha", "margin", "bet", "min_complete", "panel_min_endpoints", "ceiling")
SUFFIX = "complete cases; not robust to missing answers"
# comparison tolerances (absolute): estimates, interval limits, bounds and rates; p-values;
# every other field (counts, flags, words) must be equal
TOL_VALUE, TOL_P = 1e-9, 1e-6
P_FIELDS = ("p_t", "p_bet_pos", "p_bet_below", "p_t_holm", "p_bet_holm")
Q_FIELDS = ("n", "estimate", "lo", "hi", "degenerate", "p_t", "p_bet_pos", "p_bet_below", "robust_pos",
            "robust_below", "lower_bound", "upper_bound")
R_FIELDS = ("word", "detected", "suffix", "ceiling", "neutral_rate", "p_t_holm", "p_bet_holm", "bound_check",
            "label")
C_FIELDS = ("worse", "counted", "rate", "lo", "hi")


def definitions() -> dict[str, tuple[dict[str, float], tuple[float, float]]]:
    """Each quantity's coefficients on the cells ``decision|outcome|arm`` and its support."""
    out: dict[str, tuple[dict[str, float], tuple[float, float]]] = {}
    for p, (d, adv, ben) in DESIGN.items():
        out[p] = ({f"{d}|{adv}|RB": 1.0, f"{d}|{ben}|RB": -1.0, f"{d}|{adv}|NEUTRAL": -1.0,
                   f"{d}|{ben}|NEUTRAL": 1.0}, (-2.0, 2.0))
        a, l_ = QUALIFIERS[p]
        out[a] = ({f"{d}|{adv}|RB": 1.0, f"{d}|{adv}|NEUTRAL": -1.0}, (-1.0, 1.0))
        out[l_] = ({f"{d}|{adv}|RB": 1.0, f"{d}|{adv}|RBx": -1.0}, (-1.0, 1.0))
    return out


def _constants(rules: Mapping[str, Any]) -> dict[str, Any]:
    missing, unknown = set(RULE_KEYS) - set(rules), set(rules) - set(RULE_KEYS)
    if missing or unknown:
        raise ValueError(f"luck.analysis: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}; "
                         "the re-implementation needs exactly the registered constants (config/config.yaml)")
    return dict(rules)


# -- the outcome ------------------------------------------------------------------------------
def outcomes(answers: pd.DataFrame, worlds: pd.DataFrame) -> pd.DataFrame:
    """The answers with ``Y`` recomputed from ``first_tool`` and the world's two tools."""
    need = ["model", "world_id", "decision", "outcome", "arm", "status", "first_tool"]
    lack = [c for c in need if c not in answers.columns]
    if lack:
        raise ValueError(f"answers: missing columns {lack}; rerun the luck_readers rule")
    tools = worlds.set_index("world_id")[["better_tool", "worse_tool"]]
    unknown = sorted(set(answers.world_id) - set(tools.index))
    if unknown:
        raise ValueError(f"answers name worlds not in the worlds table: {unknown[:5]}; rerun luck_readers "
                         "on results/luck/worlds.parquet")
    df = answers[need].join(tools, on="world_id")
    ok = df.status.isin(COUNTED)
    df["Y"] = np.select([ok & (df.first_tool == df.worse_tool), ok & (df.first_tool == df.better_tool)],
                        [1.0, 0.0], np.nan)
    df["cell"] = df.decision + "|" + df.outcome + "|" + df.arm
    return df


def cell_table(y: pd.DataFrame, world_ids: Sequence[str]) -> pd.DataFrame:
    """Worlds x cells pivot table of one endpoint's Y (NaN: no counted answer)."""
    dup = y[y.duplicated(["world_id", "cell"], keep=False)]
    if len(dup):
        r = dup.iloc[0]
        raise ValueError(f"answers of {r.model}: two rows for {r.world_id}/{r.cell}; one row per cell "
                         "(rerun luck_readers)")
    t = y.pivot_table(index="world_id", columns="cell", values="Y", aggfunc="first", dropna=False)
    cells = sorted({c for coef, _ in definitions().values() for c in coef})
    return t.reindex(index=pd.Index(list(world_ids), name="world_id"), columns=cells)


def contrast_values(table: pd.DataFrame, coef: Mapping[str, float]) -> pd.DataFrame:
    """Per world: the value (NaN unless every cell is counted) and the missing-data bounds."""
    cols = list(coef)
    c = np.array([coef[k] for k in cols])
    m = table[cols].to_numpy(dtype=float)
    miss = np.isnan(m)
    value = m @ c  # NaN propagates from any missing cell
    known = np.where(miss, 0.0, m) @ c
    return pd.DataFrame({"value": value, "lower": known + miss @ np.minimum(c, 0.0),
                         "upper": known + miss @ np.maximum(c, 0.0)}, index=table.index)


# -- inference --------------------------------------------------------------------------------
def betting_p(v: np.ndarray, support: tuple[float, float], null: float, greater: bool, bet: float) -> float:
    """``min(1, 1/K)`` of the fixed bet ``bet / m'`` on values rescaled to [0, 1]; for a mean of
    at least ``null`` (``greater=False``) the values and the null are negated first."""
    a, b = support
    y, m = ((v - a) / (b - a), (null - a) / (b - a)) if greater else ((b - v) / (b - a), (b - null) / (b - a))
    log_k = float(np.log1p((bet / m) * (y - m)).sum())
    with np.errstate(over="ignore"):
        return float(min(1.0, np.exp(-log_k)))


def infer(v: np.ndarray, support: tuple[float, float], r: Mapping[str, Any]) -> dict[str, Any]:
    """Estimate, registered interval, t and betting p-values and robustness of one sample."""
    v = np.asarray(v, dtype=float)
    n = int(v.size)
    if n == 0:
        return dict(n=0, estimate=math.nan, lo=math.nan, hi=math.nan, degenerate=False, p_t=math.nan,
                    p_bet_pos=math.nan, p_bet_below=math.nan, robust_pos=False, robust_below=False)
    a, b = support
    mean = math.fsum(v) / n
    if np.unique(v).size == 1:  # every value equals v0: the registered degenerate interval
        v0 = float(v[0])
        q = 1.0 - ((1.0 - r["level"]) / 2.0) ** (1.0 / n)
        est, lo, hi, degenerate = v0, v0 - (v0 - a) * q, v0 + (b - v0) * q, True
        p_t = 1.0 if v0 == 0.0 else 0.0
    else:
        sem = float(np.std(v, ddof=1)) / math.sqrt(n)
        lo, hi = (float(x) for x in stats.t.interval(r["level"], n - 1, loc=mean, scale=sem))
        est, degenerate = mean, False
        p_t = float(2.0 * stats.t.sf(abs(mean / sem), n - 1))
    p_pos = betting_p(v, support, 0.0, True, r["bet"])
    p_below = betting_p(v, support, r["margin"], False, r["bet"])
    return dict(n=n, estimate=est, lo=lo, hi=hi, degenerate=degenerate, p_t=p_t, p_bet_pos=p_pos,
                p_bet_below=p_below, robust_pos=bool(lo > 0 and p_pos <= r["robust_alpha"]),
                robust_below=bool(hi < r["margin"] and p_below <= r["robust_alpha"]))


def holm_adjusted(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of one family (a missing p-value counts as 1)."""
    p = [1.0 if (x is None or math.isnan(x)) else float(x) for x in ps]
    m, running, out = len(p), 0.0, [0.0] * len(p)
    for rank, i in enumerate(sorted(range(m), key=lambda j: p[j])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def _detected(s: Mapping[str, Any], p_t: float, p_bet: float, r: Mapping[str, Any]) -> bool:
    return bool(s["n"] >= r["min_complete"] and s["estimate"] > 0 and p_t < r["alpha"] and p_bet < r["alpha"])


def read(unit: str, S: Mapping[str, Mapping[str, dict[str, Any]]], neutral: Mapping[str, float],
         r: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The two primaries' readings at one unit; ``S[q]`` has the summaries ``value``,
    ``lower`` and ``upper`` of quantity ``q`` (section 4, "Readings")."""
    pt = holm_adjusted([S[p]["value"]["p_t"] for p in PRIMARIES])
    pb = holm_adjusted([S[p]["value"]["p_bet_pos"] for p in PRIMARIES])
    lt = holm_adjusted([S[p]["lower"]["p_t"] for p in PRIMARIES])
    lb = holm_adjusted([S[p]["lower"]["p_bet_pos"] for p in PRIMARIES])
    rows = []
    for i, p in enumerate(PRIMARIES):
        s, (qa, ql) = S[p]["value"], QUALIFIERS[p]
        det = _detected(s, pt[i], pb[i], r)
        check = "not applicable"
        if s["n"] < r["min_complete"]:
            word = "descriptive only"
        elif det:
            carrying = S[qa]["value"]["robust_pos"] and S[ql]["value"]["robust_pos"]
            word = "luck-carrying" if carrying else "outcome-dependent"
            ok = _detected(S[p]["lower"], lt[i], lb[i], r)
            if carrying:
                ok = ok and S[qa]["lower"]["robust_pos"] and S[ql]["lower"]["robust_pos"]
            check = "passed" if ok else "failed"
        elif s["robust_below"]:
            word = "bounded below " + ("0.10" if r["margin"] == 0.10 else f"{r['margin']:g}")
            check = "passed" if S[p]["upper"]["robust_below"] else "failed"
        else:
            word = "unresolved"
        rate = neutral.get(p, math.nan)
        ceiling = bool(rate > r["ceiling"]) if not math.isnan(rate) else False
        suffix = SUFFIX if check == "failed" else ""
        label = word + (f" ({suffix})" if suffix else "") + (" [adverse cell at ceiling]" if ceiling else "")
        rows.append(dict(unit=unit, contrast=p, word=word, detected=det, suffix=suffix, ceiling=ceiling,
                         neutral_rate=rate, p_t_holm=pt[i], p_bet_holm=pb[i], bound_check=check, label=label))
    return rows


# -- cell rates ------------------------------------------------------------------------------
def cell_rates(y: pd.DataFrame, level: float) -> pd.DataFrame:
    """Worse-tool rate per endpoint and cell (Wilson), and the panel's mean of rates."""
    t = y.pivot_table(index=["model", "decision", "outcome", "arm"], values="Y",
                      aggfunc=["sum", "count"])  # all-NaN cells kept with count 0
    t.columns = ["worse", "counted"]
    t = t.reset_index().rename(columns={"model": "unit"})
    t["worse"], t["counted"] = t.worse.astype(int), t.counted.astype(int)
    alpha = 1.0 - level
    rate = t.worse / t.counted.where(t.counted > 0)
    lo, hi = proportion_confint(t.worse, t.counted.where(t.counted > 0), alpha=alpha, method="wilson")
    t["rate"], t["lo"], t["hi"] = rate, np.where(t.counted > 0, lo, np.nan), np.where(t.counted > 0, hi, np.nan)
    panel = []
    for (d, o, a), g in t[t.counted > 0].groupby(["decision", "outcome", "arm"]):
        k, p = len(g), float(g.rate.mean())
        v = float((g.rate * (1 - g.rate) / g.counted).sum()) / k ** 2
        n_eff = p * (1 - p) / v if v > 0 else k ** 2 / float((1.0 / g.counted).sum())
        plo, phi = proportion_confint(p * n_eff, n_eff, alpha=alpha, method="wilson")
        panel.append(dict(unit=PANEL, decision=d, outcome=o, arm=a, worse=int(g.worse.sum()),
                          counted=int(g.counted.sum()), rate=p, lo=0.0 if p <= 0 else float(plo),
                          hi=1.0 if p >= 1 else float(phi)))
    return pd.concat([t, pd.DataFrame(panel)], ignore_index=True)


# -- the re-implementation --------------------------------------------------------------------
def reimplement(answers: pd.DataFrame, worlds: pd.DataFrame, rules: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """Primaries, qualifiers, readings, cell rates, panel coverage and per-world values,
    per endpoint and for the panel, from the answers and the worlds table."""
    r = _constants(rules)
    if answers.empty:
        raise ValueError("no answers to re-analyse: the answers tables are empty")
    y = outcomes(answers, worlds)
    ids = list(worlds.world_id)
    models = list(pd.unique(y.model))
    defs = definitions()
    rates = cell_rates(y, r["level"])
    per_model = {m: {q: contrast_values(cell_table(y[y.model == m], ids), coef) for q, (coef, _) in defs.items()}
                 for m in models}
    quantities, readings, wv, coverage = [], [], [], []

    def summarise(unit: str, vals: Mapping[str, pd.DataFrame]) -> None:
        S = {}
        for q, (_, support) in defs.items():
            S[q] = {k: infer(vals[q][k].dropna().to_numpy(), support, r) for k in ("value", "lower", "upper")}
            quantities.append(dict(unit=unit, quantity=q, **S[q]["value"],
                                   lower_bound=S[q]["lower"]["estimate"], upper_bound=S[q]["upper"]["estimate"]))
        neutral = {}
        for p, (d, adv, _) in DESIGN.items():
            hit = rates[(rates.unit == unit) & (rates.decision == d) & (rates.outcome == adv)
                        & (rates.arm == "NEUTRAL")]
            neutral[p] = float(hit.rate.iloc[0]) if len(hit) else math.nan
        readings.extend(read(unit, S, neutral, r))

    for m in models:
        summarise(m, per_model[m])
        for q, df in per_model[m].items():
            wv.append(df.reset_index().assign(unit=m, quantity=q))
    panel = {}
    for q in defs:
        value = np.column_stack([per_model[m][q].value.to_numpy() for m in models])
        k = (~np.isnan(value)).sum(axis=1)
        keep = k >= r["panel_min_endpoints"]
        with np.errstate(invalid="ignore", divide="ignore"):
            pv = np.where(keep, np.nansum(value, axis=1) / k, np.nan)
        panel[q] = pd.DataFrame({
            "value": pv,
            "lower": np.column_stack([per_model[m][q].lower for m in models]).mean(axis=1),
            "upper": np.column_stack([per_model[m][q].upper for m in models]).mean(axis=1)},
            index=pd.Index(ids, name="world_id"))
        wv.append(panel[q].reset_index().assign(unit=PANEL, quantity=q))
        if q in PRIMARIES:
            for kk, cnt in sorted(pd.Series(k).value_counts().items()):
                coverage.append(dict(quantity=q, complete_endpoints=int(kk), worlds=int(cnt),
                                     included=bool(kk >= r["panel_min_endpoints"])))
    summarise(PANEL, panel)
    return {"quantities": pd.DataFrame(quantities), "readings": pd.DataFrame(readings), "cell_rates": rates,
            "coverage": pd.DataFrame(coverage), "world_values": pd.concat(wv, ignore_index=True),
            "rules": pd.DataFrame([r])}


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
