"""The anti-persistence study's estimates: success by design and setting over seeds, calls
per episode, success and mode shares per round.

A **setting** is (backbone, benchmark), the paper's nine cells.  A job's success rate is
the share of its evaluation episodes won; a design's entry in a setting is the mean of its
seeds' rates with their sample standard deviation (the paper's ``±``; none with one seed);
its **average** is the equal-weighted mean of its setting means, given only when the
design has every setting.  Calls per episode are the mean of ``llm_calls`` (synthesis plus
execution, :mod:`.play`) over a job's episodes, then over seeds.  The main estimate uses
each job's final-round evaluation (:func:`final_round`; with ``eval_every_round`` a job also
holds the held-out evaluation of every earlier round's snapshot).  Round curves: held-out
success per evaluated round (:func:`heldout_per_round`), and training success per round
(:func:`per_round`, the training episodes, rotation and exploration included).  Mode
shares count the training episodes' chosen mode (the column of :data:`MODE_COLUMNS` a
selector design declares), per round and averaged over the rounds (the paper's ten-round
averages, :func:`mode_shares_average`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

MODE_COLUMNS = ("synthesis_mode", "mode")
"""Where a selector design records the chosen mode (the first present is used)."""


def setting_of(df: pd.DataFrame) -> pd.Series:
    return df["model"].astype(str) + " / " + df["env"].astype(str)


def job_rates(episodes: pd.DataFrame, value: str = "won") -> pd.DataFrame:
    """One row per job (design, model, env, seed): the mean of ``value`` over its episodes."""
    df = episodes.assign(_v=episodes[value].astype(float))
    out = df.groupby(["design", "model", "env", "seed_index"], as_index=False).agg(value=("_v", "mean"),
                                                                                  episodes=("_v", "size"))
    out["setting"] = setting_of(out)
    return out


def over_seeds(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per (design, setting): mean and sample sd over seeds (sd NaN with one seed), seeds."""
    g = jobs.groupby(["design", "setting"], as_index=False)["value"]
    out = g.agg(mean="mean", sd=lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else np.nan, seeds="size")
    return out


def equal_weighted(summary: pd.DataFrame, settings: Sequence[str]) -> pd.Series:
    """Per design: the mean of its setting means, NaN unless it has every one of ``settings``."""
    out = {}
    for design, g in summary.groupby("design"):
        have = set(g["setting"])
        out[design] = float(g["mean"].mean()) if set(settings) <= have else np.nan
    return pd.Series(out, name="average")


def final_round(eval_episodes: pd.DataFrame) -> pd.DataFrame:
    """Each job's evaluation of its final snapshot: the rows of the job's highest ``round``."""
    keys = ["design", "model", "env", "seed_index"]
    last = eval_episodes.groupby(keys)["round"].transform("max")
    return eval_episodes[eval_episodes["round"] == last]


def heldout_per_round(eval_episodes: pd.DataFrame) -> pd.DataFrame:
    """Per (design, setting, round): held-out success of that round's snapshot, mean over seeds
    (one round per job unless ``eval_every_round``)."""
    df = eval_episodes.assign(setting=setting_of(eval_episodes), _w=eval_episodes["won"].astype(float))
    jobs = df.groupby(["design", "setting", "seed_index", "round"], as_index=False)["_w"].mean()
    return jobs.groupby(["design", "setting", "round"], as_index=False)["_w"].mean().rename(columns={"_w": "success"})


def success(eval_episodes: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """The main estimate: (per design x setting summary, equal-weighted average per design),
    from each job's final-round evaluation."""
    summary = over_seeds(job_rates(final_round(eval_episodes)))
    settings = sorted(summary["setting"].unique())
    return summary, equal_weighted(summary, settings)


def calls(episodes: pd.DataFrame) -> pd.DataFrame:
    """Per (design, setting): mean LLM calls per episode (total, synthesis, execution) over seeds."""
    parts = []
    for col in ("llm_calls", "synthesis_calls_total", "execution_calls"):
        s = over_seeds(job_rates(episodes, col))[["design", "setting", "mean"]].rename(columns={"mean": col})
        parts.append(s.set_index(["design", "setting"]))
    return pd.concat(parts, axis=1).reset_index()


def per_round(train_episodes: pd.DataFrame) -> pd.DataFrame:
    """Per (design, setting, round): the training success rate, mean over seeds."""
    df = train_episodes.assign(setting=setting_of(train_episodes), _w=train_episodes["won"].astype(float))
    jobs = df.groupby(["design", "setting", "seed_index", "round"], as_index=False)["_w"].mean()
    return jobs.groupby(["design", "setting", "round"], as_index=False)["_w"].mean().rename(columns={"_w": "success"})


def mode_shares(train_episodes: pd.DataFrame) -> pd.DataFrame:
    """Per (design, setting, round, mode): the share of the round's episodes that took the mode
    (pooled over seeds); empty when no design records a mode."""
    col = next((c for c in MODE_COLUMNS if c in train_episodes.columns), None)
    if col is None:
        return pd.DataFrame(columns=["design", "setting", "round", "mode", "share"])
    df = train_episodes[train_episodes[col].notna()]
    df = df.assign(setting=setting_of(df))
    n = df.groupby(["design", "setting", "round"])[col].transform("size")
    out = df.assign(_s=1.0 / n).groupby(["design", "setting", "round", col], as_index=False)["_s"].sum()
    return out.rename(columns={col: "mode", "_s": "share"})


def mode_shares_average(train_episodes: pd.DataFrame) -> pd.DataFrame:
    """Per (design, setting, mode): the mean over the rounds of the per-round share (a round in
    which the mode was not taken counts 0), the paper's ten-round averages; ``rounds``: how many."""
    per = mode_shares(train_episodes)
    if per.empty:
        return pd.DataFrame(columns=["design", "setting", "mode", "share", "rounds"])
    wide = per.pivot_table(index=["design", "setting", "round"], columns="mode", values="share", fill_value=0.0)
    out = wide.groupby(level=["design", "setting"]).agg(["mean", "size"])
    rows = [{"design": d, "setting": s, "mode": m, "share": float(out.loc[(d, s), (m, "mean")]),
             "rounds": int(out.loc[(d, s), (m, "size")])} for d, s in out.index for m in wide.columns]
    return pd.DataFrame(rows)
