"""Analysis of the history study: success and recovery rates, paired differences, rates
of experience generation and next-action repetition.

*When History Fails to Become Experience*: Tables 2-6, 10, 11 and Figures 2-5, 8.
Every rate carries a Wilson interval; every difference between two conditions is paired
by unit (task, source trajectory or fixed history) with a paired bootstrap interval and
the exact McNemar p-value (:mod:`memtrials.stats.paired`).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd

from memtrials.stats import paired_difference, wilson_interval

EPISODE_KEY = ["model", "env", "task_id"]


def load(paths: Iterable[str]) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in paths]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def rate(k: int, n: int) -> dict[str, float]:
    iv = wilson_interval(int(k), int(n))
    return {"k": int(k), "n": int(n), "rate": iv.estimate, "lo": iv.lo, "hi": iv.hi}


def fmt_rate(k: int, n: int, digits: int = 1) -> str:
    """``46.4 [44.1, 48.7]`` (percent, Wilson 95 %); an em dash when n = 0."""
    if n == 0:
        return "—"
    r = rate(k, n)
    return f"{100 * r['rate']:.{digits}f} [{100 * r['lo']:.{digits}f}, {100 * r['hi']:.{digits}f}]"


def success_rates(df: pd.DataFrame, by: Sequence[str], outcome: str = "won") -> pd.DataFrame:
    """One row per group and condition: successes, episodes, rate and Wilson interval."""
    rows = []
    for key, g in df.groupby(list(by) + ["condition"], sort=True):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(list(by) + ["condition"], key)), **rate(int(g[outcome].sum()), len(g))})
    return pd.DataFrame(rows)


def grouped_table(df: pd.DataFrame, conditions: Sequence[str], labels: dict[str, str],
                  outcome: str = "won") -> pd.DataFrame:
    """Table 2 shape: rows by environment, by model and overall; a column per condition."""
    rows = []
    for group, col in (("Environment", "env"), ("Model", "model"), ("Overall", None)):
        keys = sorted(df[col].unique()) if col else ["all"]
        for key in keys:
            sub = df[df[col] == key] if col else df
            row = {"Group": group, "Name": key}
            for c in conditions:
                g = sub[sub["condition"] == c]
                row[labels.get(c, c)] = fmt_rate(int(g[outcome].sum()), len(g))
            rows.append(row)
    return pd.DataFrame(rows)


def count_table(df: pd.DataFrame, conditions: Sequence[str], labels: dict[str, str],
                outcome: str = "won") -> pd.DataFrame:
    """Table 4 shape: successes / episodes per model x environment cell, with totals."""
    rows = []
    for (model, env), sub in df.groupby(["model", "env"], sort=True):
        row = {"Model": model, "Environment": env}
        for c in conditions:
            g = sub[sub["condition"] == c]
            row[labels.get(c, c)] = f"{int(g[outcome].sum())}/{len(g)}" if len(g) else "—"
        rows.append(row)
    total = {"Model": "Total", "Environment": ""}
    rate_row = {"Model": "Pooled rate (%)", "Environment": ""}
    for c in conditions:
        g = df[df["condition"] == c]
        total[labels.get(c, c)] = f"{int(g[outcome].sum())}/{len(g)}"
        rate_row[labels.get(c, c)] = fmt_rate(int(g[outcome].sum()), len(g))
    return pd.DataFrame(rows + [total, rate_row])


def paired_vs(df: pd.DataFrame, base: str, other: str, key: Sequence[str], outcome: str = "won",
              by: Sequence[str] = (), n_boot: int = 4000, seed: int = 0) -> pd.DataFrame:
    """``other`` minus ``base`` per group, paired on ``key``: interval and McNemar p."""
    a = df[df["condition"] == base].set_index(list(key))[outcome]
    b = df[df["condition"] == other].set_index(list(key))[outcome]
    both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").reset_index()
    groups = both.groupby(list(by), sort=True) if by else [((), both)]
    rows = []
    for gkey, g in groups:
        gkey = gkey if isinstance(gkey, tuple) else (gkey,)
        r = paired_difference(g["a"].astype(int), g["b"].astype(int), n_boot=n_boot, seed=seed)
        rows.append({**dict(zip(by, gkey)), "base": base, "condition": other, "n_pairs": len(g),
                     "base_rate": float(g["a"].mean()), "rate": float(g["b"].mean()),
                     "diff": r.diff.estimate, "lo": r.diff.lo, "hi": r.diff.hi,
                     "p_mcnemar": r.p_mcnemar, "base_only": r.n10, "other_only": r.n01})
    return pd.DataFrame(rows)


def paired_table(df: pd.DataFrame, base: str, others: Sequence[str], key: Sequence[str], labels: dict[str, str],
                 outcome: str = "won", n_boot: int = 4000) -> pd.DataFrame:
    """Overall paired differences from ``base`` (percentage points), one row per condition."""
    rows = []
    for c in others:
        if c == base or c not in set(df["condition"]):
            continue
        d = paired_vs(df, base, c, key, outcome, n_boot=n_boot)
        if d.empty:
            continue
        r = d.iloc[0]
        rows.append({"Condition": labels.get(c, c), "Pairs": int(r["n_pairs"]),
                     f"{labels.get(base, base)} (%)": f"{100 * r['base_rate']:.1f}",
                     "Condition (%)": f"{100 * r['rate']:.1f}",
                     "Change (p)": f"{100 * r['diff']:+.1f} [{100 * r['lo']:+.1f}, {100 * r['hi']:+.1f}]",
                     "McNemar p": f"{r['p_mcnemar']:.3g}", "Discordant (-/+)": f"{r['base_only']}/{r['other_only']}"})
    return pd.DataFrame(rows)


def experience_rates(steps: pd.DataFrame) -> pd.DataFrame:
    """Table 6: valid reviews, experiences and NOUPDATE (percent of valid) per model x environment."""
    rows = []
    reviewed = steps[steps["review_decision"].notna()]
    for (model, env), g in reviewed.groupby(["model", "env"], sort=True):
        valid = g[g["review_decision"] != "INVALID"]
        n = len(valid)
        e = int((valid["review_decision"] == "CALIBRATE").sum())
        rows.append({"Model": model, "Environment": env, "Reviews": len(g), "Valid reviews": n,
                     "Experience": f"{e} ({fmt_rate(e, n)})", "NOUPDATE": f"{n - e} ({fmt_rate(n - e, n)})"})
    if not reviewed.empty:
        valid = reviewed[reviewed["review_decision"] != "INVALID"]
        n, e = len(valid), int((valid["review_decision"] == "CALIBRATE").sum())
        rows.append({"Model": "Overall", "Environment": "", "Reviews": len(reviewed), "Valid reviews": n,
                     "Experience": f"{e} ({fmt_rate(e, n)})", "NOUPDATE": f"{n - e} ({fmt_rate(n - e, n)})"})
    return pd.DataFrame(rows)


def repetition_table(resp: pd.DataFrame, conditions: Sequence[str], labels: dict[str, str]) -> pd.DataFrame:
    """Table 3: per model the shared N and repeated-action counts with rates, plus pooled."""
    rows = []
    groups = list(resp.groupby("model", sort=True)) + [("Pooled", resp)]
    for model, g in groups:
        n = g[g["condition"] == conditions[0]]["episode_id"].nunique() if len(g) else 0
        row = {"Model": model, "N": n}
        for c in conditions:
            x = g[g["condition"] == c]
            row[labels.get(c, c)] = f"{int(x['repeated'].sum())} ({fmt_rate(int(x['repeated'].sum()), len(x))})"
        rows.append(row)
    return pd.DataFrame(rows)
