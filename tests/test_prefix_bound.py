"""The prefix figures of ``benchmarks/scale_prefix.py`` (issue 39, "Prompt-prefix reuse") on real
rendered actor prompts: as sent, the layouts' rewrites and the content bound, checked against
counts made by hand on a three-step episode."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from memtrials.agent import views as V
from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.render import Segment

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from scale_prefix import content_bound, prefix_reuse, repeated_share  # noqa: E402

OBS = ["You are in the middle of a room. Looking around you, you see a desk 1 and a shelf 1.",
       "You arrive at desk 1. On the desk 1, you see a mug 1.",
       "You pick up the mug 1 from the desk 1."]
ACTS = ["go to desk 1", "take mug 1 from desk 1", "go to shelf 1"]
LISTINGS = [["go to desk 1", "go to shelf 1", "look", "inventory"],
            ["go to shelf 1", "take mug 1 from desk 1", "examine desk 1", "look", "inventory"],
            ["go to desk 1", "go to shelf 1", "put mug 1 in/on desk 1", "examine mug 1", "look", "inventory"]]


def episode(condition: str) -> tuple[pd.DataFrame, dict[str, str]]:
    prompts = ActorPrompts.load(REPO / "config" / "prompts" / "actor")
    rows, texts = [], {}
    for t in range(3):
        entries = [V.Entry(observation=OBS[k], action=ACTS[k]) for k in range(t)]
        label = V.current_label(condition, len(entries))
        msgs = prompts.actor_messages(env="alfworld", task="put a mug on the shelf",
                                      history=[Segment.of(V.apply_view(condition, entries))],
                                      current_observation=OBS[t], current_label=label, step_count=t,
                                      admissible=LISTINGS[t], mode="react")
        texts[f"c{t}"] = msgs[0]["content"]
        rows.append({"call_id": f"c{t}", "episode_id": "e", "step": t + 1, "action": ACTS[t]})
    return pd.DataFrame(rows), texts


@pytest.mark.parametrize("condition", ["raw", "causal"])
def test_the_content_bound_counts_only_the_action_the_observation_and_the_listing_as_new(condition):
    order, texts = episode(condition)
    words = [len(texts[f"c{t}"].split()) for t in range(3)]
    listing = [len(("Admissible actions:\n" + "\n".join(f"- {a}" for a in LISTINGS[t])).split()) for t in range(3)]
    new = [None] + [len(OBS[t].split()) + listing[t] + len(ACTS[t - 1].split()) for t in (1, 2)]
    # the first prompt of the first episode repeats nothing; later ones at best all but the new words
    assert content_bound(order, texts) == pytest.approx(((words[1] - new[1]) + (words[2] - new[2])) / sum(words))
    as_sent = repeated_share(order, texts)
    assert 0 < as_sent < content_bound(order, texts) < 1


def test_layout_b_sits_between_the_prompts_as_sent_and_the_bound():
    order, texts = episode("raw")
    calls = pd.DataFrame({"call_id": list(texts), "purpose": "actor",
                          "messages": [json.dumps([{"role": "user", "content": texts[c]}]) for c in texts],
                          "cached_tokens": 0, "prompt_tokens": 1})
    p = prefix_reuse(calls, order, "raw")
    assert p["repeated"] < p["layout_a"] < p["layout_b"] <= p["bound"]
    assert p["repeated"] < p["layout_c"] < p["layout_b"]
