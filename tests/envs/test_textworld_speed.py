"""The TextWorld memo (memtrials.envs.alfworld.speed) changes no result: same games, same episodes."""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from memtrials.envs.alfworld import sas_disk
from memtrials.envs.alfworld import speed as tws
from memtrials.envs.alfworld.env import AlfworldEnv
from tests.envs.conftest import REPO, SMALL_SIZES

pytestmark = pytest.mark.slow

GENERATE = (
    "import json,sys\n"
    "from memtrials.envs.alfworld import gen as alfworld_gen, speed as textworld_speed\n"
    "alfworld_gen.generate(sys.argv[1], seed=0, sizes=json.loads(sys.argv[2]), workers=1)\n"
    "print('STATS:'+json.dumps({'installed': textworld_speed.installed(), 'stats': textworld_speed.stats()}))\n"
)


def _generate(root: Path, memo: str) -> subprocess.Popen:
    """Generate the small game set in a fresh process with the memo switched on (1) or off (0)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env[tws.SWITCH] = memo
    return subprocess.Popen([sys.executable, "-c", GENERATE, str(root), json.dumps(SMALL_SIZES)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)


def _stats(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err[-3000:]
    line = [ln for ln in out.splitlines() if ln.startswith("STATS:")][-1]
    return json.loads(line[len("STATS:"):])


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_generated_games_are_byte_identical_with_and_without_the_memo(tmp_path):
    procs = [_generate(tmp_path / "on", "1"), _generate(tmp_path / "off", "0")]  # side by side
    on, off = (_stats(p) for p in procs)
    assert on["installed"] and not off["installed"] and off["stats"] == {}
    assert all(on["stats"][k]["hits"] > 0 for k in ("csg_parse", "pddl2sas", "query")), on["stats"]
    a, b = _tree(tmp_path / "on"), _tree(tmp_path / "off")
    assert len(a) == 2 * sum(SMALL_SIZES.values())  # traj_data.json and game.tw-pddl of every game
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []


def _play(env: AlfworldEnv, task_id: str, walkthrough: list[str]) -> list[tuple]:
    """Observations step by step: a few non-gold actions, then a fresh reset and the gold walkthrough."""
    seen = []
    obs = env.reset(task_id)
    seen.append((obs.text, obs.admissible, obs.score, obs.won, obs.done))
    extra = ["fly to the moon", "look", "inventory"] + [a for a in obs.admissible if a.startswith("go to")][:2]
    for action in extra + [next((a for a in env.admissible_actions() if a.startswith("examine")), "look")]:
        obs = env.step(action)
        seen.append((action, obs.text, obs.admissible, obs.score, obs.won, obs.done))
    obs = env.reset(task_id)
    seen.append((obs.text, obs.admissible))
    for action in walkthrough:
        obs = env.step(action)
        seen.append((action, obs.text, obs.admissible, obs.score, obs.won, obs.done))
    assert obs.won
    return seen


def test_episodes_identical_step_by_step_with_and_without_the_memo(alf_games, monkeypatch):
    root, records = alf_games
    # a planner-solved game and the oracle-solved two-object game
    picks = [r for r in records if r["spec"].task_type in ("pick_heat_then_place_in_recep", "pick_two_obj_and_place")]
    assert len(picks) == 2
    env = AlfworldEnv(root=root)
    assert tws.installed()
    before = {k: v["hits"] for k, v in tws.stats().items()}
    with_memo = [_play(env, r["spec"].task_id, r["walkthrough"]) for r in picks]
    AlfworldEnv(root=root).reset(picks[0]["spec"].task_id)  # a second engine loads the same game again
    after = tws.stats()
    assert all(after[k]["hits"] > before[k] for k in ("csg_parse", "pddl2sas", "query")), after
    try:
        tws.uninstall()
        monkeypatch.setenv(tws.SWITCH, "0")
        plain = AlfworldEnv(root=root)
        assert not tws.installed() and tws.stats() == {}
        without = [_play(plain, r["spec"].task_id, r["walkthrough"]) for r in picks]
    finally:
        monkeypatch.delenv(tws.SWITCH)
        tws.install()
    assert with_memo == without


def test_install_is_idempotent_and_pinned(monkeypatch, caplog):
    from textworld.envs.pddl import textgen

    assert tws.install() and tws.installed()
    patched = textgen._parse_and_convert
    assert tws.install() and textgen._parse_and_convert is patched
    try:
        tws.uninstall()
        assert not tws.installed() and textgen._parse_and_convert is not patched
        monkeypatch.setitem(tws.PINNED, "textworld", "0.0.0")
        monkeypatch.setattr(tws, "_warned", [])
        with caplog.at_level(logging.WARNING, logger=tws.__name__):
            assert tws.install() is False
        assert "pinned 0.0.0, installed 1.7.0" in caplog.text and not tws.installed()
    finally:
        monkeypatch.undo()
        tws.install()
    assert tws.installed()


def _reinstall(monkeypatch, **switches: str) -> None:
    tws.uninstall()
    for part, value in switches.items():
        monkeypatch.setenv(tws.PART_SWITCHES[part], value)
    assert tws.install()


@pytest.mark.parametrize("part", sorted(tws.PART_SWITCHES))
def test_each_part_changes_no_episode_and_has_its_switch(alf_games, monkeypatch, part, tmp_path):
    """Episodes (texts, admissible lists in order, scores) with the part on equal those with it off."""
    from textworld.envs.pddl import logic as pddl_logic
    from textworld.envs.pddl import textgen

    monkeypatch.setenv(sas_disk.SAS_DIR, str(tmp_path / "sas"))
    root, records = alf_games
    picks = [r for r in records if r["spec"].task_type in ("pick_clean_then_place_in_recep", "pick_two_obj_and_place")]
    try:
        _reinstall(monkeypatch, **{part: "1"})
        assert part in tws.parts()
        on = [_play(AlfworldEnv(root=root), r["spec"].task_id, r["walkthrough"]) for r in picks]
        _reinstall(monkeypatch, **{part: "0"})
        assert part not in tws.parts() and tws.installed()
        if part == "shallow_copy":
            assert textgen.copy_context is tws._originals.get("copy_context", textgen.copy_context)
            assert textgen.copy_context.__module__ == textgen.__name__
        elif part == "lazy_replan":
            assert pddl_logic.PddlState.__module__ == pddl_logic.__name__
        else:
            assert "pddl2sas_disk" not in tws.stats()
        off = [_play(AlfworldEnv(root=root), r["spec"].task_id, r["walkthrough"]) for r in picks]
    finally:
        monkeypatch.undo()
        tws.uninstall()
        tws.install()
    assert on == off
    assert tws.parts() == frozenset(tws.PART_SWITCHES)


def test_lazy_replan_defers_the_optimized_translation_and_the_planner_still_plans_the_same(alf_games, monkeypatch, tmp_path):
    """Episodes make no optimized (replan) translation; the planner expert's plans are unchanged."""
    from memtrials.envs.alfworld import planner as alfworld_planner

    root, records = alf_games
    planned = [r for r in records if r["spec"].task_type != "pick_two_obj_and_place"][:3]
    files = [str(root / r["spec"].task_id / "game.tw-pddl") for r in planned]
    calls: list[bool] = []
    monkeypatch.setenv(sas_disk.SAS_DIR, str(tmp_path / "sas"))  # an empty disk memo: every translation is made
    try:
        tws.uninstall()
        assert tws.install() and "lazy_replan" in tws.parts()
        inner = tws._originals["pddl2sas"]
        monkeypatch.setitem(tws._originals, "pddl2sas",
                            lambda d, p, verbose=False, optimize=False: calls.append(optimize) or inner(d, p, optimize=optimize))
        env = AlfworldEnv(root=root)
        for r in planned:
            env.reset(r["spec"].task_id)
            env.step("look")
        assert calls and not any(calls)  # only the plain translation of each new game
        monkeypatch.setattr(alfworld_planner, "_engines", __import__("threading").local())
        lazy = [alfworld_planner.planner_walkthrough(f) for f in files]
        assert any(calls)  # the planner needed the optimized one: made on its replan
        monkeypatch.setenv(tws.PART_SWITCHES["lazy_replan"], "0")
        tws.uninstall()
        assert tws.install() and "lazy_replan" not in tws.parts()
        monkeypatch.setattr(alfworld_planner, "_engines", __import__("threading").local())
        eager = [alfworld_planner.planner_walkthrough(f) for f in files]
    finally:
        monkeypatch.undo()
        tws.uninstall()
        tws.install()
    assert lazy == eager == [r["walkthrough"] for r in planned]


def test_translations_read_back_from_disk_give_the_same_episodes(alf_games, monkeypatch, tmp_path):
    """The disk memo: a process with an empty in-memory memo reads each game's translation from
    the folder (no new translation) and plays every episode as a process that translates afresh;
    a corrupt file is translated again and replaced; a folder that cannot be written only costs
    the memo, and an empty folder setting switches the part off."""
    root, records = alf_games
    picks = [r for r in records if r["spec"].task_type in ("pick_clean_then_place_in_recep", "pick_two_obj_and_place")]
    folder = tmp_path / "sas"
    monkeypatch.setenv(sas_disk.SAS_DIR, str(folder))

    def play_all():
        tws.uninstall()  # drop the in-memory memo: a new process's view
        assert tws.install() and "disk_sas" in tws.parts()
        return [_play(AlfworldEnv(root=root), r["spec"].task_id, r["walkthrough"]) for r in picks], \
            tws.stats()["pddl2sas_disk"]

    try:
        before = dict(sas_disk.counts)
        first, _ = play_all()
        written = sorted(folder.glob("*.pickle"))
        assert written and sas_disk.counts["misses"] > before["misses"]
        hits = sas_disk.counts["hits"]
        misses = sas_disk.counts["misses"]
        again, _ = play_all()
        assert sas_disk.counts["hits"] > hits and sas_disk.counts["misses"] == misses  # all read back, none made
        assert again == first
        written[0].write_bytes(b"not a pickle")
        errors = sas_disk.counts["errors"]
        third, _ = play_all()
        assert third == first and sas_disk.counts["errors"] == errors + 1
        assert written[0].read_bytes() != b"not a pickle"  # replaced by a good translation
        monkeypatch.setenv(sas_disk.SAS_DIR, "")
        tws.uninstall()
        assert tws.install() and sas_disk.sas_dir() is None
        plain = [_play(AlfworldEnv(root=root), r["spec"].task_id, r["walkthrough"]) for r in picks]
        assert plain == first
        blocked = tmp_path / "file"
        blocked.write_text("")
        monkeypatch.setenv(sas_disk.SAS_DIR, str(blocked / "sas"))  # below a file: cannot be made
        errors = sas_disk.counts["errors"]
        unwritable, _ = play_all()
        assert unwritable == first and sas_disk.counts["errors"] > errors
    finally:
        monkeypatch.undo()
        tws.uninstall()
        tws.install()


def test_the_disk_memo_keeps_under_its_cap_dropping_the_least_recently_used(monkeypatch, tmp_path, caplog):
    """A hit marks its file used; a write that takes the folder over the cap deletes the least
    recently used files until it is under nine tenths of the cap; a bad cap value is reported and
    the default used."""
    folder = tmp_path / "sas"
    monkeypatch.setenv(sas_disk.SAS_DIR, str(folder))
    monkeypatch.setenv(sas_disk.SAS_MAX_MB, str(1100 / 2**20))  # room for two 400-byte translations, not three
    monkeypatch.setitem(tws._originals, "pddl2sas", lambda domain, problem, optimize=False: problem * 400)
    monkeypatch.setattr(tws, "_parts", {"disk_sas"})
    monkeypatch.setattr(sas_disk, "counts", {"hits": 0, "misses": 0, "errors": 0, "pruned": 0})
    assert tws._translate("d", "a", False) == "a" * 400
    assert tws._translate("d", "b", False) == "b" * 400
    files = {pickle.loads(p.read_bytes())[0]: p for p in folder.glob("*.pickle")}
    assert len(files) == 2
    for i, p in enumerate(files.values()):
        os.utime(p, (1000 + i, 1000 + i))  # both written long ago
    assert tws._translate("d", "a", False) == "a" * 400 and sas_disk.counts["hits"] == 1  # a used now
    assert tws._translate("d", "c", False) == "c" * 400
    left = sorted(pickle.loads(p.read_bytes())[0] for p in folder.glob("*.pickle"))
    assert left == ["a", "c"] and sas_disk.counts["pruned"] == 1  # b, the least recently used, went
    assert tws._translate("d", "b", False) == "b" * 400 and sas_disk.counts["misses"] == 4  # made again
    monkeypatch.setenv(sas_disk.SAS_MAX_MB, "0")
    assert tws._translate("d", "e", False) == "e" * 400 and not list(folder.glob("*.pickle"))  # keeps nothing
    monkeypatch.setenv(sas_disk.SAS_MAX_MB, "lots")
    monkeypatch.setattr(sas_disk, "_warned_cap", [])
    with caplog.at_level("WARNING"):
        assert sas_disk.sas_max_bytes() == sas_disk.SAS_MAX_MB_DEFAULT * 2**20
    assert f"{sas_disk.SAS_MAX_MB}='lots'" in caplog.text


def test_pruning_skips_files_that_another_process_removed(tmp_path, monkeypatch):
    folder = tmp_path / "sas"
    folder.mkdir()
    for i in range(4):
        (folder / f"{i}.pickle").write_bytes(b"x" * 100)
        os.utime(folder / f"{i}.pickle", (1000 + i, 1000 + i))
    (folder / ".tmpfile.tmp").write_bytes(b"x" * 10_000)  # a write in progress is not counted or touched
    real_unlink = Path.unlink

    def racing_unlink(self, missing_ok=False):
        if self.name == "0.pickle":
            real_unlink(self)  # gone before this process gets to it
            raise FileNotFoundError(self)
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", racing_unlink)
    assert sas_disk.prune_sas_dir(folder, 250) == 1  # 400 > 250: down to 225; 0 went by itself, 1 by this call
    assert sorted(p.name for p in folder.iterdir()) == [".tmpfile.tmp", "2.pickle", "3.pickle"]
    assert sas_disk.prune_sas_dir(folder, 10_000) == 0
