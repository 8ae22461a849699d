"""End to end on the loopback endpoint: worlds -> freeze -> lessons -> answers ->
registered analysis -> tables and figure, through Snakemake.

The scripted endpoint writes a "switch tools after an error" lesson from every
failure run and a "keep the tool" lesson from every success run; its reader picks the
worse tool only when its memory holds the failure-written lesson and the world is one
of the planted susceptible worlds (so the planted P2 is their share).  One world's
N lesson comes back empty (missing: its reader cells are not scheduled); one answer is
truncated JSON (recovered by the registered rule) and one is unparseable (invalid).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import pytest
import yaml

from memtrials.testing import LoopbackServer, loopback_endpoint
from tests.conftest import REPO, run_snakemake, failure_text

FAILURE_LESSON = ("# Memory Item 1\n## Title Switch tools after an error\n"
                  "## Description Use when a tool returned an error.\n"
                  "## Content After an error, start the next run with the other tool.")
SUCCESS_LESSON = ("# Memory Item 1\n## Title Keep the tool that worked\n"
                  "## Description Use when choosing the tool for this task.\n"
                  "## Content Keep using the tool with the better record.")
_COUNTS = re.compile(r"(\w+) succeeded in (\d+) of (\d+)")


def _h(tool: str, i: int, m: int) -> bool:
    return hashlib.sha256(tool.encode()).digest()[i] % m == 0


def susceptible(better_tool: str) -> bool:
    """The planted worlds: about 3 in 4, by a hash of the better tool's name."""
    return not _h(better_tool, 0, 4)


def empty_n_lessons(better_tool: str) -> bool:
    """Worlds whose N lessons come back empty (missing)."""
    return _h(better_tool, 1, 6)


def odd_answers(better_tool: str) -> bool:
    """Worlds with one truncated (recovered) and one unparseable (invalid) PLANTED answer."""
    return _h(better_tool, 2, 4)


def _text(body: Mapping[str, Any], role: str) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == role)


def policy(body: Mapping[str, Any]) -> str:
    system, user = _text(body, "system"), _text(body, "user")
    counts = {t: int(k) for t, k, _ in _COUNTS.findall(user)}
    better, worse = sorted(counts, key=counts.get, reverse=True)
    if system.startswith("You are an expert in running operational tasks"):
        if "If nothing about how the task should be done needs to change" in system and empty_n_lessons(better):
            return "   "  # an empty lesson: missing
        return FAILURE_LESSON if "this run allows no retry" in user else SUCCESS_LESSON
    memory = user.split("Memory items saved from earlier runs of this task:\n", 1)[1]
    pick = worse if ("Switch tools after an error" in memory and susceptible(better)) else better
    if "## Title Use" in memory and odd_answers(better):  # the PLANTED arm
        if "it succeeded." in user:
            return '{"first_tool": "' + better + '", "reason": "the record fav'  # truncated: recovered
        if f"{worse} was used and it failed" in user:
            return "I cannot decide."  # unparseable: invalid
    return json.dumps({"first_tool": pick, "reason": "Chosen by the scripted reader."})


# the study's own outputs (other studies in the copied workflow are not asked for)
LUCK_TARGETS = ["results/luck/freeze/manifest.json", "results/luck/analysis/registered.json",
                "results/luck/tables/table1_panel.md", "results/luck/figures/figure1_p2_p3m.png"]


def test_pipeline_recovers_planted_p2_and_reads_luck_carrying(workflow_copy):
    wf = workflow_copy
    with LoopbackServer(policy=policy) as srv:
        entry = loopback_endpoint(srv, api_key_env=None, max_concurrency=8,
                                  params={"temperature": 0.0, "max_tokens": 256})
        minilm = yaml.safe_load((wf / "config/models.yaml").read_text())["endpoints"]["minilm"]
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": {"loop": entry, "minilm": minilm}}))
        overlay = {
            "models_file": "models.yaml", "panel": ["loop"], "smoke": {"enabled": False, "question": "x"},
            "luck": {"seed": 7, "worlds": {"domains": 8, "per_domain": 4},
                     "analysis": {"min_complete": 24, "panel_min_endpoints": 1}},
        }
        base = yaml.safe_load((wf / "config/config.yaml").read_text())
        # other studies' chat roles (the embedder must stay an embedding endpoint)
        overlay["roles"] = {role: "loop" for role in (base.get("roles") or {}) if role != "embedder"}
        (wf / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        out = run_snakemake(wf, "--configfile", "overlay.yaml", "--", *LUCK_TARGETS)
        assert out.returncode == 0, failure_text(out)

        worlds = pd.read_parquet(wf / "results/luck/worlds.parquet")
        lessons = pd.read_parquet(wf / "results/luck/loop/lessons.parquet")
        answers = pd.read_parquet(wf / "results/luck/loop/answers.parquet")
        assert len(worlds) == 32 and len(lessons) == 32 * 12 and len(answers) == 32 * 32
        # missing lessons: recorded, never retried; their reader cells not scheduled
        missing = lessons[lessons.status != "ok"]
        n_empty = int(worlds.better_tool.map(empty_n_lessons).sum())
        assert n_empty > 0 and worlds.better_tool.map(odd_answers).any()
        assert len(missing) == 4 * n_empty and set(missing.status) == {"empty"}
        assert set(missing.instruction) == {"N"}
        assert (answers.status == "not_scheduled").sum() == 2 * len(missing)
        assert (answers.status == "recovered").sum() > 0 and (answers.status == "invalid").sum() > 0
        assert answers[answers.status == "invalid"].raw.notna().all()

        reg = json.loads((wf / "results/luck/analysis/registered.json").read_text())
        q = {(r["unit"], r["quantity"], r["subset"]): r for r in reg["quantities"]}
        planted = worlds.better_tool.map(susceptible).mean()
        p2 = q[("loop", "P2", "all")]
        assert p2["n"] == 32 and p2["estimate"] == pytest.approx(planted)
        assert p2["lo"] < planted < p2["hi"]
        readings = {(r["unit"], r["contrast"]): r for r in reg["readings"]}
        assert readings[("loop", "P2")]["word"] == "luck-carrying"
        assert readings[("panel", "P2")]["word"] == "luck-carrying"
        assert readings[("loop", "P3m")]["word"] == "bounded below 0.10"
        assert q[("loop", "Sus", "all")]["estimate"] == pytest.approx(0.0, abs=0.02)
        for ext in ("md", "csv", "tex", "html"):
            assert (wf / f"results/luck/tables/table1_panel.{ext}").stat().st_size > 0
        assert "luck-carrying" in (wf / "results/luck/tables/table3_endpoints.md").read_text()
        assert f"| loop | 384 | {len(missing)} | 0% |" in (wf / "results/luck/tables/table_lessons.md").read_text()
        assert (wf / "results/luck/figures/figure1_p2_p3m.png").read_bytes()[:4] == b"\x89PNG"
        examples = (wf / "results/luck/analysis/examples.md").read_text()
        assert "## loop, RB, world" in examples and "Switch tools after an error" in examples
        # the records are locked into the registered manifest; the run says its thresholds are not registered
        lock = json.loads((wf / "results/luck/freeze/registered.json").read_text())["lock"]
        assert "results/luck/loop/answers.calls.parquet" in lock["records"]
        assert reg["thresholds"]["registered"] is False and "min_complete" in reg["thresholds"]["differs"]
        assert "NOT the registered thresholds" in (wf / "results/luck/tables/table1_panel.md").read_text()
        assert entry["model"] in (wf / "results/luck/tables/table6_endpoints.md").read_text()
        assert "# Appendix C by its rules" in examples
        assert all(w.startswith("lk-") for w in worlds.world_id)
        spec = json.loads((wf / "results/luck/loop/answers.spec.json").read_text())  # run_rule's spec
        assert spec["rule"] == "luck_readers" and spec["params"]["slice"]["panel"] == ["loop"]
        calls_before = srv.stats.requests

        # a locked record changed afterwards: the analysis refuses it (and the original bytes pass again)
        answers_path = wf / "results/luck/loop/answers.parquet"
        original = answers_path.read_bytes()
        edited = answers.copy()
        edited.loc[edited.y == 0.0, "y"] = 1.0
        edited.to_parquet(answers_path)
        out = run_snakemake(wf, "--configfile", "overlay.yaml", "--forcerun", "luck_analysis", "--",
                            "results/luck/analysis/registered.json")
        assert out.returncode != 0 and "have changed since" in out.stdout + out.stderr
        answers_path.write_bytes(original)

        # drift: an edited prompt makes the freeze (and every writer/reader) refuse
        prompt = wf / "config/prompts/luck/writer_rbd_success.md"
        prompt.write_text(prompt.read_text() + "Be careful.\n")
        out = run_snakemake(wf, "--configfile", "overlay.yaml", "--forcerun", "luck_writers", "--", *LUCK_TARGETS)
        assert out.returncode != 0
        assert "no longer matches its registered freeze" in out.stdout + out.stderr
        assert "prompt_files.writer_rbd_success.md" in out.stdout + out.stderr
        assert srv.stats.requests == calls_before
        # re-freeze on purpose (the registered manifest is moved aside, kept)
        rf = subprocess.run([sys.executable, "-m", "memtrials.studies.luck.freeze", "--refreeze",
                             "results/luck/freeze/registered.json"], cwd=wf, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        assert rf.returncode == 0, rf.stderr
        assert list((wf / "results/luck/freeze").glob("registered.*.json"))
        assert not (wf / "results/luck/freeze/registered.json").exists()
