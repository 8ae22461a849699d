"""Curation within a token budget, and the choice among candidates by practice score.

Source: *Reliable Memory from Unstable Growth*, Section 3.2 (the curated set) and
Section 3.3 (RBC's choice, Best-Full), Appendix D.2 (why no playbook is a candidate).

Curation (:func:`curate`) uses only the signs and order of the block estimates: blocks
with a positive estimate, largest first, each added if the served tokens stay within
``B`` times the whole playbook's tokens.  The budget is a cap, not a target: a playbook
with one helpful block is curated to that block.  The paper calls the rule the greedy
knapsack solution (ranked by effect, not effect per token); with blocks of unequal size it
does not print whether a block that does not fit ends the pass or is skipped.  We follow
the greedy knapsack it names: ``rule="skip"`` (default) skips that block and tries the
next smaller positive one; ``rule="stop"`` ends at the first block that does not fit.
For blocks of equal size the two agree.  ``budget=None`` serves every positive block
(the paper's no-cap comparison).

The choice (:func:`choose`) serves the candidate with the highest mean practice success
on the same fresh practice episodes.  RBC's 2K+1 candidates are the K curated sets, the
K whole playbooks and no playbook (:func:`rbc_candidates`); Best-Full's K+1 are the
whole playbooks and no playbook (:func:`best_full_candidates`).  Ties (scores within
``SCORE_RTOL``, a choice the paper leaves open) go to the candidate serving fewer
tokens, then to the earlier candidate in that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, Sequence

import numpy as np
import pandas as pd

#: Practice scores this close (relative to the larger magnitude) count as tied.
SCORE_RTOL = 1e-12

CandidateKind = Literal["curated", "whole", "none"]


@dataclass(frozen=True)
class Curated:
    """The curated set of one playbook: blocks in the order added, and the budget's arithmetic."""

    blocks: tuple[int, ...]  # largest estimate first
    served_tokens: int
    whole_tokens: int
    cap_tokens: float | None  # B x whole tokens (None: no cap)
    skipped: tuple[int, ...]  # positive blocks left out because they would exceed the cap
    rule: str

    def included(self, m: int) -> np.ndarray:
        """The 0/1 inclusion over ``m`` blocks that serves this set."""
        z = np.zeros(m, dtype=np.int8)
        z[list(self.blocks)] = 1
        return z


def curate(estimates: Sequence[float] | np.ndarray, block_tokens: Sequence[int] | np.ndarray, *,
           budget: float | None = 0.4, rule: Literal["skip", "stop"] = "skip") -> Curated:
    """Positive blocks, largest estimate first, added while served tokens <= ``budget`` x whole.

    ``estimates[j]`` and ``block_tokens[j]`` belong to block ``j``; the whole playbook's
    tokens are their sum.  Equal estimates are taken in block order.  The cap is exact
    (rational arithmetic on the budget's decimal value).
    """
    est = np.asarray(estimates, dtype=float).ravel()
    tok = np.asarray(block_tokens).ravel()
    if est.size != tok.size:
        raise ValueError(f"curate: {est.size} estimates but {tok.size} block token counts; one of each per block")
    if not np.isfinite(est).all():
        raise ValueError("estimates: contain NaN or inf; estimate every block before curating")
    if tok.size and (not np.issubdtype(tok.dtype, np.integer) or (tok < 0).any()):
        raise ValueError("block_tokens: expected non-negative integer token counts")
    if rule not in ("skip", "stop"):
        raise ValueError(f"rule {rule!r}: expected 'skip' or 'stop'")
    whole = int(tok.sum())
    cap: Fraction | None = None
    if budget is not None:
        if not 0 < float(budget) <= 1:
            raise ValueError(f"budget: a fraction of the whole playbook's tokens in (0, 1], got {budget}")
        cap = Fraction(repr(float(budget))) * whole
    order = sorted((j for j in range(est.size) if est[j] > 0), key=lambda j: (-est[j], j))
    chosen: list[int] = []
    skipped: list[int] = []
    served = 0
    for j in order:
        if cap is None or served + int(tok[j]) <= cap:
            chosen.append(j)
            served += int(tok[j])
        elif rule == "skip":
            skipped.append(j)
        else:
            skipped.extend(order[order.index(j):])
            break
    return Curated(tuple(chosen), served, whole, None if cap is None else float(cap), tuple(skipped), rule)


@dataclass(frozen=True)
class Candidate:
    """One playbook RBC or Best-Full may serve."""

    name: str
    kind: CandidateKind
    run: str | None  # the growth run it comes from (None for no playbook)
    tokens: int  # tokens it serves


def _runs(runs: Sequence[str], *counts: Sequence[int]) -> list[str]:
    ids = [str(r) for r in runs]
    if not ids or len(set(ids)) != len(ids):
        raise ValueError(f"runs: expected distinct growth-run ids, got {ids}")
    for c in counts:
        if len(c) != len(ids):
            raise ValueError(f"{len(ids)} runs but {len(c)} token counts; give one per run")
    return ids


def rbc_candidates(runs: Sequence[str], curated_tokens: Sequence[int], whole_tokens: Sequence[int]) -> list[Candidate]:
    """RBC's 2K+1 candidates, in this order: curated per run, whole per run, no playbook."""
    ids = _runs(runs, curated_tokens, whole_tokens)
    return ([Candidate(f"curated:{r}", "curated", r, int(t)) for r, t in zip(ids, curated_tokens)]
            + [Candidate(f"whole:{r}", "whole", r, int(t)) for r, t in zip(ids, whole_tokens)]
            + [Candidate("none", "none", None, 0)])


def best_full_candidates(runs: Sequence[str], whole_tokens: Sequence[int]) -> list[Candidate]:
    """Best-Full's K+1 candidates (RSEA's acceptance rule): whole per run, then no playbook."""
    ids = _runs(runs, whole_tokens)
    return [Candidate(f"whole:{r}", "whole", r, int(t)) for r, t in zip(ids, whole_tokens)] + [
        Candidate("none", "none", None, 0)]


@dataclass(frozen=True)
class Choice:
    """The served candidate, every candidate's practice score, and the candidates it tied with."""

    chosen: Candidate
    scores: pd.DataFrame  # name, kind, run, tokens, n, score, order
    tied: tuple[str, ...]  # names with the top score (the chosen one included)


def choose(candidates: Sequence[Candidate], episodes: pd.DataFrame) -> Choice:
    """Serve the candidate with the highest mean practice success.

    ``episodes`` has columns ``candidate`` (a name), ``episode`` and ``score``, one row per
    candidate and episode; rows of other candidates are ignored (Best-Full reads RBC's
    table).  Every candidate must be scored on the same episodes.  A ``split`` column, if
    present, must say ``practice`` on every row read: the choice never reads evaluation.
    """
    cands = list(candidates)
    names = [c.name for c in cands]
    if not cands or len(set(names)) != len(names):
        raise ValueError(f"candidates: expected distinct names, got {names}")
    need = {"candidate", "episode", "score"}
    if not need <= set(episodes.columns):
        raise ValueError(f"episodes: missing columns {sorted(need - set(episodes.columns))}")
    rows = episodes[episodes["candidate"].isin(names)]
    if "split" in rows.columns and (rows["split"] != "practice").any():
        bad = sorted(set(rows.loc[rows["split"] != "practice", "split"].astype(str)))
        raise ValueError(f"episodes: the choice reads practice episodes only, got split {bad}")
    if rows.duplicated(["candidate", "episode"]).any():
        raise ValueError("episodes: a candidate is scored twice on one episode; keep one row per pair")
    if not np.isfinite(rows["score"].to_numpy(dtype=float)).all():
        raise ValueError("episodes: a score is NaN or inf; score every episode before choosing")
    sets = {n: frozenset(rows.loc[rows["candidate"] == n, "episode"]) for n in names}
    ref = sets[names[0]]
    if not ref or any(s != ref for s in sets.values()):
        sizes = {n: len(s) for n, s in sets.items()}
        raise ValueError(f"episodes: every candidate must be scored on the same non-empty episodes, got {sizes}")
    means = rows.groupby("candidate")["score"].mean()
    table = pd.DataFrame({"name": names, "kind": [c.kind for c in cands], "run": [c.run for c in cands],
                          "tokens": [c.tokens for c in cands], "n": len(ref),
                          "score": [float(means[n]) for n in names], "order": range(len(cands))})
    top = float(table["score"].max())
    tied = table[table["score"] >= top - SCORE_RTOL * max(abs(top), 1.0)]
    pick = tied.sort_values(["tokens", "order"]).iloc[0]
    return Choice(cands[int(pick["order"])], table, tuple(tied["name"]))
