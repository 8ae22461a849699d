"""The calibrator's config checks fail before any job with the key and the fix named, and the
default config and the paper preset resolve to the jobs the issue asks for."""

from __future__ import annotations

import copy

import pytest
import yaml

from memtrials.config import ConfigError, check_config, merge
from memtrials.studies.history.calibrator.workflow import CalibratorWorkflow
from tests.conftest import REPO, base_config


def workflow(cfg):
    models = check_config(cfg)
    return CalibratorWorkflow(cfg, models, lambda m: {"identity": models[m].identity})


def test_default_resolves_to_one_job_per_stage_and_model():
    w = workflow(base_config())
    assert w.sources == ["smollm2"] and w.recipients == ["smollm2"] and w.envs == ["alfworld", "scienceworld"]
    assert w.compare_files() == ["results/calibrator/compare/smollm2.parquet"]
    assert w.train_variants == ["full"] and w.variants == ["full", "screen_only"] and w.joint_sft_files() == []
    assert w.final_targets() == ["results/calibrator/tables/index.md"] + [
        f"results/calibrator/known/tables/known_answer.{ext}" for ext in ("md", "csv", "tex", "html")]
    assert w.known_cell()["cell"]["endpoint"] == "planted-calibrator"
    assert w.source_cell("smollm2", "alfworld")["split"] == "train"
    # training tasks are drawn from the evaluation's task types (history.task_types)
    assert w.source_cell("smollm2", "scienceworld")["task_types"] == w.h["task_types"]["scienceworld"]
    # Table 8: the stand-in's Calibrator cells and the trained calibrator's beside them; Table 9 reuses
    # them (full: the trained calibrator; screen-only: the stand-in, roles.calibrator), no cell of its
    # own; the joint actor and the baseline on the same environments
    assert w.rollout_files()["calibrator"] == ["results/calibrator/rollouts/smollm2/scienceworld/calibrator.parquet"]
    cal = w.rollout_files()["calibrator-smollm2-calibrator"]
    assert cal == ["results/calibrator/rollouts/smollm2/scienceworld/calibrator-smollm2-calibrator.parquet"]
    assert w.report_inputs()["manifests"] == ["results/calibrator/sft/full/memtrials-sft.json"]
    assert w.ablation_files() == {"full": cal, "screen_only": w.rollout_files()["calibrator"]}
    assert w.joint_files() == {a: [f"results/calibrator/joint/rollouts/{a}/smollm2/scienceworld.parquet"]
                               for a in ("joint", "action_only")}
    inputs = w.report_inputs()
    assert inputs["ablation_screen_only"] == w.rollout_files()["calibrator"] and inputs["arm_joint"] and inputs["arm_action_only"]
    # the joint actor's SFT data: rollouts on the calibrator's training split, never history's tasks
    assert w.joint_data_files() == {"calibrator": ["results/calibrator/joint/sources/smollm2/scienceworld.parquet"],
                                    "raw": ["results/calibrator/sources/smollm2/scienceworld.parquet"]}
    tc = w.training_cell({"seed": 1, "split": "test", "tasks_per_cell": 5, "actor": {}}, "scienceworld")
    assert (tc["split"], tc["seed"], tc["tasks_per_cell"]) == ("train", w.c["seed"], w.c["sources"]["tasks_per_cell"])
    assert (tc["eval_split"], tc["eval_seed"]) == (w.h["splits"]["scienceworld"], w.h["seed"])
    jc = w.joint_cell({"seed": 1})
    assert jc["max_output_tokens"] == w.c["joint"]["max_output_tokens"]
    assert (jc["reply"], jc["max_experience_chars"]) == ("constrained", 80)


def test_paper_preset_has_the_papers_roles_actors_and_recipe():
    cfg = merge(base_config(), yaml.safe_load((REPO / "config/presets/calibrator-paper.yaml").read_text()))
    w = workflow(cfg)
    assert w.roles["generator"] == w.roles["judge"] == "gpt-5.6-sol"
    assert len(w.recipients) == 5 and w.c["contexts"]["count"] == 10000
    assert w.recipe()["base_model"] == "Qwen/Qwen3-8B" and w.recipe()["epochs"] == 3
    assert w.recipe()["learning_rate"] == 1e-5 and w.train_variants == ["full", "screen_only"]
    # Table 9 compares two trained calibrators, each declared as trained on its own dataset
    ab = w.ablation_endpoints
    assert ab["full"] == w.roles["calibrator"] and ab["screen_only"] not in (None, ab["full"])
    assert set(ab.values()) <= set(w.c["trained_endpoints"])
    assert w.c["trained_endpoints"][ab["screen_only"]].endswith("/screen_only")
    assert w.ablation_files()["screen_only"][0].startswith("results/calibrator/ablation/screen_only/")
    assert len(w.joint_actors["joint"]) == len(w.joint_actors["action_only"]) == 5
    assert w.joint_data_files() == {
        "calibrator": [f"results/calibrator/joint/sources/gpt-5.6-sol/{e}.parquet" for e in w.rollout_envs],
        "raw": [f"results/calibrator/sources/gpt-5.6-sol/{e}.parquet" for e in w.rollout_envs]}
    assert w.c["joint"]["reply"] == "free"   # the trained joint actor writes its own block
    sft = w.report_inputs()["sft"]
    assert "results/calibrator/sft/joint-seed4/memtrials-sft.json" in sft and len(sft) == 2 + 10
    for arm in ("joint", "action_only"):   # every seed's endpoint is declared as its own seed's checkpoint
        assert [w.c["trained_endpoints"][e] for e in w.joint_actors[arm]] == \
            [f"results/calibrator/sft/{arm}-seed{k}" for k in range(5)]


@pytest.mark.parametrize("edit, match", [
    (lambda c: c["calibrator"]["splits"].update(alfworld="eval"), r"calibrator.splits.alfworld: 'eval' is also"),
    # the joint actor's environments need a training split too (its SFT data's source rollouts)
    (lambda c: c["calibrator"]["splits"].update(scienceworld=c["history"]["splits"]["scienceworld"])
     or c["calibrator"]["sources"].update(envs=["alfworld"]), r"calibrator.splits.scienceworld: .* is also"),
    (lambda c: c["roles"].pop("generator"), r"roles.generator: missing"),
    (lambda c: c["calibrator"].update(recipients=["nowhere"]), r"calibrator.recipients: endpoint 'nowhere'"),
    (lambda c: c["calibrator"]["train"].update(variants=["screen_only"]) or c["calibrator"].update(variants=["full"]),
     r"train.variants must be among variants"),
    (lambda c: c["calibrator"]["rollouts"].update(envs=["alfworld"]) or c["history"].update(envs=["scienceworld"]),
     r"calibrator.rollouts.envs: \['alfworld'\] not in history.envs"),
    (lambda c: c["calibrator"]["ablation"]["endpoints"].update(screen_only="nowhere"),
     r"calibrator.ablation.endpoints.screen_only: endpoint 'nowhere'"),
    (lambda c: c["calibrator"]["joint"].update(data_models=["nowhere"]),
     r"calibrator.joint.data_models: endpoint 'nowhere'"),
    (lambda c: c["calibrator"]["joint"]["actors"].update(action_only=["nowhere"]),
     r"calibrator.joint.actors.action_only: endpoint 'nowhere'"),
])
def test_bad_config_is_refused_with_the_key_named(edit, match):
    cfg = copy.deepcopy(base_config())
    edit(cfg)
    with pytest.raises(ConfigError, match=match):
        workflow(cfg)


def test_the_trained_calibrator_is_found_in_the_registry_and_absent_without_it(tmp_path):
    """rollouts.trained and ablation.endpoints null: the registry's embedded checkpoint entry serving
    results/calibrator/sft/full (the default's smollm2-calibrator); a registry without one (a test's
    loopback) falls back to roles.calibrator and runs no trained cell, so no training is needed."""
    w = workflow(base_config())
    assert w.trained_cals == ["smollm2-calibrator"] and w.ablation_endpoints == {
        "full": "smollm2-calibrator", "screen_only": "smollm2"}
    reg = yaml.safe_load((REPO / "config/models.yaml").read_text())
    del reg["endpoints"]["smollm2-calibrator"]
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(reg))
    cfg = copy.deepcopy(base_config())
    cfg["models_file"] = str(tmp_path / "models.yaml")
    w = workflow(cfg)
    assert w.trained_cals == [] and w.ablation_endpoints == {"full": "smollm2", "screen_only": "smollm2"}
    assert w.report_inputs()["manifests"] == []


def test_known_answer_needs_a_planted_entry():
    cfg = base_config()
    cfg["calibrator"]["known_answer"]["endpoint"] = "smollm2"
    with pytest.raises(ConfigError, match="calibrator.known_answer.endpoint: 'smollm2' is not a planted entry"):
        workflow(cfg)
    cfg["calibrator"]["known_answer"].update(endpoint="planted-calibrator", tasks=100_000)
    with pytest.raises(ConfigError, match="calibrator.known_answer.tasks"):
        workflow(cfg)
    cfg["calibrator"]["known_answer"].update(enabled=False)
    assert not any("known_answer" in t for t in workflow(cfg).final_targets())
