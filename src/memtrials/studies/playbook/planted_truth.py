"""The truth of the playbook study's estimands on a planted run, from the declared ``p`` alone.

Given a run's blocks (which lesson codes each block holds: structure of the run, not its
outcomes) and :class:`.planted.Plant`:

- :func:`block_truth`: each block's Banzhaf value at inclusion probability ``p``, the estimand
  of the practice round's with/without difference and of the ridge (Section 3.2), by exact
  enumeration over the other blocks' inclusions (``2^(m-1)`` terms, weighted by ``p``);
- :func:`set_value`: the success chance of serving a set of blocks (a candidate's score / 100);
- :func:`best_set`: the best set of blocks within the token cap, by exact enumeration (the
  oracle curation);
- :func:`greedy_truth`: the set the study's own rule (:func:`memtrials.curation.curate`) picks
  when fed the true values, the set RBC should find with enough practice episodes.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Sequence

import numpy as np

from memtrials.curation import Curated, curate
from memtrials.studies.playbook.planted import Plant


def _codes(block_codes: Sequence[Sequence[str]], included: Sequence[int] | np.ndarray) -> set[str]:
    z = np.asarray(included).ravel()
    if z.size != len(block_codes):
        raise ValueError(f"included: {z.size} entries for {len(block_codes)} blocks")
    return {c for j, codes in enumerate(block_codes) if z[j] for c in codes}


def set_value(plant: Plant, block_codes: Sequence[Sequence[str]], included: Sequence[int] | np.ndarray) -> float:
    """The chance of success with the blocks ``included`` (0/1 per block) served."""
    return plant.chance(_codes(block_codes, included))


def block_truth(plant: Plant, block_codes: Sequence[Sequence[str]], p: float = 0.5) -> np.ndarray:
    """Banzhaf value of every block at inclusion ``p``: E[v(S + j) - v(S)], S ~ Bernoulli(p) over the others."""
    m = len(block_codes)
    if m > 16:
        raise ValueError(f"block_truth: {m} blocks; exact enumeration is kept to at most 16")
    if not 0 < p < 1:
        raise ValueError(f"p: an inclusion probability in (0, 1), got {p}")
    out = np.zeros(m)
    for j in range(m):
        others = [k for k in range(m) if k != j]
        for bits in itertools.product((0, 1), repeat=len(others)):
            z = np.zeros(m, dtype=int)
            z[others] = bits
            w = p ** sum(bits) * (1 - p) ** (len(bits) - sum(bits))
            z1 = z.copy()
            z1[j] = 1
            out[j] += w * (set_value(plant, block_codes, z1) - set_value(plant, block_codes, z))
    return out


def _cap(block_tokens: Sequence[int], budget: float | None) -> Fraction | None:
    whole = int(sum(int(t) for t in block_tokens))
    return None if budget is None else Fraction(repr(float(budget))) * whole


def best_set(plant: Plant, block_codes: Sequence[Sequence[str]], block_tokens: Sequence[int],
             budget: float | None) -> tuple[tuple[int, ...], float]:
    """The best set of blocks serving at most ``budget`` x the whole playbook's tokens (exact
    enumeration; ties to fewer tokens, then the lexicographically first set)."""
    m = len(block_codes)
    if len(block_tokens) != m:
        raise ValueError(f"block_tokens: {len(block_tokens)} counts for {m} blocks")
    if m > 16:
        raise ValueError(f"best_set: {m} blocks; exact enumeration is kept to at most 16")
    cap = _cap(block_tokens, budget)
    best: tuple[float, int, tuple[int, ...]] | None = None
    for bits in itertools.product((0, 1), repeat=m):
        tokens = sum(int(t) for t, b in zip(block_tokens, bits) if b)
        if cap is not None and tokens > cap:
            continue
        chosen = tuple(j for j in range(m) if bits[j])
        key = (-set_value(plant, block_codes, bits), tokens, chosen)
        if best is None or key < best:
            best = key
    assert best is not None  # the empty set always fits
    return best[2], -best[0]


def greedy_truth(plant: Plant, block_codes: Sequence[Sequence[str]], block_tokens: Sequence[int], *,
                 budget: float | None, rule: str = "skip", p: float = 0.5) -> Curated:
    """The study's curation rule applied to the true block values."""
    truth = block_truth(plant, block_codes, p)
    return curate(np.round(truth, 12), np.asarray(block_tokens, dtype=np.int64), budget=budget, rule=rule)  # type: ignore[arg-type]


def included(blocks: Sequence[int], m: int) -> np.ndarray:
    """The 0/1 inclusion of ``blocks`` over ``m`` blocks."""
    z = np.zeros(m, dtype=int)
    z[list(blocks)] = 1
    return z
