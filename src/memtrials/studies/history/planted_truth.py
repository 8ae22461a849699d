"""The truth of the history study's planted runs, from the declared policy alone.

:mod:`memtrials.studies.history.planted` declares, per view class, the chance ``p_right`` of
the right action and, after a failure, the rate ``repeat`` of repeating it.  With the planted
world's tasks (:mod:`memtrials.envs.planted.world`: steps and actions per step, a function of
the task id) and the actor's budget of ``max_actions`` actions, every estimand the planted
tables report has a value computed here by exact enumeration of the policy's Markov chain,
never from runs:

* success of a condition on a task: the probability that the agent does all ``L`` steps
  within ``max_actions`` actions.  The state is (actions taken, steps done, the action that
  just failed, the history's action strings where a shuffle needs them).  What the prompt
  shows follows from the state: no history reads as Raw; ``recent3`` differs from Raw only
  with more than 3 entries; ``shuffle_all`` (``shuffle_old``) shows a uniformly drawn
  permutation of all (the older than the 3 latest) action strings, which the policy reads as
  shuffled exactly when some shown string moved, with probability ``1 - prod(m_i!) / N!``
  over the ``N`` permuted positions with string multiplicities ``m_i`` (the world's codes are
  distinct within a task, so strings of different steps differ).  The shuffles' truth assumes
  ``history.shuffle: per_step`` (a fresh uniform permutation at each prompt);
* a condition's success rate: the mean over the cell's tasks; its change from Raw: the
  difference of those means (the same tasks: paired);
* the repetition rate (a step right after a failed action repeats it): ``repeat.causal``
  under causal labels, ``repeat.base`` otherwise (each such step repeats with that chance).
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache
from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.envs.planted.world import make_task
from memtrials.studies.history.planted import VIEW_CLASSES

CONDITIONS: tuple[str, ...] = ("raw", "recent3", "obsonly", "shuffle_all", "shuffle_old", "causal",
                               "experience", "check")
"""The block-format conditions the planted policy is declared for."""
RECENT_K = 3


def _detect(strings: Sequence[Any]) -> float:
    """P(a uniform permutation of ``strings`` moves some string): 1 - prod(m_i!) / N!."""
    n = len(strings)
    if n < 2:
        return 0.0
    keep = math.prod(math.factorial(m) for m in Counter(strings).values())
    return 1.0 - keep / math.factorial(n)


def p_shown(condition: str, hist: tuple, p: Mapping[str, float]) -> float:
    """The chance of the right action at a prompt of ``condition`` after history ``hist``
    (a tuple of action strings, as ``(step, id)``; id -1 the right action)."""
    n = len(hist)
    if condition == "check":
        return p["check"]
    if n == 0 or condition == "raw":
        return p["raw"]
    if condition == "recent3":
        return p["recent3"] if n > RECENT_K else p["raw"]
    if condition in ("obsonly", "causal", "experience"):
        return p[condition]
    permuted = hist if condition == "shuffle_all" else hist[:-RECENT_K] if n > RECENT_K else ()
    q = _detect(permuted)
    return q * p["shuffled"] + (1 - q) * p["raw"]


def _canonical(condition: str, hist: tuple, k: int) -> tuple:
    """What of the history decides the rest of the chain (memo key): for ``shuffle_all`` the
    multiplicities of earlier steps' strings (they never recur) and the current step's counts."""
    if condition == "shuffle_all":
        counts = Counter(hist)
        done = tuple(sorted(c for s, c in counts.items() if s[0] < k))
        return done, tuple(sorted((s[1], c) for s, c in counts.items() if s[0] == k))
    if condition == "shuffle_old":
        return (tuple(sorted(hist[:-RECENT_K])), hist[-RECENT_K:])
    return ()


def success_probability(condition: str, actions_per_step: Sequence[int], max_actions: int,
                        p_right: Mapping[str, float], repeat: Mapping[str, float]) -> float:
    """P(won) of one task with ``actions_per_step`` admissible actions at each step."""
    return _success(condition, tuple(int(m) for m in actions_per_step), int(max_actions),
                    tuple(sorted(p_right.items())), tuple(sorted(repeat.items())))


@lru_cache(maxsize=4096)
def _success(condition: str, shape: tuple[int, ...], budget: int, p_items: tuple, r_items: tuple) -> float:
    p, r = dict(p_items), dict(r_items)
    if condition not in CONDITIONS:
        raise ValueError(f"planted truth: no declared effect for condition {condition!r}; known: {CONDITIONS}")
    rate = r["causal"] if condition == "causal" else r["base"]
    memo: dict[tuple, float] = {}

    def go(t: int, k: int, failed: int | None, hist: tuple) -> float:
        if k == len(shape):
            return 1.0
        if t == budget:
            return 0.0
        key = (t, k, failed, _canonical(condition, hist, k))
        if key in memo:
            return memo[key]
        pr = p_shown(condition, hist, p)
        wrong = [w for w in range(shape[k] - 1) if w != failed]
        total = 0.0
        if failed is not None:
            total += rate * go(t + 1, k, failed, hist + ((k, failed),))
            mass = 1.0 - rate
        else:
            mass = 1.0
        total += mass * pr * go(t + 1, k + 1, None, hist + ((k, -1),))
        for w in wrong:
            total += mass * (1 - pr) / len(wrong) * go(t + 1, k, w, hist + ((k, w),))
        memo[key] = total
        return total

    return go(0, 0, None, ())


def repetition_truth(condition: str, repeat: Mapping[str, float]) -> float:
    return float(repeat["causal"] if condition == "causal" else repeat["base"])


def truth_table(tasks: Sequence[str], conditions: Sequence[str], max_actions: int,
                p_right: Mapping[str, float], repeat: Mapping[str, float]) -> pd.DataFrame:
    """One row per (estimand, condition): ``success`` (mean over ``tasks``), ``change_vs_raw``
    (the difference from Raw's mean over the same tasks) and ``repetition``; column ``truth``."""
    missing = sorted(set(VIEW_CLASSES) - set(p_right))
    if missing:
        raise ValueError(f"planted truth: p_right lacks {missing}")
    shapes = [tuple(len(s.actions) for s in make_task(t).steps) for t in tasks]
    if not shapes:
        raise ValueError("planted truth: no tasks")
    succ = {c: sum(success_probability(c, s, max_actions, p_right, repeat) for s in shapes) / len(shapes)
            for c in set(conditions) | {"raw"}}
    rows = []
    for c in conditions:
        rows.append({"estimand": "success", "condition": c, "truth": succ[c]})
        if c != "raw":
            rows.append({"estimand": "change_vs_raw", "condition": c, "truth": succ[c] - succ["raw"]})
        rows.append({"estimand": "repetition", "condition": c, "truth": repetition_truth(c, repeat)})
    return pd.DataFrame(rows)
