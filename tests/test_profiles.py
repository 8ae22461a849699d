"""The scale-out profiles (profiles/slurm, profiles/kubernetes): a dry run of each on a paper
preset through its executor plugin (installed from envs/requirements.txt), and the per-rule
resources each job would ask for.  Each is given as the workflow profile
(``--workflow-profile profiles/slurm``), which replaces profiles/default.

A dry run never submits: Snakemake plans the DAG with the profile's executor settings and
resources and prints each job, so neither sbatch nor a Kubernetes API server is needed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, copy_workflow

PROFILES = ("slurm", "kubernetes")
EXECUTOR = {"slurm": "slurm", "kubernetes": "kubernetes"}


def profile(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "profiles" / name / "config.yaml").read_text())


def minutes(value: Any) -> int:
    """A profile's runtime as Snakemake reads it (a string is a timespan; a bare number, seconds)."""
    from humanfriendly import parse_timespan

    return max(int(round(parse_timespan(str(value)) / 60)), 1)


def job_resources(text: str) -> dict[str, dict[str, str]]:
    """{rule: {resource: value}} from a dry run's job listing (the first job of each rule;
    its threads as ``threads``)."""
    out: dict[str, dict[str, str]] = {}
    for rule, block in re.findall(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)", text, flags=re.M):
        res = re.search(r"^    resources: (.*)$", block, flags=re.M)
        if rule in out or not res:
            continue
        out[rule] = dict(kv.split("=", 1) for kv in res.group(1).split(", "))
        threads = re.search(r"^    threads: (\d+)$", block, flags=re.M)
        if threads:
            out[rule]["threads"] = threads.group(1)
    return out


def rule_names() -> set[str]:
    names = set()
    for path in [REPO / "Snakefile", *(REPO / "workflow").rglob("*.smk")]:
        names |= set(re.findall(r"^(?:rule|checkpoint) (\w+):", path.read_text(), flags=re.M))
    return names


def test_job_resources_parses_a_dry_run_listing():
    text = ("rule a:\n    input: x\n    jobid: 1\n    threads: 8\n    resources: tmpdir=/tmp, mem_mb=4000, api=16\n\n"
            "localrule b:\n    resources: tmpdir=/tmp\n\nrule a:\n    resources: mem_mb=1\n")
    assert job_resources(text) == {"a": {"tmpdir": "/tmp", "mem_mb": "4000", "api": "16", "threads": "8"},
                                   "b": {"tmpdir": "/tmp"}}
    assert minutes("24h") == 1440 and minutes("30m") == 30 and minutes("1440") == 24


@pytest.mark.parametrize("name", PROFILES)
def test_profile_names_its_executor_and_known_rules(name):
    prof = profile(name)
    assert prof["executor"] == EXECUTOR[name]
    assert any(str(r).startswith("api=") for r in prof["resources"]), "the global api cap"
    unknown = sorted((set(prof.get("set-resources", {})) | set(prof.get("set-threads", {}))) - rule_names())
    assert not unknown, f"profiles/{name}/config.yaml sets resources of rules that do not exist: {unknown}"
    for rule, res in prof.get("set-resources", {}).items():
        assert "api" not in res, f"{rule}: the api resource is declared by the rule (in flight), not the profile"
        if "runtime" in res:  # a bare number would be read as seconds
            assert re.fullmatch(r"\d+[mhd]", str(res["runtime"])), (rule, res["runtime"])


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """The workflow without results (a dry run in the repository would plan around whatever
    results a developer has built there)."""
    return copy_workflow(tmp_path_factory.mktemp("profiles") / "wf")


def _dry_run(wf: Path, name: str, *configfiles: str) -> dict[str, dict[str, str]]:
    args = ["-n", "--workflow-profile", f"profiles/{name}"]
    if name == "kubernetes":  # the storage volume holds the checkout: here, the copy
        args += ["--default-storage-prefix", str(wf)]
    if configfiles:
        args += ["--configfile", *configfiles]
    # no --cores: on a cluster the profile's `jobs` bounds a run, and threads are not scaled
    # down to this machine's cores
    out = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=wf, capture_output=True, text=True,
                         timeout=600)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    assert "This was a dry-run" in text
    return job_resources(text)


def _expect(name: str, jobs: dict[str, dict[str, str]]) -> None:
    prof = profile(name)
    settings = [(rule, res) for rule, res in prof.get("set-resources", {}).items()]
    settings += [(rule, {"threads": n}) for rule, n in prof.get("set-threads", {}).items()]
    for rule, res in settings:
        if rule not in jobs:
            continue
        for key, value in res.items():
            want = str(minutes(value)) if key == "runtime" else str(value)
            assert jobs[rule].get(key) == want, f"{name}: {rule} asks for {key}={jobs[rule].get(key)}, profile says {want}"


@pytest.mark.slow
@pytest.mark.parametrize("name", PROFILES)
def test_dry_run_on_the_luck_paper_preset(name, checkout):
    jobs = _dry_run(checkout, name, str(checkout / "config/presets/luck-paper.yaml"))
    assert {"luck_writers", "luck_readers", "luck_analysis"} <= set(jobs)
    _expect(name, jobs)
    assert jobs["luck_writers"]["api"] == "16"  # the example entries' max_concurrency
    if name == "slurm":
        assert jobs["luck_writers"]["runtime"] == "1440" and jobs["luck_worlds"]["runtime"] == "30"


@pytest.mark.slow
@pytest.mark.parametrize("name", PROFILES)
def test_dry_run_places_the_calibrator_training_rule_on_a_gpu(name, checkout, tmp_path):
    overlay = tmp_path / "train.yaml"
    overlay.write_text(yaml.safe_dump({"calibrator": {"train": {"enabled": True}}}))
    jobs = _dry_run(checkout, name, str(overlay))
    _expect(name, jobs)
    sft = jobs["calibrator_sft"]
    declared = yaml.safe_load((REPO / "config/config.yaml").read_text())["calibrator"]["train"]["resources"]
    assert sft["gpu"] == str(declared["gpu"]) and sft["mem_mb"] == str(declared["mem_mb"])
    assert sft["runtime"] == str(declared["runtime"])
    if name == "slurm":
        assert sft["slurm_partition"] == "gpu" and sft["cpus_per_task"] == "8"
    else:
        assert sft["gpu_manufacturer"] == "nvidia" and sft["threads"] == "8"


def test_readme_documents_each_profile():
    readme = (REPO / "README.md").read_text()
    for name in PROFILES:
        assert f"--workflow-profile profiles/{name}" in readme, f"README: no example run with profiles/{name}"


def test_executor_plugins_are_pinned():
    reqs = (REPO / "envs/requirements.txt").read_text()
    for name in PROFILES:
        assert re.search(rf"^snakemake-executor-plugin-{name}==\S+$", reqs, flags=re.M), name
    assert Path(REPO / "envs/constraints.txt").read_text().count("snakemake-storage-plugin-fs==") == 1


@pytest.mark.slow
def test_a_command_line_config_that_drops_the_profiles_cache_backend_stops_before_any_job(checkout):
    """``--config`` replaces the profile's ``config:`` entry (cache={backend: shards}) whole, so
    the run would reach Slurm with the default sqlite cache: the workflow's start refuses it,
    naming the fix, before any job is submitted (no sbatch is needed to see it)."""
    args = ["--workflow-profile", "profiles/slurm", "--config", "cache={mode: use}",
            "--", "results/smoke/smollm2.parquet"]
    out = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=checkout, capture_output=True,
                         text=True, timeout=600)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text[-3000:]
    assert "cache.backend = sqlite, but the executor 'slurm' runs jobs on other hosts" in text, text[-3000:]
    assert "cache={backend: shards}" in text
    assert not (checkout / "results" / "smoke").exists()


def test_the_backend_check_allows_local_runs_and_shards_anywhere():
    from memtrials.llm.cache import check_backend_for_executor

    check_backend_for_executor("sqlite", "local", False)
    check_backend_for_executor("sqlite", None, False)
    check_backend_for_executor("shards", "kubernetes", True)
    with pytest.raises(ValueError, match="executor 'kubernetes'"):
        check_backend_for_executor("sqlite", "kubernetes", True)
