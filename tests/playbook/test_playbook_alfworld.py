"""The ALFWorld settings through the playbook study, and the embedded model.

On generated ALFWorld games and the loopback endpoint: a Dynamic Cheatsheet growth run
(its rewrite writes the planted lessons as entries) and its practice round, checked on the
artifacts.  On the embedded model (``smollm2`` every chat role, ``minilm`` embedder, as the
default config): one ACE growth batch of the default config's ALFWorld setting and a
two-episode practice round, checked for what every run must have whatever the small model
writes: the actor, Reflector and Curator calls recorded on the embedded endpoints, a
playbook artifact of the declared schema, and a practice record.
"""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from memtrials.llm import read_records
from memtrials.studies.playbook.records import PLAYBOOK_SCHEMA
from tests.conftest import embedded_config
from tests.playbook.helpers import HARMFUL, HELPFUL, alf_policy, config, paths, run_part, task_table

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _served_matches_inclusion(base, k: int = 1) -> None:
    rec = json.loads((base / f"practice/run{k}.json").read_text())
    episodes = pd.read_parquet(base / f"practice/run{k}.parquet")
    steps = pd.read_parquet(base / f"practice/run{k}.steps.parquet")
    first = steps.sort_values("step").groupby("episode_id").first()
    blocks = rec["blocks"]["blocks"]
    for _, ep in episodes.iterrows():
        want = set().union(*[set(blocks[b]) for b, z in enumerate(ep["inclusion"]) if z == "1"])
        assert set(json.loads(first.loc[ep["episode_id"], "memory_ids"])) == want


def test_dc_growth_and_practice_on_alfworld(alf_root, loopback, tmp_path):
    srv = loopback(policy=alf_policy(), embed_dim=64)
    cfg = config(tmp_path, srv, alf_root, env="alfworld", embedder="loop", growth__runs=1,
                 measurement__practice_tasks=2, measurement__episodes=4, tokenizer="endpoint")
    tasks = task_table(alf_root, tmp_path / "tasks.parquet", "alfworld")
    base = tmp_path / "results/playbook/std/loop/alfworld/dc"
    growth = run_part(cfg, "growth", base, tasks, variant="dc")
    practice = run_part(cfg, "practice", base, tasks, variant="dc")

    pb = pd.read_parquet(paths(base, "growth")["playbooks"])
    assert list(pb["text"]) == HELPFUL + HARMFUL and set(pb["section"]) == {"cheatsheet"}
    assert list(pb["uses"]) == [1] * 6 and pb["helpful"].isna().all()
    # tokens by the endpoint's own tokenizer (the loopback counts words), not the pieces fallback
    assert list(pb["tokens"]) == [len(t.split()) for t in pb["text"]] and growth["counted_by"] == "endpoint:loop"
    assert growth["calls"]["dc_curator"]["calls"] == 1 and growth["calls"]["actor"]["calls"] >= 2
    episodes = pd.read_parquet(paths(base, "growth")["episodes"])
    table = pd.read_parquet(tasks).set_index("task_id")
    assert set(episodes["env"]) == {"alfworld"} and set(table.loc[episodes["task_id"], "split"]) == {"train"}
    assert len(practice["blocks"]["blocks"]) == 2 and practice["episodes"] == 4
    assert set(table.loc[practice["practice_tasks"], "split"]) == {"practice"}
    _served_matches_inclusion(base)


@pytest.mark.embedded
def test_embedded_model_grows_and_practices_the_default_alfworld_setting(alf_root, tmp_path):
    cfg = embedded_config(tmp_path, servers=None)
    pb = cfg["playbook"]
    pb.update(envs=["alfworld"], env_options={"alfworld": {"root": str(alf_root)}}, in_flight=1)
    pb["actor"]["max_actions"] = 1
    pb["growth"].update(runs=1, train_tasks=1, batch_size=1, max_passes=1)
    pb["measurement"].update(practice_tasks=2, episodes=2)
    tasks = task_table(alf_root, tmp_path / "tasks.parquet", "alfworld")
    base = tmp_path / "results/playbook/std/smollm2/alfworld/ace-passfail"
    record = run_part(cfg, "growth", base, tasks)
    practice = run_part(cfg, "practice", base, tasks)

    calls = read_records(paths(base, "growth")["calls"]).to_pandas()
    by_purpose = calls.groupby("purpose")["endpoint"].agg(set).to_dict()
    assert by_purpose["actor"] == by_purpose["ace_reflector"] == by_purpose["ace_curator"] == {"smollm2"}
    assert record["calls"]["ace_reflector"]["calls"] == record["calls"]["ace_curator"]["calls"] == 1
    assert pq.read_schema(paths(base, "growth")["playbooks"]).remove_metadata().equals(PLAYBOOK_SCHEMA)
    assert record["n_passes"] == 1 and record["passes"][0]["n_lessons"] == len(record["memory"]["state"]["lessons"])
    lessons = record["passes"][0]["n_lessons"]
    assert practice["episodes"] == 2 and len(practice["blocks"]["blocks"]) == min(lessons, 4)
    if lessons:  # the lessons were embedded by the embedded embedder
        pcalls = read_records(paths(base, "practice")["calls"]).to_pandas()
        assert set(pcalls.loc[pcalls["purpose"] == "playbook_blocks", "endpoint"]) == {"minilm"}
    _served_matches_inclusion(base)
