"""An independent re-implementation of the luck study's registered analysis of the two
primaries and their qualifiers (*Lessons from Luck*, section 4; section 5.7 and Appendix H):
the outcome, the per-world contrasts, the readings, the cell rates and :func:`reimplement`.
Its statistics are in :mod:`.reimpl_stats`; its comparison with the registered output
(``REIMPL_COMPARISON.json``) is :mod:`.reimpl_compare`.

Written from the paper's definitions, not from the registered code: nothing here or in
:mod:`.reimpl_stats` calls ``contrasts``, ``inference``, ``analysis`` or ``memtrials.stats``
(only :func:`.reimpl_compare.registered_outputs`, which reads the registered side, imports
the registered per-world values).  Where it can, it takes other means than the registered
analysis:

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

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from memtrials.studies.luck.reimpl_stats import holm_adjusted, infer

PANEL = "panel"
PRIMARIES = ("P2", "P3m")
QUALIFIERS = {"P2": ("A2", "L2"), "P3m": ("A3", "L3")}
# (decision, adverse outcome, benign outcome): the adverse cell holds the chance outcome
DESIGN = {"P2": ("good", "failure", "success"), "P3m": ("bad", "success", "failure")}
COUNTED = ("valid", "recovered")
RULE_KEYS = ("level", "alpha", "robust_alpha", "margin", "bet", "min_complete", "panel_min_endpoints", "ceiling")
SUFFIX = "complete cases; not robust to missing answers"


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


# -- readings ---------------------------------------------------------------------------------
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
