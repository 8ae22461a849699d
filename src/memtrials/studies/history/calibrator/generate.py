"""Stage 2 of the labels (section 6.1): the generator role reviews every context through
the Appendix G.2 interface and returns NOUPDATE or a candidate experience E."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd

from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.records import table
from memtrials.agent.review import review_transition
from memtrials.io import write_parquet
from memtrials.llm import open_client
from memtrials.studies.history.calibrator.contexts import Context
from memtrials.studies.history.calibrator.schemas import GENERATE_SCHEMA

if TYPE_CHECKING:
    from memtrials.llm import Client

log = logging.getLogger(__name__)


def read_contexts(path: str) -> list[Context]:
    return [Context.from_row(r) for r in pd.read_parquet(path).to_dict("records")]


async def review_contexts(client: Client, prompts: ActorPrompts, generator: str, contexts: Sequence[Context],
                          max_tokens: int | None) -> list[dict[str, Any]]:
    """One G.2 review per context (rows of ``GENERATE_SCHEMA``, in context order)."""

    async def one(c: Context) -> dict[str, Any]:
        r = await review_transition(client, prompts, generator, env=c.env, task=c.task, history=c.review_history(),
                                    action=c.action, observation=c.observation, max_tokens=max_tokens)
        return {"context_id": c.context_id, "generator": generator, "call_id": r.call_id,
                "decision": r.decision, "experience": r.experience}

    return list(await asyncio.gather(*(one(c) for c in contexts)))


async def generate_stage(config: Mapping[str, Any], *, generator: str, contexts_path: str, actor_prompts_dir: str,
                         max_tokens: int | None, out: str, out_calls: str) -> pd.DataFrame:
    """Review every context with ``generator``; write the candidates and the call records."""
    contexts = read_contexts(contexts_path)
    prompts = ActorPrompts.load(actor_prompts_dir)
    async with open_client(config, f"calibrator/generate/{generator}", out_calls) as client:
        client.expect(len(contexts))
        rows = await review_contexts(client, prompts, generator, contexts, max_tokens)
    df = table(rows, GENERATE_SCHEMA).to_pandas()
    write_parquet(table(rows, GENERATE_SCHEMA), out)
    log.info("generator %s: %d contexts, %d CALIBRATE, %d NOUPDATE, %d invalid", generator, len(df),
             (df["decision"] == "CALIBRATE").sum(), (df["decision"] == "NOUPDATE").sum(),
             (df["decision"] == "INVALID").sum())
    return df
