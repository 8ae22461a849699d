"""The luck study's headline for the scorecard (:mod:`memtrials.pipeline.scorecard`): at one
endpoint, the two primary interactions (P2: good decision, outcome x memory; P3m: bad
decision, its mirror) with their registered intervals and readings, from the registered
analysis (``results/luck/analysis/``: ``registered.json``, ``quantities.parquet``, ``readings.parquet``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.report.scorecard import Headline
from memtrials.studies.luck.contrasts import PRIMARIES
from memtrials.studies.luck.outputs import HEADLINE

STUDY = "luck"


def headline(model: str, inputs: Mapping[str, Sequence[str]], options: Mapping[str, Any]) -> list[Headline]:
    q = pd.read_parquet(inputs["quantities"][0])
    r = pd.read_parquet(inputs["readings"][0])
    level = float(json.loads(Path(inputs["registered"][0]).read_text(encoding="utf-8"))["rules"]["level"])
    interval = f"{100 * level:g}% t interval over worlds (registered; degenerate rule for a constant sample)"
    out = []
    for p in PRIMARIES:
        row = q[(q["unit"] == model) & (q["quantity"] == p) & (q["subset"] == "all")]
        if row.empty:
            out.append(Headline.not_run(STUDY, HEADLINE[p], f"the registered analysis has no {p} row for {model} "
                                        "(no answers of this endpoint: see results/luck/analysis/missingness)"))
            continue
        s = row.iloc[0]
        read = r[(r["unit"] == model) & (r["contrast"] == p)]
        if int(s["n"]) == 0:
            out.append(Headline.not_run(STUDY, HEADLINE[p], f"no complete world for {p} at {model} (every world "
                                        "misses an answer; see results/luck/tables/table_counts)"))
            continue
        out.append(Headline(STUDY, HEADLINE[p], float(s["estimate"]), float(s["lo"]), float(s["hi"]), unit="",
                            interval=interval, n=int(s["n"]), n_label="complete worlds",
                            reading=str(read["label"].iloc[0]) if len(read) else "no reading recorded"))
    return out
