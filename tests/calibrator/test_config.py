"""The calibrator's config checks fail before any job with the key and the fix named, and the
default config and the paper preset resolve to the jobs the issue asks for."""

from __future__ import annotations

import copy

import pytest
import yaml

from hindsight.config import ConfigError, check_config, merge
from hindsight.studies.history.calibrator.workflow import CalibratorWorkflow
from tests.conftest import REPO, base_config


def workflow(cfg):
    models = check_config(cfg)
    return CalibratorWorkflow(cfg, models, lambda m: {"identity": models[m].identity})


def test_default_resolves_to_one_job_per_stage_and_model():
    w = workflow(base_config())
    assert w.sources == ["smollm2"] and w.recipients == ["smollm2"] and w.envs == ["alfworld", "scienceworld", "appworld"]
    assert w.compare_files() == ["results/calibrator/compare/smollm2.parquet"]
    assert w.train_variants == [] and w.variants == ["full", "screen_only"]
    assert w.final_targets() == ["results/calibrator/tables/index.md"]
    assert w.source_cell("smollm2", "alfworld")["split"] == "train"


def test_paper_preset_has_the_papers_roles_actors_and_recipe():
    cfg = merge(base_config(), yaml.safe_load((REPO / "config/presets/calibrator-paper.yaml").read_text()))
    w = workflow(cfg)
    assert w.roles["generator"] == w.roles["judge"] == "gpt-5.6-sol"
    assert len(w.recipients) == 5 and w.c["contexts"]["count"] == 10000
    assert w.recipe()["base_model"] == "Qwen/Qwen3-8B" and w.recipe()["epochs"] == 3
    assert w.recipe()["learning_rate"] == 1e-5 and w.train_variants == ["full", "screen_only"]


@pytest.mark.parametrize("edit, match", [
    (lambda c: c["calibrator"]["splits"].update(alfworld="eval"), r"calibrator.splits.alfworld: 'eval' is also"),
    (lambda c: c["roles"].pop("generator"), r"roles.generator: missing"),
    (lambda c: c["calibrator"].update(recipients=["nowhere"]), r"calibrator.recipients: endpoint 'nowhere'"),
    (lambda c: c["calibrator"]["train"].update(variants=["screen_only"]) or c["calibrator"].update(variants=["full"]),
     r"train.variants must be among variants"),
])
def test_bad_config_is_refused_with_the_key_named(edit, match):
    cfg = copy.deepcopy(base_config())
    edit(cfg)
    with pytest.raises(ConfigError, match=match):
        workflow(cfg)
