"""Every study's task requests are checked against the environments before any job
(``memtrials.envs.catalog``): a split the task table does not hold, an option
``make_env`` does not take, or more tasks than a split holds is a ConfigError naming the
key, the allowed values or the size, and the fix, when the workflow is parsed, and
``python -m memtrials config check`` runs the same checks.  Before, the playbook,
anti-persistence and calibrator studies found these inside a job, after other cells had
spent calls."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from memtrials.config import ConfigError, check_config
from memtrials.envs.catalog import check_env_options, check_split, check_task_count, split_size
from memtrials.studies.antipersist.workflow import AntipersistWorkflow
from memtrials.studies.history.calibrator.workflow import CalibratorWorkflow
from memtrials.studies.playbook.design import role_tasks
from tests.conftest import REPO, base_config
from tests.playbook.helpers import workflow as playbook_workflow


def _set(cfg: dict, dotted: str, value) -> dict:
    *parents, leaf = dotted.split(".")
    node = cfg
    for k in parents:
        node = node[k]
    node[leaf] = value
    return cfg


def _config(**changes) -> dict:
    cfg = copy.deepcopy(base_config())
    for dotted, value in changes.items():
        _set(cfg, dotted.replace("__", "."), value)
    return cfg


def _antipersist(cfg):
    models = check_config(cfg)
    return AntipersistWorkflow(cfg, models, lambda name: {"name": name})


def _calibrator(cfg):
    models = check_config(cfg)
    return CalibratorWorkflow(cfg, models, lambda m: {"identity": models[m].identity})


def test_the_catalog_knows_the_generated_split_sizes_before_any_table(tmp_path):
    envs = base_config()["envs"]
    sizes = envs["alfworld"]["sizes"]
    assert split_size("alfworld", "eval", envs, tmp_path) == (sizes["eval"], "the generated games, envs.alfworld.sizes")
    # per type too, from the generator's quotas, before any game exists (the calibrator's source
    # check and the history preflight filter by history.task_types)
    from memtrials.envs.alfworld.gen import type_counts

    train = type_counts(sizes)["train"]
    assert sum(train.values()) == sizes["train"] and max(train.values()) - min(train.values()) <= 1
    two = ["pick_and_place_simple", "look_at_obj_in_light"]
    assert split_size("alfworld", "train", envs, tmp_path, two) == (
        train["pick_and_place_simple"] + train["look_at_obj_in_light"], "the generated games, envs.alfworld.sizes")
    size, where = split_size("appworld", "train", envs, tmp_path)
    assert size > 0 and "authored" in where
    assert split_size("scienceworld", "test", envs, tmp_path) is None  # known once its table is built
    # a built table answers, official data included
    pd.DataFrame({"task_id": ["a", "b", "c"], "split": ["test", "test", "dev"], "type": ["t", "t", "t"],
                  "source": ["official"] * 3}).to_parquet(tmp_path / "scienceworld.parquet")
    assert split_size("scienceworld", "test", envs, tmp_path) == (2, str(tmp_path / "scienceworld.parquet"))
    with pytest.raises(ConfigError, match=r"config key k: 3 tasks, but the scienceworld split 'test' holds 2 "
                                          r"\(.*scienceworld\.parquet\); set k lower"):
        check_task_count("scienceworld", "test", 3, envs, "k", "set k lower", tmp_path)
    check_task_count("scienceworld", "test", 2, envs, "k", "set k lower", tmp_path)
    check_task_count("scienceworld", "test", None, envs, "k", "set k lower", tmp_path)  # null: the whole split


def test_the_catalog_refuses_unknown_splits_and_options():
    envs = base_config()["envs"]
    with pytest.raises(ConfigError, match=r"config key a\.b: unknown split 'tset' for the official scienceworld "
                                          r"data; allowed: train, dev, test; set a\.b to one of them"):
        check_split("scienceworld", "tset", envs, "a.b")
    with pytest.raises(ConfigError, match=r"unknown split None"):
        check_split("alfworld", None, envs, "a.b")
    check_split("alfworld", None, envs, "a.b", nullable=True)
    with pytest.raises(ConfigError, match=r"config key x\.alfworld: unknown option\(s\) \['colour'\]; allowed: .*"
                                          r"max_steps.*remove or rename them"):
        check_env_options({"alfworld": {"colour": "red"}}, "x")
    with pytest.raises(ConfigError, match=r"config key x: unknown environment\(s\) \['webshop'\]"):
        check_env_options({"webshop": {}}, "x", ("alfworld", "scienceworld"))
    with pytest.raises(ConfigError, match=r"config key x\.alfworld: 3 is not a mapping"):
        check_env_options({"alfworld": 3}, "x")
    check_env_options({"scienceworld": {"simplification": "easy"}}, "x")


@pytest.mark.parametrize("dotted, value, message", [
    ("playbook.growth.train_tasks", 500,
     r"playbook\.growth\.train_tasks: 500 tasks, but the alfworld split 'train' holds 120 \(the generated games, "
     r"envs\.alfworld\.sizes\); set playbook\.growth\.train_tasks to at most that, or name a larger split in "
     r"playbook\.splits\.alfworld\.generated\.train"),
    ("playbook.measurement.practice_tasks", 61, r"playbook\.measurement\.practice_tasks: 61 tasks, but the alfworld "
                                                r"split 'practice' holds 60"),
    ("playbook.evaluation.tasks", 168, r"playbook\.evaluation\.tasks: 168 tasks, but the alfworld split 'eval' holds "
                                       r"134"),
    ("playbook.splits.alfworld.generated.train", "trian",
     r"playbook\.splits\.alfworld\.generated\.train: unknown split 'trian' for the generated alfworld data; allowed: "
     r"train, practice, eval"),
    ("playbook.env_options", {"alfworld": {"colour": "red"}},
     r"playbook\.env_options\.alfworld: unknown option\(s\) \['colour'\]"),
    ("playbook.env_options", {"scienceworld": {}}, r"playbook\.env_options: unknown environment\(s\) "
                                                   r"\['scienceworld'\]; allowed: alfworld, appworld"),
    ("playbook.evaluation.tasks", 0, r"playbook\.evaluation\.tasks: 0 is less than the minimum of 1"),
])
def test_playbook_task_requests_are_checked_before_any_job(dotted, value, message):
    with pytest.raises(ConfigError, match=message):
        playbook_workflow(_set(copy.deepcopy(base_config()), dotted, value))


def test_playbook_evaluation_on_the_whole_split():
    """``playbook.evaluation.tasks: null`` plays every task of the evaluation split (the paper
    preset: AppWorld's 168, ALFWorld's 134), in the sampler's seeded order."""
    w = playbook_workflow(_set(copy.deepcopy(base_config()), "playbook.evaluation.tasks", None))
    assert w.p["evaluation"]["tasks"] is None
    tasks = pd.DataFrame({"task_id": [f"t{i}" for i in range(7)], "split": ["eval"] * 5 + ["train"] * 2,
                          "type": ["a", "b", "a", "b", "a", "a", "a"]})
    whole = role_tasks(tasks, "eval", None, 3, "tasks.parquet", "playbook.evaluation.tasks")
    assert sorted(whole) == ["t0", "t1", "t2", "t3", "t4"]
    assert whole == role_tasks(tasks, "eval", 5, 3, "tasks.parquet", "playbook.evaluation.tasks")
    with pytest.raises(ValueError, match=r"6 tasks requested but split 'eval' has only 5; set "
                                         r"playbook\.evaluation\.tasks to at most"):
        role_tasks(tasks, "eval", 6, 3, "tasks.parquet", "playbook.evaluation.tasks")


@pytest.mark.parametrize("changes, message", [
    ({"antipersist__pools__alfworld__train_tasks": 500},
     r"antipersist\.pools\.alfworld\.train_tasks: 500 tasks, but the alfworld split 'train' holds 120 \(the generated "
     r"games, envs\.alfworld\.sizes\); set antipersist\.pools\.alfworld\.train_tasks to at most that \(or null: the "
     r"whole split\), or name a larger split in antipersist\.pools\.alfworld\.train_split"),
    ({"antipersist__pools__alfworld__eval_split": "evl"},
     r"antipersist\.pools\.alfworld\.eval_split: unknown split 'evl' for the generated alfworld data"),
    ({"antipersist__pools__scienceworld__train_split": "training"},
     r"antipersist\.pools\.scienceworld\.train_split: unknown split 'training' for the official scienceworld data; "
     r"allowed: train, dev, test"),
    ({"antipersist__env_options": {"scienceworld": {"colour": "red"}}},
     r"antipersist\.env_options\.scienceworld: unknown option\(s\) \['colour'\]; allowed: simplification"),
])
def test_antipersist_pools_are_checked_before_any_job(changes, message):
    with pytest.raises(ConfigError, match=message):
        _antipersist(_config(**changes))
    _antipersist(_config(antipersist__pools__alfworld__train_tasks=120))  # exactly the split: fine


def test_calibrator_source_tasks_are_checked_before_any_job():
    with pytest.raises(ConfigError, match=r"calibrator\.splits\.alfworld: unknown split 'trn' for the generated "
                                          r"alfworld data; allowed: train, practice, eval"):
        _calibrator(_config(calibrator__splits={"alfworld": "trn", "scienceworld": "train", "appworld": "train"}))
    cfg = _config(calibrator__sources__envs=["alfworld", "appworld"], calibrator__sources__tasks_per_cell=100,
                  history__task_types={"alfworld": None, "scienceworld": None, "appworld": None})
    with pytest.raises(ConfigError, match=r"calibrator\.sources\.tasks_per_cell: 121 tasks, but the alfworld split "
                                          r"'train' holds 120 \(the generated games"):
        _calibrator(_set(cfg, "calibrator.sources.tasks_per_cell", 121))
    with pytest.raises(ConfigError, match=r"calibrator\.sources\.tasks_per_cell: 100 tasks, but the appworld split "
                                          r"'train' holds 90 \(the project-authored AppWorld task set\); set "
                                          r"calibrator\.sources\.tasks_per_cell to at most that"):
        _calibrator(_set(cfg, "calibrator.sources.tasks_per_cell", 100))
    _calibrator(_set(cfg, "calibrator.sources.tasks_per_cell", 90))


def _check(args: list[str], capsys) -> tuple[int, str]:
    from memtrials.__main__ import main

    rc = main(["config", "check", *args])
    return rc, capsys.readouterr().err


def test_config_check_runs_every_studys_checks(tmp_path, capsys, monkeypatch):
    """``config check`` says what ``snakemake -n`` would: a study's own check (not only the
    schema) fails with the overlay that set the key named."""
    monkeypatch.chdir(REPO)
    cases = {"practice.yaml": ("playbook:\n  measurement:\n    practice_tasks: 1\n",
                               "config key playbook.measurement.practice_tasks: the estimate leaves one task out"),
             "pool.yaml": ("antipersist:\n  pools:\n    alfworld: {train_split: train, train_tasks: 500, "
                           "eval_split: eval, eval_tasks: 1}\n",
                           "config key antipersist.pools.alfworld.train_tasks: 500 tasks, but the alfworld split"),
             "history.yaml": ("history:\n  splits: {alfworld: eval, scienceworld: tset, appworld: eval}\n",
                              "config key history.splits.scienceworld: unknown split 'tset'")}
    for name, (text, message) in cases.items():
        overlay = tmp_path / name
        overlay.write_text(text)
        rc, err = _check(["--configfile", str(overlay)], capsys)
        assert rc == 2 and err.startswith(f"error: {overlay}: {message}"), err


def test_every_paper_preset_passes_config_check_but_historys_on_generated_data(capsys, monkeypatch, tmp_path):
    """The presets' sizes fit the data they name (calibrator: AppWorld's train split holds 90;
    playbook: the whole evaluation split); the history preset's 500 tasks a cell need the
    official data, by design (its header), and say so before any job."""
    monkeypatch.chdir(REPO)
    presets = sorted(p for p in (REPO / "config/presets").glob("*.yaml") if not p.name.endswith(".models.yaml"))
    assert len(presets) >= 5
    for preset in presets:
        rc, err = _check(["--configfile", str(preset.relative_to(REPO))], capsys)
        if preset.stem == "history-paper":
            assert rc == 2 and "config key history.tasks_per_cell: 500 tasks per cell" in err, err
        elif preset.stem == "official-data":  # the official data's variables first, by design (its header)
            assert rc == 2 and "ALFWORLD_DATA" in err and ("is not set" in err or "does not exist" in err), err  # unset, or
            # ALFWorld's own default (~/.cache/alfworld) where an earlier import in the process set it
            for variable, folder in (("ALFWORLD_DATA", "json_2.1.1"), ("APPWORLD_ROOT", "data/tasks")):
                (tmp_path / variable / folder).mkdir(parents=True)
                monkeypatch.setenv(variable, str(tmp_path / variable))
            assert _check(["--configfile", str(preset.relative_to(REPO))], capsys) == (0, ""), err
            for variable in ("ALFWORLD_DATA", "APPWORLD_ROOT"):
                monkeypatch.delenv(variable)
        else:
            assert rc == 0, err
    playbook = yaml.safe_load(Path(REPO / "config/presets/playbook-paper.yaml").read_text())
    assert playbook["playbook"]["evaluation"]["tasks"] is None
