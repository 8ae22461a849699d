"""The luck study's registered analysis, per endpoint and for the panel
(*Lessons from Luck*, section 4).

Per endpoint every contrast is computed on its complete worlds; the panel averages,
within each world, the endpoints complete for that world (worlds with at least
``panel_min_endpoints`` complete endpoints) and then averages over worlds.  The
missing-data bounds use every world with missing answers set adversarially; the
panel's bounds weight all endpoints equally.  Cell rates carry Wilson intervals; the
panel's cell rate is the mean of the endpoints' rates, with an interval for that mean.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from memtrials.stats import wilson_interval
from memtrials.stats.rates import mean_of_rates
from memtrials.studies.luck.contrasts import (
    ADVERSE_NEUTRAL, CONTRASTS, PRIMARIES, QUALIFIERS, Contrast, world_values, y_matrix,
)
from memtrials.studies.luck.inference import Reading, Rules, Summary, read_primaries, summarize
from memtrials.studies.luck.outputs import ANALYSIS_TABLES, PANEL
from memtrials.studies.luck.supplement import BOOTSTRAP_QUANTITIES, anomalies, bootstrap_table, regret

CUE_SPLIT = ("P2", "P3m")
TABLES = ANALYSIS_TABLES  # the analysis tables written beside registered.json


@dataclass
class Analysis:
    quantities: pd.DataFrame
    readings: pd.DataFrame
    remedies: pd.DataFrame
    cell_rates: pd.DataFrame
    missingness: pd.DataFrame
    lessons: pd.DataFrame
    coverage: pd.DataFrame
    rules: Rules
    lock: dict[str, Any] | None = None  # the records' lock (registered manifest), if locked
    endpoints: pd.DataFrame = field(default_factory=pd.DataFrame)  # Table 6: ids, pins, sent params
    anomalies: pd.DataFrame = field(default_factory=pd.DataFrame)  # supplement: odd lessons and answers
    regret: pd.DataFrame = field(default_factory=pd.DataFrame)  # supplement: regret per cell
    bootstrap: pd.DataFrame = field(default_factory=pd.DataFrame)  # supplement: bootstrap intervals

    def to_json(self) -> str:
        def rec(df: pd.DataFrame) -> list[dict[str, Any]]:
            return json.loads(df.to_json(orient="records", double_precision=15))
        return json.dumps({
            "rules": asdict(self.rules),
            "thresholds": {"registered": self.rules.registered, "differs": self.rules.differences(),
                           "note": self.rules.caption_note()},
            "records_lock": self.lock,
            "readings": rec(self.readings),
            "quantities": rec(self.quantities), "remedies": rec(self.remedies),
            "cell_rates": rec(self.cell_rates), "missingness": rec(self.missingness),
            "lesson_descriptives": rec(self.lessons), "panel_coverage": rec(self.coverage),
            "endpoints": rec(self.endpoints), "anomalies": rec(self.anomalies), "regret": rec(self.regret),
            "bootstrap": rec(self.bootstrap),
        }, indent=1, sort_keys=True)


def _summ(values: pd.Series, c: Contrast, rules: Rules) -> Summary:
    return summarize(values.dropna().to_numpy(), c.support, rules)


def _row(unit: str, c: Contrast, subset: str, s: Summary, lo: Summary, hi: Summary, n_worlds: int) -> dict[str, Any]:
    d = s.as_dict()
    d.update(unit=unit, quantity=c.name, subset=subset, family=c.family, instruction=c.instruction,
             decision=c.decision, support_lo=c.support[0], support_hi=c.support[1], n_worlds=n_worlds,
             lower_bound=lo.estimate, upper_bound=hi.estimate)
    return d


def _contrast_set(worlds: pd.DataFrame) -> list[tuple[Contrast, str, list[str]]]:
    """(contrast, subset label, world ids) for every quantity, incl. the cue splits."""
    ids = list(worlds.world_id)
    out = [(c, "all", ids) for c in CONTRASTS]
    for cue in ("explicit", "implicit"):
        sub = list(worlds.world_id[worlds.cue == cue])
        for name in CUE_SPLIT:
            c = next(c for c in CONTRASTS if c.name == name)
            out.append((c, f"cue={cue}", sub))
    return out


def cell_rates(answers: pd.DataFrame, level: float) -> pd.DataFrame:
    """Worse-tool rate of every endpoint x decision x outcome x arm, with Wilson intervals;
    panel rows are the mean of the endpoints' rates (as the paper reports them) with an
    interval for that mean (:func:`memtrials.stats.rates.mean_of_rates`: Wilson at the
    effective sample size of the mean); ``worse`` / ``counted`` there are pooled counts."""
    rows = []
    for (m, d, o, a), g in answers.groupby(["model", "decision", "outcome", "arm"], sort=True):
        counted = g.y.dropna()
        k, n = int(counted.sum()), int(counted.size)
        iv = wilson_interval(k, n, level)
        rows.append(dict(unit=m, decision=d, outcome=o, arm=a, worse=k, counted=n, rate=iv.estimate,
                         lo=iv.lo, hi=iv.hi, interval="wilson", invalid=int((g.status == "invalid").sum()),
                         recovered=int((g.status == "recovered").sum()),
                         not_scheduled=int((g.status == "not_scheduled").sum())))
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    panel = []
    for (d, o, a), g in df.groupby(["decision", "outcome", "arm"], sort=True):
        iv = mean_of_rates(list(g.worse), list(g.counted), level)
        panel.append(dict(unit=PANEL, decision=d, outcome=o, arm=a, worse=int(g.worse.sum()),
                          counted=int(g.counted.sum()), rate=iv.estimate, lo=iv.lo, hi=iv.hi,
                          interval="mean of rates (Wilson, effective n)", invalid=int(g.invalid.sum()),
                          recovered=int(g.recovered.sum()), not_scheduled=int(g.not_scheduled.sum())))
    return pd.concat([df, pd.DataFrame(panel)], ignore_index=True)


def _neutral_rates(rates: pd.DataFrame, unit: str) -> dict[str, float]:
    out = {}
    for p, (d, o, a) in ADVERSE_NEUTRAL.items():
        r = rates[(rates.unit == unit) & (rates.decision == d) & (rates.outcome == o) & (rates.arm == a)]
        out[p] = float(r.rate.iloc[0]) if len(r) else math.nan
    return out


def _readings(unit: str, S: dict[str, tuple[Summary, Summary, Summary]], rates: pd.DataFrame,
              rules: Rules) -> list[Reading]:
    prim = {p: S[p][0] for p in PRIMARIES}
    quals = {p: (S[QUALIFIERS[p][0]][0], S[QUALIFIERS[p][1]][0]) for p in PRIMARIES}
    bprim = {p: (S[p][1], S[p][2]) for p in PRIMARIES}
    bquals = {p: (S[QUALIFIERS[p][0]][1], S[QUALIFIERS[p][1]][1]) for p in PRIMARIES}
    return list(read_primaries(prim, quals, bprim, bquals, _neutral_rates(rates, unit), rules).values())


def _remedy_rows(unit: str, S: dict[str, tuple[Summary, Summary, Summary]]) -> list[dict[str, Any]]:
    rows = []
    for r in ("RBD", "N"):
        for p, tag in (("P2", "2"), ("P3m", "3")):
            dp, da = S[f"d{p}[{r}-RB]"][0], S[f"dA{tag}[{r}-RB]"][0]
            rows.append(dict(unit=unit, remedy=r, contrast=p, dP=dp.estimate, dP_lo=dp.lo, dP_hi=dp.hi,
                             dA=da.estimate, dA_lo=da.lo, dA_hi=da.hi, n=dp.n,
                             credited=bool(dp.hi < 0 and da.hi < 0)))
    return rows


def analyse(answers: pd.DataFrame, worlds: pd.DataFrame, rules: Rules,
            lessons: pd.DataFrame | None = None) -> Analysis:
    """Run the registered analysis on the answers of every endpoint in ``answers``."""
    if answers.empty:
        raise ValueError("no answers to analyse: the answers tables are empty")
    models = list(dict.fromkeys(answers.model))  # the panel's order
    rates = cell_rates(answers, rules.level)
    qrows: list[dict[str, Any]] = []
    readings: list[dict[str, Any]] = []
    remedies: list[dict[str, Any]] = []
    contrast_set = _contrast_set(worlds)
    all_ids = list(worlds.world_id)
    ymats = {m: y_matrix(answers[answers.model == m], all_ids) for m in models}
    per_model_vals: dict[tuple[str, str, str], pd.DataFrame] = {}
    for m in models:
        S: dict[str, tuple[Summary, Summary, Summary]] = {}
        for c, subset, ids in contrast_set:
            wv = world_values(ymats[m].loc[ids], c)
            per_model_vals[(m, c.name, subset)] = wv
            triple = (_summ(wv.value, c, rules), _summ(wv.lower, c, rules), _summ(wv.upper, c, rules))
            qrows.append(_row(m, c, subset, *triple, len(ids)))
            if subset == "all":
                S[c.name] = triple
        readings += [dict(unit=m, **asdict(r), label=r.label()) for r in _readings(m, S, rates, rules)]
        remedies += _remedy_rows(m, S)
    # the panel
    S = {}
    cov = []
    boot = {(m, q): per_model_vals[(m, q, "all")].value for m in models for q in BOOTSTRAP_QUANTITIES}
    for c, subset, ids in contrast_set:
        vals = pd.DataFrame({m: per_model_vals[(m, c.name, subset)].value for m in models})
        k = vals.notna().sum(axis=1)
        keep = k >= rules.panel_min_endpoints
        panel_vals = vals[keep].mean(axis=1)
        lower = pd.DataFrame({m: per_model_vals[(m, c.name, subset)].lower for m in models}).mean(axis=1)
        upper = pd.DataFrame({m: per_model_vals[(m, c.name, subset)].upper for m in models}).mean(axis=1)
        triple = (_summ(panel_vals, c, rules), _summ(lower, c, rules), _summ(upper, c, rules))
        row = _row(PANEL, c, subset, *triple, len(ids))
        row["panel_endpoints"] = len(models)
        qrows.append(row)
        if subset == "all":
            S[c.name] = triple
            if c.name in BOOTSTRAP_QUANTITIES:
                boot[(PANEL, c.name)] = panel_vals
            if c.name in PRIMARIES:
                for kk, cnt in k.value_counts().sort_index().items():
                    cov.append(dict(quantity=c.name, complete_endpoints=int(kk), worlds=int(cnt),
                                    included=bool(kk >= rules.panel_min_endpoints)))
    readings += [dict(unit=PANEL, **asdict(r), label=r.label()) for r in _readings(PANEL, S, rates, rules)]
    remedies += _remedy_rows(PANEL, S)
    miss = (answers.groupby(["model", "status"]).size().unstack(fill_value=0).reset_index()
            .rename(columns={"model": "unit"}))
    return Analysis(
        quantities=pd.DataFrame(qrows), readings=pd.DataFrame(readings),
        remedies=pd.DataFrame(remedies), cell_rates=rates, missingness=miss,
        lessons=lesson_descriptives(lessons) if lessons is not None else pd.DataFrame(),
        coverage=pd.DataFrame(cov), rules=rules,
        anomalies=anomalies(answers, lessons), regret=regret(answers, worlds),
        bootstrap=bootstrap_table(boot, rules.level),
    )


def lesson_descriptives(lessons: pd.DataFrame) -> pd.DataFrame:
    """Per endpoint x instruction x decision x outcome: lessons, missing, share naming the worse tool."""
    if lessons.empty:
        return pd.DataFrame()
    g = lessons.groupby(["model", "instruction", "decision", "outcome"], sort=True)
    out = g.agg(lessons=("status", "size"), missing=("status", lambda s: int((s != "ok").sum())),
                names_worse=("names_worse_tool", "sum"), mean_chars=("n_chars", "mean")).reset_index()
    ok = out.lessons - out.missing
    out["share_naming_worse"] = np.where(ok > 0, out.names_worse / ok.where(ok > 0, 1), np.nan)
    return out.rename(columns={"model": "unit"})


def endpoint_primaries(y: pd.DataFrame, rules: Rules) -> tuple[dict[str, Reading], dict[str, Summary]]:
    """Readings of P2 and P3m for one endpoint's Y matrix, computing only the six
    quantities the readings need (the fast path used by the simulation checks)."""
    names = [*PRIMARIES, *QUALIFIERS["P2"], *QUALIFIERS["P3m"]]
    by_name = {c.name: c for c in CONTRASTS}
    S = {}
    for n in names:
        c = by_name[n]
        wv = world_values(y, c)
        S[n] = (_summ(wv.value, c, rules), _summ(wv.lower, c, rules), _summ(wv.upper, c, rules))
    neutral = {p: float(y[cell].mean()) for p, cell in ADVERSE_NEUTRAL.items()}
    prim = {p: S[p][0] for p in PRIMARIES}
    quals = {p: (S[QUALIFIERS[p][0]][0], S[QUALIFIERS[p][1]][0]) for p in PRIMARIES}
    bprim = {p: (S[p][1], S[p][2]) for p in PRIMARIES}
    bquals = {p: (S[QUALIFIERS[p][0]][1], S[QUALIFIERS[p][1]][1]) for p in PRIMARIES}
    return read_primaries(prim, quals, bprim, bquals, neutral, rules), {n: S[n][0] for n in names}
