"""The one rule entry (memtrials.pipeline.rule_entry.run_rule): logging to the rule's log, a clean
exit on user-fixable errors, and the spec written beside the outputs once the rule succeeds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from snakemake.io import Namedlist

import memtrials
from memtrials.pipeline import rule_entry
from memtrials.agent.prompts import PROMPT_FILES, ActorPrompts
from memtrials.config import ConfigError
from memtrials.config.prompts import PromptFiles
from memtrials.pipeline.rule_entry import REDACTED, redact, run_rule, spec_path

REPO = Path(__file__).resolve().parents[1]
PROMPTS = REPO / "config" / "prompts" / "actor"
JUDGE = REPO / "config" / "prompts" / "history"
JUDGE_FILES = ("judge_repetition_system.txt", "judge_repetition_user.txt")
SECRET = "sk-rule-entry-DUMMY-0123456789"


def fake_snakemake(tmp_path: Path, **params) -> SimpleNamespace:
    return SimpleNamespace(
        rule="history_rollouts",
        wildcards=Namedlist(fromdict={"model": "loop", "env": "scienceworld", "condition": "raw"}),
        params=Namedlist(fromdict=params),
        input=Namedlist(fromdict={"tasks": str(tmp_path / "tasks.parquet"),
                                  "prompts": [str(JUDGE / f) for f in JUDGE_FILES],
                                  "actor_prompts": [str(PROMPTS / f) for f in PROMPT_FILES]}),
        output=Namedlist(fromdict={"episodes": str(tmp_path / "out" / "raw.parquet"),
                                   "steps": str(tmp_path / "out" / "raw.steps.parquet")}),
        log=Namedlist(toclone=[str(tmp_path / "logs" / "raw.log")]),
    )


def test_spec_written_after_success(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTRIALS_RULE_TEST_KEY", SECRET)
    endpoint = {"identity": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}, "params": {"seed": 0},
                "api_key_env": "MEMTRIALS_RULE_TEST_KEY"}
    smk = fake_snakemake(tmp_path, cell={"seed": 3, "endpoint": endpoint, "api_key": "typed-in-by-mistake",
                                         "note": f"header Bearer {SECRET}"}, prompts_dir=str(PROMPTS))

    async def main():  # async mains run too
        import logging

        logging.getLogger("test").info("working")
        Path(smk.output.episodes).parent.mkdir(parents=True, exist_ok=True)
        Path(smk.output.episodes).write_text("done")
        return 7

    assert run_rule(smk, main) == 7
    path = tmp_path / "out" / "raw.spec.json"
    assert path == spec_path(smk.output[0])
    text = path.read_text()
    spec = json.loads(text)
    assert spec["rule"] == "history_rollouts"
    assert spec["wildcards"] == {"model": "loop", "env": "scienceworld", "condition": "raw"}
    assert spec["params"]["cell"]["seed"] == 3 and spec["params"]["cell"]["endpoint"]["params"] == {"seed": 0}
    assert spec["params"]["cell"]["endpoint"]["api_key_env"] == "MEMTRIALS_RULE_TEST_KEY"  # a name, kept
    assert spec["params"]["cell"]["api_key"] == REDACTED and spec["params"]["cell"]["note"] == REDACTED
    assert SECRET not in text and "typed-in-by-mistake" not in text
    # every prompt input is digested: the study's own (prompts) and the actor's (actor_prompts)
    prompts, judge = ActorPrompts.load(PROMPTS), PromptFiles.load(JUDGE, JUDGE_FILES)
    assert spec["prompts"] == {str(PROMPTS): {"digests": prompts.digests(), "version": prompts.version()},
                               str(JUDGE): {"digests": judge.digests(), "version": judge.version()}}
    assert spec["inputs"][0].endswith("tasks.parquet") and len(spec["inputs"]) == 1 + len(JUDGE_FILES) + len(PROMPT_FILES)
    assert spec["outputs"] == [smk.output.episodes, smk.output.steps]
    assert spec["memtrials_version"] == memtrials.__version__
    assert re.fullmatch(r"[0-9a-f]{40}", spec["git"]["revision"]) and isinstance(spec["git"]["dirty"], bool)
    assert text == json.dumps(spec, sort_keys=True, ensure_ascii=False, indent=1) + "\n"  # canonical
    assert "working" in (tmp_path / "logs" / "raw.log").read_text()
    assert sorted(p.name for p in path.parent.iterdir()) == ["raw.parquet", "raw.spec.json"]


@pytest.mark.parametrize("error, code", [(ConfigError("config key history.seed: fix it"), 1)])
def test_user_error_exits_1_without_spec(tmp_path, error, code):
    smk = fake_snakemake(tmp_path)

    def main():
        raise error

    with pytest.raises(SystemExit) as info:
        run_rule(smk, main)
    assert info.value.code == code
    assert "config key history.seed: fix it" in (tmp_path / "logs" / "raw.log").read_text()
    assert not (tmp_path / "out").exists()


def test_a_bug_propagates_without_spec(tmp_path, capsys):
    smk = fake_snakemake(tmp_path)
    with pytest.raises(ZeroDivisionError):
        run_rule(smk, lambda: 1 / 0)
    assert not (tmp_path / "out").exists()
    # the rule's log says why the job failed (the traceback), the console does not get it twice
    log = (tmp_path / "logs" / "raw.log").read_text()
    assert "the job failed with an unexpected error" in log and "ZeroDivisionError" in log and "1 / 0" in log
    assert "ZeroDivisionError" not in capsys.readouterr().err


def test_spec_path_of_files_and_folders():
    assert spec_path("results/history/rollouts/m/e/raw.parquet").name == "raw.spec.json"
    assert str(spec_path("resources/alfworld/games")) == "resources/alfworld/games.spec.json"
    assert str(spec_path("results/history/tables/index.md")) == "results/history/tables/index.spec.json"


def test_git_revision_outside_a_checkout(tmp_path, monkeypatch):
    fake = tmp_path / "site" / "lib" / "memtrials" / "__init__.py"
    fake.parent.mkdir(parents=True)
    monkeypatch.setattr(memtrials, "__file__", str(fake))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert rule_entry.git_revision.__wrapped__() == {"revision": "unknown", "dirty": None}


def test_redact_keeps_ordinary_values(monkeypatch):
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", SECRET)
    data = {"max_tokens": 32, "review_max_tokens": 8, "api_key_env": "X_KEY", "token": "", "list": [SECRET, "ok"]}
    assert redact(data) == {"max_tokens": 32, "review_max_tokens": 8, "api_key_env": "X_KEY", "token": "",
                            "list": [REDACTED, "ok"]}


def test_job_cost_line_logged_last_counts_the_work_and_its_children(tmp_path):
    """The ``job cost:`` line (what bench_cached_rerun.py reads) ends the rule's log, and its
    CPU figures grow with the work done in the job and in a child it waited for."""
    import subprocess
    import sys

    smk = fake_snakemake(tmp_path)
    before = rule_entry.job_cost()

    def main():
        sum(i * i for i in range(2_000_000))  # CPU in the job's own process
        subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
        Path(smk.output.episodes).parent.mkdir(parents=True, exist_ok=True)
        Path(smk.output.episodes).write_text("done")

    run_rule(smk, main)
    last = Path(smk.log[0]).read_text().strip().splitlines()[-1]
    found = rule_entry.COST_LINE.search(last)
    assert found is not None, last
    assert float(found["cpu"]) > before["cpu_s"] + 0.05
    assert float(found["children"]) > before["children_cpu_s"] + 0.05
    assert found["wall"] == "-" or float(found["wall"]) >= float(found["cpu"]) * 0.5
