"""The Snakemake catalog's CI habits: ``snakefmt --check`` and ``snakemake --lint`` over the
Snakefile and every rule file under ``workflow/`` (whatever .smk files exist, so a study added
later is covered), on the default config and on each paper preset that parses on the
project's own data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, run_snakemake


def workflow_files() -> list[Path]:
    return [REPO / "Snakefile", *sorted((REPO / "workflow").rglob("*.smk"))]


def test_the_workflow_has_rule_files():
    names = {p.name for p in workflow_files()}
    assert {"Snakefile", "common.smk", "luck.smk", "history.smk"} <= names


def test_snakefmt_check_is_clean():
    files = [str(p.relative_to(REPO)) for p in workflow_files()]
    out = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "--diff", *files], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (
        "snakefmt would reformat these workflow files; run `.venv/bin/snakefmt "
        + " ".join(files) + "` and commit the result:\n" + (out.stdout + out.stderr)[-6000:])


# `snakemake --lint` on the default config: tests/test_workflow.py::test_lint_is_clean


# history-paper.yaml stops at parse time on the generated task data, by design (500 tasks per
# cell; tests/history/test_history_config.py pins that message), so it is linted with a small
# overlay that keeps every other key of the preset
OVERLAYS = {"history-paper": [{"history": {"tasks_per_cell": 2, "chat_tasks_per_cell": 2}}]}
PRESETS = sorted(p.stem for p in (REPO / "config/presets").glob("*.yaml") if not p.name.endswith(".models.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_lint_on_a_paper_preset_is_clean(preset, tmp_path, official_env_vars):  # official-data.yaml names them
    args = ["--configfile", str(REPO / f"config/presets/{preset}.yaml")]
    for i, extra in enumerate(OVERLAYS.get(preset, [])):
        path = tmp_path / f"extra{i}.yaml"
        path.write_text(yaml.safe_dump(extra))
        args.append(str(path))
    out = run_snakemake(REPO, "--lint", *args)
    text = out.stdout + out.stderr
    # --lint exits 1 whenever it has anything to say; its findings name the rule and the fix
    assert out.returncode == 0 and "Congratulations" in text, text[-6000:]
