"""A scripted WebShop shopper for the loopback endpoint (the three studies' WebShop tests).

It reads only what the actor prompt shows: the task (the goal's instruction) and the listed
actions.  With the search bar listed (the template ``search[<...>]``) it searches for the
instruction's words; on a results page it opens the first product listed; on an item page it
buys.  So its purchases score a real, partial purchase reward.  Every request that asks for
JSON (a review, a judge, ACE's Reflector and Curator, Dynamic Cheatsheet's selection) gets a
schema-valid object (:func:`memtrials.testing.policies.first_enum`); a JSON-enum action
request gets the action wrapped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from memtrials.agent.parse import TEMPLATE
from memtrials.testing import loopback_embed_endpoint, loopback_endpoint
from memtrials.testing.policies import first_enum, schema_of
from tests.conftest import base_config
from tests.history.helpers import is_judge, is_review

_TASK = re.compile(r"Your task is to:\s*(.+)")
_PRODUCT = re.compile(r"^click\[b[0-9a-z]{9}\]$")


def _text(body: Mapping[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])


def listed_actions(text: str) -> list[str]:
    """The bullets under the prompt's last ``Admissible actions:`` heading."""
    at = text.rfind("Admissible actions:\n")
    if at < 0:
        return []
    out = []
    for line in text[at + len("Admissible actions:\n"):].splitlines():
        if not line.startswith("- "):
            break
        out.append(line[2:])
    return out


def shop(body: Mapping[str, Any]) -> str:
    """The shopper's next action for an actor request."""
    text = _text(body)
    listed = listed_actions(text)
    bar = next((a for a in listed if TEMPLATE.match(a)), None)
    if bar is not None:
        m = _TASK.search(text)
        words = re.sub(r"[^a-z0-9 ]+", " ", (m.group(1) if m else "product").lower()).split()
        return f"{bar.split('[', 1)[0]}[{' '.join(words[:12])}]"
    if "click[buy now]" in listed:
        return "click[buy now]"
    product = next((a for a in listed if _PRODUCT.match(a)), None)
    return product or (listed[0] if listed else "click[back to search]")


def shopper(body: Mapping[str, Any]) -> str:
    """The loopback policy: the Experience review keeps nothing, the repetition judge says no,
    JSON where a schema is asked for, else :func:`shop`."""
    if is_review(body):
        return '{"decision":"NOUPDATE","experience":null}'
    if is_judge(body):
        return '{"supports_repetition": false}'
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {}
    if "answer" in (schema.get("properties") or {}):  # an action as a JSON enum
        return json.dumps({"answer": shop(body)})
    if schema_of(body) is not None:
        return first_enum(body)
    return shop(body)


def loopback_overlay(wf: Path, srv: Any, section: str, values: Mapping[str, Any], grammar: bool = False) -> None:
    """``models.yaml`` (chat endpoint ``loop`` on ``srv``, with grammars when ``grammar``, and
    embedder ``emb``) and ``overlay.yaml`` in the workflow copy ``wf``: every role on ``loop``,
    the embedder ``emb``, the study ``section`` set to ``values``, only WebShop's environment
    jobs in ``all``."""
    (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": {
        "loop": loopback_endpoint(srv, grammar=grammar), "emb": loopback_embed_endpoint(srv)}}))
    overlay = {"models_file": "models.yaml", "panel": ["loop"],
               "roles": {**{r: "loop" for r in base_config()["roles"]}, "embedder": "emb"},
               section: dict(values), "envs": {"run": ["webshop"]}}
    (wf / "overlay.yaml").write_text(yaml.safe_dump(overlay))


def run_on_webshop(tmp_path: Path, section: str, values: Mapping[str, Any], target: str,
                   grammar: bool = False) -> Path:
    """A workflow copy under ``tmp_path`` run to ``target`` through Snakemake with the study
    ``section`` set to ``values`` (:func:`loopback_overlay`), the shopper answering every
    call; returns the copy's folder."""
    from memtrials.testing import LoopbackServer
    from tests.conftest import copy_workflow, failure_text, run_snakemake

    wf = copy_workflow(tmp_path / "wf")
    with LoopbackServer(policy=shopper, embed_dim=32) as srv:
        loopback_overlay(wf, srv, section, values, grammar=grammar)
        r = run_snakemake(wf, "--configfile", "overlay.yaml", "--", target, timeout=900)
        assert r.returncode == 0, failure_text(r)
    return wf
