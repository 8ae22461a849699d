"""Stage 3 of the labels (section 6.1): the judge role screens every candidate experience
for unsupported claims and for restatements of the observation.  A candidate passes only
when the judge answers validly and flags neither; a failed (or invalid) screen keeps the
context with a NOUPDATE target."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd

from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.records import table
from memtrials.io import write_parquet
from memtrials.llm import open_client
from memtrials.studies.history.calibrator.contexts import Context
from memtrials.studies.history.calibrator.generate import read_contexts
from memtrials.studies.history.calibrator.prompts import SCREEN_SCHEMA as SCREEN_JSON
from memtrials.studies.history.calibrator.prompts import CalibratorPrompts
from memtrials.studies.history.calibrator.schemas import SCREEN_SCHEMA

if TYPE_CHECKING:
    from memtrials.llm import Client

log = logging.getLogger(__name__)


def candidates(contexts: Sequence[Context], generated: pd.DataFrame) -> list[tuple[Context, str]]:
    """The contexts whose review returned CALIBRATE, with their experience, in context order."""
    exp = {r["context_id"]: r["experience"] for r in generated.to_dict("records") if r["decision"] == "CALIBRATE"}
    return [(c, exp[c.context_id]) for c in contexts if c.context_id in exp]


async def screen_candidates(client: Client, hp: ActorPrompts, cp: CalibratorPrompts, judge: str,
                            cands: Sequence[tuple[Context, str]], max_tokens: int | None) -> list[dict[str, Any]]:
    async def one(c: Context, e: str) -> dict[str, Any]:
        msgs = cp.screen_messages(hp, env=c.env, task=c.task, history=c.review_history(), action=c.action,
                                  observation=c.observation, experience=e)
        j = await client.complete_json(judge, msgs, schema=SCREEN_JSON, max_tokens=max_tokens, temperature=0.0,
                                       purpose="calibrator-screen")
        v = j.value if j.valid and isinstance(j.value, dict) else None
        uns = bool(v["unsupported"]) if v else None
        rest = bool(v["restates_observation"]) if v else None
        return {"context_id": c.context_id, "judge": judge, "call_id": j.call_id, "valid": v is not None,
                "unsupported": uns, "restates_observation": rest,
                "passed": v is not None and not uns and not rest}

    return list(await asyncio.gather(*(one(c, e) for c, e in cands)))


async def screen_stage(config: Mapping[str, Any], *, judge: str, contexts_path: str, generated_path: str,
                       actor_prompts_dir: str, calibrator_prompts_dir: str, max_tokens: int | None, out: str,
                       out_calls: str) -> pd.DataFrame:
    cands = candidates(read_contexts(contexts_path), pd.read_parquet(generated_path))
    hp, cp = ActorPrompts.load(actor_prompts_dir), CalibratorPrompts.load(calibrator_prompts_dir)
    async with open_client(config, f"calibrator/screen/{judge}", out_calls) as client:
        client.expect(len(cands))
        rows = await screen_candidates(client, hp, cp, judge, cands, max_tokens)
    write_parquet(table(rows, SCREEN_SCHEMA), out)
    log.info("screen by %s: %d candidates, %d passed", judge, len(rows), sum(r["passed"] for r in rows))
    return table(rows, SCREEN_SCHEMA).to_pandas()
