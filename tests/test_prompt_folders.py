"""Prompt folders are checked before any job; a prompt file that resolves outside the
repository (through a symlink) is refused unless ``prompts.allow_outside`` allows it."""

from __future__ import annotations

import os
import shutil

import pytest

from memtrials.config import REPO_ROOT, ConfigError
from memtrials.config.prompts import PROMPTS_ALLOW_ENV, PromptFiles, PromptOutside, check_prompts, placeholders, prompt_dirs
from tests.conftest import REPO, base_config, run_snakemake


@pytest.fixture
def outside(tmp_path_factory):
    """A text file outside the repository (a secret a symlink might point at)."""
    path = tmp_path_factory.mktemp("elsewhere") / "notes.txt"
    path.write_text("private notes, never to be sent to an endpoint\n")
    return path


@pytest.fixture
def folder(tmp_path):
    """A copy of the luck study's prompt folder, outside the repository like a test's workdir."""
    dest = tmp_path / "prompts" / "luck"
    shutil.copytree(REPO / "config" / "prompts" / "luck", dest)
    return dest


def test_every_enabled_prompts_dir_is_found():
    keys = dict(prompt_dirs(base_config()))
    assert keys["luck.prompts_dir"] == "config/prompts/luck" and "history.prompts_dir" in keys


def test_a_missing_prompts_dir_names_the_key(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv(PROMPTS_ALLOW_ENV, raising=False)
    cfg = base_config()
    cfg["history"]["prompts_dir"] = str(tmp_path / "gone")
    with pytest.raises(ConfigError, match=r"^config\.yaml: key history\.prompts_dir: folder '.*gone' does not exist"
                                          r".*Fix: restore it from git \(config/prompts/history/\) or set "
                                          r"history\.prompts_dir"):
        check_prompts(cfg, "config.yaml")
    cfg["history"]["enabled"] = False  # a disabled study's folder is not needed
    check_prompts(cfg, "config.yaml")
    cfg["luck"]["prompts_dir"] = str(REPO / "config" / "config.yaml")
    with pytest.raises(ConfigError, match=r"key luck\.prompts_dir: .* is a file, not a folder"):
        check_prompts(cfg, "config.yaml")


def test_a_symlink_outside_the_repository_is_refused_before_any_job(folder, outside, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv(PROMPTS_ALLOW_ENV, raising=False)
    cfg = base_config()
    cfg["luck"]["prompts_dir"] = str(folder)
    check_prompts(cfg)  # a copy outside the repository is fine: each file lies in its folder
    (folder / "reader_system.txt").unlink()
    (folder / "reader_system.txt").symlink_to(outside)
    with pytest.raises(ConfigError, match=rf"key luck\.prompts_dir: prompt file .*reader_system\.txt resolves to "
                                          rf"{outside}, outside the repository .*prompts\.allow_outside: true"):
        check_prompts(cfg)
    cfg["prompts"] = {"allow_outside": True}
    check_prompts(cfg)
    assert os.environ[PROMPTS_ALLOW_ENV] == "1"  # the jobs inherit the rule


def test_load_refuses_a_file_resolving_outside_and_records_where_each_came_from(folder, outside, monkeypatch):
    monkeypatch.delenv(PROMPTS_ALLOW_ENV, raising=False)
    (folder / "in_repo.txt").symlink_to(REPO_ROOT / "config" / "prompts" / "luck" / "reader_system.txt")
    loaded = PromptFiles.load(folder, ["reader_user.txt", "in_repo.txt"], what="luck")
    assert loaded.resolved == {"reader_user.txt": str((folder / "reader_user.txt").resolve()),
                               "in_repo.txt": str(REPO_ROOT / "config" / "prompts" / "luck" / "reader_system.txt")}
    (folder / "leak.txt").symlink_to(outside)
    with pytest.raises(PromptOutside, match=r"luck prompt file\(s\) resolve outside the repository .*leak\.txt.*"
                                            r"prompts\.allow_outside: true"):
        PromptFiles.load(folder, ["reader_user.txt", "leak.txt"], what="luck")
    allowed = PromptFiles.load(folder, ["leak.txt"], allow_outside=True)
    assert allowed.resolved == {"leak.txt": str(outside)} and allowed.texts["leak.txt"].startswith("private")
    monkeypatch.setenv(PROMPTS_ALLOW_ENV, "1")  # as check_prompts exports prompts.allow_outside: true
    assert PromptFiles.load(folder, ["leak.txt"]).texts == allowed.texts


def test_the_workflow_refuses_a_missing_folder_and_a_duplicate_key_before_any_job(workflow_copy):
    shutil.rmtree(workflow_copy / "config" / "prompts" / "luck")
    out = run_snakemake(workflow_copy, "-n")
    assert out.returncode != 0 and "MissingInputException" not in out.stdout + out.stderr
    assert "key luck.prompts_dir: folder 'config/prompts/luck' does not exist" in out.stdout + out.stderr
    shutil.copytree(REPO / "config" / "prompts" / "luck", workflow_copy / "config" / "prompts" / "luck")
    overlay = workflow_copy / "twice.yaml"
    overlay.write_text("smoke:\n  enabled: false\nsmoke:\n  enabled: true\n")
    out = run_snakemake(workflow_copy, "-n", "--configfile", "twice.yaml")
    assert out.returncode != 0
    assert "twice.yaml: line 3, column 1: key 'smoke' appears twice" in out.stdout + out.stderr


def test_an_edited_folder_with_an_unknown_placeholder_is_refused_before_any_job(tmp_path, monkeypatch):
    """A copied prompt folder whose file asks for a field its study does not fill (a misspelt
    ``{histroy}``) is refused by the check before any job, naming the file, the field and
    the fields the shipped file uses; an unchanged copy of every study's folder passes."""
    from memtrials.config.prompts import check_placeholders

    monkeypatch.chdir(REPO)
    for key, value in prompt_dirs(base_config()):
        copy = tmp_path / key
        shutil.copytree(REPO / value, copy)
        check_placeholders(copy, key, "overlay.yaml")  # the same fields: passes
    copy = tmp_path / "history.actor_prompts_dir"
    block = copy / "actor_block.txt"
    assert "history" in placeholders(block.read_text())
    block.write_text(block.read_text().replace("{history}", "{histroy}"))
    with pytest.raises(ConfigError) as info:
        check_placeholders(copy, "history.actor_prompts_dir", "overlay.yaml")
    text = str(info.value)
    assert text.startswith("overlay.yaml: key history.actor_prompts_dir: prompt file ")
    assert "actor_block.txt asks for {histroy}, which the study does not fill" in text
    assert "{history}" in text and "Fix: correct the name" in text
    # str.format templates: doubled braces are literal text, not a field
    assert placeholders("{{not_a_field}} {name:.2f} {other!r} {\"json\": 1}") == {"name", "other"}


def test_the_config_check_runs_the_placeholder_check(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv(PROMPTS_ALLOW_ENV, raising=False)
    edited = REPO / "config" / "prompts" / f"luck-edited-{os.getpid()}"
    shutil.copytree(REPO / "config" / "prompts" / "luck", edited)
    try:
        reader = edited / "reader_user.txt"
        field = sorted(placeholders(reader.read_text()))[0]
        reader.write_text(reader.read_text().replace("{" + field + "}", "{" + field + "_typo}", 1))
        cfg = base_config()
        cfg["luck"]["prompts_dir"] = str(edited.relative_to(REPO))
        with pytest.raises(ConfigError, match=r"key luck\.prompts_dir: prompt file .*reader_user\.txt asks for "
                                              + "{" + field + "_typo}"):
            check_prompts(cfg, "overlay.yaml")
    finally:
        shutil.rmtree(edited)


def test_a_studys_actor_prompts_dir_is_checked_too(tmp_path, monkeypatch):
    """``<study>.actor_prompts_dir`` and ``<study>.memory_prompts_dir`` (the agent layer's and the
    memories' prompts the studies use) are checked before any job like every ``prompts_dir``; a
    missing one names the key and the shipped folder to restore."""
    monkeypatch.chdir(REPO)
    keys = dict(prompt_dirs(base_config()))
    assert keys["playbook.actor_prompts_dir"] == keys["antipersist.actor_prompts_dir"] == \
        keys["history.actor_prompts_dir"] == "config/prompts/actor"
    assert keys["playbook.memory_prompts_dir"] == keys["antipersist.memory_prompts_dir"] == "config/prompts/memory"
    assert keys["history.prompts_dir"] == "config/prompts/history"
    assert keys["calibrator.prompts_dir"] == "config/prompts/calibrator"
    cfg = base_config()
    cfg["playbook"]["actor_prompts_dir"] = "config/prompts/no-such-folder"
    with pytest.raises(ConfigError, match=r"key playbook\.actor_prompts_dir: folder 'config/prompts/no-such-folder' "
                                          r"does not exist .* restore it from git \(config/prompts/actor/\)"):
        check_prompts(cfg, "overlay.yaml")
    # a key the shipped config lacks: its owner from the key's name, never the study's folder
    cfg = base_config()
    cfg["luck"]["memory_prompts_dir"] = "config/prompts/no-such-folder"
    with pytest.raises(ConfigError, match=r"key luck\.memory_prompts_dir: .* restore it from git "
                                          r"\(config/prompts/memory/\)"):
        check_prompts(cfg, "overlay.yaml")
