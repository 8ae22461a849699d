"""Block estimates from a recorded practice round (the glue to :mod:`memtrials.stats.inclusion`).

Source: *Reliable Memory from Unstable Growth*, Section 3.2 ("What is estimated"): the
curated set is built from the ridge estimates (task intercepts unpenalised, lambda by
leaving one task out); the plain with/without difference and its interval are reported
beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd
import pyarrow as pa

from memtrials.curation.design import DESIGN_COLUMNS, inclusion_matrix
from memtrials.stats.inclusion import RidgeLOTO, ridge_loto, with_without

#: One row per block: the ridge estimate (what curation reads) and the with/without difference.
ESTIMATES_SCHEMA = pa.schema([
    pa.field("block", pa.int64(), nullable=False),
    pa.field("estimate", pa.float64(), nullable=False),  # ridge at the chosen lambda
    pa.field("unpenalised", pa.float64(), nullable=False),  # least squares with task intercepts
    pa.field("diff", pa.float64()),  # with minus without
    pa.field("se", pa.float64()),
    pa.field("lo", pa.float64()),
    pa.field("hi", pa.float64()),
    pa.field("n_with", pa.int64(), nullable=False),
    pa.field("n_without", pa.int64(), nullable=False),
])


@dataclass(frozen=True)
class BlockEstimates:
    """Per-block estimates and the ridge fit they come from (its lambda and CV curve)."""

    table: pd.DataFrame  # columns of ESTIMATES_SCHEMA
    fit: RidgeLOTO


def block_estimates(design: pd.DataFrame, scores: pd.DataFrame, m: int, *, level: float = 0.95,
                    lambdas: Sequence[float] | None = None) -> BlockEstimates:
    """Join a practice round with its episodes' scores (columns ``episode``, ``score``) and estimate.

    Every design episode must have exactly one score; scores of other episodes are refused.
    """
    if not {"episode", "score"} <= set(scores.columns):
        raise ValueError("scores: expected columns 'episode' and 'score'")
    if scores["episode"].duplicated().any():
        raise ValueError("scores: an episode is scored twice; keep one row per episode")
    missing = set(design["episode"]) - set(scores["episode"])
    extra = set(scores["episode"]) - set(design["episode"])
    if missing or extra:
        raise ValueError(f"scores: episodes without a score {sorted(missing)[:5]}, scores of episodes "
                         f"not in the design {sorted(extra)[:5]}; score exactly the round's episodes")
    joined = design.merge(scores[["episode", "score"]], on="episode", how="left", validate="one_to_one")
    z = inclusion_matrix(joined, m)
    task, y = joined[DESIGN_COLUMNS[1]].to_numpy(), joined["score"].to_numpy(dtype=float)
    fit = ridge_loto(task, z, y, lambdas=lambdas)
    ww = with_without(task, z, y, level=level)
    table = pd.DataFrame({"block": ww["block"].astype("int64"), "estimate": fit.coef,
                          "unpenalised": fit.unpenalised, "diff": ww["diff"], "se": ww["se"],
                          "lo": ww["lo"], "hi": ww["hi"], "n_with": ww["n_with"].astype("int64"),
                          "n_without": ww["n_without"].astype("int64")})
    return BlockEstimates(table, fit)
