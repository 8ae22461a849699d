"""Locking a registered run's records: the analysis locks complete records into the
registered manifest, refuses records changed since, and refuses calls that did not send
the registered parameters; a run on non-registered thresholds says so everywhere."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memtrials.io import write_parquet
from memtrials.llm.records import records_table
from memtrials.studies.luck import entry
from memtrials.studies.luck.design import DECISIONS, INSTRUCTIONS, OUTCOMES
from memtrials.studies.luck.freeze import FreezeMismatch
from memtrials.studies.luck.readers import ANSWER_SCHEMA
from memtrials.studies.luck.simulate import simulate_answers
from memtrials.studies.luck.writers import LESSON_SCHEMA, lesson_row
from tests.luck.test_luck_freeze import REPO, workflow

import pyarrow as pa


def _calls(n: int, prefix: str, params: dict, model: str = "org/model-a") -> pa.Table:
    return records_table([{"call_id": f"{prefix}{i:05d}", "cell_id": "c", "origin_cell": "c", "endpoint": "loop",
                           "model": model, "request_digest": "d", "sample": 0, "purpose": "p", "messages": "[]",
                           "params": json.dumps(params), "constraint": "none", "response_text": "",
                           "refusal": "", "finish_reason": "stop", "prompt_tokens": 0, "completion_tokens": 0,
                           "cached_tokens": 0, "cost": 0.0, "latency_s": 0.0, "attempts": 1, "errors": "[]",
                           "seed": None, "system_fingerprint": "", "started_at": "", "finished_at": ""}
                          for i in range(n)])


def registered_freeze(tmp: Path, sl: dict, per_domain: int) -> tuple[Path, Path, Path, list]:
    """Seeded worlds (2 domains of ``per_domain``), the study's prompts and a registered freeze
    of config slice ``sl`` under ``tmp``: (worlds file, prompts folder, registered.json, worlds)."""
    prompts = tmp / "prompts"
    shutil.copytree(REPO / "config/prompts/luck", prompts)
    worlds = tmp / "worlds.parquet"
    entry.make_worlds(seed=5, domains=2, per_domain=per_domain, margin=0.10, out=str(worlds))
    reg = tmp / "freeze/registered.json"
    entry.freeze(worlds=str(worlds), prompts_dir=str(prompts), config_slice=sl, registered=str(reg),
                 out=str(tmp / "freeze/manifest.json"))
    return worlds, prompts, reg, entry.load_worlds(str(worlds))


def write_records(d: Path, model: str, ws: list, ans: pd.DataFrame, sent: dict) -> None:
    """One endpoint's complete records in ``d``: a lesson for every world and cell, the answers
    ``ans`` (the columns of ANSWER_SCHEMA), and the calls of both with the registered ``sent``."""
    lessons = [lesson_row(model, w, i, dd, o, "# Memory Item 1\nKeep the tool.", "stop", "c", "p")
               for w in ws for i in INSTRUCTIONS for dd in DECISIONS for o in OUTCOMES]
    write_parquet(pa.Table.from_pylist(lessons, schema=LESSON_SCHEMA), d / "lessons.parquet")
    write_parquet(pa.Table.from_pandas(ans, schema=ANSWER_SCHEMA, preserve_index=False), d / "answers.parquet")
    for n, prefix, role, name in ((len(lessons), "w", "writer", "lessons"), (len(ans), "r", "reader", "answers")):
        params = sent[role]["params"] | {"extra_body": sent[role]["extra_body"]}
        write_parquet(_calls(n, prefix, params), d / f"{name}.calls.parquet")


@pytest.fixture
def complete_run(tmp_path: Path):
    """A registered freeze and one endpoint's complete records (simulated answers)."""
    lw = workflow()
    sl = lw.slice()
    worlds_path, prompts, reg, ws = registered_freeze(tmp_path, sl, per_domain=4)
    d = tmp_path / "loop"
    ans = simulate_answers(ws, "loop", np.random.default_rng(0), p2=0.3)
    for c in ANSWER_SCHEMA.names:
        if c not in ans.columns:
            ans[c] = None
    ans["sample"] = 0
    write_records(d, "loop", ws, ans[ANSWER_SCHEMA.names], sl["endpoints"]["loop"]["sent"])
    kw = dict(worlds=str(worlds_path), answers=[str(d / "answers.parquet")], lessons=[str(d / "lessons.parquet")],
              prompts_dir=str(prompts), config_slice=sl, registered=str(reg), rules=lw.analysis_rules(),
              outdir=str(tmp_path / "analysis"))
    return tmp_path, kw, reg, d


def test_complete_records_are_locked_and_a_later_change_refused(complete_run):
    tmp, kw, reg, d = complete_run
    entry.analysis(**kw)
    lock = json.loads(reg.read_text())["lock"]
    assert set(lock["records"]) == {str(d / f) for f in ("lessons.parquet", "lessons.calls.parquet",
                                                          "answers.parquet", "answers.calls.parquet")}
    out = json.loads((tmp / "analysis/registered.json").read_text())
    assert out["records_lock"] == lock
    entry.analysis(**kw)  # unchanged records: verified, the analysis runs again
    # a record edited after the lock is refused, with the fix
    ans = pd.read_parquet(d / "answers.parquet")
    ans.loc[0, "y"] = 1.0 - (ans.loc[0, "y"] if ans.loc[0, "y"] == ans.loc[0, "y"] else 0.0)
    write_parquet(pa.Table.from_pandas(ans, schema=ANSWER_SCHEMA, preserve_index=False), d / "answers.parquet")
    with pytest.raises(FreezeMismatch) as err:
        entry.analysis(**kw)
    msg = str(err.value)
    assert f"{d / 'answers.parquet'}: changed" in msg and "--refreeze" in msg and "locked" in msg


def test_incomplete_records_are_not_locked(complete_run):
    tmp, kw, reg, d = complete_run
    ans = pd.read_parquet(d / "answers.parquet").iloc[:-1]
    write_parquet(pa.Table.from_pandas(ans, schema=ANSWER_SCHEMA, preserve_index=False), d / "answers.parquet")
    entry.analysis(**kw)
    assert "lock" not in json.loads(reg.read_text())
    assert json.loads((tmp / "analysis/registered.json").read_text())["records_lock"] is None


@pytest.mark.parametrize("field,value,expect", [
    ("params", {"temperature": 0.7, "max_tokens": 32}, "sampling parameters"),
    ("model", "org/other", "model id"),
])
def test_calls_that_sent_other_parameters_are_refused(complete_run, field, value, expect):
    tmp, kw, reg, d = complete_run
    calls = pd.read_parquet(d / "answers.calls.parquet")
    if field == "params":
        calls["params"] = json.dumps(value | {"extra_body": kw["config_slice"]["endpoints"]["loop"]["sent"]
                                              ["reader"]["extra_body"]})
        write_parquet(_calls(len(calls), "r", json.loads(calls.params.iloc[0])), d / "answers.calls.parquet")
    else:
        sent = kw["config_slice"]["endpoints"]["loop"]["sent"]["reader"]
        write_parquet(_calls(len(calls), "r", sent["params"] | {"extra_body": sent["extra_body"]}, model=value),
                      d / "answers.calls.parquet")
    with pytest.raises(FreezeMismatch, match=expect):
        entry.analysis(**kw)
    assert "lock" not in json.loads(reg.read_text())


def test_default_thresholds_say_so_in_registered_json_and_every_caption(complete_run):
    tmp, kw, reg, d = complete_run
    entry.analysis(**kw)
    out = json.loads((tmp / "analysis/registered.json").read_text())
    assert out["thresholds"]["registered"] is False
    assert set(out["thresholds"]["differs"]) == {"min_complete", "panel_min_endpoints"}
    figs = [str(tmp / "fig.png"), str(tmp / "fig.svg")]
    entry.report(analysis_dir=str(tmp / "analysis"), tables_dir=str(tmp / "tables"), figures=figs)
    mds = sorted((tmp / "tables").glob("*.md"))
    assert mds and all("NOT the registered thresholds" in p.read_text() for p in mds)
    supplement = (tmp / "tables/registered_supplement.md").read_text()
    assert "## table_bootstrap" in supplement and "## table_anomalies" in supplement
    assert all("NOT the registered thresholds" in p.read_text() for p in (tmp / "tables").glob("*.tex"))
    # registered thresholds: no note
    from dataclasses import asdict

    from memtrials.studies.luck.inference import REGISTERED_RULES

    entry.analysis(**{**kw, "rules": asdict(REGISTERED_RULES)})
    out = json.loads((tmp / "analysis/registered.json").read_text())
    assert out["thresholds"] == {"registered": True, "differs": {}, "note": ""}
    entry.report(analysis_dir=str(tmp / "analysis"), tables_dir=str(tmp / "tables2"), figures=figs)
    assert not any("NOT the registered" in p.read_text() for p in (tmp / "tables2").glob("*.md"))


def test_frozen_sent_params_match_what_the_client_builds():
    """The freeze's `sent` entry equals the parameters the model layer puts in each call
    record (seed offset and the reader's response_format aside), for the embedded default
    and a pinned router entry; check_sent accepts those records."""
    from memtrials.config import load_models
    from memtrials.llm.client import Client
    from memtrials.studies.luck.freeze import sent_params
    from memtrials.studies.luck.lock import check_sent

    models = {**load_models(REPO / "config/models.yaml"),
              **load_models(REPO / "config/presets/luck-paper.models.yaml")}
    for name in ("smollm2", "qwen-3.8-max"):
        ep = models[name]
        for role, max_tokens, extra in (("writer", 32, {}), ("reader", None, {"response_format": {"type": "x"}})):
            built = Client._params(None, ep, 7, {"max_tokens": max_tokens, **extra})  # what a call records
            frozen = sent_params(ep, max_tokens)
            endpoint = {"identity": ep.identity, "sent": {role: frozen}}
            check_sent(_calls(3, "x", built, model=ep.model).to_pandas(), "records", endpoint, role)
            if ep.params.get("seed") is not None:
                assert built["seed"] == ep.params["seed"] + 7 and frozen["seed"] == "entry seed + sample index"
