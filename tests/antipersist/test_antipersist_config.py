"""The antipersist section: config errors name the key and the fix before any job; the
job slices, designs and paths the rules ask for; the paper preset's dry run."""

from __future__ import annotations

import copy
import re

import pytest

from memtrials.config import ConfigError, check_config, merge
from memtrials.studies.antipersist.design import DESIGNS, sweep_of, training_order
from memtrials.studies.antipersist.memories import selector_settings
from memtrials.studies.antipersist.workflow import AntipersistWorkflow
from tests.conftest import REPO, base_config, run_snakemake


def workflow(**changes):
    cfg = copy.deepcopy(base_config())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = cfg["antipersist"]
        for k in parents:
            node = node[k]
        node[leaf] = value
    models = check_config(cfg)
    return AntipersistWorkflow(cfg, models, lambda name: {"name": name})


@pytest.mark.parametrize("changes, message", [
    # caught by the schema (config/schemas/config.schema.json), naming the key
    ({"designs": ["trajectory", "memgpt"]}, r"key antipersist\.designs\.1: 'memgpt' is not one of \['trajectory'"),
    ({"envs": ["textcraft"]}, r"key antipersist\.envs\.0: 'textcraft' is not one of \['alfworld', 'scienceworld', 'webshop', 'planted'\]"),
    ({"rounds": 0}, r"key antipersist\.rounds: 0 is less than the minimum of 1"),
    ({"pools__alfworld": {"train_split": "train"}}, r"key antipersist\.pools\.alfworld: 'train_tasks' is a required"),
    ({"pools__scienceworld__eval_tasks": 0}, r"key antipersist\.pools\.scienceworld\.eval_tasks: 0 is less than"),
    ({"autorefine__prune_fraction": 1.0}, r"key antipersist\.autorefine\.prune_fraction: 1\.0 is greater than or"),
    ({"sweeps__enabled": True, "sweeps__gamma": [0.9, "x"]}, r"key antipersist\.sweeps\.gamma\.1: 'x' is not of type"),
    # caught by the study's own checks (studies/antipersist/workflow.py)
    ({"batch_size": 3, "round_size": 4}, r"antipersist\.batch_size: 3 does not divide round_size 4; a batch"),
    ({"synthesizer": "minilm"}, r"antipersist\.synthesizer: 'minilm' is not a chat endpoint"),
    ({"selector__gamma": 0.0}, r"antipersist\.selector\.gamma: expected a number in \[0\.0, 1\.0\] \(not 0\)"),
    ({"selector__epsilon": 1.5}, r"antipersist\.selector\.epsilon: expected a number in \[0\.0, 1\.0\], got 1\.5"),
    ({"sweeps__enabled": True, "sweeps__gamma": [0.0]}, r"antipersist\.sweeps\.gamma: 0 is not a decay"),
    ({"memory_prompts_dir": "config/prompts/nowhere"},
     r"antipersist\.memory_prompts_dir: folder 'config/prompts/nowhere' does not"),
])
def test_config_errors_name_the_key(changes, message):
    with pytest.raises(ConfigError, match=message):
        workflow(**changes)


def test_jobs_slices_and_sweeps():
    wf = workflow()
    listed = list(base_config()["antipersist"]["designs"])
    assert wf.designs == listed and set(listed) <= set(DESIGNS)
    assert len(wf.jobs()) == 2 * len(listed)  # one stream (and one evaluation) per design x benchmark x seed
    c = wf.cell("smollm2", "alfworld", "expel")
    assert "expel" in c and "reflexion" not in c and "selector" not in c and list(c["pools"]) == ["alfworld"]
    ablated = workflow(designs=listed + ["fixed-corrective"])  # the default leaves the ablations out, for time
    assert "selector" in ablated.cell("smollm2", "alfworld", "fixed-corrective")
    sw = workflow(sweeps__enabled=True)
    extra = sw.designs[len(listed):]
    # the points equal to the main selector's gamma (0.998) and lam (0.05) are the main design's cells
    assert extra == ["antipersist-gamma-0.98", "antipersist-gamma-0.99", "antipersist-gamma-1.0",
                     "antipersist-lambda-0.0", "antipersist-lambda-0.2", "antipersist-lambda-0.5"]
    plan = sw.sweep_plan()
    assert [d for _, _, d in plan] == ["antipersist-gamma-0.98", "antipersist-gamma-0.99", "antipersist",
                                       "antipersist-gamma-1.0", "antipersist-lambda-0.0", "antipersist",
                                       "antipersist-lambda-0.2", "antipersist-lambda-0.5"]
    alone = workflow(sweeps__enabled=True, designs=["trajectory"])  # the main design joins for its sweep rows
    assert "antipersist" in alone.designs and "antipersist-gamma-0.998" not in alone.designs
    sel = base_config()["antipersist"]["selector"]
    assert selector_settings("antipersist-gamma-0.98", sel, 1)["gamma"] == 0.98 == sweep_of(extra[0])[1]
    assert selector_settings("antipersist-lambda-0.5", sel, 1)["lam"] == 0.5
    assert selector_settings("fixed-corrective", sel, 1) == {"policy": "fixed", "arm": "corrective", "lam": 0.05,
                                                             "seed": 1}
    assert selector_settings("random", sel, 1)["policy"] == "uniform"


def test_training_order_visits_the_pool_in_seeded_passes():
    rounds = training_order(["a", "b", "c"], 3, 2, seed=5)
    flat = [t for r in rounds for t in r]
    assert [len(r) for r in rounds] == [2, 2, 2] and sorted(flat[:3]) == ["a", "b", "c"]
    assert sorted(flat[3:]) == ["a", "b", "c"]  # the second pass, in its own order
    assert training_order(["a", "b", "c"], 3, 2, seed=5) == rounds != training_order(["a", "b", "c"], 3, 2, seed=6)


def test_the_paper_preset_dry_run(workflow_copy):
    r = run_snakemake(workflow_copy, "-n", "--configfile", "config/presets/antipersist-paper.yaml", "--",
                      "results/antipersist/tables/index.md", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    # 3 backbones x 3 benchmarks x (14 designs + 6 sweep designs: the 8 points less the two equal to the
    # main design, whose rows are its cells) x 3 seeds streams, as many evaluations
    counts = dict(re.findall(r"^(antipersist_\w+)\s+(\d+)$", r.stdout, re.MULTILINE))
    assert counts == {"antipersist_train": str(3 * 3 * 20 * 3), "antipersist_eval": str(3 * 3 * 20 * 3),
                      "antipersist_report": "1"}, r.stdout[-2000:]
