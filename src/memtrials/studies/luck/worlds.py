"""World generator of the luck study (*Lessons from Luck*, section 3.1).

A world is a recurring task of one domain with two interchangeable tools that differ
only in recorded reliability.  Within a domain the better tool's listing position
(first/second) and the cue (explicit/implicit) are fully crossed, and the log length
(180, 240, 300 or 365 runs per tool) is rotated so that it is balanced with both.
Success rates are drawn uniformly from 0.80-0.93 (better) and 0.50-0.70 (worse) with a
gap of at least 0.15, counts are rounded, and the realised rates are checked again.

Acceptance rule, with a uniform Beta(1, 1) prior on each tool's success probability:
the better tool's posterior mean after one more failure, ``(s_b + 1) / (n + 3)``, must
exceed the worse tool's after one more success, ``(s_w + 2) / (n + 3)``, by at least
``margin`` (registered 0.10), so the better tool stays better after any single
further outcome.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from memtrials.studies.luck.domains import DOMAINS, Domain
from memtrials.studies.luck.names import coin_name

LOG_LENGTHS = (180, 240, 300, 365)
BETTER_RANGE = (0.80, 0.93)
WORSE_RANGE = (0.50, 0.70)
MIN_GAP = 0.15
PRIOR = (1.0, 1.0)  # Beta(alpha, beta) prior of the acceptance rule

WORLD_COLUMNS = [
    "world_id", "index", "domain", "cue", "better_position", "n_runs",
    "better_tool", "worse_tool", "better_name", "worse_name",
    "better_successes", "worse_successes", "error_text", "seed",
]


@dataclass(frozen=True)
class World:
    """One world; tool names are ``{verb}_via_{coined}``; ``cue`` is explicit|implicit."""

    world_id: str
    index: int
    domain: str
    cue: str
    better_position: int  # 0: better tool listed first, 1: second
    n_runs: int
    better_tool: str
    worse_tool: str
    better_name: str
    worse_name: str
    better_successes: int
    worse_successes: int
    error_text: str  # the transient error of this world's failure runs
    seed: int

    @property
    def tools(self) -> tuple[str, str]:
        """The two tools in listing order."""
        if self.better_position == 0:
            return (self.better_tool, self.worse_tool)
        return (self.worse_tool, self.better_tool)

    def successes(self, tool: str) -> int:
        return self.better_successes if tool == self.better_tool else self.worse_successes

    def coined(self, tool: str) -> str:
        return self.better_name if tool == self.better_tool else self.worse_name


def posterior_mean(successes: int, runs: int, prior: tuple[float, float] = PRIOR) -> float:
    """Posterior mean success probability under a Beta prior."""
    a, b = prior
    return (successes + a) / (runs + a + b)


def acceptance_margin(better_successes: int, worse_successes: int, n_runs: int,
                      prior: tuple[float, float] = PRIOR) -> float:
    """Better tool after one more failure minus worse tool after one more success."""
    return (posterior_mean(better_successes, n_runs + 1, prior)
            - posterior_mean(worse_successes + 1, n_runs + 1, prior))


def _draw_counts(rng: np.random.Generator, n: int, margin: float) -> tuple[int, int]:
    for _ in range(10_000):
        pb = rng.uniform(*BETTER_RANGE)
        pw = rng.uniform(*WORSE_RANGE)
        sb, sw = int(round(pb * n)), int(round(pw * n))
        rb, rw = sb / n, sw / n
        if not (BETTER_RANGE[0] <= rb <= BETTER_RANGE[1] and WORSE_RANGE[0] <= rw <= WORSE_RANGE[1]):
            continue
        if rb - rw < MIN_GAP - 1e-12:
            continue
        if acceptance_margin(sb, sw, n) < margin:
            continue
        return sb, sw
    raise RuntimeError(f"no acceptable success counts for n={n}, margin={margin}")


def generate_worlds(seed: int, n_domains: int = 16, worlds_per_domain: int = 16,
                    margin: float = 0.10) -> list[World]:
    """Generate ``n_domains x worlds_per_domain`` worlds deterministically from ``seed``.

    ``worlds_per_domain`` must be a multiple of 4 so that position x cue is balanced
    within each domain.  World ids are :func:`world_id` (``lk-<seed digest>-NNNN``), in
    the order of :func:`interleave` (domains interleaved, none first by construction).
    """
    if not 1 <= n_domains <= len(DOMAINS):
        raise ValueError(f"luck.worlds.domains={n_domains}: must be between 1 and {len(DOMAINS)}")
    if worlds_per_domain < 4 or worlds_per_domain % 4:
        raise ValueError(
            f"luck.worlds.per_domain={worlds_per_domain}: must be a positive multiple of 4 "
            "(better position x cue are balanced within each domain)"
        )
    rng = np.random.default_rng(seed)
    domains: list[Domain] = [DOMAINS[i] for i in sorted(rng.permutation(len(DOMAINS))[:n_domains])]
    taken: set[str] = set()
    by_domain: list[list[dict]] = []
    for d_i, dom in enumerate(domains):
        text = dom.texts()
        design = []
        for k in range(worlds_per_domain):
            pos, cue = k % 2, ("explicit", "implicit")[(k // 2) % 2]
            n_runs = LOG_LENGTHS[(k // 4 + k + d_i) % len(LOG_LENGTHS)]
            design.append((pos, cue, n_runs))
        order = rng.permutation(worlds_per_domain)
        worlds_of_domain = []
        for k in order:
            pos, cue, n_runs = design[k]
            sb, sw = _draw_counts(rng, n_runs, margin)
            better = coin_name(rng, text, taken)
            taken.add(better)
            worse = coin_name(rng, text, taken, avoid_initial=better[0])
            taken.add(worse)
            err = dom.errors[int(rng.integers(len(dom.errors)))]
            worlds_of_domain.append(dict(
                domain=dom.key, cue=cue, better_position=pos, n_runs=n_runs,
                better_tool=f"{dom.verb}_via_{better}", worse_tool=f"{dom.verb}_via_{worse}",
                better_name=better, worse_name=worse,
                better_successes=sb, worse_successes=sw, error_text=err, seed=seed,
            ))
        by_domain.append(worlds_of_domain)
    return [World(world_id=world_id(seed, i), index=i, **fields)
            for i, fields in enumerate(interleave(by_domain, seed))]


def id_prefix(seed: int) -> str:
    """``lk-`` and the first 6 hex digits of the seed's SHA-256: our own id scheme, which
    cannot be mistaken for the paper's deposited worlds (``w20261009_NNNN``)."""
    return "lk-" + hashlib.sha256(f"luck-worlds:{int(seed)}".encode()).hexdigest()[:6]


def world_id(seed: int, index: int) -> str:
    return f"{id_prefix(seed)}-{index:04d}"


def interleave(by_domain: list[list[dict]], seed: int) -> list[dict]:
    """Id order: round r holds the r-th world of every domain, the domains in a fresh
    seeded order each round.  So any rule that takes "the first world in id order" meeting
    a condition (Appendix C's example selection) sees every domain within each run of
    ``n_domains`` ids and favours none (which domain leads a round is a seeded draw)."""
    rng = np.random.default_rng([int(seed), 0x1D5])
    out: list[dict] = []
    for r in range(max((len(ws) for ws in by_domain), default=0)):
        for d in rng.permutation(len(by_domain)):
            if r < len(by_domain[d]):
                out.append(by_domain[d][r])
    return out


def worlds_frame(worlds: list[World]) -> pd.DataFrame:
    """The worlds as a DataFrame with the stable column order :data:`WORLD_COLUMNS`."""
    return pd.DataFrame([asdict(w) for w in worlds], columns=WORLD_COLUMNS)


def worlds_from_frame(df: pd.DataFrame, source: str = "worlds table") -> list[World]:
    """Rebuild worlds from a table written by :func:`worlds_frame`."""
    missing = [c for c in WORLD_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{source}: missing columns {missing}; regenerate it with the luck_worlds rule")
    return [World(**{c: (int(r[c]) if c in ("index", "better_position", "n_runs",
                                            "better_successes", "worse_successes", "seed")
                         else str(r[c])) for c in WORLD_COLUMNS})
            for r in df.to_dict("records")]
