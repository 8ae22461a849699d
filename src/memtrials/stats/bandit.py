"""A contextual bandit over a few arms by nearest neighbours in an outcome log (pure numpy).

The anti-persistence paper's mode selector (its "Mode choice" paragraph; the arms there
are the synthesis modes none / imitation / strategic / corrective), written generically:
it receives context vectors as arrays and never calls a model.  Its state is the
**outcome log**, plain JSON (one entry per finished episode, in stream order: arm, raw
success, extra calls, cost-adjusted reward, round, a caller's key and fields), so it
snapshots with the memory that owns it.

Rule of :meth:`KNNBandit.choose` for one task with context vector ``q`` (settings in
brackets, the paper's defaults):

1. **Rotation.** While ``round < rotate_rounds`` [3] the arm is
   ``arms[(position + round) % len(arms)]`` (``position``: the task's index within its
   round), so every round cycles through all arms and a task met again in the next round
   takes the next arm.  Propensity 1.
2. **Exploration.** Otherwise, with probability ``epsilon`` [0.1] a uniformly random arm.
3. **Neighbours.** Otherwise the ``neighbours`` [10] log entries nearest to ``q`` by
   cosine (ties: the newer entry first).  If their mean cosine is below ``min_cosine``
   [0.7] the neighbourhood is a weak match and each arm is scored by its **global**
   decayed mean reward over the whole log (the global best mode, no bonus).  Otherwise
   each arm ``a`` is scored ``Q_a + bonus / sqrt(1 + n_a)`` [bonus 0.5], where
   ``n_a = sum gamma**age`` over the neighbours that took ``a`` and ``Q_a`` is their
   ``gamma**age``-weighted mean reward; an arm absent from the neighbourhood has
   ``n_a = 0`` and ``Q_a`` = its global decayed mean (so it keeps the full bonus and is
   retried when the neighbourhood's arms are not clearly better).  An arm never tried
   anywhere scores ``+inf`` (tried first).  The highest score wins.

Choices the paper leaves open, made here (docs/antipersist.md, "Selector"):

- **Age counts log entries (episodes), not rounds**: the newest entry has age 0, the one
  before it age 1, and so on (``gamma = 0.998`` then halves a weight in about 350
  episodes, seven rounds of 50).  Entries are appended in stream order.
- **Bonus** ``bonus / sqrt(1 + n_a)`` on decayed counts (above); no confidence bound is
  claimed (the paper claims none either).
- **Ties** between arms' scores (within 1e-12) are broken uniformly at random; the random
  draws of one choice come from a generator seeded by ``(seed, key)`` (SHA-256), so a
  choice is a pure function of the log, the vectors, the key and the settings, whatever
  order concurrent episodes run in.
- **Empty log** after the rotation: a uniformly random arm (reason ``empty``).

:class:`FixedPolicy` (one arm always) and :class:`UniformPolicy` (a uniformly random arm,
no rotation) are the ablations; all three share the outcome log and :meth:`record`.
:func:`make_selector` builds any of them from a settings mapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from memtrials.seeds import seed64

__all__ = ["Choice", "FixedPolicy", "KNNBandit", "OutcomeLog", "UniformPolicy", "make_selector", "reward"]

TIE = 1e-12


def reward(success: bool | float, extra_calls: int, lam: float) -> float:
    """Cost-adjusted reward: ``clip(success - lam * extra_calls, -1, 1)``."""
    return float(np.clip(float(success) - lam * int(extra_calls), -1.0, 1.0))


def rng_for(seed: int, key: str) -> np.random.Generator:
    """The generator of one choice: seeded by SHA-256 of ``seed`` and ``key``."""
    return np.random.default_rng(seed64(int(seed), key, sep="\x1f"))


def _unit(x: Any) -> np.ndarray:
    v = np.asarray(x, dtype=np.float64)
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n == 0, 1.0, n)


@dataclass(frozen=True)
class Choice:
    """One choice: the arm, why (``rotation`` | ``explore`` | ``neighbours`` | ``fallback`` |
    ``empty`` | ``fixed`` | ``uniform``), its probability under the rule given the log
    (``propensity``), and what the greedy step saw."""

    arm: str
    reason: str
    propensity: float
    mean_cosine: float | None = None
    neighbours: tuple[int, ...] = ()
    scores: Mapping[str, float] = field(default_factory=dict)

    def data(self) -> dict[str, Any]:
        """As plain JSON data (an infinite score is written as the string ``"inf"``)."""
        return {"arm": self.arm, "reason": self.reason, "propensity": round(self.propensity, 12),
                "mean_cosine": None if self.mean_cosine is None else round(self.mean_cosine, 6),
                "neighbours": list(self.neighbours),
                "scores": {a: (round(s, 6) if math.isfinite(s) else str(s)) for a, s in self.scores.items()}}


class OutcomeLog:
    """The outcome log and the reward rule that every policy here shares."""

    kind = "outcome_log"
    policy = "log"

    def __init__(self, arms: Sequence[str], *, lam: float = 0.05, seed: int = 0) -> None:
        arms = tuple(str(a) for a in arms)
        if not arms or len(set(arms)) != len(arms):
            raise ValueError(f"selector: arms must be distinct and non-empty, got {list(arms)}")
        if not lam >= 0:
            raise ValueError(f"selector.lam must be >= 0 (the cost of one extra call), got {lam}")
        self.arms, self.lam, self.seed = arms, float(lam), int(seed)
        self.log: list[dict[str, Any]] = []

    def reward(self, success: bool | float, extra_calls: int) -> float:
        return reward(success, extra_calls, self.lam)

    def record(self, arm: str, success: bool, extra_calls: int, *, key: str, round: int | None = None,
               **extra: Any) -> dict[str, Any]:
        """Append one outcome (``extra``: more plain-JSON fields the caller keeps); return it."""
        if arm not in self.arms:
            raise ValueError(f"selector: unknown arm {arm!r}; arms are {list(self.arms)}")
        entry = {**extra, "key": str(key), "arm": arm, "success": bool(success), "extra_calls": int(extra_calls),
                 "reward": self.reward(success, extra_calls), "round": round}
        self.log.append(entry)
        return entry

    def settings(self) -> dict[str, Any]:
        return {"policy": self.policy, "arms": list(self.arms), "lam": self.lam, "seed": self.seed}

    def state(self) -> dict[str, Any]:
        return {"settings": self.settings(), "log": [dict(e) for e in self.log]}

    def load(self, state: Mapping[str, Any]) -> None:
        """Adopt a state's outcome log (this selector's settings are kept)."""
        self.log = [dict(e) for e in state["log"]]

    def shares(self) -> dict[str, float]:
        """Fraction of the log's entries that took each arm."""
        n = len(self.log)
        return {a: (sum(e["arm"] == a for e in self.log) / n if n else 0.0) for a in self.arms}


class FixedPolicy(OutcomeLog):
    """Always ``arm`` (the fixed-mode ablation)."""

    policy = "fixed"

    def __init__(self, arms: Sequence[str], arm: str, *, lam: float = 0.05, seed: int = 0) -> None:
        super().__init__(arms, lam=lam, seed=seed)
        if arm not in self.arms:
            raise ValueError(f"selector.arm: {arm!r} is not one of the arms {list(self.arms)}")
        self.arm = arm

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "arm": self.arm}

    def choose(self, query: Any, vectors: Any, *, key: str, round: int | None = None,
               position: int | None = None) -> Choice:
        return Choice(self.arm, "fixed", 1.0)


class UniformPolicy(OutcomeLog):
    """A uniformly random arm for every task, no rotation (the random-choice ablation)."""

    policy = "uniform"

    def choose(self, query: Any, vectors: Any, *, key: str, round: int | None = None,
               position: int | None = None) -> Choice:
        rng = rng_for(self.seed, key)
        return Choice(self.arms[int(rng.integers(len(self.arms)))], "uniform", 1.0 / len(self.arms))


class KNNBandit(OutcomeLog):
    """The rule of the module docstring."""

    policy = "bandit"

    def __init__(self, arms: Sequence[str], *, lam: float = 0.05, gamma: float = 0.998, neighbours: int = 10,
                 bonus: float = 0.5, min_cosine: float = 0.7, rotate_rounds: int = 3, epsilon: float = 0.1,
                 seed: int = 0) -> None:
        super().__init__(arms, lam=lam, seed=seed)
        checks = {"gamma": 0.0 < gamma <= 1.0, "neighbours": int(neighbours) >= 1 and neighbours == int(neighbours),
                  "bonus": bonus >= 0.0, "min_cosine": -1.0 <= min_cosine <= 1.0,
                  "rotate_rounds": int(rotate_rounds) >= 0 and rotate_rounds == int(rotate_rounds),
                  "epsilon": 0.0 <= epsilon <= 1.0}
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            got = {"gamma": gamma, "neighbours": neighbours, "bonus": bonus, "min_cosine": min_cosine,
                   "rotate_rounds": rotate_rounds, "epsilon": epsilon}
            want = {"gamma": "in (0, 1]", "neighbours": "an integer >= 1", "bonus": ">= 0",
                    "min_cosine": "in [-1, 1]", "rotate_rounds": "an integer >= 0", "epsilon": "in [0, 1]"}
            raise ValueError("selector: " + "; ".join(f"{k} must be {want[k]}, got {got[k]!r}" for k in bad))
        self.gamma, self.neighbours, self.bonus = float(gamma), int(neighbours), float(bonus)
        self.min_cosine, self.rotate_rounds, self.epsilon = float(min_cosine), int(rotate_rounds), float(epsilon)

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "gamma": self.gamma, "neighbours": self.neighbours, "bonus": self.bonus,
                "min_cosine": self.min_cosine, "rotate_rounds": self.rotate_rounds, "epsilon": self.epsilon}

    # -- the greedy step -------------------------------------------------------
    def weights(self) -> np.ndarray:
        """``gamma ** age`` of every log entry (the newest has age 0)."""
        n = len(self.log)
        return self.gamma ** np.arange(n - 1, -1, -1, dtype=np.float64)

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Arm index, reward and ``gamma ** age`` of every log entry."""
        col = {a: k for k, a in enumerate(self.arms)}
        arm = np.array([col[e["arm"]] for e in self.log], dtype=np.int64)
        rew = np.array([e["reward"] for e in self.log], dtype=np.float64)
        return arm, rew, self.weights()

    def global_means(self) -> dict[str, float]:
        """Each arm's decayed mean reward over the whole log (``nan`` for an arm never tried)."""
        arm, rew, w = self._arrays()
        n = np.bincount(arm, weights=w, minlength=len(self.arms))
        s = np.bincount(arm, weights=w * rew, minlength=len(self.arms))
        return {a: (float(s[k] / n[k]) if n[k] > 0 else math.nan) for k, a in enumerate(self.arms)}

    def nearest(self, query: Any, vectors: Any) -> tuple[list[int], list[float]]:
        """Indices of the nearest log entries (cosine, newer first on ties) and their cosines."""
        v = _unit(vectors).reshape(len(self.log), -1)
        sims = np.round(v @ _unit(query), 12)
        order = np.lexsort((-np.arange(len(sims)), -sims))[:self.neighbours].tolist()
        return order, [float(sims[i]) for i in order]

    def scores(self, query: Any, vectors: Any) -> tuple[str, dict[str, float], list[int], float]:
        """The greedy step: (``neighbours`` | ``fallback``, arm scores, neighbour indices, mean cosine)."""
        glob = self.global_means()
        nb, sims = self.nearest(query, vectors)
        mean_cos = float(np.mean(sims))
        untried = {a: math.inf for a in self.arms if math.isnan(glob[a])}
        if mean_cos < self.min_cosine:
            return "fallback", {a: untried.get(a, glob[a]) for a in self.arms}, nb, mean_cos
        arm, rew, w = self._arrays()
        idx = np.array(nb, dtype=np.int64)
        n = np.bincount(arm[idx], weights=w[idx], minlength=len(self.arms))
        s = np.bincount(arm[idx], weights=w[idx] * rew[idx], minlength=len(self.arms))
        out = {}
        for k, a in enumerate(self.arms):
            q = float(s[k] / n[k]) if n[k] > 0 else glob[a]
            out[a] = untried.get(a, q + self.bonus / math.sqrt(1.0 + float(n[k])))
        return "neighbours", out, nb, mean_cos

    def choose(self, query: Any, vectors: Any, *, key: str, round: int | None = None,
               position: int | None = None) -> Choice:
        """The arm for one task (module docstring).  ``vectors``: one context vector per log
        entry, in log order; ``round`` / ``position``: the task's round (0-based) and index in
        it (``None``: past the rotation, e.g. a held-out evaluation)."""
        n = len(self.arms)
        if round is not None and round < self.rotate_rounds:
            if position is None:
                raise ValueError(f"selector: round {round} is a rotation round; its choice needs the task's position")
            return Choice(self.arms[(int(position) + int(round)) % n], "rotation", 1.0)
        vectors = np.asarray(vectors, dtype=np.float64)
        if len(vectors) != len(self.log):
            raise ValueError(f"selector: {len(vectors)} context vectors for {len(self.log)} log entries "
                             "(one vector per entry, in log order)")
        rng = rng_for(self.seed, key)
        u, explore_arm, tie_draw = rng.random(), int(rng.integers(n)), rng.random()
        if not self.log:
            return Choice(self.arms[explore_arm], "empty", 1.0 / n)
        how, scores, nb, mean_cos = self.scores(query, vectors)
        best = max(scores.values())
        ties = [a for a in self.arms if scores[a] >= best - TIE]
        greedy = ties[min(int(tie_draw * len(ties)), len(ties) - 1)]
        arm, reason = (self.arms[explore_arm], "explore") if u < self.epsilon else (greedy, how)
        prop = self.epsilon / n + (1.0 - self.epsilon) * (arm in ties) / len(ties)
        return Choice(arm, reason, prop, mean_cos, tuple(nb), scores)


POLICIES = {"bandit": KNNBandit, "fixed": FixedPolicy, "uniform": UniformPolicy}
_KEYS = {"bandit": {"lam", "gamma", "neighbours", "bonus", "min_cosine", "rotate_rounds", "epsilon", "seed"},
         "fixed": {"arm", "lam", "seed"}, "uniform": {"lam", "seed"}}


def make_selector(settings: Mapping[str, Any], arms: Sequence[str], where: str = "selector") -> OutcomeLog:
    """A policy from settings: ``{"policy": "bandit" | "fixed" | "uniform", ...}`` (``policy``
    defaults to ``bandit``; ``fixed`` needs ``arm``; other keys are the constructors' keywords).
    ``where`` names the settings in error messages (e.g. a config key)."""
    s = dict(settings)
    policy = s.pop("policy", "bandit")
    s.pop("arms", None)
    if policy not in POLICIES:
        raise ValueError(f"{where}.policy: unknown policy {policy!r}; expected one of {sorted(POLICIES)}")
    unknown = sorted(set(s) - _KEYS[policy])
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown} for policy {policy!r}; allowed: {sorted(_KEYS[policy])}")
    if policy == "fixed" and "arm" not in s:
        raise ValueError(f"{where}.arm: the fixed policy needs the arm it always takes (one of {list(arms)})")
    return POLICIES[policy](arms, **s)
