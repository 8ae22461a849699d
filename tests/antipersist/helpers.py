"""Shared by the anti-persistence tests: a ScienceWorld task table, a job config slice, a
loopback policy for the actor and every synthesis role, and a subprocess training job."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from memtrials.testing import loopback_embed_endpoint, loopback_endpoint
from memtrials.testing.policies import make_policy

REPO = Path(__file__).resolve().parents[2]
TYPES = ["find-non-living-thing", "lifespan-longest-lived", "identify-life-stages-1"]
SECTION = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["antipersist"]


def task_table(path: Path) -> Path:
    """Official ScienceWorld task ids: variation 0 of three types for training, 1 and 2 for testing.

    Variation 0 is the training pool because its observations do not depend on what the
    engine played before (the runner's kill test uses the same tasks); in some other
    variations ScienceWorld lists objects in an order that depends on the engine's earlier
    episodes, so a job resumed in a fresh process would see different observations."""
    rows = [{"task_id": f"{t}:{v}", "env": "scienceworld", "split": "train" if v == 0 else "test", "type": t,
             "source": "official", "detail": "{}"} for t in TYPES for v in range(3)]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)
    return path


def policy(body: dict) -> str:
    """JSON answers for every synthesis schema; plain text for free-text syntheses; actors
    the first admissible action."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        props = (fmt["json_schema"]["schema"].get("properties") or {})
        if "operations" in props:
            return json.dumps({"operations": [{"op": "ADD", "number": 0, "text": "Look around first."}]})
        if "skills" in props:
            return json.dumps({"skills": [{"name": "look", "text": "look around before acting"}]})
        if "rules" in props:
            return json.dumps({"rules": ["Look around first."]})
        return make_policy("first_enum")(body)
    if body.get("grammar") or "admissible" in json.dumps(body.get("messages")).lower():
        return make_policy("first_admissible")(body)
    return "Open the door first, because the room is closed."


def job_config(base: dict[str, Any], tmp: Path, srv: Any) -> dict[str, Any]:
    """``base`` (a pipeline config) with the chat endpoint ``loop`` and the embedder ``emb``."""
    cfg = copy.deepcopy(base)
    models = tmp / "models.yaml"
    models.write_text(yaml.safe_dump({"endpoints": {"loop": loopback_endpoint(srv), "emb": loopback_embed_endpoint(srv)}}))
    cfg["models_file"] = str(models)
    cfg["panel"] = ["loop"]
    cfg["roles"] = {**{r: "loop" for r in cfg["roles"]}, "embedder": "emb"}
    return cfg


def cell(design: str, **over: Any) -> dict[str, Any]:
    """A job's config slice for the ScienceWorld test table (2 rounds of 2 tasks, 2 held out)."""
    a = copy.deepcopy(SECTION)
    c = {"seed": 7, "rounds": 2, "round_size": 2, "batch_size": 1, "in_flight": 1, "k": 3,
         "pools": {"scienceworld": {"train_split": "train", "train_tasks": 3, "eval_split": "test", "eval_tasks": 2}},
         "env_options": {"scienceworld": {}}, "actor": {"mode": "choice", "max_actions": 2, "max_output_tokens": 16,
                                                         "max_listed_actions": 5},
         "synthesis": {"max_tokens": 32}, "synthesizer": None, "embedder": "emb",
         "selector": a["selector"], "reflexion": a["reflexion"], "expel": a["expel"], "autorefine": a["autorefine"]}
    c.update(over)
    return c
