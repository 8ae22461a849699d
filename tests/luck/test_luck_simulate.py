"""Operating characteristics of the registered analysis (section 4): the simulated
scenarios are the paper's (discordance between two cells, shared per-world states,
heterogeneous world means averaging 0 over worlds), and the registered rule keeps its
rates.  Replicate counts are small; tolerances are 3 binomial standard errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memtrials.studies.luck.contrasts import CONTRAST_BY_NAME, world_values
from memtrials.studies.luck.inference import REGISTERED_RULES
from memtrials.studies.luck.simulate import (
    CELLS, Scenario, detection_rates, operating_characteristics, simulate_y, y_frame,
)

IDS = [f"w{i}" for i in range(256)]


def se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("d", [0.02, 0.10])
def test_discordance_is_the_probability_that_two_cells_differ(d):
    y = simulate_y(20000, Scenario(discordance=d, shared=0.3), np.random.default_rng(1))
    i, j = np.random.default_rng(2).choice(len(CELLS), size=2, replace=False)
    differ = float(np.mean(y[:, i] != y[:, j]))
    assert abs(differ - d) < 4 * se(d, 20000)
    # a per-cell reading of the same number would make two cells differ about twice as often
    assert abs(differ - 2 * d * (1 - d)) > 4 * se(d, 20000)


def test_planted_effect_is_the_expected_contrast_even_with_shared_states():
    s = Scenario(discordance=0.10, shared=0.2, p2=0.10)
    y = y_frame(simulate_y(40000, s, np.random.default_rng(3)), [f"w{i}" for i in range(40000)])
    for name in ("P2", "A2", "L2"):
        v = world_values(y, CONTRAST_BY_NAME[name]).value
        assert abs(v.mean() - 0.10) < 4 * v.std() / math.sqrt(len(v)), name
    v = world_values(y, CONTRAST_BY_NAME["P3m"]).value
    assert abs(v.mean()) < 4 * v.std() / math.sqrt(len(v))


def test_heterogeneous_world_means_average_zero_over_worlds_but_not_within():
    """With the world types fixed, a negative world's expected P2 is -2 x rate and every
    other world's +2 x rate x n_neg / n_pos: never 0 within a world, 0 on average."""
    s = Scenario(discordance=0.0, hetero_share=0.25, hetero_rate=0.04)
    n, reps = 256, 300
    neg = np.zeros(n, bool)
    neg[::4] = True
    rng = np.random.default_rng(4)
    c = CONTRAST_BY_NAME["P2"]
    vals = np.array([world_values(y_frame(simulate_y(n, s, rng, negative=neg), IDS), c).value.to_numpy()
                     for _ in range(reps)])
    pos_rate = 2 * 64 * 0.04 / 192
    m_neg, m_pos = vals[:, neg].mean(), vals[:, ~neg].mean()
    assert abs(m_neg - (-2 * 0.04)) < 4 * 2 * se(0.04, reps * 64)
    assert abs(m_pos - pos_rate) < 4 * se(pos_rate, reps * 192)
    assert m_neg < 0 < m_pos
    assert abs(vals.mean()) < 4 * vals.std() / math.sqrt(vals.size)


def test_registered_detection_at_the_papers_scenarios():
    """P2 = 0.10 per endpoint: 96.8 % at discordance 0.02 and 56.3 % at 0.10 (registered).
    Ours: about 97.2 % and 60.3 % (3000 replicates; docs/luck.md): within 3 SE at 0.02 and
    within 5 points at 0.10, where the paper does not say how its planted effect meets the
    background.  Reading discordance as a per-cell rate gives about 91 % at 0.02 and far
    below 50 % at 0.10: outside both tolerances."""
    reps = 800
    for d, registered, slack in ((0.02, 0.968, 0.0), (0.10, 0.563, 0.05)):
        oc = detection_rates(Scenario(discordance=d, p2=0.10), REGISTERED_RULES, reps, seed=7)
        assert abs(oc["P2"] - registered) <= slack + 3 * se(registered, reps), (d, oc["P2"])
        assert oc["P3m"] <= 3 * se(0.006, reps)


def test_nulls_keep_the_registered_rule_and_the_t_rule_alone_does_not():
    """Every null: false detection of either primary at most 0.6 % (registered) within 3 SE.
    Heterogeneous null: the t rule alone rejects far more often than the registered rule,
    and more often than it does in a homogeneous null (the reason for the betting test):
    about 6 % against 0-0.2 % and 2 % here (the paper reports 10.6 % for its own scenario)."""
    reps = 1000
    rates = {}
    for name, sc in (("plain", Scenario(discordance=0.02)),
                     ("shared", Scenario(discordance=0.02, shared=0.10)),
                     ("hetero", Scenario(discordance=0.0, hetero_share=0.25, hetero_rate=0.04))):
        rates[name] = detection_rates(sc, REGISTERED_RULES, reps, seed=8)
        assert rates[name]["either"] <= 0.006 + 3 * se(0.006, reps), name
    h, plain = rates["hetero"], rates["plain"]
    assert h["t_alone_either"] > 2 * plain["t_alone_either"]
    assert h["t_alone_either"] > plain["t_alone_either"] + 3 * math.hypot(h["t_alone_either_se"],
                                                                          plain["t_alone_either_se"])
    assert h["t_alone_either"] > h["either"] + 3 * h["t_alone_either_se"]


@pytest.mark.parametrize("scenario", [Scenario(p2=0.10), Scenario(discordance=0.1, p2=0.05),
                                      Scenario(discordance=0.0, hetero_share=0.25, hetero_rate=0.04)])
def test_fast_rates_agree_with_the_readings_path(scenario):
    """detection_rates and operating_characteristics see the same draws and the same rule."""
    a = detection_rates(scenario, REGISTERED_RULES, 25, seed=11)
    b = operating_characteristics(scenario, REGISTERED_RULES, 25, seed=11)
    for k in ("P2", "P3m", "either", "t_alone_either"):
        assert a[k] == b[k], k
