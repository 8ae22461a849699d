"""Step hooks: where a reviewer or calibrator sees a completed transition.

*When History Fails to Become Experience*, section 5.2, section 6 and Appendix G.2.  After
a transition (the action and the observation it returned) a hook may write text that
stays beside that transition in the history (an Experience).  :func:`review_transition` is
the one review call of the project: the actor loop (per step, through
:class:`ReviewHook`), the reference continuation (once, at resumption) and the repetition
probe (once per fixed history) all make it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from memtrials.agent.prompts import REVIEW_SCHEMA, parse_review
from memtrials.agent.render import Segment

if TYPE_CHECKING:
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.llm import Client


@dataclass(frozen=True)
class Review:
    """What a hook wrote: ``decision`` CALIBRATE | NOUPDATE | INVALID, ``experience`` or None."""

    call_id: str | None
    decision: str | None
    experience: str | None


@dataclass(frozen=True)
class Transition:
    """A completed transition, as a hook sees it."""

    env: str
    task: str
    step: int                         # the action's step number in the task
    history: Sequence[Segment]        # the reviewer's history through this action (raw)
    action: str
    observation: str                  # what the action returned
    terminal: bool


class StepHook(Protocol):
    """Sees every transition of an episode; may return a :class:`Review` (or None)."""

    async def after_step(self, client: Client, t: Transition) -> Review | None: ...


async def review_transition(client: Client, prompts: ActorPrompts, model: str, *, env: str, task: str,
                            history: Sequence[Segment], action: str, observation: str,
                            max_tokens: int | None) -> Review:
    """One Appendix G.2 review: NOUPDATE, CALIBRATE with an experience, or INVALID."""
    msgs = prompts.review_messages(env=env, task=task, history=history, action=action, observation=observation)
    j = await client.complete_json(model, msgs, schema=REVIEW_SCHEMA, max_tokens=max_tokens, purpose="review")
    decision, exp = parse_review(j.value if j.valid else None)
    return Review(j.call_id, decision, exp)


@dataclass(frozen=True)
class ReviewHook:
    """Reviews every non-terminal transition with ``model`` (the actor itself, C_actor, or a
    calibrator's endpoint)."""

    prompts: ActorPrompts
    model: str
    max_tokens: int | None = None

    async def after_step(self, client: Client, t: Transition) -> Review | None:
        if t.terminal:
            return None
        return await review_transition(client, self.prompts, self.model, env=t.env, task=t.task, history=t.history,
                                       action=t.action, observation=t.observation, max_tokens=self.max_tokens)
