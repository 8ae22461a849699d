"""Next-action repetition probe on fixed histories.

*When History Fails to Become Experience*, section 5.1 and Appendix B.1.  From each Raw
rollout, take its earliest non-terminal pair of identical consecutive actions
``A_i = A_{i+1}`` (at most one per trajectory); a judge endpoint (role ``judge``)
screens for feedback that does not support a third execution; the source actor then
produces one next action on the same fixed prefix under Raw, Causal and Experience
(a review of the Raw prefix in a separate call, its experience placed beside the latest
transition; NOUPDATE or an invalid review leaves the Raw input unchanged).  The outcome
is whether the next action repeats the pair's action.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Sequence

import pandas as pd

from memtrials.agent.actor import ActorSettings, action_constraint
from memtrials.agent.parse import normalize, parse_action
from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.review import review_transition
from memtrials.agent.render import Segment
from memtrials.agent.views import Entry, apply_view, current_label, raw
from memtrials.studies.history.design import PROBE_CONDITIONS
from memtrials.studies.history.prompts import JUDGE_SCHEMA, JudgePrompts

import pyarrow as pa  # noqa: E402

SCREEN_SCHEMA = pa.schema([
    ("model", pa.string()), ("env", pa.string()), ("episode_id", pa.string()), ("task_id", pa.string()),
    ("pair_step", pa.int64()), ("repeated_action", pa.string()), ("judge", pa.string()),
    ("judge_call_id", pa.string()), ("judge_valid", pa.bool_()), ("judge_supports", pa.bool_()),
    ("selected", pa.bool_()),
])
RESPONSE_SCHEMA = pa.schema([
    ("model", pa.string()), ("env", pa.string()), ("episode_id", pa.string()), ("task_id", pa.string()),
    ("pair_step", pa.int64()), ("condition", pa.string()), ("repeated_action", pa.string()),
    ("call_id", pa.string()), ("raw_reply", pa.string()), ("action", pa.string()), ("parse_status", pa.string()),
    ("repeated", pa.bool_()), ("review_call_id", pa.string()), ("review_decision", pa.string()),
    ("experience", pa.string()), ("prompt_tokens", pa.int64()),
])
"""Declared once: the probe's two tables keep these columns even when empty."""


@dataclass(frozen=True)
class RepeatPair:
    """A fixed history ending in two identical actions (steps ``step`` and ``step + 1``)."""

    episode_id: str
    task_id: str
    task: str
    step: int                      # i: A_i == A_{i+1}
    entries: tuple[Entry, ...]     # (O_1, A_1) .. (O_{i+1}, A_{i+1})
    current_observation: str       # O_{i+2}
    shown_actions: tuple[str, ...] | None  # the admissible list shown at step i+2
    admissible_count: int

    @property
    def action(self) -> str:
        return self.entries[-1].action


def select_pairs(episodes: pd.DataFrame, steps: pd.DataFrame) -> list[RepeatPair]:
    """The earliest non-terminal repeat pair of every trajectory that has one, in episode order.

    The pair must be followed by a recorded step (its prompt gives the admissible actions
    of the fixed state), so a pair at the end of the budget does not count.
    """
    out = []
    for _, ep in episodes.sort_values(["task_index", "episode_id"]).iterrows():
        st = steps[steps["episode_id"] == ep["episode_id"]].sort_values("step").reset_index(drop=True)
        acts = list(st["action"])
        for i in range(len(acts) - 2):
            if normalize(acts[i]) == normalize(acts[i + 1]) and not bool(st.loc[i + 1, "done"]):
                entries = tuple(Entry(st.loc[j, "obs_before"], acts[j]) for j in range(i + 2))
                nxt = st.loc[i + 2]
                # a code environment lists no actions: a missing value reads back as NaN, not None
                listed = nxt["shown_actions"]
                shown = json.loads(listed) if isinstance(listed, str) and listed else None
                out.append(RepeatPair(str(ep["episode_id"]), str(ep["task_id"]), str(ep["task"]), i + 1, entries,
                                      str(nxt["obs_before"]), tuple(shown) if shown is not None else None,
                                      int(nxt["n_admissible"])))
                break
    return out


async def probe_cell(
    config: Any, *, model: str, judge: str, env: str, episodes_path: str, steps_path: str,
    settings: ActorSettings, actor_prompts_dir: str, prompts_dir: str, out_responses: str, out_screen: str,
    out_calls: str,
    conditions: Sequence[str] = PROBE_CONDITIONS,
) -> pd.DataFrame:
    """Screen the repeat pairs of one Raw cell and ask the actor for one next action per condition
    (the actor's prompts from ``actor_prompts_dir``, the screen's from ``prompts_dir``)."""
    from memtrials.io import write_parquet
    from memtrials.llm import open_client

    bad = [c for c in conditions if c not in PROBE_CONDITIONS]
    if bad:
        raise ValueError(f"unknown probe condition(s) {bad}; known: {', '.join(PROBE_CONDITIONS)}")
    prompts, judge_prompts = ActorPrompts.load(actor_prompts_dir), JudgePrompts.load(prompts_dir)
    pairs = select_pairs(pd.read_parquet(episodes_path), pd.read_parquet(steps_path))
    cell = f"history/probe/{model}/{env}"
    mode = settings.mode

    async with open_client(config, cell, out_calls) as client:
        client.expect(len(pairs) * (1 + 2 * len(conditions)))

        async def screen(p: RepeatPair) -> dict[str, Any]:
            msgs = judge_prompts.judge_messages(prompts, env=env, task=p.task, history=[Segment.of(raw(p.entries))],
                                                action=p.action, observation=p.current_observation)
            j = await client.complete_json(judge, msgs, schema=JUDGE_SCHEMA, purpose="judge",
                                           max_tokens=settings.review_max_tokens or settings.max_output_tokens)
            supports = j.value["supports_repetition"] if j.valid and j.value else None
            return {"episode_id": p.episode_id, "task_id": p.task_id, "pair_step": p.step,
                    "repeated_action": p.action, "judge": judge, "judge_call_id": j.call_id,
                    "judge_valid": j.valid, "judge_supports": supports, "selected": supports is False}

        screened = await asyncio.gather(*(screen(p) for p in pairs))

        async def respond(p: RepeatPair, condition: str) -> dict[str, Any]:
            entries = list(p.entries)
            review_id = decision = exp = None
            if condition == "experience":
                r = await review_transition(client, prompts, model, env=env, task=p.task,
                                            history=[Segment.of(raw(entries))], action=p.action,
                                            observation=p.current_observation,
                                            max_tokens=settings.review_max_tokens or settings.max_output_tokens)
                review_id, decision, exp = r.call_id, r.decision, r.experience
                entries[-1] = Entry(entries[-1].observation, entries[-1].action, exp)
            view = apply_view(condition, entries)
            msgs = prompts.actor_messages(
                env=env, task=p.task, history=[Segment.of(view)], current_observation=p.current_observation,
                current_label=current_label(condition, len(entries)), step_count=len(entries),
                admissible=p.shown_actions, mode=mode, fmt=settings.fmt)
            choice = mode == "choice" and bool(p.shown_actions)
            r = await client.complete(model, msgs, max_tokens=settings.max_output_tokens, purpose="actor",
                                      **(action_constraint(client, model, p.shown_actions, p.task) if choice else {}))
            parsed = parse_action(r.text, p.shown_actions, "choice" if choice else "react")
            return {"episode_id": p.episode_id, "task_id": p.task_id, "pair_step": p.step, "condition": condition,
                    "repeated_action": p.action, "call_id": r.call_id, "raw_reply": r.text,
                    "action": parsed.action, "parse_status": parsed.status,
                    "repeated": normalize(parsed.action) == normalize(p.action),
                    "review_call_id": review_id, "review_decision": decision, "experience": exp,
                    "prompt_tokens": r.usage.prompt_tokens}

        chosen = [p for p, s in zip(pairs, screened) if s["selected"]]
        responses = await asyncio.gather(*(respond(p, c) for p in chosen for c in conditions))

    from memtrials.agent.records import table

    cell_cols = {"model": model, "env": env}
    screen_t = table([{**cell_cols, **r} for r in screened], SCREEN_SCHEMA)
    resp_t = table([{**cell_cols, **r} for r in responses], RESPONSE_SCHEMA)
    write_parquet(screen_t, out_screen)
    write_parquet(resp_t, out_responses)
    resp_df = resp_t.to_pandas()
    return resp_df
