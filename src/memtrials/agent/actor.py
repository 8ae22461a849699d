"""The ReAct-style actor loop that every rollout study uses.

*When History Fails to Become Experience*, Appendix A (interaction and termination) and
section 5.2 / Appendix D.2 (Experience reviews).  At each step the actor renders the
task, the history under a view (a :class:`Composer`), the current observation and the
admissible actions; asks the model for the next action; parses it (an unparsable or
inadmissible action is recorded and executed as written: it counts as a step); and steps
the environment.  Budget: ``max_actions`` actions (30 in the paper) and an output cap per
request (8,192 tokens in the paper).  A joint actor (``mode="joint"``, section 6.4 /
Appendix G.3) writes one calibration block before each action: the block reviews the
preceding transition, and its experience goes beside that transition (the step row's
review columns record it; the first step's block reviews nothing).  After every
transition the step hooks (:mod:`memtrials.agent.review`) see it; a review (Appendix G.2) may write an experience
that stays beside its source transition.  A memory (:mod:`memtrials.memory`) puts a block
in every prompt; the served lesson ids and the memory's declared columns are recorded per
step.

This module plays one episode; :mod:`memtrials.agent.runner` runs many, concurrently or
as a stream, over an environment pool (:mod:`memtrials.envs.pool`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from memtrials.agent.listing import LISTINGS
from memtrials.agent.listing import list_actions as listed_actions  # the prompt's listing
from memtrials.agent.parse import TEMPLATE, parse_action, parse_joint, templates
from memtrials.agent.records import dumps
from memtrials.agent.review import ReviewHook, StepHook, Transition
from memtrials.agent.render import Segment, approx_tokens, render_block, render_chat
from memtrials.agent.views import SHUFFLE_MODES, Entry, apply_view, current_label, raw
from memtrials.io import canonical_json
from memtrials.llm import CallFailed
from memtrials.llm.carry import carry
from memtrials.llm.structured import gbnf_actions, gbnf_joint
from memtrials.memory.base import EpisodeMemory, StepContext

if TYPE_CHECKING:
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.envs.base import Env
    from memtrials.llm import Client

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActorSettings:
    """Everything about the actor that determines its outputs (recorded in cell params)."""

    model: str
    view: str = "raw"
    fmt: str = "block"                     # block | chat (Appendix F)
    mode: str = "choice"                   # choice: reply constrained to the listed actions; react: free text;
                                           # joint: free text, a <calibration> block then the action (section 6.4)
    max_actions: int = 30
    max_output_tokens: int | None = 8192
    max_listed_actions: int | None = None  # list at most this many admissible actions (None: all)
    listing: str = "sample"                # which ones when capped: sample | ranked | best-first (memtrials.agent.listing)
    review: bool = False                   # Experience reviews after non-terminal transitions
    review_model: str | None = None        # None: the actor itself (C_actor); else e.g. a calibrator
    review_max_tokens: int | None = None
    reminder: bool = False                 # Check (Appendix D.1)
    shuffle: str = "per_step"              # Shuffle-All/-Old: per_step | per_episode (views.SHUFFLE_MODES)
    sample: int = 0                        # sample index of the actor's calls (cache key; added to the endpoint's seed)
    temperature: float | None = None       # the actor's sampling temperature (None: the endpoint's params)
    joint_grammar_chars: int | None = None  # joint mode: where the endpoint takes a grammar, constrain the reply
                                           # to a valid block (experience <= this many characters) + a listed action

    def __post_init__(self) -> None:
        if self.max_actions < 1:
            raise ValueError(f"max_actions must be >= 1, got {self.max_actions}")
        if self.fmt not in ("block", "chat"):
            raise ValueError(f"unknown history format {self.fmt!r} (block | chat)")
        if self.mode not in ("choice", "react", "joint"):
            raise ValueError(f"unknown action mode {self.mode!r} (choice | react | joint)")
        if self.sample < 0:
            raise ValueError(f"sample must be >= 0, got {self.sample}")
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise ValueError(f"temperature must be in [0, 2] or None, got {self.temperature}")
        if self.listing not in LISTINGS:
            raise ValueError(f"unknown action listing {self.listing!r} ({' | '.join(LISTINGS)})")
        if self.shuffle not in SHUFFLE_MODES:
            raise ValueError(f"unknown shuffle mode {self.shuffle!r} ({' | '.join(SHUFFLE_MODES)})")
        if self.joint_grammar_chars is not None and (self.mode != "joint" or self.joint_grammar_chars < 1):
            raise ValueError(f"joint_grammar_chars needs mode 'joint' and a value >= 1, got {self.joint_grammar_chars}")
        if self.mode == "joint" and self.review:
            raise ValueError("a joint actor (mode 'joint') writes its own calibration: no separate review")


class Composer(Protocol):
    """Builds what the actor and the reviewer see from the entries executed so far."""

    start: int

    def actor(self, entries: Sequence[Entry]) -> tuple[list[Segment], str, tuple[int, ...] | None]: ...

    def review(self, entries: Sequence[Entry]) -> list[Segment]: ...


@dataclass(frozen=True)
class ViewComposer:
    """A full rollout's history under one view; reviews always see the raw history."""

    view: str
    seed: int | str = 0
    start: int = 1
    shuffle: str = "per_step"

    def actor(self, entries: Sequence[Entry]) -> tuple[list[Segment], str, tuple[int, ...] | None]:
        res = apply_view(self.view, entries, seed=self.seed, start=self.start, shuffle=self.shuffle)
        return [Segment.of(res)], current_label(self.view, len(entries), self.start), res.permutation

    def review(self, entries: Sequence[Entry]) -> list[Segment]:
        return [Segment.of(raw(entries, self.start))]


def digest_messages(messages: Sequence[dict[str, str]]) -> str:
    """The ``prompt_digest`` column: SHA-256 of the messages' canonical JSON on one line with
    Python's spaced separators (the bytes it has always hashed)."""
    text = canonical_json(list(messages), indent=None, compact=False, newline=False)
    return hashlib.sha256(text.encode()).hexdigest()


def is_context_error(exc: CallFailed) -> bool:
    msg = str(exc).lower()
    return "http 400" in msg and ("context" in msg or "too long" in msg or "maximum" in msg)


@dataclass
class Episode:
    """Step rows (``STEP_SCHEMA``) and the episode summary (without cell columns)."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    final_info: dict[str, Any] = field(default_factory=dict)
    """The last observation's ``info`` (JSON data; e.g. AppWorld's per-test results under
    ``tests``), for memories that learn from feedback; not a column of the step table."""


def default_hooks(prompts: ActorPrompts, s: ActorSettings) -> list[StepHook]:
    """The hooks ``s`` asks for: a review of every non-terminal transition when ``s.review``."""
    if not s.review:
        return []
    return [ReviewHook(prompts, s.review_model or s.model, s.review_max_tokens or s.max_output_tokens)]


def joint_grammar(client: Client, s: ActorSettings, shown: Sequence[str] | None) -> str | None:
    """The grammar of a constrained joint reply (:func:`memtrials.llm.structured.gbnf_joint`):
    only in joint mode with ``joint_grammar_chars`` set, listed actions, and an endpoint that
    takes grammars; otherwise None (the free reply, parsed or recorded invalid)."""
    if s.mode != "joint" or s.joint_grammar_chars is None or not shown or not client.supports_grammar(s.model):
        return None
    return gbnf_joint(list(shown), s.joint_grammar_chars)


MAX_TEMPLATE_CHARS = 100
"""Longest text a constrained reply writes into a template action (a search query)."""


def template_words(task: str | None) -> list[str]:
    """The words a ``choice``-mode reply may write into a template action (a search): the task
    text's words (lowercased letters and digits, in order, once each).  The project's choice: a
    constrained reply copies what is listed, and a template's text is drawn from the task, as a
    listed action is drawn from the page (docs/environments.md, WebShop)."""
    return list(dict.fromkeys(w for w in re.findall(r"[a-z0-9]+", (task or "").lower()) if len(w) > 1))


def action_constraint(client: Client, model: str, shown: Sequence[str] | None,
                      task: str | None = None) -> dict[str, Any]:
    """What constrains a ``choice``-mode reply to the listed actions ``shown``: ``choices``
    (the client's grammar or JSON enum), or, where the list holds a template action
    (``search[<your query>]``, :func:`memtrials.agent.parse.templates`), a grammar of the
    listed actions and the template filled in (:func:`memtrials.llm.structured.gbnf_actions`)
    on endpoints that take one, else nothing (the free reply, parsed against the list)."""
    if not shown:
        return {}
    names = templates(shown)
    if not names:
        return {"choices": list(shown)}
    if not client.supports_grammar(model):
        return {}
    literals = [a for a in shown if not TEMPLATE.match(a)]
    return {"grammar": gbnf_actions(literals, names, MAX_TEMPLATE_CHARS, words=template_words(task) or None)}


def attach_calibration(ep: Episode, decision: str, experience: str | None, call_id: str | None) -> None:
    """A joint actor's calibration of the latest completed transition: its experience (if
    CALIBRATE) beside that entry, and the review columns of that step's row (the call is
    the actor's own, the one that wrote the block)."""
    last = ep.entries[-1]
    exp = experience if decision == "CALIBRATE" else None
    kept = carry(exp) if exp is not None else None
    ep.entries[-1] = Entry(last.observation, last.action, kept.text if kept is not None else None)
    ep.steps[-1].update(review_call_id=call_id, review_decision=decision, experience=exp,
                        carry_cut=ep.steps[-1]["carry_cut"] + (kept.cut if kept is not None else 0))


async def run_episode(
    client: Client, env: Env, prompts: ActorPrompts, s: ActorSettings, *, env_name: str,
    task_id: str, episode_id: str, seed: int | str, composer: Composer | None = None,
    memory: EpisodeMemory | None = None, hooks: Sequence[StepHook] | None = None, start_obs: Any = None,
    env_call: Callable[..., Any] | None = None, task: str | None = None,
) -> Episode:
    """Play one episode (from ``reset``, or from ``start_obs`` after a restore).

    ``prompts`` builds the actor's messages (``actor_messages``) and the reviews'
    (``review_messages``); ``hooks`` default to :func:`default_hooks`; ``env_call(fn,
    *args)`` runs an environment call (default: in a worker thread; the runner passes
    :meth:`EnvPool.caller`).  ``task`` is the task text when the caller has it already.
    """
    composer = composer or ViewComposer(s.view, seed, shuffle=s.shuffle)
    hooks = default_hooks(prompts, s) if hooks is None else list(hooks)
    call = env_call or asyncio.to_thread
    obs = start_obs if start_obs is not None else await call(env.reset, task_id)
    task = task if task is not None else await call(env.task_description)
    ep = Episode()
    entries = ep.entries
    initial = obs.text
    first_tokens = first_approx = None
    termination = "budget"
    won = False
    final_score = float(getattr(obs, "score", 0.0))
    for i in range(s.max_actions):
        t = composer.start + i  # step number of this action in the task
        admissible = obs.admissible if obs.admissible is not None else await call(env.admissible_actions)
        shown = listed_actions(admissible, s.max_listed_actions, f"{seed}:{t}", s.listing, task, obs.text)
        history, label, perm = composer.actor(entries)
        served = memory.at_step(StepContext(env_name, task_id, task, t, obs.text, tuple(entries))) if memory else None
        block = served.block if served is not None else None
        msgs = prompts.actor_messages(
            env=env_name, task=task, history=history, current_observation=obs.text, current_label=label,
            step_count=t - 1, admissible=shown, mode=s.mode, fmt=s.fmt, reminder=s.reminder, memory=block)
        hist_text = render_block(history) if s.fmt == "block" else "\n".join(
            m["content"] for m in render_chat(history))
        prompt_text = "\n".join(m["content"] for m in msgs)
        grammar = joint_grammar(client, s, shown)
        try:
            r = await client.complete(
                s.model, msgs, sample=s.sample, max_tokens=s.max_output_tokens, purpose="actor",
                temperature=s.temperature,
                **(action_constraint(client, s.model, shown, task) if s.mode == "choice" else {}),
                **({"grammar": grammar} if grammar is not None else {}))
        except CallFailed as exc:
            if not is_context_error(exc):
                raise
            log.warning("%s step %d: prompt exceeds the endpoint's context; episode ends (%s)", episode_id, t, exc)
            termination = "context_exceeded"
            break
        if first_tokens is None:
            first_tokens, first_approx = r.usage.prompt_tokens, approx_tokens(prompt_text)
        if s.mode == "joint":  # the block reviews the preceding transition: its experience goes beside it
            cal, parsed = parse_joint(r.text, admissible, "react")
            if entries:
                attach_calibration(ep, cal.decision, cal.experience, r.call_id)
        else:
            parsed = parse_action(r.text, admissible, "choice" if (s.mode == "choice" and shown) else "react")
        new = await call(env.step, parsed.action)
        terminal = bool(new.done) or i + 1 == s.max_actions
        review_id = decision = exp = None
        if hooks:
            tr = Transition(env_name, task, t, composer.review(entries + [Entry(obs.text, parsed.action)]),
                            parsed.action, new.text, terminal)
            for hook in hooks:
                note = await hook.after_step(client, tr)
                if note is not None and review_id is None:
                    review_id, decision, exp = note.call_id, note.decision, note.experience
        # what later prompts quote of this step's reply: at most carry.max_chars of each (memtrials.llm.carry)
        act_kept, exp_kept = carry(parsed.action), carry(exp) if exp is not None else None
        entries.append(Entry(obs.text, act_kept.text, exp_kept.text if exp_kept is not None else None))
        ep.steps.append({
            "episode_id": episode_id, "task_id": task_id, "step": t, "obs_before": obs.text,
            "n_admissible": -1 if admissible is None else len(admissible),
            "shown_actions": dumps(list(shown) if shown is not None else None),
            "prompt_digest": digest_messages(msgs), "prompt_chars": len(prompt_text),
            "history_chars": len(hist_text), "history_tokens": approx_tokens(hist_text),
            "prompt_tokens": r.usage.prompt_tokens, "completion_tokens": r.usage.completion_tokens,
            "permutation": dumps(list(perm) if perm is not None else None),
            "memory_ids": dumps(list(block.ids) if block is not None else []),
            "raw_reply": r.text, "finish_reason": r.finish_reason, "constraint": r.constraint,
            "action": parsed.action, "parse_status": parsed.status,
            "replay_action": str((new.info or {}).get("replay_action", parsed.action)),
            "observation": new.text, "reward": float(new.reward), "score": float(new.score),
            "done": bool(new.done), "won": bool(new.won), "latency_s": float(r.latency_s),
            "call_id": r.call_id, "review_call_id": review_id, "review_decision": decision, "experience": exp,
            "carry_cut": act_kept.cut + (exp_kept.cut if exp_kept is not None else 0),
            **(served.columns if served is not None else {}),
        })
        obs = new
        final_score = float(new.score)
        ep.final_info = json.loads(json.dumps(new.info or {}, default=str))
        if new.won:
            won, termination = True, "won"
            break
        if new.done:
            termination = "done"
            break
    decisions = [st["review_decision"] for st in ep.steps]
    ep.summary = {
        "episode_id": episode_id, "task_id": task_id, "seed": int(seed) if str(seed).lstrip("-").isdigit() else 0,
        "task": task, "initial_observation": initial, "won": won, "n_steps": len(ep.steps), "final_score": final_score,
        "termination": termination,
        "n_unparsable": sum(st["parse_status"] == "unparsable" for st in ep.steps),
        "n_inadmissible": sum(st["parse_status"] == "inadmissible" for st in ep.steps),
        "n_reviews": sum(d is not None for d in decisions),
        "n_experiences": decisions.count("CALIBRATE"), "n_noupdate": decisions.count("NOUPDATE"),
        "n_review_invalid": decisions.count("INVALID"),
        "first_prompt_tokens": first_tokens if first_tokens is not None else -1,
        "first_prompt_approx_tokens": first_approx if first_approx is not None else -1,
        "prompt_tokens": sum(st["prompt_tokens"] for st in ep.steps),
        "completion_tokens": sum(st["completion_tokens"] for st in ep.steps),
    }
    return ep
