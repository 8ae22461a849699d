"""The study's pure parts: settings and slices from the config, errors naming the key, seeds,
the scores' averaging, and the choice over the first 1..K runs with its tie rule."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from memtrials.config import ConfigError
from memtrials.studies.playbook.analysis import method_score
from memtrials.studies.playbook.choice import decide
from memtrials.studies.playbook.design import growth_order, variants_for
from memtrials.studies.playbook.evaluate import eval_plan
from memtrials.curation import rbc_candidates
from tests.conftest import base_config
from tests.playbook.helpers import workflow


def test_settings_variants_and_paths_from_the_default_config():
    wf = workflow(base_config())
    assert wf.variants("alfworld") == ["ace-passfail", "dc"]
    assert wf.variants("appworld") == ["ace-passfail", "dc"]  # unit_tests feedback: the paper preset
    assert wf.variants("webshop") == ["ace-reward", "dc"]  # on WebShop ACE's Reflector sees the reward
    # the default leaves AppWorld, WebShop and DC out ("*:appworld", "*:webshop", "*:alfworld:dc", for time): 1 setting
    assert [s[2:] for s in wf.settings()] == [("alfworld", "ace-passfail")]
    assert wf.splits("webshop") == {"train": "train", "practice": "practice", "eval": "test"}
    assert {s[0] for s in wf.settings()} == {"std"}
    assert wf.candidates() == ["curated-run1", "curated-run2", "whole-run1", "whole-run2", "none"]
    assert variants_for("appworld", ["dc"], ["unit_tests"]) == ["dc"]
    growth = wf.cell("growth", "smollm2", "appworld")
    assert growth["roles"] == {"reflector": "smollm2", "curator": "smollm2", "embedder": "minilm"}
    assert growth["splits"] == {"train": "train", "practice": "practice", "eval": "eval"}
    assert "evaluation" not in growth and "choice" not in growth  # a change there does not regrow
    assert "growth" not in wf.cell("eval", "smollm2", "appworld")


def test_official_data_maps_the_papers_splits_and_roles_from_model(official_env_vars):
    cfg = copy.deepcopy(base_config())
    cfg["envs"]["appworld"]["source"] = "official"
    cfg["envs"]["alfworld"]["source"] = "official"
    cfg["playbook"].update(roles_from_model=True, exclude=["smollm2:alfworld", "*:webshop"], long_growth=True)
    wf = workflow(cfg)
    assert wf.splits("appworld") == {"train": "train", "practice": "dev", "eval": "test_normal"}
    assert wf.cell("growth", "smollm2", "appworld")["roles"]["reflector"] == "smollm2"
    assert {s[2] for s in wf.settings()} == {"appworld"} and {s[0] for s in wf.settings()} == {"std", "long"}


def test_exclude_takes_a_model_env_pair_or_one_variant_and_a_wildcard_model():
    cfg = copy.deepcopy(base_config())
    cfg["playbook"].update(appworld_feedback=["pass_fail", "unit_tests"], exclude=["*:webshop"])
    assert len(workflow(cfg).settings()) == 5
    cfg["playbook"]["exclude"] = ["smollm2:appworld:ace-pertest", "*:alfworld:dc", "*:webshop"]
    assert [s[2:] for s in workflow(cfg).settings()] == [("alfworld", "ace-passfail"), ("appworld", "ace-passfail"),
                                                         ("appworld", "dc")]
    cfg["playbook"]["exclude"] = ["*:alfworld", "*:webshop"]
    assert {s[2] for s in workflow(cfg).settings()} == {"appworld"}
    cfg["playbook"]["exclude"] = ["other:alfworld", "*:webshop"]  # another model's pair leaves this panel's in
    assert len(workflow(cfg).settings()) == 5
    cfg["playbook"]["exclude"] = []  # every benchmark: ALFWorld 2, AppWorld 3, WebShop 2 (ace-reward, dc)
    assert len(workflow(cfg).settings()) == 7
    cfg["playbook"].update(long_growth=True, exclude=["long:*:webshop", "long:smollm2:alfworld:dc"])
    settings = workflow(cfg).settings()  # long growth only: std keeps all 7; long: ACE's variants (Appendix E) less
    assert len([s for s in settings if s[0] == "std"]) == 7  # WebShop's (long:*:webshop)
    assert sorted(s[2:] for s in settings if s[0] == "long") == [
        ("alfworld", "ace-passfail"), ("appworld", "ace-passfail"), ("appworld", "ace-pertest")]


@pytest.mark.parametrize("key,value,match", [
    ("exclude", ["smollm2:alfworld:ace"], "playbook.exclude"),
    ("exclude", ["smollm2:alfworld:dc:x"], "playbook.exclude"),
    ("envs", ["scienceworld"], "playbook.envs"),
    ("measurement.practice_tasks", 1, "playbook.measurement.practice_tasks"),
    ("measurement.budget", 1.5, "playbook.measurement.budget"),
    ("growth.runs", 0, "playbook.growth.runs"),
    ("exclude", ["smollm2"], "playbook.exclude"),
    ("tokenizer", "bpe", "playbook.tokenizer"),
])
def test_bad_values_fail_naming_the_key(key, value, match):
    cfg = copy.deepcopy(base_config())
    section, _, sub = key.partition(".")
    if sub:
        cfg["playbook"][section][sub] = value
    else:
        cfg["playbook"][section] = value
    with pytest.raises(ConfigError, match=match.replace(".", r"\.")):
        workflow(cfg)


def test_a_role_outside_the_registry_is_refused():
    cfg = copy.deepcopy(base_config())
    cfg["roles"]["embedder"] = "smollm2"  # a chat endpoint
    with pytest.raises(ConfigError, match="roles.embedder"):
        workflow(cfg)


def test_runs_differ_in_order_and_evaluation_seeds_are_shared():
    tasks = [f"t{i}" for i in range(8)]
    a, b = growth_order(tasks, 1, "appworld", 1, 1), growth_order(tasks, 1, "appworld", 2, 1)
    assert sorted(a) == sorted(b) == tasks and a != b
    assert growth_order(tasks, 1, "appworld", 1, 1) == a  # seeded
    plan = eval_plan(["x", "y"], 3, 7, "appworld")
    assert [(t, j) for t, j, _ in plan] == [("x", 0), ("x", 1), ("x", 2), ("y", 0), ("y", 1), ("y", 2)]
    assert plan == eval_plan(["x", "y"], 3, 7, "appworld") and len({s for *_, s in plan}) == 6


def test_score_averages_seeds_within_a_task_then_tasks():
    # task a: 1 of 1 seed solved; task b: 1 of 4 seeds: the task mean is (1 + 0.25) / 2
    ep = pd.DataFrame({"task_id": ["a", "b", "b", "b", "b"], "won": [True, True, False, False, False]})
    assert method_score(ep) == pytest.approx(62.5)
    assert np.isnan(method_score(ep.iloc[0:0]))


def _scores(values: dict[str, list[float]]) -> pd.DataFrame:
    rows = [{"candidate": c, "episode": i, "score": y, "split": "practice"}
            for c, ys in values.items() for i, y in enumerate(ys)]
    return pd.DataFrame(rows)


def test_choices_over_the_first_runs_and_the_tie_rule():
    runs = ["run1", "run2"]
    cands = rbc_candidates(runs, [10, 12], [40, 50])
    scores = _scores({"curated:run1": [1, 0, 0, 0], "curated:run2": [1, 1, 1, 0], "whole:run1": [1, 1, 0, 0],
                      "whole:run2": [1, 1, 1, 0], "none": [1, 0, 1, 0]})
    d = decide(runs, cands, scores)
    # curated:run2 and whole:run2 tie at 0.75: the fewer tokens (curated) is served
    assert d["rbc"]["chosen"] == "curated:run2" and set(d["rbc"]["tied"]) == {"curated:run2", "whole:run2"}
    assert d["best_full"]["chosen"] == "whole:run2" and d["rbc_cut"] == ["curated:run1"] and d["cut_runs"] == ["run1"]
    one = d["by_runs"][0]
    assert one["runs"] == 1 and one["best_full"]["candidates"] == ["whole:run1", "none"]
    # with run 1 only, whole:run1 and none tie at 0.5: no playbook serves fewer tokens
    assert one["best_full"]["chosen"] == "none" and one["rbc"]["chosen"] == "none"
    with pytest.raises(ValueError, match="practice episodes only"):
        decide(runs, cands, scores.assign(split="eval"))
