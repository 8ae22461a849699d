"""Operating characteristics of the registered analysis (section 4): the simulated
scenarios are the paper's (discordance between two cells, shared per-world states,
heterogeneous world means averaging 0 over worlds), and the registered rule keeps its
rates.  Replicate counts are small; tolerances are 3 binomial standard errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hindsight.studies.luck.contrasts import CONTRAST_BY_NAME, world_values
from hindsight.studies.luck.inference import REGISTERED_RULES
from hindsight.studies.luck.simulate import CELLS, Scenario, operating_characteristics, simulate_y, y_frame

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
    """P2 = 0.10 per endpoint: 96.8 % at discordance 0.02 and 56.3 % at 0.10 (registered)."""
    reps = 60
    for d, registered in ((0.02, 0.968), (0.10, 0.563)):
        oc = operating_characteristics(Scenario(discordance=d, p2=0.10), REGISTERED_RULES, reps, seed=7)
        assert abs(oc["P2"] - registered) <= 3 * se(registered, reps) + 1 / reps, (d, oc["P2"])
        assert oc["P3m"] <= 3 * se(0.01, reps)


def test_nulls_keep_the_registered_rule_and_the_t_rule_alone_does_not():
    reps = 80
    shared = operating_characteristics(Scenario(discordance=0.02, shared=0.1), REGISTERED_RULES, reps, seed=8)
    assert shared["either"] <= 3 * se(0.01, reps)
    hetero = operating_characteristics(Scenario(discordance=0.0, hetero_share=0.25, hetero_rate=0.04),
                                       REGISTERED_RULES, reps, seed=9)
    assert hetero["either"] <= 3 * se(0.01, reps)
    # the reason for the betting test: the t rule alone rejects far more often here
    assert hetero["t_alone_either"] >= 0.087 - 3 * se(0.087, reps)
    assert hetero["t_alone_either"] > hetero["either"] + 2 * hetero["t_alone_either_se"]
