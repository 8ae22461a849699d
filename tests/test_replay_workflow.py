"""Reproduce the tables from the cache alone: a small real Snakemake run of the luck study on
the loopback endpoint, then a rerun from scratch in replay mode (``cache.mode: replay``) with
the endpoint stopped and its key unset rebuilds byte-identical tables; with one cache entry
removed, the cell that needs it fails naming itself and the missing entry."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
import yaml

from memtrials.testing import LoopbackServer, loopback_endpoint
from tests.conftest import failure_text, run_snakemake
from tests.luck.test_luck_e2e import policy

KEY = "MEMTRIALS_REPLAY_WF_KEY"
TARGETS = ["results/luck/tables/table1_panel.md", "results/luck/figures/figure1_p2_p3m.png"]


def _tables(wf) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((wf / "results/luck/tables").iterdir())
            if p.suffix in (".md", ".csv", ".tex")}


@pytest.mark.slow
def test_a_reviewer_rebuilds_identical_tables_from_the_cache_with_no_endpoint_and_no_key(workflow_copy):
    wf = workflow_copy
    with LoopbackServer(policy=policy) as srv:
        entry = loopback_endpoint(srv, api_key_env=KEY, max_concurrency=8, params={"temperature": 0.0, "max_tokens": 256})
        minilm = yaml.safe_load((wf / "config/models.yaml").read_text())["endpoints"]["minilm"]
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": {"loop": entry, "minilm": minilm}}))
        base = yaml.safe_load((wf / "config/config.yaml").read_text())
        overlay = {"models_file": "models.yaml", "panel": ["loop"], "smoke": {"enabled": False, "question": "x"},
                   "roles": {role: "loop" for role in base["roles"] if role != "embedder"}}
        (wf / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        out = run_snakemake(wf, "--configfile", "overlay.yaml", "--", *TARGETS, env={KEY: "the-key"})
        assert out.returncode == 0, failure_text(out)
        assert srv.stats.completions > 0
    tables = _tables(wf)
    assert "table1_panel.md" in tables and len(tables) >= 6

    # the reviewer's copy: the cache alone, the endpoint stopped, the key unset
    for path in (wf / "results").iterdir():
        if path.name != "cache":
            shutil.rmtree(path)
    (wf / "replay.yaml").write_text(yaml.safe_dump({"cache": {"mode": "replay"}}))
    env = {KEY: ""}  # (cache.mode use refuses to start without it: tests/test_llm_replay.py)
    out = run_snakemake(wf, "--configfile", "overlay.yaml", "replay.yaml", "--", *TARGETS, env=env)
    assert out.returncode == 0, failure_text(out)
    assert _tables(wf) == tables

    # one entry gone: its cell fails, naming itself and the missing entry
    db = sqlite3.connect(wf / "results/cache/llm.sqlite")
    key, record = db.execute("SELECT key, record FROM responses WHERE record LIKE '%luck/loop/readers%' "
                             "ORDER BY key LIMIT 1").fetchone()
    db.execute("DELETE FROM responses WHERE key = ?", (key,))
    db.commit()
    db.close()
    # the readers cell runs again (and what follows it), nothing before it
    out = run_snakemake(wf, "--configfile", "overlay.yaml", "replay.yaml", "--forcerun", "luck_readers", "--",
                        *TARGETS, env=env)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert f"replay mode (cache.mode: replay): cell '{json.loads(record)['origin_cell']}' needs a chat completion" in text
    assert f"missing entry {key}" in text
