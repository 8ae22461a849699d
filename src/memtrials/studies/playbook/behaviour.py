"""Table 4's behaviour rates: how often an episode does what a harmful family of rules asks.

*Reliable Memory from Unstable Growth*, Section 6.3 / Table 4: on AppWorld the harmful
blocks tell the agent to pass an answer to ``complete_task`` (the call that ends the task),
so with such a block the agent answers more often; on WebShop they make it buy less often.
Each benchmark contributes its behaviour through one hook in :data:`BEHAVIOURS` (name, and a
function of one episode's steps, in step order, returning whether the episode showed it).
AppWorld's and WebShop's (a purchase: ``click[buy now]``) are here; a benchmark without a
hook has no rate.  WebShop's rate appears once WebShop runs as a benchmark of this study.  The rates are unadjusted means over a
practice round's episodes with the block included and without it (the paper's reading),
from the round's own design (practice episodes only).
"""

from __future__ import annotations

import re
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

_COMPLETE = re.compile(r"complete_task\((.*?)\)", re.S)
_NO_ANSWER = {"", "None", "answer=None"}


def answered_complete_task(steps: pd.DataFrame) -> bool:
    """AppWorld: the episode called ``complete_task`` with an answer (not bare, not ``answer=None``)."""
    return any(re.sub(r"\s+", "", m) not in _NO_ANSWER for a in steps["action"] for m in _COMPLETE.findall(str(a)))


def purchased(steps: pd.DataFrame) -> bool:
    """WebShop: the episode clicked Buy Now (``click[buy now]``, WebShop's own action; any case)."""
    return any(re.sub(r"\s+", " ", str(a)).strip().lower() == "click[buy now]" for a in steps["action"])


#: env -> (behaviour, hook over one episode's steps)
BEHAVIOURS: dict[str, tuple[str, Callable[[pd.DataFrame], bool]]] = {
    "appworld": ("answers passed to complete_task", answered_complete_task),
    "webshop": ("purchases (Buy Now)", purchased),
}


def episode_behaviour(env: str, episodes: pd.DataFrame, steps: pd.DataFrame) -> pd.Series | None:
    """Per practice episode (index ``design_episode``), whether it showed ``env``'s behaviour; None
    when the benchmark has no hook."""
    if env not in BEHAVIOURS:
        return None
    _, hook = BEHAVIOURS[env]
    by_id = {str(k): g.sort_values("step") for k, g in steps.groupby("episode_id")} if len(steps) else {}
    empty = steps.iloc[0:0] if len(steps.columns) else pd.DataFrame(columns=["action", "step"])
    return pd.Series([hook(by_id.get(str(e), empty)) for e in episodes["episode_id"]],
                     index=episodes["design_episode"].astype(int).to_numpy(), dtype=bool)


RATE_COLUMNS = ("block", "behaviour", "rate_with", "rate_without", "difference", "n_with", "n_without")
"""The columns of :func:`block_rates` (a table without a hook keeps them, with no rows)."""


def block_rates(env: str, design: pd.DataFrame, episodes: pd.DataFrame, steps: pd.DataFrame,
                m: int) -> pd.DataFrame:
    """Per block: the behaviour's rate over the round's episodes that include it and that leave it
    out, and their difference (empty when the benchmark has no hook)."""
    shown = episode_behaviour(env, episodes, steps)
    if shown is None or not m:
        return pd.DataFrame(columns=list(RATE_COLUMNS))
    d = design.set_index("episode").reindex(shown.index)
    rows = []
    for j in range(m):
        z = d[f"z{j}"].astype(int).to_numpy()
        y = shown.to_numpy(dtype=float)
        w, wo = y[z == 1], y[z == 0]
        rw = float(w.mean()) if len(w) else np.nan
        rwo = float(wo.mean()) if len(wo) else np.nan
        rows.append({"block": j, "behaviour": BEHAVIOURS[env][0], "rate_with": rw, "rate_without": rwo,
                     "difference": rw - rwo, "n_with": int(len(w)), "n_without": int(len(wo))})
    return pd.DataFrame(rows)


def round_rates(practice: Sequence[str], setting_of: Callable[[str], tuple], keys: Sequence[str],
                read_json: Callable[[str], Mapping]) -> pd.DataFrame:
    """:func:`block_rates` of every practice round (record paths) whose benchmark has a hook."""
    out = []
    for p in practice:
        key = setting_of(p)
        env = key[list(keys).index("env")]
        if env not in BEHAVIOURS:
            continue
        rec, stem = read_json(p), str(p).removesuffix(".json")
        rates = block_rates(env, pd.read_parquet(stem + ".design.parquet"), pd.read_parquet(stem + ".parquet"),
                            pd.read_parquet(stem + ".steps.parquet", columns=["episode_id", "step", "action"]),
                            int(rec["blocks"]["m"]))
        if len(rates):
            out.append(rates.assign(**dict(zip(keys, key)), run=int(rec["run"])))
    if not out:  # no benchmark of the run has a hook: the table's columns, no rows
        return pd.DataFrame(columns=[*RATE_COLUMNS, *keys, "run"])
    return pd.concat(out, ignore_index=True)
