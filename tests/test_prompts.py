"""The one prompt loader (memtrials.config.prompts): exact texts, digests and version as the
studies have always computed them, and a missing-file error that says what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtrials.agent.prompts import ActorPrompts
from memtrials.config import ConfigError
from memtrials.config.prompts import MissingPromptFiles, PromptFiles, folder_key, key_owner
from memtrials.studies.luck.prompts import PromptSet

REPO = Path(__file__).resolve().parents[1]


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("alpha {x}\n", encoding="utf-8")
    (tmp_path / "b.md").write_text("béta\n\n", encoding="utf-8")
    return tmp_path


def test_digests_and_version_pinned(tmp_path: Path) -> None:
    # values computed with the two loaders this module replaced (agent/prompts.py,
    # studies/luck/prompts.py before the merge): a change here reruns every cell
    p = PromptFiles.load(_folder(tmp_path), ["b.md", "a.txt"], what="demo")
    assert p.texts == {"a.txt": "alpha {x}\n", "b.md": "béta\n\n"}
    assert p.digests() == {
        "a.txt": "abb466ef71a425ccfa2eb5e09ebe2f2b1f472862e3019a2360f6a4e404398ec4",
        "b.md": "4790ef238876d9b2bc6368f668f89a1e85be5486ef10d044ab03baa802c22c14",
    }
    assert list(p.digests()) == ["a.txt", "b.md"]
    assert p.version() == "2423c9a1cec91904"
    assert p.directory == str(tmp_path)


def test_studies_use_it() -> None:
    h = ActorPrompts.load(REPO / "config/prompts/actor")
    lk = PromptSet.load(REPO / "config/prompts/luck")
    assert isinstance(h, PromptFiles) and isinstance(lk, PromptFiles)
    assert sorted(h.texts) == sorted(ActorPrompts.NAMES)
    assert sorted(lk.digests()) == sorted(PromptSet.NAMES)


def test_missing_files_name_folder_files_and_key(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    with pytest.raises(MissingPromptFiles) as err:
        PromptFiles.load(folder, ["a.txt", "c.txt", "d.txt"], what="history")
    msg = str(err.value)
    assert str(folder) in msg and "'c.txt', 'd.txt'" in msg and "'a.txt'" not in msg.split(";")[0]
    assert "history.prompts_dir" in msg and "config/prompts/history/" in msg
    # a config error (a cell exits 1 with the message) and still a FileNotFoundError
    assert isinstance(err.value, ConfigError) and isinstance(err.value, FileNotFoundError)
    with pytest.raises(MissingPromptFiles, match=r"no such folder.*luck\.prompts_dir"):
        PromptSet.load(tmp_path / "nowhere")


@pytest.mark.parametrize("what, key, shipped", [
    ("actor", "<study>.actor_prompts_dir", "config/prompts/actor/"),
    ("memory", "<study>.memory_prompts_dir", "config/prompts/memory/"),
    ("calibrator", "calibrator.prompts_dir", "config/prompts/calibrator/"),
])
def test_a_shared_folder_is_named_by_each_studys_own_key(tmp_path: Path, what: str, key: str, shipped: str) -> None:
    """The actor's and the memories' folders are no study's: the error names the key every
    study has for them (``<study>.actor_prompts_dir``) and their shipped folder."""
    assert folder_key(what) == key and key_owner(key.replace("<study>", "playbook")) == what
    with pytest.raises(MissingPromptFiles) as err:
        PromptFiles.load(tmp_path, ["x.txt"], what=what)
    assert f"fix {key} in the config" in str(err.value) and f"({shipped})" in str(err.value)
    with pytest.raises(MissingPromptFiles, match=r"fix playbook\.baselines\.prompts_dir in the config"):
        PromptFiles.load(tmp_path, ["x.txt"], what="playbook", key="playbook.baselines.prompts_dir")
    with pytest.raises(MissingPromptFiles, match=r"\(config/prompts/actor/\) or fix <study>\.actor_prompts_dir"):
        ActorPrompts.load(tmp_path)

