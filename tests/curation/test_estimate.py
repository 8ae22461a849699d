"""From a simulated practice round to the curated set: the helpful block kept, the harmful dropped."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memtrials.pipeline import codesets as sources
from memtrials.curation.design import inclusion_matrix, practice_round
from memtrials.curation.estimate import ESTIMATES_SCHEMA, block_estimates
from memtrials.curation.selection import curate

TASKS = [f"t{k}" for k in range(10)]


def play(design: pd.DataFrame, m: int, effects: np.ndarray, seed: int) -> pd.DataFrame:
    """A scripted agent: success probability = task difficulty + effects of the served blocks."""
    rng = np.random.default_rng(seed)
    difficulty = dict(zip(TASKS, np.linspace(0.3, 0.6, len(TASKS))))
    mu = design["task_id"].map(difficulty).to_numpy() + inclusion_matrix(design, m) @ effects
    return pd.DataFrame({"episode": design["episode"], "score": (rng.random(len(design)) < mu).astype(float)})


def test_planted_round_keeps_the_helpful_block_and_drops_the_harmful_one():
    m = 6
    effects = np.array([0.0, 0.25, 0.0, -0.25, 0.0, 0.0])
    kept = []
    for seed in range(10):
        design = practice_round(TASKS, 300, m, seed=seed)
        est = block_estimates(design, play(design, m, effects, seed), m)
        assert list(est.table.columns) == ESTIMATES_SCHEMA.names
        curated = curate(est.table["estimate"].to_numpy(), np.full(m, 20), budget=0.4)
        kept.append(curated.blocks)
        assert curated.blocks[0] == 1 and 3 not in curated.blocks and len(curated.blocks) <= 2
        row = est.table.set_index("block")
        assert row.loc[1, "lo"] > 0 and row.loc[3, "hi"] < 0
    assert len(kept) == 10


def test_scores_must_match_the_rounds_episodes():
    design = practice_round(TASKS, 30, 3, seed=0)
    scores = play(design, 3, np.zeros(3), 0)
    with pytest.raises(ValueError, match="without a score"):
        block_estimates(design, scores.iloc[1:], 3)
    with pytest.raises(ValueError, match="scored twice"):
        block_estimates(design, pd.concat([scores, scores.iloc[:1]]), 3)


@pytest.mark.parametrize("module,forbidden", [
    ("memtrials.curation", ("memtrials.llm", "memtrials.agent", "memtrials.studies", "memtrials.memory",
                            "memtrials.envs", "memtrials.config")),
    ("memtrials.stats.inclusion", ("memtrials.curation", "memtrials.llm", "memtrials.studies")),
])
def test_curation_stays_below_the_model_and_agent_layers(module, forbidden):
    reached = [m for m in sources.closure([module]) if any(m == f or m.startswith(f + ".") for f in forbidden)]
    assert not reached, reached
