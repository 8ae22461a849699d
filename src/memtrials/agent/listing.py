"""Which admissible actions a prompt lists when it may list only ``cap`` of them.

The papers list every admissible action.  ScienceWorld has hundreds per state (about 400-1,000
with ``simplification: easy``), more than a small embedded model's 4,096-token slot holds, so the
reduced default lists at most ``max_listed_actions`` of them; in ``choice`` mode the reply is
constrained to the listed ones, so an action left off cannot be taken.  This is the project's own
rule, not the papers'.  Two listings (``ActorSettings.listing``):

- ``sample``: a seeded uniform sample of ``cap`` actions (the seed: episode seed and step), shown
  in the environment's order.  Fair but blind: on ScienceWorld it held the gold next action at 6
  of 76 gold steps with 10 listed (docs/history.md).
- ``ranked``: the ``cap`` actions that best match what the agent itself reads, the task
  description and the current observation, shown in the environment's order.  It reads nothing
  else: no gold path, no environment state, no earlier outcome.  An action's score is the sum,
  over its distinct object words (its content words after its first word, the verb), of the
  word's inverse document frequency over the *current admissible list* (``log(N / df)``) times
  its weight in the context (2 if the task names it, 1 if only the observation does, 0
  otherwise), divided by the square root of the action's object-word count.  Content words
  are lower-cased alphanumeric tokens minus a short stop list (articles, prepositions,
  "containing", "called", "task", ...).  The verb does not count: a task that says "focus on
  the thing" must not lift every one of ScienceWorld's dozens of "focus on X" actions (a focus
  on the wrong thing ends the episode); the IDF discounts what remains ubiquitous ("door",
  a room every "move X to <room>" names), so an object that few actions name (the task's
  "sidetable", an observation's "cd 2") weighs much.  The square root keeps long compound
  actions ("move cup containing red paint in art studio to cup containing nothing") from
  winning by length alone while still crediting each matched word.
  Ties (notably every unmatched action, score 0) are broken by the ``sample`` listing's own
  draw: the actions ``sample`` would list come first, in its draw order, then the rest in a
  continued draw from the same generator.  So a ranked listing with no word in common with
  the context is exactly the ``sample`` listing, and with any cap the ranked listing differs
  from it only where the context says something.
- ``best-first``: the same actions as ``ranked``, shown best match first (ties in the sample's
  draw order) instead of in the environment's order, and so also when the cap keeps them all.
  Small models pick by position as much as by content: at an ALFWorld state where the task's
  object lay in front of the agent ("take keychain 2 from desk 1" listed last of ten,
  alphabetically), Qwen2.5-Coder-1.5B answered "go to desk 2" with the environment's order and
  the take action with it listed first, free-form and grammar-constrained alike (3 December;
  docs/history.md, "Listing order").  The order is therefore part of what an actor is shown,
  and the history study's tables say which listing a cell used.
  No demotion of actions already taken: the history study's repetition probe measures whether
  an agent repeats an action at the same observation, and a listing that hid repeats would
  remove the behaviour it measures.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from typing import Sequence

from memtrials.seeds import seed64

LISTINGS: tuple[str, ...] = ("sample", "ranked", "best-first")
"""``ActorSettings.listing`` values."""

STOP_WORDS: frozenset[str] = frozenset(
    "a an the to in into on onto at of from for with and or is are be it its this that these those you your "
    "yours there here which what who called containing contains substance then first now some any up down around "
    "task".split())
"""Words that say nothing about which object an action is about (an action's verb, its first
word, is left out by :func:`object_words`; the IDF discounts what stays common)."""

TASK_WEIGHT = 2.0
"""A content word the task names counts twice a word only the observation names: the task is
the goal, the observation mostly lists what is around."""

_TOKEN = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens of ``text`` without :data:`STOP_WORDS`, in order."""
    return [w for w in _TOKEN.findall(text.lower()) if w not in STOP_WORDS]


def _rng(seed: str) -> random.Random:
    return random.Random(seed64(seed))


def sample_order(n: int, cap: int, seed: str) -> list[int]:
    """Indices ``0..n-1`` in the tie-break order: first the ``cap`` indices the ``sample``
    listing draws (in its draw order), then the others in a continued draw of the same generator."""
    rng = _rng(seed)
    first = rng.sample(range(n), cap)
    chosen = set(first)
    rest = [i for i in range(n) if i not in chosen]
    return first + rng.sample(rest, len(rest))


def sampled(actions: Sequence[str], cap: int, seed: str) -> tuple[str, ...]:
    """The ``sample`` listing: ``cap`` seeded draws, in the environment's order."""
    keep = sorted(_rng(seed).sample(range(len(actions)), cap))
    return tuple(actions[i] for i in keep)


def object_words(action: str) -> set[str]:
    """The content words of ``action`` after its verb (its first word): what it acts on."""
    return set(content_words(" ".join(action.split()[1:])))


def relevance(actions: Sequence[str], task: str, observation: str) -> list[float]:
    """Each action's score against the task and observation (see the module docstring)."""
    words = [object_words(a) for a in actions]
    df = Counter(w for ws in words for w in ws)
    n = len(actions)
    task_words, obs_words = set(content_words(task)), set(content_words(observation))

    def weight(w: str) -> float:
        return TASK_WEIGHT if w in task_words else 1.0 if w in obs_words else 0.0

    return [sum(math.log(n / df[w]) * weight(w) for w in ws) / math.sqrt(len(ws)) if ws else 0.0 for ws in words]


def rank_order(actions: Sequence[str], cap: int, seed: str, task: str, observation: str) -> list[int]:
    """Indices of ``actions`` best-scoring first, ties in the sample's draw order for ``cap``."""
    scores = relevance(actions, task, observation)
    order = sample_order(len(actions), min(cap, len(actions)), seed)
    tie = {i: k for k, i in enumerate(order)}
    return sorted(range(len(actions)), key=lambda i: (-scores[i], tie[i]))


def ranked(actions: Sequence[str], cap: int, seed: str, task: str, observation: str) -> tuple[str, ...]:
    """The ``ranked`` listing: the ``cap`` best-scoring actions, ties in the sample's draw order,
    shown in the environment's order."""
    keep = sorted(rank_order(actions, cap, seed, task, observation)[:cap])
    return tuple(actions[i] for i in keep)


def best_first(actions: Sequence[str], cap: int, seed: str, task: str, observation: str) -> tuple[str, ...]:
    """The ``best-first`` listing: the ``ranked`` listing's actions, best-scoring first."""
    return tuple(actions[i] for i in rank_order(actions, cap, seed, task, observation)[:cap])


def list_actions(admissible: Sequence[str] | None, cap: int | None, seed: str, listing: str = "sample",
                 task: str = "", observation: str = "") -> tuple[str, ...] | None:
    """The admissible actions shown in a prompt: all when ``cap`` is None or not below their
    number, else ``cap`` of them by ``listing`` (:data:`LISTINGS`; ``best-first`` reorders them
    in either case); None when the environment has no admissible list (AppWorld)."""
    if listing not in LISTINGS:
        raise ValueError(f"unknown action listing {listing!r} ({' | '.join(LISTINGS)})")
    if admissible is None:
        return None
    acts = tuple(admissible)
    if listing == "best-first" and acts:
        return best_first(acts, len(acts) if cap is None else cap, seed, task, observation)
    if cap is None or len(acts) <= cap:
        return acts
    if listing == "sample":
        return sampled(acts, cap, seed)
    return ranked(acts, cap, seed, task, observation)
