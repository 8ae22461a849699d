"""Known-answer tables of the anti-persistence study: the planted truth beside each estimate.

Each function reads a planted run's ordinary artifacts (episode tables with ``task``, ``won``,
``mode``, ``mode_reason``, ``synthesis_status``, ``retrieval``; the memory snapshots' lineage)
and the declared world (:class:`.planted.AntiPlant`), never a side record of the agent:

- :func:`mode_cluster_table`: success per (mode, cluster) where the actor was shown that mode's
  guidance (or, for ``none``, no guidance), one episode per distinct request, with Wilson
  intervals, beside ``p(mode, cluster)``;
- :func:`selector_table`: per cluster, the share of the selector's choices past the rotation
  that took the cluster's best mode, beside chance (1/4) and the best mode's name;
- :func:`flaw_table`: the lineage counts of :mod:`.lineage` with the planted flaws as labels,
  ``P(flawed child | served a flawed parent) - P(flawed child | not)`` with Newcombe's interval,
  beside :func:`.planted.flaw_reproduction`;
- :func:`round_table`: per evaluated round, the trajectories served against what the stream's
  plan says was stored by then (a snapshot of the wrong round fails it).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

import pandas as pd

from memtrials.stats import rate_difference, wilson_interval
from memtrials.studies.antipersist.lineage import rule_store, stream_counts
from memtrials.studies.antipersist.planted import FLAWED, MODES, AntiPlant, best_modes, flaw_reproduction

TRUTH_COLUMNS = ("estimate", "lo", "hi", "truth", "covered")


def _row(k: int, n: int, truth: float) -> dict[str, Any]:
    i = wilson_interval(int(k), int(n))
    return {"n": int(n), "estimate": i.estimate, "lo": i.lo, "hi": i.hi, "truth": truth,
            "covered": bool(n and i.lo <= truth <= i.hi)}


def with_clusters(episodes: pd.DataFrame, plant: AntiPlant) -> pd.DataFrame:
    """The episodes with their planted cluster (from the task text); refuses tasks without one."""
    clusters = episodes["task"].astype(str).map(plant.cluster_of)
    if clusters.isna().any():
        bad = episodes.loc[clusters.isna(), "task"].astype(str).head(3).tolist()
        raise ValueError(f"planted antipersist: tasks without a cluster (one of {sorted(plant.clusters)}): {bad}; "
                         "is this a planted-world run?")
    return episodes.assign(cluster=clusters)


def shown_mode(episodes: pd.DataFrame) -> pd.Series:
    """The mode whose guidance each episode was shown: its mode when the synthesis served
    guidance (``ok``), ``none`` when it served earlier attempts; null when nothing was shown of a
    synthesis mode (no success / failure on hand, an empty reply)."""
    mode = episodes["mode"].astype(str)
    ok = episodes["synthesis_status"].astype(str).isin(["ok", "not_needed"])
    return mode.where(ok)


def distinct_draws(df: pd.DataFrame) -> pd.DataFrame:
    """One episode per distinct request: the study's actor does not sample (the same task shown the
    same memory sends the same request, whose reply the cache replays), so a task met again with the
    same guidance repeats its outcome.  Kept: the first episode per (task, mode shown, trajectories
    shown for ``none``); a synthesis mode's planted guidance is the same text for every task."""
    key = df["task_id"].astype(str) + "|" + df["shown"].astype(str) + "|" + \
        df["retrieval"].astype(str).where(df["shown"] == "none", "")
    return df.loc[~key.duplicated()]


def mode_cluster_table(episodes: pd.DataFrame, plant: AntiPlant) -> pd.DataFrame:
    """Success per (mode shown, cluster) over distinct requests (:func:`distinct_draws`), beside the
    planted chance."""
    df = with_clusters(episodes, plant).assign(shown=lambda d: shown_mode(d)).dropna(subset=["shown"])
    df = distinct_draws(df)
    rows = []
    for (mode, cluster), g in df.groupby(["shown", "cluster"]):
        rows.append({"mode": mode, "cluster": cluster,
                     **_row(int(g["won"].astype(bool).sum()), len(g), plant.chance(str(mode), str(cluster)))})
    return pd.DataFrame(rows, columns=["mode", "cluster", "n", *TRUTH_COLUMNS])


def selector_table(episodes: pd.DataFrame, plant: AntiPlant,
                   reasons: Iterable[str] = ("neighbours", "fallback")) -> pd.DataFrame:
    """Per cluster: the share of the selector's greedy choices (``reasons``) that took the
    cluster's best mode, with its Wilson interval, beside chance (1/|modes|)."""
    df = with_clusters(episodes, plant)
    df = df[df["mode_reason"].astype(str).isin(list(reasons))]
    best = best_modes(plant)
    rows = []
    for cluster in plant.cluster_names:
        g = df[df["cluster"] == cluster]
        k = int((g["mode"].astype(str) == best[cluster]).sum())
        i = wilson_interval(k, len(g))
        rows.append({"cluster": cluster, "best_mode": best[cluster], "n": len(g), "best_share": i.estimate,
                     "lo": i.lo, "hi": i.hi, "chance": 1.0 / len(MODES), "above_chance": bool(len(g) and i.lo > 1 / len(MODES))})
    return pd.DataFrame(rows)


def flaws(state: Mapping[str, Any]) -> dict[str, bool]:
    """Rule id -> planted flaw (its text says so), for every stored rule of a snapshot."""
    store = rule_store(state)
    return {str(r["id"]): FLAWED in str(r["text"]) for r in store["rules"]}


def flaw_table(streams: Iterable[tuple[Mapping[str, Any], pd.DataFrame]], plant: AntiPlant) -> pd.DataFrame:
    """The planted error's reproduction over streams ``(final state, training episodes)``, through
    the study's lineage counts with the planted flaws as labels, beside the declared value."""
    total: dict[str, int] = {}
    for state, train in streams:
        for k, v in stream_counts(state, train, flaws(state)).items():
            total[k] = total.get(k, 0) + int(v)
    if not total:
        return pd.DataFrame()
    d = rate_difference(total["flagged_exposed"], total["gen_exposed"], total["flagged_unexposed"],
                        total["gen_unexposed"])
    truth = flaw_reproduction(plant)
    return pd.DataFrame([{"quantity": "P(flawed | served a flawed parent) - P(flawed | not)",
                          "n": total["gen_exposed"] + total["gen_unexposed"], "exposed": total["gen_exposed"],
                          "estimate": d.estimate, "lo": d.lo, "hi": d.hi, "truth": truth,
                          "covered": bool(d.lo <= truth <= d.hi)}])


def round_table(eval_episodes: pd.DataFrame, round_size: int, k: int) -> pd.DataFrame:
    """Per evaluated round ``r`` of a trajectory-serving design: the trajectories its held-out
    episodes were served must be ones stored by the end of round ``r`` (ids ``T..`` are numbered
    in stream order, one per training episode: at most ``r x round_size``) and each episode is
    served ``min(k, r x round_size)`` of them (the truth, from the stream's plan).  A snapshot of
    another round served there breaks one of the two."""
    rows = []
    for r, g in eval_episodes.groupby("round"):
        stored = int(r) * int(round_size)
        ids = [[x for x in served_ids(v) if x.startswith("T")] for v in g["retrieval"]]
        top = max((int(x[1:]) for s in ids for x in s), default=0)
        counts = sorted({len(s) for s in ids})
        want = min(int(k), stored)
        rows.append({"round": int(r), "episodes": len(g), "latest_served": top, "stored_by_round": stored,
                     "served_per_episode": ",".join(map(str, counts)), "truth_per_episode": want,
                     "covered": bool(top <= stored and counts == [want])})
    return pd.DataFrame(rows)


def served_ids(retrieval: Any) -> list[str]:
    if not isinstance(retrieval, str) or not retrieval:
        return []
    return [str(x["id"]) for x in json.loads(retrieval)]
