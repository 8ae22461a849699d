"""The evidence for error reproduction: abstractions' lineage, labels by downstream success,
exposure, flagged generation and admission (the paper's split), with intervals.

The paper reads error reproduction as "an association between earlier abstractions and
later ones", with "labels [that] track downstream success", split into exposure, flagged
generation and admission into memory; it gives no formula.  The project's operational
definitions, per training stream of a design that stores abstractions (abstraction and
joint memory, whose ``lineage`` :mod:`memtrials.memory.abstraction` records):

- **use**: a training episode of the stream that was served the stored rule (its id in the
  episode's ``retrieval`` column); every use comes after the rule was stored.
- **label**: a rule is **flagged** when it has at least one use and the success rate of its
  uses is below the stream's training success rate (a parameter-free threshold: the rule
  did worse than the stream's average episode); a rule never used is **unlabelled**.
- **exposure**: a synthesis (one call reading one episode's trajectory) is **exposed** when
  that episode was served at least one flagged rule (its ``parents``).
- **flagged generation**: a rule the synthesis wrote (a repeat of a stored rule counts as
  that rule) is flagged.  The association is the difference
  ``P(flagged | exposed) - P(flagged | not exposed)`` over the labelled generated rules,
  with Newcombe's interval (:func:`memtrials.stats.rate_difference`).
- **admission**: a flagged generated rule entered the store as a new rule (a repeat is not
  admitted again).

Rates carry Wilson intervals; counts are pooled over the seeds of a (design, setting) and,
in the ``all`` rows, over its settings.  The intervals treat generated rules as independent,
which they are not (one stream's rules share tasks, and a parent and its child can be
served together, so their labels share episodes): an association, as the paper says, not
a causal effect of any rule.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

import pandas as pd

from memtrials.stats import rate_difference, wilson_interval

COUNTS = ("syntheses", "exposed", "gen_exposed", "flagged_exposed", "gen_unexposed", "flagged_unexposed",
          "flagged_generated", "flagged_admitted", "unlabelled")


def rule_store(state: Mapping[str, Any]) -> Mapping[str, Any]:
    """The abstraction store of a snapshot's state (joint memory keeps it under ``abstraction``)."""
    return state if "lineage" in state else state["abstraction"]


def served_rule_ids(retrieval: Any) -> list[str]:
    if not isinstance(retrieval, str) or not retrieval:
        return []
    return [str(x["id"]) for x in json.loads(retrieval) if str(x["id"]).startswith("R")]


def labels(train: pd.DataFrame) -> dict[str, bool]:
    """Rule id -> flagged, for every rule with a use in this stream's training episodes."""
    base = float(train["won"].astype(float).mean())
    uses: dict[str, list[float]] = {}
    for retrieval, won in zip(train["retrieval"], train["won"]):
        for rid in served_rule_ids(retrieval):
            uses.setdefault(rid, []).append(float(won))
    return {rid: sum(v) / len(v) < base for rid, v in uses.items()}


def stream_counts(state: Mapping[str, Any], train: pd.DataFrame,
                  flagged: Mapping[str, bool] | None = None) -> dict[str, int]:
    """The counts of :data:`COUNTS` for one stream (its final state and its training episodes);
    ``flagged`` replaces the labels by downstream success (:func:`labels`) with given ones (a
    known-answer run's planted flaws)."""
    flagged = labels(train) if flagged is None else flagged
    out = dict.fromkeys(COUNTS, 0)
    for entry in rule_store(state)["lineage"]:
        exposed = any(flagged.get(p, False) for p in entry["parents"])
        out["syntheses"] += 1
        out["exposed"] += exposed
        for g in entry["generated"]:
            label = flagged.get(g["id"])
            if label is None:
                out["unlabelled"] += 1
                continue
            side = "exposed" if exposed else "unexposed"
            out[f"gen_{side}"] += 1
            out[f"flagged_{side}"] += label
            out["flagged_generated"] += label
            out["flagged_admitted"] += label and bool(g["admitted"])
    return out


def counts(snapshots: Iterable[Mapping[str, Any]], train: pd.DataFrame) -> pd.DataFrame:
    """One row per stream (design, model, env, seed_index) with its :data:`COUNTS`; ``snapshots``
    are the final memory snapshots (their metadata names the stream)."""
    rows = []
    for snap in snapshots:
        key = {k: snap[k] for k in ("design", "model", "env", "seed_index")}
        mine = train[(train["design"] == key["design"]) & (train["model"] == key["model"]) &
                     (train["env"] == key["env"]) & (train["seed_index"] == key["seed_index"])]
        if mine.empty:
            raise ValueError(f"lineage: no training episodes for the stream {key}")
        rows.append({**key, "setting": f"{key['model']} / {key['env']}", **stream_counts(snap["state"], mine)})
    return pd.DataFrame(rows, columns=["design", "model", "env", "seed_index", "setting", *COUNTS])


def _rate(k: int, n: int) -> dict[str, float]:
    i = wilson_interval(int(k), int(n))
    return {"rate": i.estimate, "lo": i.lo, "hi": i.hi}


def rates(per_stream: pd.DataFrame) -> pd.DataFrame:
    """Per (design, setting) pooled over seeds, plus an ``all`` row per design pooled over
    settings: exposure, flagged generation given exposure or not, their difference (the
    association), admission of flagged rules; each with its interval and counts."""
    if per_stream.empty:
        return pd.DataFrame()
    pooled = pd.concat([per_stream.groupby(["design", "setting"], as_index=False)[list(COUNTS)].sum(),
                        per_stream.assign(setting="all").groupby(["design", "setting"], as_index=False)[
                            list(COUNTS)].sum()], ignore_index=True)
    rows = []
    for _, c in pooled.iterrows():
        row: dict[str, Any] = {"design": c["design"], "setting": c["setting"], **{k: int(c[k]) for k in COUNTS}}
        for name, (k, n) in {"exposure": (c["exposed"], c["syntheses"]),
                             "flagged_if_exposed": (c["flagged_exposed"], c["gen_exposed"]),
                             "flagged_if_not_exposed": (c["flagged_unexposed"], c["gen_unexposed"]),
                             "admission": (c["flagged_admitted"], c["flagged_generated"])}.items():
            row.update({f"{name}{s}": v for s, v in zip(("", "_lo", "_hi"), _rate(k, n).values())})
        d = rate_difference(int(c["flagged_exposed"]), int(c["gen_exposed"]), int(c["flagged_unexposed"]),
                            int(c["gen_unexposed"]))
        row.update(association=d.estimate, association_lo=d.lo, association_hi=d.hi)
        rows.append(row)
    return pd.DataFrame(rows)
