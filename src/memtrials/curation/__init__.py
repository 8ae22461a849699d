"""Playbook curation by randomized inclusion (Reliable Memory from Unstable Growth, Section 3).

- :mod:`.blocks`: lessons clustered into blocks by Ward's method on their embeddings.
- :mod:`.design`: the practice round (a task and a Bernoulli(1/2) inclusion per block per
  episode, seeded per episode) and the fresh episodes the candidates are scored on.
- :mod:`.estimate`: a recorded round's block estimates (ridge and with/without), through
  :mod:`memtrials.stats.inclusion`.
- :mod:`.select`: curation within a token budget, and the choice among candidates (RBC's
  2K+1, Best-Full's K+1) by practice score.

The estimators themselves are generic statistics, in :mod:`memtrials.stats.inclusion`.
This package imports ``stats`` and ``files`` only; the caller embeds lessons and runs episodes.
"""

from memtrials.curation.blocks import BLOCKS_SCHEMA, Blocks, cluster_blocks
from memtrials.curation.design import (
    DESIGN_COLUMNS, block_columns, choice_episodes, design_schema, inclusion_matrix, practice_episode,
    practice_round, served_lessons, write_design,
)
from memtrials.curation.estimate import ESTIMATES_SCHEMA, BlockEstimates, block_estimates
from memtrials.curation.selection import (
    Candidate, Choice, Curated, best_full_candidates, choose, curate, rbc_candidates,
)

__all__ = [
    "BLOCKS_SCHEMA", "BlockEstimates", "Blocks", "ESTIMATES_SCHEMA", "block_estimates", "Candidate", "Choice", "Curated", "DESIGN_COLUMNS", "best_full_candidates",
    "block_columns", "choice_episodes", "choose", "cluster_blocks", "curate", "design_schema",
    "inclusion_matrix", "practice_episode", "practice_round", "rbc_candidates", "served_lessons", "write_design",
]
