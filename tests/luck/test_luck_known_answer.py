"""The luck study's known-answer run through the real client, cache and records (issue 38):
the planted endpoint of config/models.yaml writes and reads on worlds of its own, the
registered analysis estimates every contrast, the tables put the truth beside each; a
rerun replays every call from the cache; a wiring defect (the reader served the lesson of
the other outcome) makes the known-answer check fail."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pandas as pd
import yaml

from memtrials.studies.luck import known, readers
from memtrials.studies.luck.planted import PlantedLuck, contrast_truth

from tests.conftest import embedded_config

REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "config/config.yaml").read_text())
MODELS = yaml.safe_load((REPO / "config/models.yaml").read_text())


def _cfg(tmp_path: Path, params: dict | None = None) -> dict:
    cfg = embedded_config(tmp_path)
    if params is not None:
        models = copy.deepcopy(MODELS)
        models["endpoints"]["planted-luck"]["planted"]["params"] = params
        (tmp_path / "models.yaml").write_text(yaml.safe_dump(models, sort_keys=False))
        cfg["models_file"] = str(tmp_path / "models.yaml")
    return cfg


def _run(cfg: dict, tmp_path: Path, params: dict, per_domain: int = 8) -> pd.DataFrame:
    cell = {**CONFIG["luck"]["known_answer"], "worlds": {"domains": 4, "per_domain": per_domain, "margin": 0.1}}
    return asyncio.run(known.known_answer(
        cfg, model="planted-luck", params=params, cell=cell, rules=CONFIG["luck"]["analysis"],
        prompts_dir=str(REPO / "config/prompts/luck"), outdir=str(tmp_path / "known"),
        tables_dir=str(tmp_path / "tables")))


def test_known_answer_run_through_the_client(tmp_path):
    params = MODELS["endpoints"]["planted-luck"]["planted"]["params"]
    cfg = _cfg(tmp_path)
    t = _run(cfg, tmp_path, params)
    truth = contrast_truth(PlantedLuck.from_params(params))
    assert set(t["quantity"]) == set(truth)
    assert all(abs(r.truth - truth[r.quantity]) < 1e-12 for r in t.itertuples())
    assert t["covered"].mean() >= 0.85, t[~t["covered"]]
    calls = pd.read_parquet(tmp_path / "known" / "answers.calls.parquet")
    answers = pd.read_parquet(tmp_path / "known" / "answers.parquet")
    assert len(answers) == 32 * 32 and answers["call_id"].isin(calls["call_id"]).all()
    md = (tmp_path / "tables" / "known_answer.md").read_text()
    assert "truth" in md and "NOT a real model" in md
    # a rerun (from the cache) gives the same table
    pd.testing.assert_frame_equal(t, _run(cfg, tmp_path, params))


def test_mutation_reader_served_other_lesson(tmp_path, monkeypatch):
    params = copy.deepcopy(MODELS["endpoints"]["planted-luck"]["planted"]["params"])
    params["switch"]["RB"]["good"]["failure"] = 0.6
    real = readers.memory_for

    def swapped(arm, w, decision, outcome, prompts, lessons):
        return real({"RB": "RBx", "RBx": "RB"}.get(arm, arm), w, decision, outcome, prompts, lessons)

    monkeypatch.setattr(readers, "memory_for", swapped)
    t = _run(_cfg(tmp_path, params), tmp_path, params).set_index("quantity")
    assert not t.loc["P2", "covered"] and not t.loc["L2", "covered"], t.loc[["P2", "L2"]]
