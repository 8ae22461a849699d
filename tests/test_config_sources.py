"""A rejected config key is named with the file that set it (issue 14, "Bad configs"):
config/config.yaml, a ``--configfile`` overlay (the last one that sets the key, in
Snakemake's merge order) or ``--config`` on the command line, through ``config check``,
``snakemake -n`` and ``bin/run -n``; ``bin/run`` names an overlay that Snakemake's own
loader would reject without naming it (empty, unparsable, not a mapping)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from memtrials.config import CLI_CONFIG, ConfigError, Sources, config_sources, load_config
from tests.conftest import run_snakemake

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "config.yaml"


def test_sources_name_the_last_file_that_sets_each_key():
    src = Sources([
        ("config/config.yaml", {"panel": ["a"], "luck": {"seed": 1, "enabled": True}, "cache": {"mode": "use"}}),
        ("one.yaml", {"luck": {"seed": 2}}),
        ("two.yaml", {"panel": ["b"], "luck": {"writer": "x"}}),
        (CLI_CONFIG, {"roles": {"judge": "j"}}),
    ])
    assert src.of("luck.seed") == "one.yaml"
    assert src.of(["luck", "enabled"]) == "config/config.yaml"
    assert src.of(["panel", 0]) == "two.yaml"  # an item of a list the overlay replaced
    assert src.of("cache.mode") == "config/config.yaml"
    assert src.of("roles.judge") == CLI_CONFIG
    assert src.of(()) == str(src) == f"config/config.yaml + one.yaml + two.yaml + {CLI_CONFIG}"
    # a study's message gets the file of its key in front, and of the other keys it names
    msg = src.explain(ConfigError("config key luck.seed: too big; compare luck.writer with roles.judge"))
    assert msg.startswith("one.yaml: config key luck.seed: too big")
    assert "luck.writer is set in two.yaml" in msg and f"roles.judge is set in {CLI_CONFIG}" in msg


def test_config_sources_follow_snakemakes_merge_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text("panel: [a]\nluck: {seed: 1}\n")
    (tmp_path / "o1.yaml").write_text("luck: {seed: 2}\n")
    (tmp_path / "o2.yaml").write_text("luck: {seed: 3}\n")
    # Snakemake lists the --configfile overlays (absolute) before the Snakefile's configfile
    overlays = [tmp_path / "o1.yaml", tmp_path / "o2.yaml"]
    src = config_sources([*overlays, "base.yaml"], overlays, {"panel": ["z"]})
    assert [name for name, _ in src.layers] == ["base.yaml", "o1.yaml", "o2.yaml", CLI_CONFIG]
    assert src.of("luck.seed") == "o2.yaml" and src.of("panel") == CLI_CONFIG
    replaced = config_sources([*overlays, "base.yaml"], overlays, None, replace=True)
    assert [name for name, _ in replaced.layers] == ["o1.yaml", "o2.yaml"]


def test_config_check_names_the_file_of_each_bad_key(tmp_path):
    one, two = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one.write_text("panle: [smollm2]\n")
    two.write_text("luck:\n  sed: 3\n")
    with pytest.raises(ConfigError) as err:
        load_config(CONFIG, [one, two])
    lines = str(err.value).splitlines()
    assert any("'panle'" in ln and f"[set in {one}]" in ln for ln in lines), lines
    assert any("'sed'" in ln and f"[set in {two}]" in ln for ln in lines), lines
    with pytest.raises(ConfigError, match=rf"^{two}: invalid configuration:\n  key luck: unknown key\(s\) 'sed'"):
        load_config(CONFIG, [two])


# -- through Snakemake, in a workflow copy -------------------------------------------
@pytest.mark.parametrize("overlay, args, expected", [
    ("luck:\n  sed: 3\n", (), "bad.yaml: invalid configuration:\n  key luck: unknown key(s) 'sed'"),
    ("panel: [smollm2]\n", ("--config", "panel=[nobody]"), f"{CLI_CONFIG}: key panel: model 'nobody' is not in"),
    ("history:\n  splits: {scienceworld: tset}\n", (),
     "bad.yaml: config key history.splits.scienceworld: unknown split 'tset'"),
])
def test_snakemake_dry_run_names_the_file_that_set_the_key(workflow_copy, overlay, args, expected):
    (workflow_copy / "bad.yaml").write_text(overlay)
    out = run_snakemake(workflow_copy, "-n", "--configfile", str(workflow_copy / "bad.yaml"), *args, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert expected in text, text[-3000:]
    assert "--configfile overlays)" not in text  # the old label that named no file


def _bin_run_copy(wf: Path) -> Path:
    """``bin/run`` in the workflow copy, its set-up a no-op and the checkout's .venv linked."""
    (wf / "bin").mkdir()
    shutil.copy2(REPO / "bin" / "run", wf / "bin" / "run")
    (wf / "bin" / "setup").write_text("#!/bin/sh\nexit 0\n")
    (wf / "bin" / "setup").chmod(0o755)
    (wf / ".venv").symlink_to(REPO / ".venv")
    return wf / "bin" / "run"


@pytest.mark.parametrize("name, text, expected", [
    ("empty.yaml", "", "empty.yaml: the file is empty"),
    ("broken.yaml", "history:\n  envs: [alfworld\n  seed: 3\n", "broken.yaml: not valid YAML at line"),
    ("list.yaml", "- panel\n- smollm2\n", "list.yaml: expected a mapping of config keys"),
])
def test_bin_run_names_an_overlay_snakemake_cannot_load(workflow_copy, name, text, expected):
    run = _bin_run_copy(workflow_copy)
    (workflow_copy / "ok.yaml").write_text("panel: [smollm2]\n")
    (workflow_copy / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "MEMTRIALS_RUN_ID"}
    out = subprocess.run([str(run), "-n", "--configfile", "ok.yaml", name], cwd=workflow_copy, capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode != 0
    assert expected in out.stderr and "Fix:" in out.stderr, out.stderr[-2000:]
    assert "Building DAG" not in out.stdout + out.stderr  # rejected before Snakemake ran
