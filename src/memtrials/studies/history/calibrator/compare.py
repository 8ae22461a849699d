"""Stage 4 of the labels (section 6.1, Appendices D.4 and G.3): paired next actions.

For every screened candidate E, the recipient actor generates its next action twice from
the same context, without and with E beside the latest transition.  When the parsed
executable actions are identical the pair is a tie and the judge is not called;
otherwise the judge role compares the two actions twice, the A/B order reversed, at
temperature 0, shown the original actor prompt (without E) and the two actions and
nothing that names the actor, the arm or the experience.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd

from memtrials.agent.parse import parse_action
from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.records import table
from memtrials.io import write_parquet
from memtrials.llm import open_client
from memtrials.studies.history.calibrator.contexts import Context
from memtrials.studies.history.calibrator.generate import read_contexts
from memtrials.studies.history.calibrator.labels import needs_judge, outcome
from memtrials.studies.history.calibrator.prompts import COMPARE_SCHEMA as COMPARE_JSON
from memtrials.studies.history.calibrator.prompts import CalibratorPrompts
from memtrials.studies.history.calibrator.schemas import COMPARE_SCHEMA
from memtrials.studies.history.calibrator.screen import candidates

if TYPE_CHECKING:
    from memtrials.llm import Client

log = logging.getLogger(__name__)


def screened(contexts: Sequence[Context], generated: pd.DataFrame, screen: pd.DataFrame) -> list[tuple[Context, str]]:
    """The candidates that passed the content screen."""
    ok = set(screen.loc[screen["passed"].astype(bool), "context_id"])
    return [(c, e) for c, e in candidates(contexts, generated) if c.context_id in ok]


def actor_messages(hp: ActorPrompts, c: Context, exp: str | None, mode: str) -> list[dict[str, str]]:
    """The recipient actor's block-format prompt at step ``t+1``, with ``exp`` beside ``A_t`` or without."""
    return hp.actor_messages(env=c.env, task=c.task, history=c.actor_history(exp), current_observation=c.observation,
                             current_label="Current observation", step_count=c.step, admissible=c.next_actions,
                             mode=mode, fmt="block")


async def compare_pair(client: Client, hp: ActorPrompts, cp: CalibratorPrompts, *, actor: str, judge: str, c: Context,
                       exp: str, actor_cfg: Mapping[str, Any], judge_max_tokens: int | None) -> dict[str, Any]:
    """One within-actor pair and, unless its actions are identical, its two judgements."""
    mode = str(actor_cfg["mode"])
    constrained = mode == "choice" and bool(c.next_actions)
    choices = list(c.next_actions) if constrained and c.next_actions else None
    parse_mode = "choice" if constrained else "react"
    base = actor_messages(hp, c, None, mode)
    with_e = actor_messages(hp, c, exp, mode)
    r0, r1 = await asyncio.gather(*(
        client.complete(actor, m, max_tokens=actor_cfg["max_output_tokens"], choices=choices,
                        purpose="calibrator-pair") for m in (base, with_e)))
    a0 = parse_action(r0.text, c.next_actions, parse_mode).action
    a1 = parse_action(r1.text, c.next_actions, parse_mode).action
    row: dict[str, Any] = {
        "context_id": c.context_id, "actor": actor, "judge": judge, "call_without": r0.call_id,
        "call_with": r1.call_id, "reply_without": r0.text, "reply_with": r1.text, "action_without": a0,
        "action_with": a1, "identical": not needs_judge(a0, a1), "judge_call_ab": None, "judge_call_ba": None,
        "verdict_ab": None, "verdict_ba": None, "outcome": "tie"}
    if row["identical"]:
        return row
    prompt = base[-1]["content"]
    ab, ba = await asyncio.gather(*(
        client.complete_json(judge, cp.compare_messages(prompt, x, y), schema=COMPARE_JSON, temperature=0.0,
                             max_tokens=judge_max_tokens, purpose="calibrator-compare")
        for x, y in ((a1, a0), (a0, a1))))
    v_ab = ab.value["better"] if ab.valid and isinstance(ab.value, dict) else None
    v_ba = ba.value["better"] if ba.valid and isinstance(ba.value, dict) else None
    row.update(judge_call_ab=ab.call_id, judge_call_ba=ba.call_id, verdict_ab=v_ab or "invalid",
               verdict_ba=v_ba or "invalid", outcome=outcome(v_ab, v_ba))
    return row


async def compare_stage(config: Mapping[str, Any], *, actor: str, judge: str, contexts_path: str,
                        generated_path: str, screen_path: str, actor_prompts_dir: str, calibrator_prompts_dir: str,
                        actor_cfg: Mapping[str, Any], judge_max_tokens: int | None, out: str,
                        out_calls: str) -> pd.DataFrame:
    """Every screened candidate with one recipient actor; one row per pair."""
    pairs = screened(read_contexts(contexts_path), pd.read_parquet(generated_path), pd.read_parquet(screen_path))
    hp, cp = ActorPrompts.load(actor_prompts_dir), CalibratorPrompts.load(calibrator_prompts_dir)
    async with open_client(config, f"calibrator/compare/{actor}", out_calls) as client:
        client.expect(4 * len(pairs))
        rows = list(await asyncio.gather(*(
            compare_pair(client, hp, cp, actor=actor, judge=judge, c=c, exp=e, actor_cfg=actor_cfg,
                         judge_max_tokens=judge_max_tokens) for c, e in pairs)))
    write_parquet(table(rows, COMPARE_SCHEMA), out)
    log.info("actor %s: %d pairs, %d identical (no judge call), %d win, %d loss", actor, len(rows),
             sum(r["identical"] for r in rows), sum(r["outcome"] == "win" for r in rows),
             sum(r["outcome"] == "loss" for r in rows))
    return table(rows, COMPARE_SCHEMA).to_pandas()
