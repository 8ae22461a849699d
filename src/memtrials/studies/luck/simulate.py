"""Simulated reader answers for the registered analysis's operating characteristics
(*Lessons from Luck*, section 4, "Operating characteristics": "with no effect, a false
detection of either primary occurred in at most 0.6% of replications in every null
scenario simulated, including heterogeneous world means and shared per-world states (the
t rule alone reached 10.6% in the heterogeneous null ...). Per endpoint, a true P2 of
0.10 was detected in 96.8% of replications at a background discordance of 0.02 between
cells and in 56.3% at 0.10").

One endpoint's 32 cells per world are drawn as follows (:class:`Scenario`):

- **discordance** ``d``: the probability that two cells of a world differ.  Every cell
  departs from its world's state independently with probability ``f``, where
  ``2 f (1 - f) = d``; so two cells differ with probability exactly ``d``.
- **shared per-world states** (``shared``): a world's state is the worse tool with
  probability ``shared`` (else the better tool), shared by all its cells; contrasts keep
  expectation 0.
- **planted effects** ``p2`` / ``p3m``: the adverse cell of the matched lesson arms (good
  decision after a failure; bad decision after a success) names the worse tool with an
  extra probability chosen so that the expected P2 (and A, L) rises by exactly ``p2``.
- **heterogeneous world means** (``hetero_share``, ``hetero_rate``): a share of the worlds
  (exactly ``round(share * n)``) are negative: with probability ``hetero_rate`` their
  neutral arm's adverse cell and their lesson arm's benign cell both name the worse tool
  (a per-world contrast of -2); in every other world the lesson arm's adverse cell does so
  with the probability that makes the worlds' expected contrasts average exactly 0.  So a
  world's expected P2 (and P3m) is not 0, their mean over the worlds is: a null for the
  betting test (finite samples, independent, not identically distributed), and a skewed
  one (rare large negatives) under which the t-test alone rejects too often.
"""

from __future__ import annotations

import gc
import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd

from memtrials.studies.luck.design import ARMS, DECISIONS, OUTCOMES
from memtrials.studies.luck.worlds import World

CELLS = [(d, o, a) for d in DECISIONS for o in OUTCOMES for a in ARMS]
_COL = {c: i for i, c in enumerate(CELLS)}


@dataclass(frozen=True)
class Scenario:
    """One simulated endpoint (see the module docstring)."""

    discordance: float = 0.02
    shared: float = 0.0
    p2: float = 0.0
    p3m: float = 0.0
    hetero_share: float = 0.0
    hetero_rate: float = 0.0
    missing: float = 0.0
    lesson_arms: tuple[str, ...] = ("RB",)

    @property
    def flip(self) -> float:
        """Per-cell departure probability ``f`` with ``2 f (1 - f) = discordance``."""
        if not 0.0 <= self.discordance <= 0.5:
            raise ValueError(f"discordance {self.discordance} must lie in [0, 0.5]")
        return (1.0 - math.sqrt(1.0 - 2.0 * self.discordance)) / 2.0

    def base_rate(self) -> float:
        """Probability that a cell names the worse tool before any planted effect."""
        f = self.flip
        return self.shared * (1 - f) + (1 - self.shared) * f


def _extra(effect: float, base: float) -> float:
    p = effect / (1.0 - base) if effect else 0.0
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"planted effect {effect} cannot be reached from a base rate {base:.3f}")
    return p


def simulate_y(n_worlds: int, s: Scenario, rng: np.random.Generator,
               negative: np.ndarray | None = None) -> np.ndarray:
    """Worlds x 32 cells (order :data:`CELLS`) of Y (1: worse tool; NaN: missing).
    ``negative`` fixes which worlds are the heterogeneous scenario's negative ones (default:
    ``round(hetero_share * n)`` worlds drawn at random)."""
    state = rng.random(n_worlds) < s.shared
    y = (state[:, None] ^ (rng.random((n_worlds, len(CELLS))) < s.flip)).astype(float)
    q = s.base_rate()
    for effect, adverse in ((s.p2, ("good", "failure")), (s.p3m, ("bad", "success"))):
        extra = _extra(effect, q)
        if extra:
            for a in s.lesson_arms:
                col = _COL[(*adverse, a)]
                y[rng.random(n_worlds) < extra, col] = 1.0
    if s.hetero_share and s.hetero_rate:
        n_neg = int(round(s.hetero_share * n_worlds)) if negative is None else int(np.sum(negative))
        if not 0 < n_neg < n_worlds:
            raise ValueError(f"hetero_share {s.hetero_share}: no negative or no positive world among {n_worlds}")
        if negative is None:
            neg = np.zeros(n_worlds, bool)
            neg[rng.permutation(n_worlds)[:n_neg]] = True
        else:
            neg = np.asarray(negative, bool)
        pos_rate = 2.0 * n_neg * s.hetero_rate / (n_worlds - n_neg)
        if pos_rate > 1.0:
            raise ValueError(f"hetero scenario needs a positive-world rate {pos_rate:.2f} > 1; lower hetero_rate")
        for d, adverse, benign in (("good", "failure", "success"), ("bad", "success", "failure")):
            hit = neg & (rng.random(n_worlds) < s.hetero_rate)
            y[hit, _COL[(d, adverse, "NEUTRAL")]] = 1.0
            y[hit, _COL[(d, benign, "RB")]] = 1.0
            y[~neg & (rng.random(n_worlds) < pos_rate), _COL[(d, adverse, "RB")]] = 1.0
    if s.missing:
        y[rng.random(y.shape) < s.missing] = np.nan
    return y


def y_frame(y: np.ndarray, world_ids: Sequence[str]) -> pd.DataFrame:
    """The Y matrix as :func:`memtrials.studies.luck.contrasts.y_matrix` returns it."""
    cols = pd.MultiIndex.from_tuples(CELLS, names=["decision", "outcome", "arm"])
    return pd.DataFrame(y, index=pd.Index(list(world_ids), name="world_id"), columns=cols)


def simulate_answers(worlds: list[World], model: str, rng: np.random.Generator,
                     scenario: Scenario | None = None, **fields: Any) -> pd.DataFrame:
    """One endpoint's answers table (the columns the analysis reads) under ``scenario``
    (or ``Scenario(**fields)``)."""
    s = replace(scenario or Scenario(), **fields)
    y = simulate_y(len(worlds), s, rng)
    rows = []
    for i, w in enumerate(worlds):
        for j, (d, o, a) in enumerate(CELLS):
            v = y[i, j]
            rows.append(dict(model=model, world_id=w.world_id, domain=w.domain, cue=w.cue, decision=d,
                             outcome=o, arm=a, y=v, status="invalid" if np.isnan(v) else "valid"))
    return pd.DataFrame(rows)


@contextmanager
def gc_frozen() -> Iterator[None]:
    """Freeze the garbage collector's objects while replicating (statsmodels' multipletests
    calls gc.collect(); keep it cheap), unfreezing after unless they were frozen before."""
    frozen = gc.isfrozen() if hasattr(gc, "isfrozen") else False
    gc.freeze()
    try:
        yield
    finally:
        if not frozen:
            gc.unfreeze()


def _rates(s: Scenario, reps: int, n_worlds: int, counts: dict[str, int]) -> dict[str, Any]:
    """The scenario, the replication's size, and each count's rate over ``reps`` with its
    binomial standard error (``<count>_se``)."""
    out: dict[str, Any] = {"scenario": asdict(s), "reps": reps, "n_worlds": n_worlds}
    for k, c in counts.items():
        r = c / reps
        out[k] = r
        out[f"{k}_se"] = math.sqrt(max(r * (1 - r), 1.0 / reps) / reps)
    return out


def operating_characteristics(s: Scenario, rules: Any, reps: int, n_worlds: int = 256,
                              seed: int = 0) -> dict[str, Any]:
    """Replicate one endpoint ``reps`` times through the registered readings.

    Returns the rates of: P2 and P3m detected (registered rule); either primary detected;
    either primary detected by the t rule alone (estimate > 0, enough worlds, Holm-adjusted
    t p-value below alpha); and each rate's binomial standard error.
    """
    from memtrials.studies.luck.analysis import endpoint_primaries

    rng = np.random.default_rng(seed)
    ids = [f"s{i:04d}" for i in range(n_worlds)]
    counts = {"P2": 0, "P3m": 0, "either": 0, "t_alone_either": 0, "P2_luck_carrying": 0}
    with gc_frozen():
        for _ in range(reps):
            readings, summ = endpoint_primaries(y_frame(simulate_y(n_worlds, s, rng), ids), rules)
            det = {p: readings[p].detected for p in ("P2", "P3m")}
            t_alone = [summ[p].n >= rules.min_complete and summ[p].estimate > 0
                       and readings[p].p_t_holm < rules.alpha for p in ("P2", "P3m")]
            counts["P2"] += det["P2"]
            counts["P3m"] += det["P3m"]
            counts["either"] += det["P2"] or det["P3m"]
            counts["t_alone_either"] += any(t_alone)
            counts["P2_luck_carrying"] += readings["P2"].word == "luck-carrying"
    return _rates(s, reps, n_worlds, counts)


def detection_rates(s: Scenario, rules: Any, reps: int, n_worlds: int = 256,
                    seed: int = 0) -> dict[str, Any]:
    """The primaries' detection rates only (no qualifiers, bounds or words): the registered
    rule and the t rule alone, through the same summaries, Holm family and detection rule
    as the readings (:func:`memtrials.studies.luck.inference.read_primaries`), about five
    times faster than :func:`operating_characteristics`."""
    from memtrials.stats import holm
    from memtrials.studies.luck.contrasts import CONTRAST_BY_NAME
    from memtrials.studies.luck.inference import detected, summarize

    rng = np.random.default_rng(seed)
    coef = {}
    for p in ("P2", "P3m"):
        c = CONTRAST_BY_NAME[p]
        v = np.zeros(len(CELLS))
        for cell, k in c.terms:
            v[_COL[cell]] = k
        coef[p] = (v, c.support)
    counts = {"P2": 0, "P3m": 0, "either": 0, "t_alone_either": 0}
    with gc_frozen():
        for _ in range(reps):
            y = simulate_y(n_worlds, s, rng)
            summ = {}
            for p, (v, support) in coef.items():
                vals = y @ v
                summ[p] = summarize(vals[~np.isnan(vals)], support, rules)
            p_t = holm([summ[p].p_t for p in coef])
            p_bet = holm([summ[p].p_bet_pos for p in coef])
            det = [detected(summ[p], p_t[i], p_bet[i], rules) for i, p in enumerate(coef)]
            t_alone = [summ[p].n >= rules.min_complete and summ[p].estimate > 0 and p_t[i] < rules.alpha
                       for i, p in enumerate(coef)]
            counts["P2"] += det[0]
            counts["P3m"] += det[1]
            counts["either"] += any(det)
            counts["t_alone_either"] += any(t_alone)
    return _rates(s, reps, n_worlds, counts)


# the scenarios of docs/luck.md's operating-characteristics table (name, scenario, paper's figure)
DOC_SCENARIOS = (
    ("P2 = 0.10, discordance 0.02", Scenario(discordance=0.02, p2=0.10), "P2 96.8 %"),
    ("P2 = 0.10, discordance 0.10", Scenario(discordance=0.10, p2=0.10), "P2 56.3 %"),
    ("null, discordance 0.02", Scenario(discordance=0.02), "≤ 0.6 %"),
    ("null, discordance 0.10", Scenario(discordance=0.10), "≤ 0.6 %"),
    ("null, shared states 10 %, discordance 0.02", Scenario(discordance=0.02, shared=0.10), "≤ 0.6 %"),
    ("null, shared states 30 %, discordance 0.10", Scenario(discordance=0.10, shared=0.30), "≤ 0.6 %"),
    ("null, heterogeneous world means", Scenario(discordance=0.0, hetero_share=0.25, hetero_rate=0.04),
     "≤ 0.6 %; t alone 10.6 %"),
    ("null, heterogeneous + discordance 0.02",
     Scenario(discordance=0.02, hetero_share=0.25, hetero_rate=0.04), "≤ 0.6 %"),
)


def main(argv: list[str] | None = None) -> int:
    """Print the operating-characteristics table of docs/luck.md (registered thresholds)."""
    import argparse

    from memtrials.studies.luck.inference import REGISTERED_RULES

    ap = argparse.ArgumentParser(prog="python -m memtrials.studies.luck.simulate", description=main.__doc__)
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args(argv)
    print("| scenario | P2 detected (%) | P3m detected (%) | either detected (%) | t rule alone, either (%) "
          "| registered (paper) |\n|---|---|---|---|---|---|")
    for name, s, paper in DOC_SCENARIOS:
        a = detection_rates(s, REGISTERED_RULES, args.reps, seed=args.seed)
        print(f"| {name} | {100 * a['P2']:.1f} | {100 * a['P3m']:.1f} | {100 * a['either']:.2f} ± "
              f"{100 * a['either_se']:.2f} | {100 * a['t_alone_either']:.2f} ± {100 * a['t_alone_either_se']:.2f} "
              f"| {paper} |")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
