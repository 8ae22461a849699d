"""Official data in one switch (issue 39): the overlay config/presets/official-data.yaml with each
paper preset, the checks of ALFWORLD_DATA / APPWORLD_ROOT and of the folders' contents, and the
official path end to end through Snakemake on games in ALFWorld's official layout, made by the
project's own generator."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from memtrials.config import ConfigError, load_models
from memtrials.config.load import merge
from memtrials.envs.catalog import check_official_data
from tests.conftest import REPO, base_config, copy_workflow, failure_text, run_snakemake

OVERLAY = REPO / "config" / "presets" / "official-data.yaml"
FOLDERS = {"train": "train", "practice": "valid_seen", "eval": "valid_unseen"}  # generated split -> official folder


def with_presets(*names: str) -> dict:
    cfg = base_config()
    for name in names:
        cfg = merge(cfg, yaml.safe_load((REPO / "config" / "presets" / f"{name}.yaml").read_text()))
    return cfg


@pytest.mark.parametrize("preset", ["history-paper", "antipersist-paper", "playbook-paper", None])
def test_the_overlay_points_every_study_at_the_official_splits(preset, official_env_vars):
    from memtrials.studies.antipersist.workflow import AntipersistWorkflow
    from memtrials.studies.history.workflow import HistoryWorkflow
    from memtrials.studies.playbook.workflow import PlaybookWorkflow

    paper = with_presets(*([preset] if preset else []))
    cfg = merge(paper, yaml.safe_load(OVERLAY.read_text()))
    assert cfg["envs"]["alfworld"]["source"] == cfg["envs"]["appworld"]["source"] == "official"
    # evaluation on the held-out splits, growth and training streams on train
    assert cfg["history"]["splits"] == {**paper["history"]["splits"], "alfworld": "eval_out_of_distribution",
                                        "appworld": "test_normal"}
    assert cfg["calibrator"]["splits"] == {**paper["calibrator"]["splits"], "alfworld": "train", "appworld": "train"}
    pool = cfg["antipersist"]["pools"]["alfworld"]
    assert pool == {**paper["antipersist"]["pools"]["alfworld"], "train_split": "train",
                    "eval_split": "eval_out_of_distribution"}  # the preset's sizes kept
    assert {k: v for k, v in cfg.items() if k not in ("envs", "history", "calibrator", "antipersist")} == \
        {k: v for k, v in paper.items() if k not in ("envs", "history", "calibrator", "antipersist")}
    models = load_models(REPO / cfg["models_file"])
    identity = lambda m: {"identity": m}  # noqa: E731
    playbook = PlaybookWorkflow(cfg, models, identity)
    assert playbook.splits("appworld") == {"train": "train", "practice": "dev", "eval": "test_normal"}
    assert playbook.splits("alfworld") == {"train": "train", "practice": "eval_in_distribution",
                                           "eval": "eval_out_of_distribution"}
    if preset == "history-paper":  # 500 tasks per cell: more than the release's held-out splits, said at parse
        with pytest.raises(ConfigError, match=r"500 tasks per cell, but the alfworld split 'eval_out_of_distribution' "
                                              r"holds 134 tasks \(the official alfworld release.*name a larger split"):
            HistoryWorkflow(cfg, models, identity)
        with pytest.raises(ConfigError, match=r"the appworld split 'test_normal' holds 168 tasks"):
            HistoryWorkflow(merge(cfg, {"history": {"envs": ["appworld"]}}), models, identity)
        cfg = merge(cfg, {"history": {"tasks_per_cell": 134}})  # the README's last overlay
    HistoryWorkflow(cfg, models, identity)  # the official split names pass each study's checks
    AntipersistWorkflow(cfg, models, identity)


@pytest.mark.parametrize("env, variable, folder", [("alfworld", "ALFWORLD_DATA", "json_2.1.1"),
                                                    ("appworld", "APPWORLD_ROOT", "data/tasks")])
def test_an_unset_or_empty_variable_stops_naming_it_and_the_fix(env, variable, folder, tmp_path, monkeypatch):
    envs = merge(base_config(), yaml.safe_load(OVERLAY.read_text()))["envs"]
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError, match=rf"config key envs\.{env}\.source: .*the environment variable {variable} "
                                          rf"is not set; run .* `export {variable}=<folder>`"):
        check_official_data(env, envs)
    monkeypatch.setenv(variable, str(tmp_path))
    with pytest.raises(ConfigError, match=rf"{tmp_path / folder} does not exist \({variable}={tmp_path}\)"):
        check_official_data(env, envs)
    (tmp_path / folder).mkdir(parents=True)
    check_official_data(env, envs)
    check_official_data(env, base_config()["envs"])  # generated data needs no variable


def fake_game(folder: Path, *, traj: bool = True, game: bool = True, task_type: str = "pick_and_place_simple") -> None:
    """A trial folder with the two files the table reads (no engine opens it here)."""
    folder.mkdir(parents=True)
    if traj:
        (folder / "traj_data.json").write_text(json.dumps({"task_type": task_type, "pddl_params": {}}))
    if game:
        (folder / "game.tw-pddl").write_text(json.dumps({"solvable": True, "walkthrough": ["look"]}))


def test_an_official_alfworld_folder_without_the_loaders_files_stops_naming_folder_file_and_fix(tmp_path, caplog):
    from memtrials.envs.alfworld.env import task_rows

    root = tmp_path / "json_2.1.1"
    for folder in FOLDERS.values():
        fake_game(root / folder / "pick_and_place_simple-Apple-None-Fridge-1" / "trial_00001")
    assert len(task_rows(root, official=True)) == 3
    for folder in FOLDERS.values():  # games without traj_data.json: 0 rows before, an error now
        (root / folder / "pick_and_place_simple-Apple-None-Fridge-1" / "trial_00001" / "traj_data.json").unlink()
    with pytest.raises(FileNotFoundError, match=rf"official split folder {root / 'train'} has no playable game: "
                                                r"1 of 1 game folders lack traj_data.json .*alfworld-download"):
        task_rows(root, official=True)
    shutil.rmtree(root)
    for folder in FOLDERS.values():
        fake_game(root / folder / "look_at_obj_in_light-Book-None-DeskLamp-2" / "trial_00002", game=False)
    with pytest.raises(FileNotFoundError, match=r"1 of 1 game folders lack game\.tw-pddl"):
        task_rows(root, official=True)
    shutil.rmtree(root / "valid_seen")
    with pytest.raises(FileNotFoundError, match=rf"{root} has no valid_seen/ folder \(split eval_in_distribution\)"):
        task_rows(root, official=True)
    shutil.rmtree(root)
    for folder in FOLDERS.values():
        (root / folder / "some_task").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"holds no game folders \(<task>/trial_\*/\)"):
        task_rows(root, official=True)
    # a game lacking its files beside playable ones is skipped (as ALFWorld's own loader skips it), with a warning
    shutil.rmtree(root)
    for folder in FOLDERS.values():
        fake_game(root / folder / "a-X-None-Y-1" / "trial_00001")
    fake_game(root / "valid_unseen" / "a-X-None-Y-1" / "trial_00002", traj=False)
    with caplog.at_level("WARNING"):
        rows = task_rows(root, official=True)
    assert len(rows) == 3 and "1 of 2 game folders lack traj_data.json" in caplog.text
    assert "ALFWorld's release holds 134" in caplog.text  # a count unlike the release's is said


def test_an_official_appworld_root_without_the_task_files_stops_naming_them(tmp_path, monkeypatch):
    from memtrials.envs.appworld.env import task_rows

    root = tmp_path / "appworld"
    data = root / "data"
    (data / "tasks").mkdir(parents=True)
    monkeypatch.setenv("APPWORLD_ROOT", str(root))
    with pytest.raises(FileNotFoundError, match=r"lacks data/datasets, data/base_dbs, data/api_docs; .*"
                                                r"appworld download data"):
        task_rows(official=True)
    for name in ("datasets", "base_dbs", "api_docs"):
        (data / name).mkdir()
    with pytest.raises(FileNotFoundError, match=r"lists no split: .*holds none of train\.txt, dev\.txt"):
        task_rows(official=True)
    (data / "datasets" / "dev.txt").write_text("82e2fac_1\n82e2fac_2\n")
    for task in ("82e2fac_1", "82e2fac_2"):
        (data / "tasks" / task / "dbs").mkdir(parents=True)
        (data / "tasks" / task / "ground_truth").mkdir()
    (data / "tasks" / "82e2fac_1" / "specs.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"official split dev .*: 1 of its 2 tasks lack specs\.json "
                                                rf"\(e\.g\. {data / 'tasks' / '82e2fac_2' / 'specs.json'}\)"):
        task_rows(official=True)
    (data / "tasks" / "82e2fac_2" / "specs.json").write_text("{}")
    rows = task_rows(official=True)
    assert [(r["task_id"], r["split"], r["type"], r["source"]) for r in rows] == [
        ("82e2fac_1", "dev", "82e2fac", "official"), ("82e2fac_2", "dev", "82e2fac", "official")]


def official_alfworld(dest: Path) -> Path:
    """ALFWorld's official layout (``<dest>/json_2.1.1/{train,valid_seen,valid_unseen}/<task>/trial_*``)
    holding games made by the project's generator: two training games, one in each held-out split."""
    from memtrials.envs.alfworld.gen import generate

    generated = dest.parent / "generated"
    records = generate(generated, seed=0, sizes={"train": 2, "practice": 1, "eval": 1}, workers=1)
    for record in records:
        src = generated / record["spec"].task_id
        shutil.copytree(src, dest / "json_2.1.1" / FOLDERS[record["spec"].split] / src.parent.name / src.name)
    return dest


def official_appworld(dest: Path) -> Path:
    """An AppWorld root in AppWorld's official layout (``data/{tasks,datasets,base_dbs,api_docs}``,
    the official split listings): three tasks of the project's authored set, one family per split,
    written by AppWorld's own ``Task.save`` (in a subprocess: AppWorld fixes its root per process),
    their listings renamed to the official splits (train, practice -> dev, eval -> test_normal)."""
    import os
    import subprocess
    import sys

    code = ("import sys\nfrom memtrials.envs.appworld.data import build_root\n"
            "from memtrials.envs.appworld.manifest import MANIFEST, load_manifest\n"
            "build_root(sys.argv[1], seed=0, max_variants=1, families=['note_tag_count', 'note_latest_title', "
            "'todo_open_count'], workers=1, verified=load_manifest(MANIFEST), sample=0)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(dest)], capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    datasets = dest / "data" / "datasets"
    for ours, official in (("practice", "dev"), ("eval", "test_normal")):
        (datasets / f"{ours}.txt").rename(datasets / f"{official}.txt")
    (datasets / "all.txt").unlink()
    return dest


def appworld_or_alfworld(body: dict) -> str:
    """ALFWorld's actor the first listed action; AppWorld's (no list) a code action ending the task."""
    from memtrials.testing.policies import first_admissible

    reply = first_admissible(body)
    return reply if reply != "look" else "<action>apis.supervisor.complete_task()</action>"


TINY = {  # the anti-persistence stream (ReAct) and its frozen evaluation on ALFWorld, history's Raw on AppWorld
    "panel": ["loop"],
    "luck": {"enabled": False}, "calibrator": {"enabled": False}, "playbook": {"enabled": False},
    "history": {"enabled": True, "envs": ["appworld"], "conditions": ["raw"], "chat_conditions": [],
                "tasks_per_cell": 1, "in_flight": 1, "task_types": {"appworld": None},
                "continuation": {"enabled": False}, "probe": {"enabled": False},
                "actor": {"max_actions": 2, "max_output_tokens": 32}},
    "antipersist": {"enabled": True, "envs": ["alfworld"], "designs": ["react"], "rounds": 1, "round_size": 2,
                    "in_flight": 1, "pools": {"alfworld": {"train_tasks": 2, "eval_tasks": 1}},
                    "actor": {"mode": "choice", "max_actions": 2, "max_output_tokens": 16, "max_listed_actions": 5}},
}


@pytest.mark.slow
def test_the_official_path_end_to_end_through_snakemake(tmp_path):
    """ALFWorld (generator-made games in the official layout) through the anti-persistence study,
    AppWorld (an authored root in the official layout) through the history study's Raw cell, both
    under config/presets/official-data.yaml after a tiny overlay, on the loopback endpoint."""
    from memtrials.testing import LoopbackServer, loopback_embed_endpoint, loopback_endpoint

    data = official_alfworld(tmp_path / "alfworld_data")
    app_root = official_appworld(tmp_path / "appworld_root")
    variables = {"ALFWORLD_DATA": str(data), "APPWORLD_ROOT": str(app_root)}
    wf = copy_workflow(tmp_path / "wf")
    targets = ["results/antipersist/tables/index.md", "results/history/rollouts/loop/appworld/raw.parquet"]
    with LoopbackServer(policy=appworld_or_alfworld, embed_dim=32) as srv:
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": {
            "loop": loopback_endpoint(srv), "emb": loopback_embed_endpoint(srv)}}))
        tiny = copy.deepcopy(TINY)
        tiny["models_file"] = "models.yaml"
        tiny["roles"] = {**{r: "loop" for r in base_config()["roles"]}, "embedder": "emb"}
        (wf / "tiny.yaml").write_text(yaml.safe_dump(tiny))
        args = ("--configfile", "tiny.yaml", "config/presets/official-data.yaml", "--", *targets)
        unset = run_snakemake(wf, "-n", *args, env={**variables, "ALFWORLD_DATA": ""})  # APPWORLD_ROOT: same path
        assert unset.returncode != 0
        said = unset.stdout + unset.stderr  # unset, or ALFWorld's own default folder where its import set one
        assert "ALFWORLD_DATA" in said and ("is not set" in said or "does not exist" in said), said[-3000:]
        r = run_snakemake(wf, *args, env=variables, timeout=900)
        assert r.returncode == 0, failure_text(r)
        completions = srv.stats.completions
        # the same data with its held-out games' traj_data.json gone: the table stops, naming folder, file and fix
        broken_data = tmp_path / "broken"
        shutil.copytree(data, broken_data)
        for traj in (broken_data / "json_2.1.1" / "valid_unseen").rglob("traj_data.json"):
            traj.unlink()
        # the built table stays: pointing the variable at another folder rebuilds it (its params name the folder)
        shutil.copy(wf / "results" / "tasks" / "alfworld.parquet", tmp_path / "alfworld.parquet")
        broken = run_snakemake(wf, "--configfile", "tiny.yaml", "config/presets/official-data.yaml", "--",
                               "results/tasks/alfworld.parquet", env={**variables, "ALFWORLD_DATA": str(broken_data)})
    assert broken.returncode != 0
    text = broken.stdout + broken.stderr
    assert f"official split folder {broken_data / 'json_2.1.1' / 'valid_unseen'} has no playable game" in text
    assert "1 of 1 game folders lack traj_data.json" in text and "alfworld-download" in text
    tasks = pd.read_parquet(tmp_path / "alfworld.parquet")
    assert set(tasks["source"]) == {"official"}
    assert tasks.groupby("split").size().to_dict() == {"eval_in_distribution": 1, "eval_out_of_distribution": 1,
                                                       "train": 2}
    split_of = dict(zip(tasks["task_id"], tasks["split"]))
    out = wf / "results" / "antipersist" / "loop" / "alfworld" / "react" / "seed1"
    record = json.loads((out / "eval.json").read_text())
    assert record["episodes"] == 1 and record["memory_unchanged"]
    evaluated = pd.read_parquet(out / "eval.parquet")["task_id"].tolist()
    trained = pd.read_parquet(out / "train.parquet")["task_id"].tolist()
    assert [split_of[t] for t in evaluated] == ["eval_out_of_distribution"] and evaluated[0].startswith("valid_unseen/")
    assert sorted(split_of[t] for t in trained) == ["train", "train"]
    assert completions > 0 and (wf / targets[0]).exists()
    spec = (out / "train.spec.json").read_text()  # the cell's config slice: the environment opened the official data
    assert '"official": true' in spec
    # AppWorld: the official table's test_normal task played from $APPWORLD_ROOT
    app_tasks = pd.read_parquet(wf / "results" / "tasks" / "appworld.parquet")
    assert set(app_tasks["source"]) == {"official"}
    assert dict(zip(app_tasks["task_id"], app_tasks["split"])) == {
        "hsnotetagcount_1": "train", "hsnotelatesttitle_1": "dev", "hstodoopencount_1": "test_normal"}
    played = pd.read_parquet(wf / targets[1])
    assert played["task_id"].tolist() == ["hstodoopencount_1"]
    assert not played["won"].any()  # complete_task() without the answer: AppWorld's evaluator fails it
