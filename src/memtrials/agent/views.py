"""History views: pure functions from a recorded history to what the actor sees.

*When History Fails to Become Experience* (arXiv:2610.02769), Table 1 (section 4),
section 5.1-5.2 and Appendix G.1.  A history is the list of completed entries
``(O_t, A_t)``, t = 1..n: ``A_t`` was chosen on observation ``O_t`` and returned
``O_{t+1}``; the current observation ``O_{n+1}`` is shown by the prompt, not here.

A view turns the entries into :class:`Item` s (labelled observation / action /
experience parts); :mod:`memtrials.agent.render` writes items as one history block
(the paper's main format) or as alternating user/assistant messages (Appendix F).

Views (names are the condition names of the study):

- ``raw``: every entry in order.
- ``recent3``: only the three latest entries (their original step numbers kept).
- ``obsonly``: every observation in order, no action strings.
- ``shuffle_all``: observations in order; the action strings reassigned among all
  positions by a seeded uniform permutation.
- ``shuffle_old``: the three latest entries intact; the older action strings
  reassigned among the older positions.
- ``causal``: labels ``Initial Observation 1`` then ``Outcome of Action t-1``.
- ``experience``: raw entries, each generated experience ``E_t`` beside its source
  transition ``A_t -> O_{t+1}`` (right after entry t).
- ``check``: raw entries (the reminder of Appendix D.1 is added by the prompt).

Shuffles are seeded per episode and drawn in one of two declared ways
(:data:`SHUFFLE_MODES`, config key ``history.shuffle``): ``per_step`` draws a fresh uniform
permutation at every prompt from ``(episode seed, history length)`` (:func:`permutation`);
``per_episode`` keeps one permutation per episode and extends it as the history grows
(:func:`growing_permutation`: each new entry swaps with one uniformly chosen position, so
every prompt still shows a uniform permutation and consecutive prompts differ in at most
two positions).  Either way the same episode seed always shows the same arrangements,
and the permutation is returned for the step record.

The reference block of a continuation (Appendix D.6) is :func:`reference`: its records
are numbered and labelled apart from the executed steps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from memtrials.seeds import seed64

VIEWS: tuple[str, ...] = (
    "raw", "recent3", "obsonly", "shuffle_all", "shuffle_old", "causal", "experience", "check",
)
RECENT_K = 3
SHUFFLE_MODES: tuple[str, ...] = ("per_step", "per_episode")
"""Entries kept intact by ``recent3`` and ``shuffle_old`` (Table 1)."""


@dataclass(frozen=True)
class Entry:
    """One completed history entry: ``action`` was chosen on ``observation``.

    ``experience`` is the experience derived from ``action`` -> its returned observation
    (the Experience condition), ``None`` when there is none (NOUPDATE, not reviewed).
    """

    observation: str
    action: str
    experience: str | None = None


@dataclass(frozen=True)
class Item:
    """One rendered history entry: labels and texts (``None`` parts are not shown)."""

    index: int
    obs_label: str
    observation: str
    action_label: str | None = None
    action: str | None = None
    experience: str | None = None


@dataclass(frozen=True)
class ViewResult:
    """Items of a view plus what the step record keeps: the permutation shown.

    ``permutation[i]`` is the (0-based) index of the entry whose action string is shown
    at position ``i``; ``None`` for views that do not shuffle.
    """

    view: str
    items: tuple[Item, ...]
    permutation: tuple[int, ...] | None = None
    first_index: int = 1


def permutation(n: int, seed: int | str) -> tuple[int, ...]:
    """A uniform random permutation of ``range(n)``, determined by ``seed`` and ``n``."""
    if n < 0:
        raise ValueError(f"permutation: n must be >= 0, got {n}")
    # "hindsight-shuffle" (the project's old name) stays: it decides every shuffle, hence
    # prompts and model-cache keys
    rng = random.Random(seed64("hindsight-shuffle", seed, n))
    order = list(range(n))
    rng.shuffle(order)
    return tuple(order)


def growing_permutation(n: int, seed: int | str) -> tuple[int, ...]:
    """The episode's one permutation at history length ``n`` (``per_episode`` shuffles).

    Inside-out Fisher-Yates on a stream seeded by ``seed`` alone: the permutation at
    length ``n + 1`` is the one at ``n`` with entry ``n`` appended and swapped with a
    uniformly chosen position (possibly itself), so each length shows a uniform
    permutation and the arrangement changes by at most one swap per step.
    """
    if n < 0:
        raise ValueError(f"growing_permutation: n must be >= 0, got {n}")
    rng = random.Random(seed64("hindsight-shuffle-episode", seed))  # the old name stays, as in permutation
    order: list[int] = []
    for i in range(n):
        j = rng.randrange(i + 1)
        order.append(i)
        order[i], order[j] = order[j], order[i]
    return tuple(order)


def draw(n: int, seed: int | str, mode: str = "per_step") -> tuple[int, ...]:
    """The permutation a shuffle shows at history length ``n`` under ``mode``."""
    if mode == "per_step":
        return permutation(n, seed)
    if mode == "per_episode":
        return growing_permutation(n, seed)
    raise ValueError(f"unknown shuffle mode {mode!r}; known: {', '.join(SHUFFLE_MODES)}")


def _check(entries: Sequence[Entry]) -> None:
    for i, e in enumerate(entries):
        if not isinstance(e, Entry):
            raise TypeError(f"history entry {i + 1}: expected Entry, got {type(e).__name__}")


def _raw_items(entries: Sequence[Entry], actions: Sequence[str], start: int = 1) -> tuple[Item, ...]:
    return tuple(
        Item(start + i, f"Observation {start + i}", e.observation, f"Action {start + i}", actions[i])
        for i, e in enumerate(entries)
    )


def raw(entries: Sequence[Entry], start: int = 1) -> ViewResult:
    """Raw: ``[Observation t: 'O_t', Action t: 'A_t']`` for every entry."""
    _check(entries)
    return ViewResult("raw", _raw_items(entries, [e.action for e in entries], start), None, start)


def recent(entries: Sequence[Entry], k: int = RECENT_K, start: int = 1) -> ViewResult:
    """Recent-k-Only: whole entries before the ``k`` latest are omitted."""
    _check(entries)
    if k < 1:
        raise ValueError(f"recent: k must be >= 1, got {k}")
    cut = max(0, len(entries) - k)
    kept = entries[cut:]
    return ViewResult("recent3", _raw_items(kept, [e.action for e in kept], start + cut), None, start + cut)


def observation_only(entries: Sequence[Entry], start: int = 1) -> ViewResult:
    """Observation-Only: ``[Observation t: 'O_t']``; historical actions removed."""
    _check(entries)
    items = tuple(Item(start + i, f"Observation {start + i}", e.observation) for i, e in enumerate(entries))
    return ViewResult("obsonly", items, None, start)


def check_permutation(perm: Sequence[int], n: int, fixed_tail: int = 0) -> tuple[int, ...]:
    """``perm`` as a tuple if it is a permutation of ``range(n)`` fixing the last ``fixed_tail``."""
    p = tuple(int(i) for i in perm)
    if sorted(p) != list(range(n)):
        raise ValueError(f"not a permutation of {n} history positions: {list(p)}")
    tail = range(max(0, n - fixed_tail), n)
    if any(p[i] != i for i in tail):
        raise ValueError(f"permutation {list(p)} moves one of the {fixed_tail} latest entries")
    return p


def reassign(entries: Sequence[Entry], perm: Sequence[int], view: str = "shuffle_all",
             start: int = 1) -> ViewResult:
    """Observations in order, position i showing the action of entry ``perm[i]``."""
    _check(entries)
    fixed = RECENT_K if view == "shuffle_old" else 0
    p = check_permutation(perm, len(entries), fixed)
    return ViewResult(view, _raw_items(entries, [entries[j].action for j in p], start), p, start)


def shuffle_all(entries: Sequence[Entry], seed: int | str, start: int = 1, mode: str = "per_step") -> ViewResult:
    """Shuffle-All: actions reassigned among all positions; observations in order."""
    return reassign(entries, draw(len(entries), seed, mode), "shuffle_all", start)


def shuffle_old(entries: Sequence[Entry], seed: int | str, start: int = 1, mode: str = "per_step") -> ViewResult:
    """Shuffle-Old: the three latest entries intact; older actions reassigned among older positions."""
    n_old = max(0, len(entries) - RECENT_K)
    perm = draw(n_old, seed, mode) + tuple(range(n_old, len(entries)))
    return reassign(entries, perm, "shuffle_old", start)


def causal(entries: Sequence[Entry], start: int = 1, initial: bool = True,
           action_word: str = "Action", first_outcome_word: str = "Action") -> ViewResult:
    """Causal Transition: each returned observation labelled as its action's outcome.

    ``[Initial Observation 1: 'O_1', Action 1: 'A_1']``, then
    ``[Outcome of Action t-1: 'O_t', Action t: 'A_t']``.  With ``initial=False`` the first
    entry's observation is labelled ``Outcome of <first_outcome_word> start-1``: a segment
    that continues an earlier history (the continuation after a restore, or the reference
    block of Appendix D.6, whose actions are labelled ``action_word="Reference Action"``).
    """
    _check(entries)
    items = []
    for i, e in enumerate(entries):
        t = start + i
        if i == 0:
            label = f"Initial Observation {t}" if initial else f"Outcome of {first_outcome_word} {t - 1}"
        else:
            label = f"Outcome of {action_word} {t - 1}"
        items.append(Item(t, label, e.observation, f"{action_word} {t}", e.action))
    return ViewResult("causal", tuple(items), None, start)


def experience(entries: Sequence[Entry], start: int = 1) -> ViewResult:
    """Experience: raw entries; ``E_t`` shown right after entry t (beside ``A_t -> O_{t+1}``)."""
    _check(entries)
    items = tuple(
        Item(start + i, f"Observation {start + i}", e.observation, f"Action {start + i}", e.action, e.experience)
        for i, e in enumerate(entries)
    )
    return ViewResult("experience", items, None, start)


def reference(entries: Sequence[Entry], outcome: str, *, restored_step: int,
              causal_labels: bool = False) -> ViewResult:
    """The reference records of Appendix D.6, numbered ``1..n`` apart from the executed steps.

    ``entries`` are the recorded (not executed) actions with the observations they were
    chosen on; ``outcome`` is what the last of them returned.  Ordinary format:
    ``[Reference Observation j: 'O', Reference Action j: 'A']`` then
    ``[Reference Observation n+1: 'O']``.  Causal labels: the first observation is the
    outcome of the last executed action (``Outcome of Action restored_step``), later
    ones ``Outcome of Reference Action j-1``.
    """
    _check(entries)
    first = f"Outcome of Action {restored_step}" if restored_step > 0 else "Initial Observation"
    items = []
    for j, e in enumerate(entries, 1):
        if causal_labels:
            label = first if j == 1 else f"Outcome of Reference Action {j - 1}"
        else:
            label = f"Reference Observation {j}"
        items.append(Item(j, label, e.observation, f"Reference Action {j}", e.action))
    n = len(entries)
    if causal_labels:
        last = f"Outcome of Reference Action {n}" if n else first
    else:
        last = f"Reference Observation {n + 1}"
    items.append(Item(n + 1, last, outcome))
    return ViewResult("reference", tuple(items), None, 1)


def apply_view(view: str, entries: Sequence[Entry], *, seed: int | str | None = None,
               start: int = 1, shuffle: str = "per_step") -> ViewResult:
    """The named view of ``entries`` (``seed`` is required by the shuffles, ``shuffle`` is
    their mode, :data:`SHUFFLE_MODES`)."""
    if view not in VIEWS:
        raise ValueError(f"unknown history view {view!r}; known views: {', '.join(VIEWS)}")
    if view in ("shuffle_all", "shuffle_old") and seed is None:
        raise ValueError(f"view {view!r} needs a seed (the episode's shuffle seed)")
    if view == "raw":
        return raw(entries, start)
    if view == "check":
        res = raw(entries, start)
        return ViewResult("check", res.items, None, start)
    if view == "recent3":
        return recent(entries, RECENT_K, start)
    if view == "obsonly":
        return observation_only(entries, start)
    if view == "shuffle_all":
        return shuffle_all(entries, seed, start, shuffle)  # type: ignore[arg-type]
    if view == "shuffle_old":
        return shuffle_old(entries, seed, start, shuffle)  # type: ignore[arg-type]
    if view == "causal":
        return causal(entries, start)
    return experience(entries, start)


def current_label(view: str, n_entries: int, start: int = 1) -> str:
    """Label of the current observation: under ``causal`` it is the outcome of the last action."""
    if view == "causal" and n_entries > 0:
        return f"Current observation (Outcome of Action {start + n_entries - 1})"
    return "Current observation"
