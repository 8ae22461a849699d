"""Decision contexts (section 6.1): eligible transitions are the non-terminal ones that a
recorded step follows, drawn evenly across (source actor, environment) groups, seeded; a
code-action environment (no listed actions) keeps ``next_actions`` null."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from memtrials.agent.records import table
from memtrials.studies.history.calibrator.contexts import Context, eligible, sample_contexts
from memtrials.studies.history.calibrator.schemas import CONTEXT_SCHEMA


def cell(model: str, env: str, n_eps: int, n_steps: int, listed: bool = True, won_last: bool = False):
    eps, steps = [], []
    for e in range(n_eps):
        eid = f"history/rollouts/{model}/{env}/src/t{e}"
        eps.append({"episode_id": eid, "task": f"task {e}"})
        for t in range(1, n_steps + 1):
            steps.append({"episode_id": eid, "task_id": f"t{e}", "step": t, "obs_before": f"o{t}",
                          "action": f"a{t}", "observation": f"o{t + 1}",
                          "done": won_last and t == n_steps,
                          "shown_actions": json.dumps([f"x{t}", f"y{t}"]) if listed else None})
    return pd.DataFrame(eps), pd.DataFrame(steps)


def test_eligible_transitions_are_followed_by_a_recorded_step(tmp_path):
    ctx = eligible("m", "scienceworld", *cell("m", "scienceworld", 2, 4))
    assert len(ctx) == 2 * 3     # step 4 of each episode has no next step
    c = next(x for x in ctx if x.step == 2 and x.task_id == "t0")
    assert [e.action for e in c.history] == ["a1", "a2"] and c.action == "a2" and c.observation == "o3"
    assert c.next_actions == ("x3", "y3") and c.task == "task 0"
    # round trip through the Parquet row (code actions: null list)
    eps, steps = cell("m", "appworld", 1, 3, listed=False)
    steps.to_parquet(tmp_path / "s.parquet")             # as the step table is read back
    code = eligible("m", "appworld", eps, pd.read_parquet(tmp_path / "s.parquet"))
    t = table([x.row() for x in code], CONTEXT_SCHEMA).to_pandas()
    back = [Context.from_row(r) for r in t.to_dict("records")]
    assert back == code and all(b.next_actions is None for b in back)


def test_sampling_is_even_over_groups_and_seeded():
    groups = {(m, e): eligible(m, e, *cell(m, e, 3, 5)) for m in ("a", "b") for e in ("alfworld", "appworld")}
    picked = sample_contexts(groups, 10, seed=1)
    counts = Counter((c.source_model, c.env) for c in picked)
    assert sum(counts.values()) == 10 and sorted(counts.values()) == [2, 2, 3, 3]
    assert len({c.context_id for c in picked}) == 10
    assert [c.context_id for c in sample_contexts(groups, 10, seed=1)] == [c.context_id for c in picked]
    assert [c.context_id for c in sample_contexts(groups, 10, seed=2)] != [c.context_id for c in picked]


def test_a_small_group_gives_what_it_has(caplog):
    groups = {("a", "alfworld"): eligible("a", "alfworld", *cell("a", "alfworld", 1, 2)),
              ("a", "appworld"): eligible("a", "appworld", *cell("a", "appworld", 4, 5))}
    picked = sample_contexts(groups, 8, seed=0)
    counts = Counter(c.env for c in picked)
    assert counts == {"alfworld": 1, "appworld": 4}
    assert "1 eligible transitions, 4 asked" in caplog.text
    with pytest.raises(ValueError, match="calibrator.contexts.count"):
        sample_contexts(groups, 0, seed=0)
