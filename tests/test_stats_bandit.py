"""The kNN contextual bandit over synthesis modes (memtrials.stats.bandit), by simulation:
planted clusters with a different best mode each are learnt, the rotation and the 0.1
exploration share hold, decay follows a change of the best mode, a null does not lock in;
plus the rule's pieces on hand-built logs (scores, fallback, ties, decay by episodes)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from memtrials.stats.bandit import FixedPolicy, KNNBandit, UniformPolicy, make_selector, reward

ARMS = ("none", "imitation", "strategic", "corrective")
COST = {"none": 0, "imitation": 1, "strategic": 1, "corrective": 1}
D = 16


def tasks(rng, per, clusters, noise=0.25):
    """``per`` task vectors round-robin over ``clusters`` orthogonal centres (within-cluster cosine ~0.97)."""
    centres = np.linalg.qr(rng.normal(size=(D, D)))[0][:clusters]
    return [(j % clusters, centres[j % clusters] + noise * rng.normal(size=D) / np.sqrt(D)) for j in range(per)]


def simulate(success, seed, *, rounds=10, per=40, clusters=2, lam=0.05, **kw):
    """A training stream: ``per`` tasks a round, each chosen then recorded in turn (B = 1).
    ``success(round, cluster, arm)`` is the planted success probability.  Returns
    (round, position, cluster, arm, reason) rows and the bandit."""
    rng = np.random.default_rng(seed)
    ts = tasks(rng, per, clusters)
    b = KNNBandit(ARMS, lam=lam, seed=seed, **kw)
    vecs, rows = [], []
    for r in range(rounds):
        for j, (c, v) in enumerate(ts):
            key = f"r{r}/t{j}"
            ch = b.choose(v, np.array(vecs).reshape(len(vecs), D), key=key, round=r, position=j)
            won = bool(rng.random() < success(r, c, ch.arm))
            b.record(ch.arm, won, COST[ch.arm], key=key, round=r)
            vecs.append(v)
            rows.append((r, j, c, ch.arm, ch.reason))
    return rows, b


def shares(rows, rounds, cluster=None):
    sel = [x for x in rows if x[0] in rounds and (cluster is None or x[2] == cluster)]
    return {a: sum(x[3] == a for x in sel) / len(sel) for a in ARMS}


def test_reward_is_success_minus_lambda_times_extra_calls_clipped():
    assert reward(True, 0, 0.05) == 1.0 and reward(True, 1, 0.05) == pytest.approx(0.95)
    assert reward(False, 1, 0.05) == pytest.approx(-0.05) and reward(False, 0, 0.05) == 0.0
    assert reward(False, 30, 0.05) == -1.0 and reward(True, 3, 0.5) == -0.5 and reward(False, 5, 0.5) == -1.0
    b = KNNBandit(ARMS)
    e = b.record("strategic", True, 1, key="e1", round=0, task_id="t1")
    assert e == {"task_id": "t1", "key": "e1", "arm": "strategic", "success": True, "extra_calls": 1,
                 "reward": pytest.approx(0.95), "round": 0}


def test_the_first_three_rounds_rotate_through_every_mode():
    b = KNNBandit(ARMS)
    per = 50
    for r in range(3):
        got = [b.choose(None, np.zeros((0, D)), key=f"{r}/{j}", round=r, position=j) for j in range(per)]
        assert [c.arm for c in got] == [ARMS[(j + r) % 4] for j in range(per)]
        assert {c.reason for c in got} == {"rotation"} and {c.propensity for c in got} == {1.0}
        counts = [sum(c.arm == a for c in got) for a in ARMS]
        assert max(counts) - min(counts) <= 1  # balanced within a round
    # a task met in each rotation round takes three different modes
    assert len({ARMS[(7 + r) % 4] for r in range(3)}) == 3
    with pytest.raises(ValueError, match="needs the task's position"):
        b.choose(None, np.zeros((0, D)), key="x", round=1)
    # past the rotation (round 3, or no round: an evaluation) the rule takes over
    b.record("none", True, 0, key="a", round=0)
    assert b.choose(np.ones(D), np.ones((1, D)), key="y", round=3, position=0).reason != "rotation"
    assert b.choose(np.ones(D), np.ones((1, D)), key="y").reason != "rotation"


def test_exploration_takes_a_uniform_random_mode_one_time_in_ten():
    rng = np.random.default_rng(0)
    b = KNNBandit(ARMS, seed=3)
    vecs = rng.normal(size=(40, D))
    for i in range(40):  # a log where "strategic" is clearly best
        arm = ARMS[i % 4]
        b.record(arm, arm == "strategic", COST[arm], key=f"l{i}", round=i // 20)
    n = 4000
    picks = [b.choose(vecs[i % 40] + 0.01 * rng.normal(size=D), vecs, key=f"q{i}", round=5) for i in range(n)]
    explore = [c for c in picks if c.reason == "explore"]
    sd = math.sqrt(0.1 * 0.9 / n)
    assert abs(len(explore) / n - 0.1) < 4 * sd
    per_arm = [sum(c.arm == a for c in explore) / len(explore) for a in ARMS]
    assert max(abs(s - 0.25) for s in per_arm) < 4 * math.sqrt(0.25 * 0.75 / len(explore))
    # the greedy choices go to the best arm; its propensity is 0.9 + 0.1 / 4
    greedy = [c for c in picks if c.reason != "explore"]  # random contexts: weak neighbourhoods, the global best
    assert {c.reason for c in greedy} == {"fallback"} and {c.arm for c in greedy} == {"strategic"}
    assert greedy[0].propensity == pytest.approx(0.925)
    assert KNNBandit(ARMS, epsilon=0.0).epsilon == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_it_learns_each_clusters_best_mode(seed):
    best = {0: "strategic", 1: "imitation"}
    rows, b = simulate(lambda r, c, a: 0.8 if a == best[c] else 0.3, seed)
    for c in (0, 1):
        s = shares(rows, range(3, 10), c)
        assert max(s, key=s.get) == best[c], (c, s)
        assert s[best[c]] > 0.45, (c, s)
        late = shares(rows, range(7, 10), c)
        assert max(late, key=late.get) == best[c], (c, late)
    assert len(b.log) == 400 and json.loads(json.dumps(b.state())) == b.state()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_null_does_not_lock_onto_one_mode(seed):
    """All modes equal (success 0.5, no call cost): after the rotation no mode takes more
    than 40 % of the choices (the planted best takes over 45 %, above), and every mode keeps
    being tried greedily, not only by the 10 % exploration."""
    rows, b = simulate(lambda r, c, a: 0.5, seed, lam=0.0)
    s = shares(rows, range(3, 10))
    assert max(s.values()) < 0.40, s
    greedy = [x for x in rows if x[0] >= 3 and x[4] == "neighbours"]
    assert {x[3] for x in greedy} == set(ARMS)
    assert min(sum(x[3] == a for x in greedy) for a in ARMS) / len(greedy) > 0.10


def test_decay_follows_a_change_of_the_best_mode():
    """Strategic is best for five rounds, then imitation (strategic still fair): with decay
    the new best is chosen far more often in the last rounds than without decay."""
    before = {"none": 0.3, "imitation": 0.1, "strategic": 0.9, "corrective": 0.3}
    after = {"none": 0.3, "imitation": 0.95, "strategic": 0.55, "corrective": 0.3}

    def late_share(gamma):
        out = []
        for seed in range(5):
            rows, _ = simulate(lambda r, c, a: (before if r < 5 else after)[a], seed, rounds=9, clusters=1,
                               gamma=gamma)
            out.append(shares(rows, (7, 8))["imitation"])
        return float(np.mean(out))

    decayed, flat = late_share(0.98), late_share(1.0)
    assert decayed > flat + 0.08, (decayed, flat)
    assert decayed > 0.2  # before the change imitation was taken only by exploration (~0.025)


def test_scores_on_a_hand_built_log():
    """Decayed means plus 0.5 / sqrt(1 + decayed count) among the neighbours; an arm absent
    from the neighbourhood scores its global decayed mean plus the full bonus; an arm never
    tried scores +inf; age counts log entries (the newest has age 0)."""
    g = 0.9
    b = KNNBandit(ARMS[:3] + ("corrective",), gamma=g, neighbours=3, min_cosine=0.5)
    e = np.eye(D)
    log = [("imitation", True, e[1]), ("strategic", False, e[0]), ("strategic", True, e[0]),
           ("imitation", False, e[0]), ("none", True, e[2])]
    for i, (arm, won, _) in enumerate(log):
        b.record(arm, won, COST[arm], key=f"k{i}", round=0)
    vecs = np.array([v for _, _, v in log])
    np.testing.assert_allclose(b.weights(), [g ** 4, g ** 3, g ** 2, g, 1.0])
    how, scores, nb, mean_cos = b.scores(e[0], vecs)
    assert how == "neighbours" and nb == [3, 2, 1] and mean_cos == pytest.approx(1.0)  # ties: newer first
    w1, w2, w3 = g ** 3, g ** 2, g
    q_str = (w1 * -0.05 + w2 * 0.95) / (w1 + w2)
    assert scores["strategic"] == pytest.approx(q_str + 0.5 / math.sqrt(1 + w1 + w2))
    assert scores["imitation"] == pytest.approx(-0.05 + 0.5 / math.sqrt(1 + w3))
    assert scores["none"] == pytest.approx(1.0 + 0.5)  # absent here: its global mean, full bonus
    assert scores["corrective"] == math.inf  # never tried
    assert b.global_means()["imitation"] == pytest.approx((g ** 4 * 0.95 + g * -0.05) / (g ** 4 + g))
    ch = b.choose(e[0], vecs, key="q", round=9)
    assert ch.arm == "corrective" or ch.reason == "explore"
    assert json.loads(json.dumps(ch.data()))["scores"]["corrective"] == "inf"


def test_a_weak_neighbourhood_falls_back_to_the_global_best_mode():
    e = np.eye(D)
    b = KNNBandit(ARMS, epsilon=0.0, neighbours=3)
    for i, arm in enumerate(ARMS * 3):  # imitation always succeeds, everything else fails
        b.record(arm, arm == "imitation", COST[arm], key=f"k{i}", round=0)
    vecs = np.array([e[i % 4] for i in range(12)])
    # a strong neighbourhood (the three "none" entries, cosine 1): "none" scores its mean
    # (0) plus a small bonus; imitation, absent here, its global mean plus the full bonus
    ch = b.choose(e[0], vecs, key="near", round=4)
    assert ch.reason == "neighbours" and ch.mean_cosine == pytest.approx(1.0) and set(ch.neighbours) == {0, 4, 8}
    n_none = sum(0.998 ** (11 - i) for i in (0, 4, 8))
    assert ch.scores["none"] == pytest.approx(0.5 / math.sqrt(1 + n_none))
    assert ch.scores["imitation"] == pytest.approx(0.95 + 0.5) and ch.arm == "imitation"
    # orthogonal to every entry (mean cosine 0 < 0.7): the global best mode, no bonus
    weak = b.choose(e[5], vecs, key="far", round=4)
    assert weak.reason == "fallback" and weak.arm == "imitation" and weak.mean_cosine == pytest.approx(0.0)
    assert weak.scores == pytest.approx({"none": 0.0, "imitation": 0.95, "strategic": -0.05, "corrective": -0.05})
    # ten neighbours of e[0]: three at cosine 1, seven at 0 (mean 0.3): also a fallback
    wide = KNNBandit(ARMS, epsilon=0.0)
    wide.load(b.state())
    w = wide.choose(e[0], vecs, key="near", round=4)
    assert w.reason == "fallback" and w.mean_cosine == pytest.approx(0.3) and len(w.neighbours) == 10
    # the threshold is a setting: at 0.2 the same neighbourhood is strong enough
    low = KNNBandit(ARMS, epsilon=0.0, min_cosine=0.2)
    low.load(b.state())
    assert low.choose(e[0], vecs, key="near", round=4).reason == "neighbours"


def test_ties_are_broken_at_random_and_choices_are_pure():
    b = KNNBandit(ARMS, epsilon=0.0, rotate_rounds=0, gamma=1.0)  # no decay: equal counts, equal bonuses
    e = np.eye(D)
    for i, arm in enumerate(ARMS):
        b.record(arm, True, 0, key=f"k{i}")  # every arm the same reward and count
    vecs = np.array([e[0]] * 4)
    picks = [b.choose(e[0], vecs, key=f"q{i}") for i in range(2000)]
    assert {c.reason for c in picks} == {"neighbours"} and {c.propensity for c in picks} == {0.25}
    counts = [sum(c.arm == a for c in picks) for a in ARMS]
    assert max(abs(n / 2000 - 0.25) for n in counts) < 4 * math.sqrt(0.25 * 0.75 / 2000)
    # a choice is a function of (log, vectors, key, settings): a reloaded copy agrees
    copy = KNNBandit(ARMS, epsilon=0.0, rotate_rounds=0, gamma=1.0)
    copy.load(json.loads(json.dumps(b.state())))
    assert [copy.choose(e[0], vecs, key=f"q{i}").arm for i in range(50)] == [c.arm for c in picks[:50]]
    assert KNNBandit(ARMS, epsilon=0.0, rotate_rounds=0, seed=1).state()["settings"]["seed"] == 1
    # an empty log after the rotation: uniformly random
    assert KNNBandit(ARMS).choose(e[0], np.zeros((0, D)), key="z", round=3).reason == "empty"
    with pytest.raises(ValueError, match="4 context vectors for 4 log entries|one vector per entry"):
        b.choose(e[0], vecs[:3], key="bad")


def test_ablation_policies_and_settings():
    fixed = make_selector({"policy": "fixed", "arm": "corrective"}, ARMS)
    assert isinstance(fixed, FixedPolicy)
    assert {fixed.choose(None, None, key=f"k{i}", round=0, position=i).arm for i in range(20)} == {"corrective"}
    uni = make_selector({"policy": "uniform", "seed": 2}, ARMS)
    assert isinstance(uni, UniformPolicy)
    picks = [uni.choose(None, None, key=f"k{i}", round=0, position=0) for i in range(2000)]
    assert {c.reason for c in picks} == {"uniform"}
    assert max(abs(sum(c.arm == a for c in picks) / 2000 - 0.25) for a in ARMS) < 0.04
    uni.record("none", True, 0, key="k0")
    assert uni.shares()["none"] == 1.0 and uni.state()["settings"]["policy"] == "uniform"
    bandit = make_selector({"gamma": 0.99, "lam": 0.2}, ARMS)
    assert isinstance(bandit, KNNBandit) and bandit.gamma == 0.99 and bandit.reward(True, 1) == pytest.approx(0.8)
    assert bandit.settings() == {"policy": "bandit", "arms": list(ARMS), "lam": 0.2, "seed": 0, "gamma": 0.99,
                                 "neighbours": 10, "bonus": 0.5, "min_cosine": 0.7, "rotate_rounds": 3,
                                 "epsilon": 0.1}
    with pytest.raises(ValueError, match=r"antipersist.selector: unknown key\(s\) \['gama'\]"):
        make_selector({"gama": 0.9}, ARMS, where="antipersist.selector")
    with pytest.raises(ValueError, match="selector.policy: unknown policy 'ucb'"):
        make_selector({"policy": "ucb"}, ARMS)
    with pytest.raises(ValueError, match="selector.arm: the fixed policy needs"):
        make_selector({"policy": "fixed"}, ARMS)
    with pytest.raises(ValueError, match="gamma must be in \\(0, 1\\], got 1.5; epsilon must be in"):
        KNNBandit(ARMS, gamma=1.5, epsilon=2)
    with pytest.raises(ValueError, match="unknown arm 'greedy'"):
        bandit.record("greedy", True, 0, key="x")
