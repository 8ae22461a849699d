"""Decision contexts for the calibrator's labels (section 6.1).

A context is a completed, non-terminal transition of a source rollout: the raw history
through action ``A_t``, the observation ``O_{t+1}`` it returned, and the actions listed at
step ``t+1`` (the decision the recipient actors make next).  Contexts are drawn evenly
across the (source actor, environment) groups, seeded: each group gets ``count // G``
(the first ``count % G`` groups in seeded order one more), from its eligible transitions
in a seeded order.  A group with too few eligible transitions gives all it has and the
shortfall is logged.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.agent.render import Segment
from memtrials.agent.views import Entry, experience
from memtrials.seeds import order_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Context:
    """One decision context (a row of ``CONTEXT_SCHEMA``)."""

    context_id: str
    source_model: str
    env: str
    task_id: str
    episode_id: str
    task: str
    step: int
    history: tuple[Entry, ...]
    action: str
    observation: str
    next_actions: tuple[str, ...] | None

    @classmethod
    def from_row(cls, r: Mapping[str, Any]) -> "Context":
        hist = tuple(Entry(o, a) for o, a in json.loads(r["history"]))
        nxt = json.loads(r["next_actions"]) if isinstance(r["next_actions"], str) else None
        return cls(r["context_id"], r["source_model"], r["env"], r["task_id"], r["episode_id"], r["task"],
                   int(r["step"]), hist, r["action"], r["observation"], tuple(nxt) if nxt is not None else None)

    def row(self) -> dict[str, Any]:
        return {"context_id": self.context_id, "source_model": self.source_model, "env": self.env,
                "task_id": self.task_id, "episode_id": self.episode_id, "task": self.task, "step": self.step,
                "history": json.dumps([[e.observation, e.action] for e in self.history], ensure_ascii=False),
                "action": self.action, "observation": self.observation,
                "next_actions": None if self.next_actions is None else json.dumps(list(self.next_actions))}

    def review_history(self) -> list[Segment]:
        """What the generator reviews (Appendix G.2): the raw history through ``A_t``."""
        return [Segment.of(experience(self.history))]

    def actor_history(self, exp: str | None) -> list[Segment]:
        """What a recipient actor sees: the same history, ``exp`` beside ``A_t -> O_{t+1}`` or nothing."""
        entries = list(self.history)
        if exp is not None:
            entries[-1] = Entry(entries[-1].observation, entries[-1].action, exp)
        return [Segment.of(experience(entries))]


def eligible(model: str, env: str, episodes: pd.DataFrame, steps: pd.DataFrame) -> list[Context]:
    """Every transition ``A_t -> O_{t+1}`` of the source cell that a recorded step ``t+1`` follows."""
    tasks = dict(zip(episodes["episode_id"], episodes["task"]))
    out: list[Context] = []
    for ep_id, g in steps.sort_values(["episode_id", "step"]).groupby("episode_id", sort=True):
        rows = g.to_dict("records")
        for i in range(len(rows) - 1):
            cur, nxt = rows[i], rows[i + 1]
            if bool(cur["done"]) or int(nxt["step"]) != int(cur["step"]) + 1:
                continue
            hist = tuple(Entry(r["obs_before"], r["action"]) for r in rows[: i + 1])
            shown = json.loads(nxt["shown_actions"]) if isinstance(nxt["shown_actions"], str) else None
            cid = f"{model}/{env}/{ep_id.rsplit('/', 1)[-1]}/{int(cur['step'])}"
            out.append(Context(cid, model, env, str(cur["task_id"]), str(ep_id), str(tasks[ep_id]),
                               int(cur["step"]), hist, str(cur["action"]), str(cur["observation"]),
                               tuple(shown) if shown is not None else None))
    return out


def sample_contexts(groups: Mapping[tuple[str, str], Sequence[Context]], count: int, seed: int) -> list[Context]:
    """``count`` contexts spread evenly over ``groups`` (module docstring), in group order."""
    if count < 1:
        raise ValueError(f"config key calibrator.contexts.count must be >= 1, got {count}")
    if not groups:
        raise ValueError("calibrator contexts: no source cells (calibrator.sources.models x envs is empty)")
    order = sorted(groups, key=lambda g: (order_key(seed, *g), g))
    base, extra = divmod(count, len(order))
    picked: list[Context] = []
    for k, g in enumerate(order):
        want = base + (1 if k < extra else 0)
        pool = sorted(groups[g], key=lambda c: (order_key(seed, c.context_id), c.context_id))
        if len(pool) < want:
            log.warning("calibrator contexts: source %s/%s has %d eligible transitions, %d asked; taking all",
                        g[0], g[1], len(pool), want)
        picked.extend(pool[:want])
    return sorted(picked, key=lambda c: (c.source_model, c.env, c.episode_id, c.step))
