"""Shared by the memory tests: a config with a chat and an embedding loopback entry,
episodes built as data, and the model calls a cell recorded."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any, Sequence

import yaml

from memtrials.agent.actor import Episode
from memtrials.llm import open_client, read_records
from memtrials.testing import loopback_embed_endpoint, loopback_endpoint
from tests.conftest import REPO, base_config

MEMORY_PROMPTS = REPO / "config" / "prompts" / "memory"


def config(tmp_path: Path, srv: Any) -> dict[str, Any]:
    """Endpoints ``loop`` (chat) and ``emb`` (embeddings), both on ``srv``; a fresh cache."""
    cfg = copy.deepcopy(base_config())
    tmp_path.mkdir(parents=True, exist_ok=True)
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"endpoints": {"loop": loopback_endpoint(srv, params={
        "temperature": 0.0, "top_p": 1.0, "max_tokens": 512, "seed": 0}), "emb": loopback_embed_endpoint(srv)}}))
    cfg.update(models_file=str(models), panel=["loop"], roles={**{r: "loop" for r in cfg["roles"]}, "embedder": "emb"},
               cache={"path": str(tmp_path / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"})
    cfg["request"] = {"timeout_s": 5.0, "max_retries": 4, "backoff_base_s": 0.01, "backoff_max_s": 0.1}
    return cfg


def episode(eid: str, task: str, *, won: bool = False, served: Sequence[str] = (), n_steps: int = 2,
            score: float = 0.0, tests: list[dict[str, Any]] | None = None,
            observations: Sequence[str] | None = None) -> Episode:
    """An episode as the actor returns it (no environment): ``n_steps`` step rows that all
    showed the lessons ``served``; ``tests`` in the last step row as AppWorld's per-test results."""
    steps = []
    for k in range(1, n_steps + 1):
        obs = observations[k - 1] if observations else f"you see item {k} on the table"
        steps.append({"episode_id": eid, "task_id": task, "step": k, "action": f"look at item {k}",
                      "observation": obs, "memory_ids": json.dumps(list(served)), "won": won and k == n_steps,
                      "score": score if k == n_steps else 0.0})
    if tests is not None:
        steps[-1]["tests"] = json.dumps(tests)
    summary = {"episode_id": eid, "task_id": task, "task": task, "won": won, "final_score": score,
               "n_steps": n_steps, "seed": 0}
    return Episode(steps=steps, summary=summary)


def update(cfg: dict[str, Any], memory: Any, batches: Sequence[Sequence[Episode]], records: Path) -> None:
    """``memory.update`` on each batch in turn, one client; call records written to ``records``."""
    async def main() -> None:
        async with open_client(cfg, "tests/memory", records) as client:
            for batch in batches:
                await memory.update(client, list(batch))
    asyncio.run(main())


def calls(records: Path) -> list[dict[str, Any]]:
    """The recorded calls, each with its messages decoded, in call order."""
    rows = read_records(records).to_pylist()
    for r in rows:
        r["messages"] = json.loads(r["messages"])
    return rows
