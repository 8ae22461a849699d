"""Tables, figures and per-setting records of the playbook study (``results/playbook/``).

Tables (md, csv, tex, html through :mod:`memtrials.report.tables`): Table 1 analogue
(methods x settings, means, each method's worst gap to No playbook), Table 5 (every
growth run), Table 10 (what each part adds), Table 2 (long growth, when run), Tables
12-13 (episodes and tokens spent; tokens served per task).  Figures (png + svg):
Figure 2 (every run's Whole and curated set against No playbook, per setting) and Figure
6 (RBC and Best-Full against the number of runs).  Records: per setting, the chosen
candidates and practice scores, each run's block estimates with their intervals, and the
blocks with their lesson ids and one example lesson (``records/<setting>.json`` and .md).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from memtrials.io import atomic_write_json, atomic_write_text, save_figure
from memtrials.report.tables import write_table
from memtrials.studies.playbook import analysis as an

METHODS = ("No playbook", "Whole", "Best-Full", "RBC-cut", "RBC")
WEBSHOP_NOTE = (" WebShop scores the purchase reward x 100 (not success), on synthetic goals of the 1,000-product "
                "catalog; goals whose exact purchase upstream caps below 1.0 are kept.")


def setting_label(key: Sequence[str]) -> str:
    g, m, e, v = key
    return f"{v} · {m} · {e}" + ("" if g == "std" else f" · {g}")


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.1f}" if isinstance(x, float) else str(x)


def table1(meth: pd.DataFrame) -> pd.DataFrame:
    """Methods x settings (std growth), the mean, and each method's worst gap to No playbook."""
    std = meth[meth["growth"] == "std"]
    if std.empty:
        return pd.DataFrame()
    std = std.assign(setting=[setting_label(k) for k in std[list(an.SETTING_KEYS)].itertuples(index=False)])
    wide = std.pivot_table(index="setting", columns="method", values="score", aggfunc="first")
    wide = wide.reindex(columns=[m for m in METHODS if m in wide.columns])
    gaps = wide.sub(wide["No playbook"], axis=0).min()
    out = wide.reset_index()
    out.loc[len(out)] = ["mean", *wide.mean().tolist()]
    out.loc[len(out)] = ["worst gap to No playbook", *gaps.tolist()]
    return out


#: What each of RBC's own methods was allowed to see before serving (the baselines say theirs,
#: :data:`.methods.METHODS`).
SEES = {"No playbook": "nothing", "Whole": "growth only", "Best-Full": "practice only", "RBC-cut": "practice only",
        "RBC": "practice only"}


def baseline_rows(records: Sequence[str]) -> pd.DataFrame:
    """One row per (setting, baseline) from the baseline jobs' records (issue 10)."""
    rows = []
    for p in records:
        rec = an.read_json(p)
        res = rec["result"]
        rows.append({**dict(zip(an.SETTING_KEYS, an.setting_of(p))), "method": res["label"],
                     "candidate": f"{rec['method']}" + (f" ({res['chosen']})" if res.get("chosen") else ""),
                     "score": res["score"] if res["score"] is not None else np.nan, "served_tokens": np.nan,
                     "sees": res["sees"], "runs": ",".join(res.get("runs") or [])})
    return pd.DataFrame(rows)


#: Methods computed per run from that run's lessons and practice round, then averaged over runs:
#: every one in a table must stand on the same runs (Pooled and Best-Full cut draw on all K by design).
NOT_PER_RUN = ("No playbook", "Best-Full", "RBC", "Pooled", "Best-Full cut")


def runs_behind(allm: pd.DataFrame, names: Sequence[str] | None = None) -> dict[tuple, dict[str, str]]:
    """Per setting (std growth), the runs behind each per-run method's cell (``names``: only these)."""
    std = allm[(allm["growth"] == "std") & ~allm["method"].isin(NOT_PER_RUN)]
    if names is not None:
        std = std[std["method"].isin(names)]
    out: dict[tuple, dict[str, str]] = {}
    for r in std.itertuples(index=False):
        out.setdefault(tuple(getattr(r, k) for k in an.SETTING_KEYS), {})[str(r.method)] = str(r.runs)
    return out


def check_like_for_like(allm: pd.DataFrame, names: Sequence[str] | None = None) -> None:
    """Refuse a table whose per-run methods of one setting stand on different runs (issue 36)."""
    for key, by_method in runs_behind(allm, names).items():
        if len(set(by_method.values())) > 1:
            raise ValueError(f"playbook report: setting {setting_label(key)}: the compared methods stand on "
                             f"different runs {by_method}; every same-budget method must use the same runs "
                             "(playbook.baselines.runs decides them; rerun the baselines and the choice)")


def table1_every(meth: pd.DataFrame, base: pd.DataFrame) -> pd.DataFrame:
    """Table 1 with every baseline: methods x settings (std growth), the mean over the settings
    a method ran on, its worst gap to No playbook, and what it was allowed to see."""
    allm = pd.concat([meth.assign(sees=meth["method"].map(SEES)), base], ignore_index=True)
    std = allm[allm["growth"] == "std"]
    if std.empty:
        return pd.DataFrame()
    std = std.assign(setting=[setting_label(k) for k in std[list(an.SETTING_KEYS)].itertuples(index=False)])
    wide = std.pivot_table(index="method", columns="setting", values="score", aggfunc="first", dropna=False)
    order = [m for m in METHODS if m in wide.index] + sorted(set(wide.index) - set(METHODS))
    wide = wide.reindex(order)
    none = wide.loc["No playbook"] if "No playbook" in wide.index else None
    out = wide.copy()
    out["mean"] = wide.mean(axis=1)
    out["worst gap to No playbook"] = wide.sub(none, axis=1).min(axis=1) if none is not None else np.nan
    out["allowed to see"] = std.groupby("method")["sees"].first().reindex(order)
    return out.reset_index()


RUNS_NOTE = (" Every per-run method (RBC-cut, Whole and each budgeted baseline) is computed per growth run "
             "from that run's lessons and practice round and averaged over the same runs (playbook.baselines.runs; "
             "the records' `runs`).")
AGREE_CAPTION = ("Section 6.5 analogue: per setting, the Spearman correlation over Table 1's 2K+1 candidates "
                 "between practice success (candidate scoring) and evaluation success, and whether RBC's choice "
                 "is the best candidate on evaluation or within 0.5 points of it; the summary gives the median "
                 "over settings (where defined: at least 3 candidates, neither score constant).")
TABLE13_CAPTION = ("Table 13 / Figure 6 analogue: RBC and Best-Full choosing over the first j grown runs, their "
                   "evaluation score and the tokens spent before serving (growth with Reflector/Curator calls, "
                   "practice rounds for RBC, candidate scoring), and the extra tokens against RBC at Table 1's K.")

#: The appendix comparisons (issue 10): each a table of settings x these methods (those run).
COMPARISONS = {
    "table7_8_advantaged": (("RBC-cut", "Tags*", "Top-k*", "DC_outcome", "DC_self"),
                            "Tables 7-8 analogue: judges given an advantage (Tags* and Top-k* tuned on the "
                            "evaluation tasks, DC_outcome told each outcome) against measuring one run (RBC-cut)."),
    "table9_dgmem": (("RBC-cut", "DG-Mem"), "Table 9 analogue: the same practice episodes and serving rule, "
                     "RBC's ridge against DG-Mem's subset-Shapley estimates."),
    "table11_pooled": (("No playbook", "Best-Full", "Pooled", "RBC"), "Table 11 analogue: pooling the K runs "
                       "(merged, 8K blocks, inclusion 1/K, curated once within the same budget B as one run's: 40 % of the "
                       "runs' mean whole-playbook tokens) against choosing among them."),
    "table16_cap": (("RBC-cut", "All-positive (no cap)"), "Table 16 analogue: every positive block against the "
                    "best blocks within B, from the same estimates."),
    "table_judge": (("RBC-cut", "Judge-based RBC-cut", "Judge-based RBC-cut (another model)"), "Block effects "
                    "estimated from an LLM goal check (the setting's model, and a judge from another model: the "
                    "first of playbook.baselines.other_judges that is not the setting's; never told the outcome) "
                    "instead of task success, curated the same way, against RBC-cut."),
    "table_best_full_cut": (("Best-Full", "Best-Full cut"), "Best-Full's playbook cut to 40 % of its tokens by "
                            "similarity to the task, against Best-Full alone."),
}


def table17(records: Sequence[str]) -> pd.DataFrame:
    """Per setting, the evaluation score of each subsampled round's curated set (``subsampled`` records)."""
    rows = []
    for p in records:
        rec = an.read_json(p)
        if rec["method"] != "subsampled":
            continue
        rows.append({"setting": setting_label(an.setting_of(p)), **{f"{v.removeprefix('f')} %": s for v, s in sorted(
            rec["result"]["variants"].items(), key=lambda kv: int(kv[0].removeprefix("f")))}})
    out = pd.DataFrame(rows)
    if len(out):
        out.loc[len(out)] = ["mean", *out.iloc[:, 1:].mean().tolist()]
    return out


def comparison(allm: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """Settings x the named methods (std growth), the mean row; empty if no named baseline ran."""
    std = allm[(allm["growth"] == "std") & allm["method"].isin(names)]
    if std.empty or not (set(std["method"]) - set(METHODS)):
        return pd.DataFrame()
    std = std.assign(setting=[setting_label(k) for k in std[list(an.SETTING_KEYS)].itertuples(index=False)])
    wide = std.pivot_table(index="setting", columns="method", values="score", aggfunc="first")
    wide = wide.reindex(columns=[m for m in names if m in wide.columns]).reset_index()
    wide.loc[len(wide)] = ["mean", *wide.iloc[:, 1:].mean().tolist()]
    return wide


def _setting_cols(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df.insert(0, "setting", [setting_label(k) for k in df[list(an.SETTING_KEYS)].itertuples(index=False)])
    return df.drop(columns=list(an.SETTING_KEYS))


def table10(parts: pd.DataFrame) -> pd.DataFrame:
    std = parts[parts["growth"] == "std"]
    if std.empty:
        return pd.DataFrame()
    std = _setting_cols(std)
    wide = std.pivot_table(index="setting", columns="part", values="score", aggfunc="first")
    order = list(dict.fromkeys(std["part"]))
    wide = wide.reindex(columns=order).reset_index()
    wide.loc[len(wide)] = ["mean", *wide[order].mean().tolist()]
    return wide


def table2(meth: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Long growth: per setting, lessons and tokens of the runs and the methods' scores."""
    long = meth[meth["growth"] == "long"]
    if long.empty:
        return pd.DataFrame()
    wide = _setting_cols(long).pivot_table(index="setting", columns="method", values="score", aggfunc="first")
    size = _setting_cols(runs[runs["growth"] == "long"]).groupby("setting")[["passes", "lessons", "tokens"]].mean()
    return size.join(wide.reindex(columns=[m for m in METHODS if m in wide.columns])).reset_index()


def figure2(runs: pd.DataFrame, paths: Sequence[Path]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    std = runs[runs["growth"] == "std"]
    labels = list(dict.fromkeys(setting_label(k) for k in std[list(an.SETTING_KEYS)].itertuples(index=False)))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(labels) + 2), 3.2))
    for i, lab in enumerate(labels):
        sub = std[[setting_label(k) == lab for k in std[list(an.SETTING_KEYS)].itertuples(index=False)]]
        ax.scatter([i - 0.1] * len(sub), sub["whole_vs_none"], marker="o", color="tab:red",
                   label="Whole (a run)" if i == 0 else None)
        ax.scatter([i + 0.1] * len(sub), sub["curated_vs_none"], marker="^", color="tab:blue",
                   label="curated set (a run)" if i == 0 else None)
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("evaluation score − No playbook")
    ax.set_title("Every growth run against No playbook")
    if labels:
        ax.legend(fontsize=7)
    save_figure(fig, paths)
    plt.close(fig)


def figure6(steps: pd.DataFrame, paths: Sequence[Path]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    std = steps[steps["growth"] == "std"]
    fig, ax = plt.subplots(figsize=(4.0, 3.0))
    for method, color in (("RBC", "tab:blue"), ("Best-Full", "tab:orange")):
        mean = std[std["method"] == method].groupby("runs")["score"].mean()
        ax.plot(mean.index, mean.values, marker="o", color=color, label=method)
    ax.set_xlabel("growth runs chosen among (K)")
    ax.set_ylabel("mean evaluation score")
    ax.set_xticks(sorted(std["runs"].unique()) if len(std) else [])
    ax.legend(fontsize=7)
    ax.set_title("More runs against curating")
    save_figure(fig, paths)
    plt.close(fig)


def setting_record(key: tuple, choice: dict[str, Any], practice: Sequence[str]) -> dict[str, Any]:
    runs = []
    for p in practice:
        rec = an.read_json(p)
        runs.append({"run": rec["run"], "blocks": rec["block_lessons"], "blocks_method": rec["blocks"]["method"],
                     "m_requested": rec["blocks"]["m_requested"], "m": rec["blocks"]["m"],
                     "estimates": rec["estimates"], "ridge": rec["ridge"], "curated": rec["curated"],
                     "practice_episodes": rec["episodes"]})
    return {"setting": dict(zip(an.SETTING_KEYS, key)), "rbc": choice["rbc"], "best_full": choice["best_full"],
            "rbc_cut": choice["rbc_cut"], "candidates": [{k: c[k] for k in ("name", "tokens", "practice_score")}
                                                         for c in choice["candidates"]],
            "choice_episodes": choice["episodes"], "runs": runs}


def record_markdown(rec: dict[str, Any]) -> str:
    s = rec["setting"]
    lines = [f"# {setting_label((s['growth'], s['model'], s['env'], s['variant']))}", "",
             f"RBC serves **{rec['rbc']['chosen']}** (practice score {rec['rbc']['score']:.3f} on "
             f"{rec['choice_episodes']} fresh practice episodes; tied: {', '.join(rec['rbc']['tied'])}); "
             f"Best-Full serves **{rec['best_full']['chosen']}** ({rec['best_full']['score']:.3f}); "
             f"RBC-cut serves {', '.join(rec['rbc_cut']) if isinstance(rec['rbc_cut'], list) else rec['rbc_cut']} "
             "(scored as their mean).", "", "| candidate | tokens | practice score |", "|---|---|---|"]
    lines += [f"| {c['name']} | {c['tokens']} | {c['practice_score']:.3f} |" for c in rec["candidates"]]
    for run in rec["runs"]:
        lines += ["", f"## run {run['run']}: {run['m']} blocks ({run['blocks_method']}, m = {run['m_requested']}), "
                  f"curated blocks {run['curated']['blocks']} ({run['curated']['served_tokens']} of "
                  f"{run['curated']['whole_tokens']} tokens, cap {_fmt(run['curated']['cap_tokens'])})", "",
                  "| block | lessons | tokens | ridge estimate | with − without [95 % interval] | example lesson |",
                  "|---|---|---|---|---|---|"]
        est = {e["block"]: e for e in run["estimates"]}
        for b in run["blocks"]:
            e = est.get(b["block"], {})
            iv = (f"{_fmt(e.get('diff'))} [{_fmt(e.get('lo'))}, {_fmt(e.get('hi'))}]" if e else "—")
            lines.append(f"| {b['block']} | {', '.join(b['lesson_ids'])} | {b['tokens']} | "
                         f"{e.get('estimate', float('nan')):+.3f} | {iv} | {b['example'][:160]} |")
    return "\n".join(lines) + "\n"


def write_report(*, growth: Sequence[str], playbooks: Sequence[str], practice: Sequence[str], choice: Sequence[str],
                 evals: Sequence[str], calls: Sequence[str], tables_dir: str, figures_dir: str,
                 out_index: str, baselines: Sequence[str] = ()) -> None:
    """Every table, figure and record, then the index that links them."""
    tdir, fdir = Path(tables_dir), Path(figures_dir)
    cands = an.candidate_scores(evals)
    choices = {an.setting_of(p): an.read_json(p) for p in choice}
    meth, runs = an.methods(choices, cands), an.growth_runs(growth, practice, cands)
    parts, steps = an.parts(choices, cands), an.by_runs(choices, cands)
    cost = an.costs(growth, practice, choice, choices, cands)
    written = []
    ws = WEBSHOP_NOTE if len(cands) and "webshop" in set(cands["env"].astype(str)) else ""
    tables = {
        "table1_methods": (table1(meth), "Evaluation score (0-100) per method and setting; last rows: the mean and "
                           "each method's worst gap to No playbook. RBC and Best-Full choose over Table 1's K runs "
                           "(playbook.choice.runs)." + RUNS_NOTE + ws),
        "table5_growth_runs": (_setting_cols(runs), "Every growth run: passes, lessons, tokens, Whole and curated "
                               "set against No playbook (evaluation scores)."),
        "table10_parts": (table10(parts), "What each part adds: curate one run, choose alone, both on one run, "
                          "both over K runs."),
        "table12_13_costs": (_setting_cols(cost), "Episodes and model tokens each method spends before serving "
                             "(growth incl. Reflector/Curator calls, practice, candidate scoring), and lesson "
                             "tokens served per task."),
        "candidates": (_setting_cols(cands), "Every candidate's evaluation score." + ws),
        "table1_every_method": (table1_every(meth, baseline_rows(baselines)) if baselines else table1_every(
            meth, pd.DataFrame(columns=[*an.SETTING_KEYS, "method", "score", "sees"])),
                                "Every method, baselines included, per setting (0-100), the mean over the settings "
                                "it ran on, its worst gap to No playbook, and what it was allowed to see before "
                                "serving: Tags* and Top-k* are tuned on the evaluation tasks on purpose." + RUNS_NOTE + ws),
    }
    t17 = table17(baselines)
    if not t17.empty:
        tables["table17_subsampled_rounds"] = (t17, "Table 17 analogue: the evaluation score of the curated set "
                                               "rebuilt from the first 25/50/75/100 % of each practice round "
                                               "(mean over the runs cut); only practice episodes choose.")
    base = baseline_rows(baselines)
    allm = pd.concat([meth, base], ignore_index=True) if len(base) else meth
    check_like_for_like(allm)
    for stem, (names, caption) in COMPARISONS.items():
        t = comparison(allm, names)
        if not t.empty:
            tables[stem] = (t, caption + RUNS_NOTE)
    agree = an.agreement(choices, cands)
    if len(agree):
        tables["table_practice_vs_eval"] = (_setting_cols(agree), AGREE_CAPTION)
        tables["table_practice_vs_eval_summary"] = (an.agreement_summary(agree), AGREE_CAPTION)
    by_k = an.costs(growth, practice, choice, choices, cands, every_k=True)
    if len(by_k):
        k = max(an.headline_k(ch) for ch in choices.values())
        tables["table13_by_runs"] = (_setting_cols(by_k), TABLE13_CAPTION)
        tables["table13_level"] = (an.table13_level(by_k, k), TABLE13_CAPTION + f" Reference: RBC at K = {k}.")
    t2 = table2(meth, runs)
    if not t2.empty:
        tables["table2_long_growth"] = (t2, "Long growth (10 passes, no early stop): size and methods' scores.")
    for stem, (df, caption) in tables.items():
        write_table(df, tdir / stem, caption=caption, float_format=lambda x: f"{x:.1f}")
        written.append(stem)
    figure2(runs, [fdir / "figure2_runs.png", fdir / "figure2_runs.svg"])
    figure6(steps, [fdir / "figure6_runs.png", fdir / "figure6_runs.svg"])
    prac = an.by_setting(practice)
    rec_links = []
    for key, ch in sorted(choices.items()):
        rec = setting_record(key, ch, prac.get(key, []))
        stem = "__".join(key)
        atomic_write_json(tdir / "records" / f"{stem}.json", rec)
        atomic_write_text(tdir / "records" / f"{stem}.md", record_markdown(rec))
        rec_links.append(f"- [{setting_label(key)}](records/{stem}.md)")
    index = ["# Playbook curation: tables", "",
             "Scores are 0-100: success averaged over seeds per task, then over tasks (evaluation tasks)." + ws, ""]
    index += [f"- [{stem}]({stem}.md)" for stem in written]
    index += ["", "Figures: [Figure 2](../figures/figure2_runs.svg), [Figure 6](../figures/figure6_runs.svg)", "",
              "Per-setting records:", *rec_links]
    if not np.isfinite(cands["score"]).all() if len(cands) else False:
        index += ["", "Some candidates have no evaluation episode (score shown as —)."]
    atomic_write_text(out_index, "\n".join(index) + "\n")
