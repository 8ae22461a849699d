"""Registered inference and reading words of the luck study (*Lessons from Luck*,
section 4, "Inference" and "Readings").

Per quantity: the mean of per-world values on complete worlds, the Student-t interval
with the degenerate rule on the quantity's support, the two-sided t-test p-value, and
two one-sided betting p-values (mean at most 0; mean at least the margin).  A primary
is *detected* if its estimate is positive, at least ``min_complete`` worlds are
complete, and the Holm-adjusted (family: the two primaries) t and betting p-values are
both below 0.05.  *Robustly positive*: t lower limit > 0 and betting p (mean <= 0) <=
0.025.  *Robustly below the margin*: t upper limit < margin and betting p (mean >=
margin) <= 0.025.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from memtrials.stats import betting_pvalue, holm, t_interval, t_test_pvalue


@dataclass(frozen=True)
class Rules:
    """The analysis constants of one run (``luck.analysis`` in the config, every key
    required there); :data:`REGISTERED_RULES` holds the paper's registered values."""

    level: float
    alpha: float
    robust_alpha: float
    margin: float
    bet: float
    min_complete: int
    panel_min_endpoints: int
    ceiling: float

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> "Rules":
        cfg = dict(cfg)
        known = set(cls.__dataclass_fields__)
        unknown, missing = set(cfg) - known, known - set(cfg)
        if unknown or missing:
            raise ValueError(f"luck.analysis: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}; "
                             f"every one of {sorted(known)} is required (see config/config.yaml)")
        return cls(**cfg)

    def differences(self) -> dict[str, dict[str, float]]:
        """The constants that differ from the registered ones (empty: registered thresholds)."""
        return {k: {"run": getattr(self, k), "registered": getattr(REGISTERED_RULES, k)}
                for k in self.__dataclass_fields__ if getattr(self, k) != getattr(REGISTERED_RULES, k)}

    @property
    def registered(self) -> bool:
        return not self.differences()

    def caption_note(self) -> str:
        """One sentence for every table's caption when the thresholds are not registered."""
        if self.registered:
            return ""
        diff = ", ".join(f"{k} = {v['run']:g} (registered {v['registered']:g})"
                         for k, v in self.differences().items())
        return (f"NOT the registered thresholds ({diff}): the reading words are this run's, "
                "not registered readings.")


# section 4 ("Inference", "Readings", "Panel averages"): the registered constants
REGISTERED_RULES = Rules(level=0.95, alpha=0.05, robust_alpha=0.025, margin=0.10, bet=0.75,
                         min_complete=200, panel_min_endpoints=6, ceiling=0.90)


@dataclass
class Summary:
    """Inference for one quantity at one unit (an endpoint or the panel)."""

    n: int
    estimate: float
    lo: float
    hi: float
    degenerate: bool
    p_t: float
    p_bet_pos: float  # H0: mean <= 0
    p_bet_below: float  # H0: mean >= margin
    robust_pos: bool
    robust_below: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(d.pop("extra"))
        return d


def summarize(values: np.ndarray, support: tuple[float, float], rules: Rules) -> Summary:
    """Inference on complete-case per-world values (NaNs must be removed by the caller)."""
    v = np.asarray(values, dtype=float)
    iv = t_interval(v, support, rules.level)
    if v.size == 0:
        return Summary(0, math.nan, math.nan, math.nan, False, math.nan, math.nan, math.nan, False, False)
    p_t = t_test_pvalue(v, 0.0)
    p_pos = betting_pvalue(v, support, 0.0, "greater", rules.bet)
    p_below = betting_pvalue(v, support, rules.margin, "less", rules.bet)
    return Summary(
        n=int(v.size), estimate=iv.estimate, lo=iv.lo, hi=iv.hi, degenerate=iv.degenerate,
        p_t=p_t, p_bet_pos=p_pos, p_bet_below=p_below,
        robust_pos=bool(iv.lo > 0 and p_pos <= rules.robust_alpha),
        robust_below=bool(iv.hi < rules.margin and p_below <= rules.robust_alpha),
    )


@dataclass
class Reading:
    """One primary contrast's registered word at one unit."""

    contrast: str
    word: str  # luck-carrying | outcome-dependent | bounded below 0.10 | unresolved | descriptive only
    detected: bool
    suffix: str  # "" or "complete cases; not robust to missing answers"
    ceiling: bool  # neutral arm's worse-tool rate in the adverse cell above the ceiling
    neutral_rate: float
    p_t_holm: float
    p_bet_holm: float
    bound_check: str  # passed | failed | not applicable

    def label(self) -> str:
        s = self.word + (f" ({self.suffix})" if self.suffix else "")
        return s + (" [adverse cell at ceiling]" if self.ceiling else "")


SUFFIX = "complete cases; not robust to missing answers"


def detected(s: Summary, p_t_holm: float, p_bet_holm: float, rules: Rules) -> bool:
    """The registered detection rule for one primary (Holm-adjusted p-values given)."""
    return bool(
        s.n >= rules.min_complete and s.estimate > 0
        and p_t_holm < rules.alpha and p_bet_holm < rules.alpha
    )


def read_primaries(
    prim: dict[str, Summary], quals: dict[str, tuple[Summary, Summary]],
    bound_prim: dict[str, tuple[Summary, Summary]], bound_quals: dict[str, tuple[Summary, Summary]],
    neutral_rates: dict[str, float], rules: Rules,
) -> dict[str, Reading]:
    """Readings of the two primaries at one unit.

    ``prim``: complete-case summaries of P2 and P3m; ``quals``: their qualifiers (A, L);
    ``bound_prim``: (lower-bound, upper-bound) summaries over all worlds;
    ``bound_quals``: the qualifiers' lower-bound summaries (A, L).
    """
    names = list(prim)
    p_t = holm([prim[n].p_t for n in names])
    p_bet = holm([prim[n].p_bet_pos for n in names])
    lb_t = holm([bound_prim[n][0].p_t for n in names])
    lb_bet = holm([bound_prim[n][0].p_bet_pos for n in names])
    out: dict[str, Reading] = {}
    for i, n in enumerate(names):
        s = prim[n]
        is_detected = detected(s, p_t[i], p_bet[i], rules)
        check = "not applicable"
        if s.n < rules.min_complete:
            word = "descriptive only"
        elif is_detected:
            a, l_ = quals[n]
            word = "luck-carrying" if (a.robust_pos and l_.robust_pos) else "outcome-dependent"
            lower = bound_prim[n][0]
            ok = detected(lower, lb_t[i], lb_bet[i], rules)
            if word == "luck-carrying":
                qa, ql = bound_quals[n]
                ok = ok and qa.robust_pos and ql.robust_pos
            check = "passed" if ok else "failed"
        elif s.robust_below:
            word = "bounded below 0.10" if math.isclose(rules.margin, 0.10) else f"bounded below {rules.margin:g}"
            check = "passed" if bound_prim[n][1].robust_below else "failed"
        else:
            word = "unresolved"
        rate = neutral_rates.get(n, math.nan)
        out[n] = Reading(
            contrast=n, word=word, detected=is_detected, suffix=SUFFIX if check == "failed" else "",
            ceiling=bool(rate > rules.ceiling) if not math.isnan(rate) else False,
            neutral_rate=rate, p_t_holm=p_t[i], p_bet_holm=p_bet[i], bound_check=check,
        )
    return out
