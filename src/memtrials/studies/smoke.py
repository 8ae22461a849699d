"""The smoke cell: one fixed question to one endpoint, answer and call record as Parquet."""

from __future__ import annotations

import logging
from typing import Any, Mapping

import pandas as pd

from memtrials.io import write_parquet
from memtrials.llm import open_client

log = logging.getLogger(__name__)


async def ask(config: Mapping[str, Any], *, model: str, question: str, max_tokens: int,
              out_path: str, records_path: str) -> pd.DataFrame:
    async with open_client(config, f"smoke/{model}", records_path) as client:
        client.expect(1)
        r = await client.complete(model, [{"role": "user", "content": question}], max_tokens=max_tokens,
                                  purpose="smoke")
    df = pd.DataFrame([{
        "model": model, "question": question, "answer": r.text, "finish_reason": r.finish_reason,
        "call_id": r.call_id, "prompt_tokens": r.usage.prompt_tokens,
        "completion_tokens": r.usage.completion_tokens, "latency_s": r.latency_s, "cached": r.cached,
    }])
    write_parquet(df.drop(columns=["cached"]), out_path)
    log.info("%s answered %r (%s)", model, r.text, "cache" if r.cached else f"{r.latency_s:.2f} s")
    return df
