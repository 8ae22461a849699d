"""The Snakemake workflow: dry run, lint, schema rejection, a real smoke run, no key leaks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from memtrials.testing import LoopbackServer, loopback_endpoint
from tests.conftest import REPO, base_config, failure_text
from tests.conftest import run_snakemake as snakemake

SECRET = "sk-memtrials-DUMMY-SECRET-0123456789abcdef"


def loop_overlay(workdir: Path, name: str = "loop") -> Path:
    """A --configfile overlay that points the panel and every chat role at endpoint ``name``
    (the embedder stays the embedded ``minilm``, added to the copy's registry by :func:`registry`)."""
    roles = {role: name for role in (base_config().get("roles") or {}) if role != "embedder"}
    overlay = workdir / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"models_file": "models.yaml", "panel": [name], "roles": roles}))
    return overlay


def registry(entry: dict) -> str:
    """A models file with the loopback entry ``loop`` and the embedded embedder ``minilm``."""
    minilm = yaml.safe_load((REPO / "config" / "models.yaml").read_text())["endpoints"]["minilm"]
    return yaml.safe_dump({"endpoints": {"loop": entry, "minilm": minilm}})


def test_dry_run_of_default_config_is_clean():
    out = snakemake(REPO, "-n", "--quiet", "rules")
    assert out.returncode == 0, failure_text(out)


@pytest.mark.slow
def test_lint_is_clean():
    out = snakemake(REPO, "--lint")
    assert out.returncode == 0, failure_text(out)


def test_malformed_config_fails_before_any_job(workflow_copy):
    overlay = workflow_copy / "bad.yaml"
    overlay.write_text(yaml.safe_dump({"panel": ["nobody"]}))
    out = snakemake(workflow_copy, "-n", "--configfile", str(overlay))
    assert out.returncode != 0
    assert "key panel: model 'nobody' is not in config/models.yaml" in out.stderr + out.stdout


def test_unset_key_fails_before_any_study_call(workflow_copy):
    with LoopbackServer() as srv:
        entry = loopback_endpoint(srv, api_key_env="MEMTRIALS_UNSET_KEY")
        os.environ.pop("MEMTRIALS_UNSET_KEY", None)
        (workflow_copy / "models.yaml").write_text(registry(entry))
        overlay = loop_overlay(workflow_copy)
        out = snakemake(workflow_copy, "--configfile", str(overlay), "--", "results/smoke/loop.parquet",
                        env={"MEMTRIALS_UNSET_KEY": ""})
        assert out.returncode != 0
        assert "MEMTRIALS_UNSET_KEY, which is not set. Fix: export MEMTRIALS_UNSET_KEY=" in out.stderr + out.stdout
        assert srv.stats.requests == 0


def test_smoke_run_records_and_no_key_leaks(workflow_copy):
    with LoopbackServer(policy={"script": ["Paris"]}) as srv:
        entry = loopback_endpoint(srv, api_key_env="MEMTRIALS_DUMMY_KEY", price=(1.0, 2.0))
        (workflow_copy / "models.yaml").write_text(registry(entry))
        overlay = loop_overlay(workflow_copy)
        env = {"MEMTRIALS_DUMMY_KEY": SECRET}
        out = snakemake(workflow_copy, "--configfile", str(overlay), "--", "results/smoke/loop.parquet", env=env)
        assert out.returncode == 0, failure_text(out)
        import pandas as pd

        answer = pd.read_parquet(workflow_copy / "results/smoke/loop.parquet")
        calls = pd.read_parquet(workflow_copy / "results/smoke/loop.calls.parquet")
        assert answer.loc[0, "answer"] == "Paris"
        assert len(calls) == 1 and calls.loc[0, "cost"] > 0
        assert srv.stats.completions == 1
        # the rule's spec beside its outputs: what produced them
        spec = json.loads((workflow_copy / "results/smoke/loop.spec.json").read_text())
        assert spec["rule"] == "smoke" and spec["wildcards"] == {"model": "loop"}
        assert spec["params"]["question"] == base_config()["smoke"]["question"]
        assert spec["params"]["endpoint"]["identity"]["base_url"] == entry["base_url"]
        assert spec["outputs"] == ["results/smoke/loop.parquet", "results/smoke/loop.calls.parquet"]
        assert spec["git"]["revision"] != "unknown" and spec["prompts"] is None
        # rerunning the one cell on purpose replays the cache: no new call
        out = snakemake(workflow_copy, "--configfile", str(overlay), "--force", "--",
                        "results/smoke/loop.parquet", env=env)
        assert out.returncode == 0 and srv.stats.completions == 1
    leaks = []
    for path in workflow_copy.rglob("*"):
        if path.is_file() and not path.is_symlink() and "src" not in path.relative_to(workflow_copy).parts[:1]:
            if SECRET.encode() in path.read_bytes():
                leaks.append(str(path))
    assert not leaks, leaks
    assert SECRET not in out.stdout + out.stderr
    assert (workflow_copy / "results/cache/llm.sqlite").exists()
    log_text = (workflow_copy / "logs/smoke/loop.log").read_text()
    assert "smoke/loop: 1/1 calls" in log_text and "tokens, $" in log_text  # progress line in the log
