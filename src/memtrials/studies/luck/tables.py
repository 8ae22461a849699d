"""Tables 1-5 of the luck study and the supplement's tables, from the analysis outputs
(*Lessons from Luck*, section 5 and Appendices E-G analogues).

Every function takes the analysis tables (``quantities``, ``readings``, ``remedies``,
``cell_rates``) and returns a DataFrame of formatted cells; :func:`write_all` writes
each as Markdown, CSV, LaTeX and HTML.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from memtrials.io import atomic_write_text
from memtrials.report import fmt_interval, fmt_p, fmt_signed, table_markdown, write_table
from memtrials.studies.luck.design import ARMS
from memtrials.studies.luck.outputs import PANEL, REPORT_TABLES

TABLES = REPORT_TABLES


def _q(quantities: pd.DataFrame, unit: str, name: str, subset: str = "all") -> pd.Series:
    r = quantities[(quantities.unit == unit) & (quantities.quantity == name) & (quantities.subset == subset)]
    if r.empty:
        raise KeyError(f"analysis has no quantity {name!r} ({subset}) for {unit!r}; rerun luck_analysis")
    return r.iloc[0]


def _units(quantities: pd.DataFrame) -> list[str]:
    return [u for u in dict.fromkeys(quantities.unit) if u != PANEL]


def table1(quantities: pd.DataFrame, readings: pd.DataFrame) -> pd.DataFrame:
    """The panel's primaries, their qualifiers and the planted increment (instruction RB)."""
    rd = readings[readings.unit == PANEL].set_index("contrast")
    rows = []
    for name, check in (("P2", "primary"), ("A2", "rob. positive"), ("L2", "rob. positive"),
                        ("P3m", "primary"), ("A3", "rob. positive"), ("L3", "rob. positive"),
                        ("Sus", "above/below 0.10")):
        q = _q(quantities, PANEL, name)
        prim = name in rd.index
        rows.append({
            "quantity": name, "n": int(q.n), "estimate [95% CI]": fmt_interval(q.estimate, q.lo, q.hi),
            "p_t": fmt_p(rd.loc[name, "p_t_holm"] if prim else q.p_t),
            "p_bet": fmt_p(rd.loc[name, "p_bet_holm"] if prim else q.p_bet_pos),
            "criterion": check if not prim else ("detected" if rd.loc[name, "detected"] else "not detected"),
            "rob. positive": "yes" if q.robust_pos else "no",
            "rob. below 0.10": "yes" if q.robust_below else "no",
            "lower": fmt_signed(q.lower_bound), "upper": fmt_signed(q.upper_bound),
            "reading": rd.loc[name, "label"] if prim else (
                "" if name != "Sus" else ("increment above 0.10" if q.estimate > 0.10 else "increment below 0.10")),
        })
    return pd.DataFrame(rows)


def table2(cell_rates: pd.DataFrame, unit: str = PANEL) -> pd.DataFrame:
    """Worse-tool rates (%) by decision, previous-run outcome and memory arm."""
    r = cell_rates[cell_rates.unit == unit]
    rows = []
    for d in ("good", "bad"):
        for o in ("failure", "success"):
            row = {"decision": d, "previous run": o}
            for a in ARMS:
                x = r[(r.decision == d) & (r.outcome == o) & (r.arm == a)]
                row[a] = f"{100 * x.rate.iloc[0]:.1f}" if len(x) and x.counted.iloc[0] > 0 else "—"
            rows.append(row)
    return pd.DataFrame(rows)


def table3(quantities: pd.DataFrame, readings: pd.DataFrame) -> pd.DataFrame:
    """Per-endpoint readings (exploratory) and the panel's."""
    rows = []
    for u in [*_units(quantities), PANEL]:
        rd = readings[readings.unit == u].set_index("contrast")
        p2, p3, sus = _q(quantities, u, "P2"), _q(quantities, u, "P3m"), _q(quantities, u, "Sus")
        rows.append({"endpoint": u, "n (P2)": int(p2.n), "P2 [95% CI]": fmt_interval(p2.estimate, p2.lo, p2.hi),
                     "P2 reading": rd.loc["P2", "label"], "n (P3m)": int(p3.n),
                     "P3m [95% CI]": fmt_interval(p3.estimate, p3.lo, p3.hi),
                     "P3m reading": rd.loc["P3m", "label"], "Sus": fmt_signed(sus.estimate)})
    return pd.DataFrame(rows)


def table4(cell_rates: pd.DataFrame, readings: pd.DataFrame) -> pd.DataFrame:
    """Worse-tool rates (%) after a chance failure of the better tool under four arms."""
    rows = []
    for u in [*dict.fromkeys(u for u in cell_rates.unit if u != PANEL), PANEL]:
        r = cell_rates[(cell_rates.unit == u) & (cell_rates.decision == "good") & (cell_rates.outcome == "failure")]
        word = readings[(readings.unit == u) & (readings.contrast == "P2")].label
        row = {"endpoint": u, "P2 reading": word.iloc[0] if len(word) else ""}
        for a in ("RB", "RBD", "N", "NEUTRAL"):
            x = r[r.arm == a]
            row[a] = (f"{100 * x.rate.iloc[0]:.1f} ({int(x.worse.iloc[0])}/{int(x.counted.iloc[0])})"
                      if len(x) and x.counted.iloc[0] > 0 else "—")
        rows.append(row)
    return pd.DataFrame(rows)


def table5(remedies: pd.DataFrame) -> pd.DataFrame:
    """Remedy differences against RB with their intervals; credited by the registered rule."""
    rows = []
    for r in remedies.itertuples():
        rows.append({"endpoint": r.unit, "remedy": f"{r.remedy} - RB", "contrast": r.contrast,
                     "dP [95% CI]": fmt_interval(r.dP, r.dP_lo, r.dP_hi),
                     "dA [95% CI]": fmt_interval(r.dA, r.dA_lo, r.dA_hi), "n": int(r.n),
                     "credited": "yes" if r.credited else "no"})
    return pd.DataFrame(rows)


def table6(endpoints: pd.DataFrame) -> pd.DataFrame:
    """The panel: model identifiers, the pinned provider and what each role sent (Appendix D)."""
    return pd.DataFrame({"endpoint": endpoints.unit, "model": endpoints.model, "base URL": endpoints.base_url,
                         "provider pin": endpoints.provider_pin.replace("", "—"),
                         "writer params": endpoints.writer_params, "reader params": endpoints.reader_params,
                         "structured output": endpoints.structured_output})


def _with_ci(q: pd.Series) -> str:
    return fmt_interval(q.estimate, q.lo, q.hi)


def table7(quantities: pd.DataFrame) -> pd.DataFrame:
    """Good decision per endpoint (Appendix E, Table 7): complete worlds of P2, the
    qualifiers in the failure cell and the lesson-source effect in the benign cell."""
    rows = []
    for u in [*_units(quantities), PANEL]:
        row: dict[str, object] = {"endpoint": u, "n (P2)": int(_q(quantities, u, "P2").n)}
        for name in ("P2", "A2", "L2", "L2b"):
            q = _q(quantities, u, name)
            row[f"{name} [95% CI]"] = _with_ci(q)
            if name in ("A2", "L2"):
                row[f"{name} rob. positive"] = "yes" if q.robust_pos else "no"
        rows.append(row)
    return pd.DataFrame(rows)


def table8(quantities: pd.DataFrame, margin: float) -> pd.DataFrame:
    """Bad decision and the planted increment per endpoint (Appendix E, Table 8): complete
    worlds of P3m, the qualifiers in the success cell, Sus with its reading."""
    rows = []
    for u in [*_units(quantities), PANEL]:
        row: dict[str, object] = {"endpoint": u, "n (P3m)": int(_q(quantities, u, "P3m").n)}
        for name in ("P3m", "A3", "L3"):
            q = _q(quantities, u, name)
            row[f"{name} [95% CI]"] = _with_ci(q)
            if name != "P3m":
                row[f"{name} rob. positive"] = "yes" if q.robust_pos else "no"
        sus = _q(quantities, u, "Sus")
        row["Sus [95% CI]"] = _with_ci(sus)
        row["Sus reading"] = f"above {margin:g}" if sus.estimate > margin else f"below {margin:g}"
        rows.append(row)
    return pd.DataFrame(rows)


def table_secondary(quantities: pd.DataFrame) -> pd.DataFrame:
    """Secondary quantities (registered; intervals without multiplicity adjustment)."""
    names = ["T1", "T3", "L2b", "L3b", "P2[RBD]", "A2[RBD]", "L2[RBD]", "P2[N]", "A2[N]", "L2[N]",
             "P3m[RBD]", "P3m[N]"]
    rows = []
    for u in [PANEL, *_units(quantities)]:
        for n in names:
            q = _q(quantities, u, n)
            rows.append({"unit": u, "quantity": n, "subset": "all", "n": int(q.n),
                         "estimate [95% CI]": fmt_interval(q.estimate, q.lo, q.hi),
                         "p_bet (mean <= 0)": fmt_p(q.p_bet_pos)})
        for n in ("P2", "P3m"):
            for cue in ("explicit", "implicit"):
                q = _q(quantities, u, n, f"cue={cue}")
                rows.append({"unit": u, "quantity": n, "subset": f"cue={cue}", "n": int(q.n),
                             "estimate [95% CI]": fmt_interval(q.estimate, q.lo, q.hi),
                             "p_bet (mean <= 0)": fmt_p(q.p_bet_pos)})
    return pd.DataFrame(rows)


def table_cell_rates(cell_rates: pd.DataFrame) -> pd.DataFrame:
    """Worse-tool choices / counted answers per cell with Wilson 95 % intervals."""
    df = cell_rates.copy()
    return pd.DataFrame({
        "unit": df.unit, "decision": df.decision, "previous run": df.outcome, "arm": df.arm,
        "worse / counted": [f"{w}/{c}" for w, c in zip(df.worse, df.counted)],
        "rate [95%]": [fmt_interval(r, lo, hi).replace("+", "") for r, lo, hi in zip(df.rate, df.lo, df.hi)],
        "invalid": df.invalid, "recovered": df.recovered, "not scheduled": df.not_scheduled,
    })


def table_lessons(lessons: pd.DataFrame, missingness: pd.DataFrame) -> pd.DataFrame:
    """Per endpoint: missing lessons, the share of RB lessons from the good decision's
    failure run that name the worse tool (full or coined name), and answers by status."""
    rows = []
    units = list(dict.fromkeys(missingness.unit)) if len(missingness) else []
    for u in units:
        row: dict[str, object] = {"endpoint": u}
        if len(lessons):
            lu = lessons[lessons.unit == u]
            row["lessons"] = int(lu.lessons.sum())
            row["missing lessons"] = int(lu.missing.sum())
            adv = lu[(lu.instruction == "RB") & (lu.decision == "good") & (lu.outcome == "failure")]
            share = adv.share_naming_worse.iloc[0] if len(adv) else float("nan")
            row["RB failure lessons naming the worse tool"] = "—" if pd.isna(share) else f"{100 * share:.0f}%"
        m = missingness[missingness.unit == u].iloc[0]
        for status in ("valid", "recovered", "invalid", "not_scheduled"):
            row[status.replace("_", " ")] = int(m[status]) if status in m.index else 0
        rows.append(row)
    return pd.DataFrame(rows)


def table_coverage(coverage: pd.DataFrame) -> pd.DataFrame:
    """The panel's availability weighting: worlds by the number of endpoints complete there."""
    return pd.DataFrame({"quantity": coverage.quantity, "complete endpoints": coverage.complete_endpoints,
                         "worlds": coverage.worlds,
                         "in the panel average": ["yes" if x else "no" for x in coverage.included]})


def table_anomalies(anomalies: pd.DataFrame) -> pd.DataFrame:
    """Missing or cut lessons, recovered or invalid answers, with the finish reasons."""
    if anomalies.empty:
        return pd.DataFrame({"unit": ["—"], "kind": ["none"], "world_id": [""], "cell": [""], "status": [""],
                             "finish_reason": [""], "error": [""], "raw (start)": [""]})
    return anomalies.rename(columns={"raw": "raw (start)"})


def table_regret(regret: pd.DataFrame) -> pd.DataFrame:
    """Regret per cell: the log's success-rate gap given up by naming the worse tool."""
    r = regret.copy()
    r["regret"] = [f"{100 * v:.2f}" for v in r.regret]
    return r.rename(columns={"regret": "regret (points)", "outcome": "previous run"})


def table_bootstrap(bootstrap: pd.DataFrame, quantities: pd.DataFrame) -> pd.DataFrame:
    """Bootstrap intervals (resampling worlds) beside the registered t intervals."""
    rows = []
    for r in bootstrap.itertuples():
        q = _q(quantities, r.unit, r.quantity)
        rows.append({"unit": r.unit, "quantity": r.quantity, "n": int(r.n),
                     "estimate [registered 95%]": fmt_interval(q.estimate, q.lo, q.hi),
                     "bootstrap 95%": fmt_interval(r.estimate, r.boot_lo, r.boot_hi).split(" ", 1)[-1]})
    return pd.DataFrame(rows)


def table_bounds(quantities: pd.DataFrame) -> pd.DataFrame:
    """Missing-data bounds of the primaries and their qualifiers per unit."""
    rows = []
    for u in [*_units(quantities), PANEL]:
        for name in ("P2", "A2", "L2", "P3m", "A3", "L3"):
            q = _q(quantities, u, name)
            rows.append({"unit": u, "quantity": name, "n complete": int(q.n), "worlds": int(q.n_worlds),
                         "estimate": fmt_signed(q.estimate), "lower bound": fmt_signed(q.lower_bound),
                         "upper bound": fmt_signed(q.upper_bound)})
    return pd.DataFrame(rows)


def table_counts(cell_rates: pd.DataFrame) -> pd.DataFrame:
    """Worse-tool choices / counted answers per endpoint, decision, outcome and arm, in the
    layout of the paper's Tables 10 (good decision) and 11 (bad decision)."""
    rows = []
    r = cell_rates[cell_rates.unit != PANEL]
    for d in ("good", "bad"):
        for u in dict.fromkeys(r.unit):
            for o in ("failure", "success"):
                row: dict[str, object] = {"decision": d, "endpoint": u, "previous run": o}
                for a in ARMS:
                    x = r[(r.unit == u) & (r.decision == d) & (r.outcome == o) & (r.arm == a)]
                    row[a] = f"{int(x.worse.iloc[0])}/{int(x.counted.iloc[0])}" if len(x) else "—"
                rows.append(row)
    return pd.DataFrame(rows)


CAPTIONS = {
    "table1_panel": "Table 1 (analogue). The panel's primary contrasts, their qualifiers and the planted "
                    "increment (instruction RB): estimate with its registered 95% interval; p_t two-sided t-test "
                    "and p_bet one-sided betting test (mean <= 0), Holm-adjusted over the two primaries only; "
                    "lower/upper: missing-data bounds.",
    "table2_rates": "Table 2 (analogue). Worse-tool rates (%) by decision, previous-run outcome and memory arm "
                    "(panel mean of the endpoints' rates).",
    "table3_endpoints": "Table 3 (analogue). Per-endpoint readings (exploratory, not adjusted across endpoints).",
    "table4_remedy_rates": "Table 4 (analogue). Worse-tool rates (%) after a chance failure of the better tool "
                           "under four memory arms.",
    "table5_remedies": "Table 5 (analogue). Remedy differences against RB, paired by world; credited only if "
                       "both the P and the A difference have 95% intervals below 0.",
    "table6_endpoints": "Table 6 (analogue). The panel: model identifiers, base URL, the pinned provider and "
                        "the parameters each role sent (as frozen).",
    "table7_good": "Table 7 (analogue). Good decision, per endpoint (exploratory): complete worlds (n) of P2, "
                   "the qualifiers A2 and L2 in the failure cell and the lesson-source effect L2b in the benign "
                   "cell, with registered 95% intervals.",
    "table8_bad": "Table 8 (analogue). Bad decision and planted increment, per endpoint (exploratory): complete "
                  "worlds (n) of P3m, the qualifiers A3 and L3 in the success cell, and Sus with its reading, "
                  "with registered 95% intervals.",
    "table_coverage": "The panel's availability weighting: for each primary, worlds by the number of endpoints "
                      "complete there, and whether they enter the panel average.",
    "table_anomalies": "Anomalies: lessons that are missing (refusal, empty) or were cut at max_tokens, and reader "
                       "answers that were recovered (registered rule) or are invalid, with the provider's finish "
                       "reason and the start of the raw text.",
    "table_regret": "Regret per cell (our definition): mean over counted answers of Y x (better rate - worse "
                    "rate) in the log, in percentage points; panel: the mean of the endpoints'.",
    "table_bootstrap": "Percentile bootstrap 95% intervals (2,000 resamples of the worlds, seed 0) of the "
                       "primaries, qualifiers and Sus, beside the registered t intervals (supplement).",
    "table_bounds": "Missing-data bounds (every missing answer over all worlds set to lower / raise the "
                    "contrast) of the primaries and their qualifiers.",
    "table_counts": "Worse-tool choices / counted answers by endpoint, previous-run outcome and memory arm "
                    "(Tables 10-11 layout: good decision, then bad decision).",
    "table_secondary": "Secondary quantities with registered 95% intervals (no multiplicity adjustment); "
                       "cue splits are descriptive.",
    "table_cell_rates": "Worse-tool choices / counted answers per cell, with Wilson 95% intervals; panel rows: "
                        "the mean of the endpoints' rates (pooled counts shown) with a 95% interval for that "
                        "mean (Wilson at the mean's effective sample size).",
    "table_lessons": "Lessons and answers per endpoint: missing lessons (refusals, empty responses), the "
                     "registered lesson descriptive, and reader answers by status (recovered: by the "
                     "registered rule; not scheduled: the lesson was missing).",
}


def build_tables(quantities: pd.DataFrame, readings: pd.DataFrame, remedies: pd.DataFrame,
                 cell_rates: pd.DataFrame, lessons: pd.DataFrame | None = None,
                 missingness: pd.DataFrame | None = None, endpoints: pd.DataFrame | None = None,
                 coverage: pd.DataFrame | None = None, anomalies: pd.DataFrame | None = None,
                 regret: pd.DataFrame | None = None, bootstrap: pd.DataFrame | None = None, *,
                 margin: float) -> dict[str, pd.DataFrame]:
    out = {
        "table1_panel": table1(quantities, readings),
        "table2_rates": table2(cell_rates),
        "table3_endpoints": table3(quantities, readings),
        "table4_remedy_rates": table4(cell_rates, readings),
        "table5_remedies": table5(remedies),
        "table7_good": table7(quantities),
        "table8_bad": table8(quantities, margin),
        "table_secondary": table_secondary(quantities),
        "table_cell_rates": table_cell_rates(cell_rates),
        "table_bounds": table_bounds(quantities),
        "table_counts": table_counts(cell_rates),
    }
    if endpoints is not None:
        out["table6_endpoints"] = table6(endpoints)
    for name, df, fn in (("table_coverage", coverage, table_coverage), ("table_anomalies", anomalies, table_anomalies),
                         ("table_regret", regret, table_regret)):
        if df is not None:
            out[name] = fn(df)
    if bootstrap is not None:
        out["table_bootstrap"] = table_bootstrap(bootstrap, quantities)
    if missingness is not None:
        out["table_lessons"] = table_lessons(lessons if lessons is not None else pd.DataFrame(), missingness)
    return out


# the generated supplement (Appendix H, registered_supplement.md): these tables in one file
SUPPLEMENT = ("table_coverage", "table3_endpoints", "table_bounds", "table_secondary", "table_bootstrap",
              "table_cell_rates", "table_anomalies", "table_regret", "table_lessons")


def supplement_markdown(tables: dict[str, pd.DataFrame], note: str = "") -> str:
    """One Markdown file with the supplement's tables, each under its caption."""
    parts = ["# Lessons from Luck: generated supplement", ""]
    if note:
        parts += [note, ""]
    for stem in SUPPLEMENT:
        if stem in tables:
            parts += [f"## {stem}", "", table_markdown(tables[stem], CAPTIONS[stem])]
    return "\n".join(parts)


def write_all(tables: dict[str, pd.DataFrame], outdir: str | Path, note: str = "") -> list[Path]:
    """Write every table in four formats; ``note`` (the run's thresholds when they are not
    the registered ones) ends every caption."""
    out = []
    for stem, df in tables.items():
        caption = CAPTIONS[stem] + (f" {note}" if note else "")
        out += write_table(df, Path(outdir) / stem, caption=caption, label=f"tab:luck-{stem}")
    out.append(atomic_write_text(Path(outdir) / "registered_supplement.md", supplement_markdown(tables, note)))
    return out
