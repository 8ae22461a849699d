"""The ``envs:`` config section: schema errors name the key; options map to make_env; rules wire up."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from memtrials.config import ConfigError, check_config
from memtrials.envs.build import env_options, task_table_params
from tests.conftest import REPO, base_config


@pytest.mark.parametrize("path,value,pattern", [
    ("alfworld.source", "downloaded", r"envs.*alfworld.*source"),
    ("alfworld.sizes.test", 3, r"envs.*sizes.*'test'"),
    ("run", ["webarena"], r"envs.*run"),
    ("check.gold_min_success", 1.5, r"envs.*gold_min_success"),
])
def test_schema_rejects_bad_envs_keys(path, value, pattern):
    cfg = copy.deepcopy(base_config())
    node = cfg["envs"]
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    with pytest.raises(ConfigError, match=pattern):
        check_config(cfg)


def test_default_config_builds_at_least_300_games_and_all_five_envs():
    envs = base_config()["envs"]
    assert sum(envs["alfworld"]["sizes"].values()) >= 300
    assert set(envs["run"]) == {"alfworld", "scienceworld", "appworld", "webshop", "planted"}


def envs_with(**sections):
    """The default ``envs:`` section with some sections' keys replaced."""
    envs = copy.deepcopy(base_config()["envs"])
    for name, patch in sections.items():
        envs[name].update(patch)
    return envs


def test_env_options_follow_the_source():
    assert env_options(envs_with(alfworld={"source": "official"}), "alfworld") == {"official": True}
    assert env_options(envs_with(), "alfworld") == {"root": "resources/alfworld/games"}
    assert env_options(envs_with(appworld={"source": "generated"}), "appworld") == {"root": "resources/appworld"}
    assert env_options(envs_with(scienceworld={"simplification": "easy"}), "scienceworld") == {"simplification": "easy"}


@pytest.mark.slow
def test_dry_run_plans_tables_and_checks():
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--forceall",
                           "--", "results/envcheck/alfworld.parquet", "results/envcheck/appworld.parquet",
                           "results/envcheck/scienceworld.parquet"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rule in ("env_alfworld_games", "env_appworld_data", "env_tasks", "env_check"):
        assert rule in proc.stdout + proc.stderr


def test_task_tables_depend_on_generated_data_only():
    from memtrials.envs.build import env_data_inputs

    assert env_data_inputs(envs_with(), "alfworld") == ["resources/alfworld/games.parquet"]
    assert env_data_inputs(envs_with(appworld={"source": "official"}), "appworld") == []
    assert env_data_inputs(envs_with(), "scienceworld") == []


def test_an_official_task_table_names_the_folder_its_variable_points_at(tmp_path, monkeypatch):
    """Pointing ALFWORLD_DATA / APPWORLD_ROOT elsewhere changes env_tasks' params, so Snakemake
    rebuilds the table; a generated source's params are the slice alone, as before the key existed."""
    envs = copy.deepcopy(base_config()["envs"])
    assert task_table_params(envs, "alfworld") == {"seed": envs["seed"], "alfworld": envs["alfworld"]}
    assert "official_data" not in task_table_params(envs, "webshop")
    for env, variable in (("alfworld", "ALFWORLD_DATA"), ("appworld", "APPWORLD_ROOT")):
        envs[env]["source"] = "official"
        monkeypatch.delenv(variable, raising=False)
        assert task_table_params(envs, env)["official_data"] is None
        monkeypatch.setenv(variable, str(tmp_path / "a"))
        first = task_table_params(envs, env)["official_data"]
        monkeypatch.setenv(variable, str(tmp_path / "b"))
        assert first == str((tmp_path / "a").resolve()) != task_table_params(envs, env)["official_data"]
