"""Generic statistics shared by the studies.

- :mod:`.intervals`: Student-t interval with the degenerate rule for constant samples,
  the two-sided t-test p-value, Wilson intervals for rates, Newcombe's interval for the
  difference of two rates.
- :mod:`.betting`: the fixed-bet test of a bounded mean (Waudby-Smith & Ramdas 2024;
  Shafer 2021), valid in finite samples for independent bounded values.
- :mod:`.multiplicity`: Holm's step-down adjustment (through statsmodels).
- :mod:`.paired`: exact McNemar test and paired bootstrap interval (paired by unit).
"""

from memtrials.lazy import lazy_names

# The names below load their module on first use (PEP 562), so that a module of this package
# imports only what it needs: the anti-persistence memory's bandit (.bandit) loads no SciPy,
# whose import costs a job about 0.7 CPU-s (py-spy on a fully cached rerun, 3 December).
_WHERE = {
    "betting_pvalue": "betting", "betting_wealth": "betting",
    "Interval": "intervals", "degenerate_interval": "intervals", "t_interval": "intervals",
    "t_test_pvalue": "intervals", "wilson_interval": "intervals", "rate_difference": "intervals",
    "holm": "multiplicity",
    "PairedDifference": "paired", "mcnemar_exact": "paired", "paired_bootstrap": "paired",
    "paired_difference": "paired",
}


__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
