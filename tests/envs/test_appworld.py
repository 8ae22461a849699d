"""AppWorld: the authored offline task set and the adapter on AppWorld's own engine and evaluator."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from memtrials.envs.scripted import RandomAgent, run_episode
from memtrials.envs.base import RestoreMismatch
from memtrials.envs.tasks import make_table, sample_tasks
from memtrials.envs.appworld.manifest import MANIFEST, load_manifest
from tests.envs.conftest import REPO, restore_in_fresh_process

pytestmark = pytest.mark.slow


TAMPERED = "hsnotecreate_1"  # its digest is changed in the manifest the fixture builds against


@pytest.fixture(scope="module")
def aw_build(tmp_path_factory):
    """Variant 1 of every family (30 tasks) built in a subprocess (AppWorld fixes its root per
    process) against the checked-in verification manifest with one task's digest changed and
    one sampled task per split: AppWorld's evaluator verifies exactly those (solution passes
    every unit test, a bare ``complete_task()`` fails one, else the build fails); the other
    results come from the manifest.  Returns (root, what the build reported)."""
    root = tmp_path_factory.mktemp("appworld") / "root"
    manifest = load_manifest(MANIFEST)
    manifest["tasks"][TAMPERED] = dict(manifest["tasks"][TAMPERED], digest="0" * 64)
    (root.parent / "verification.json").write_text(json.dumps(manifest))
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    code = ("import dataclasses, json, sys; from memtrials.envs.appworld.data import build_root; "
            "m = json.load(open(sys.argv[2])); "
            "r = build_root(sys.argv[1], seed=0, max_variants=1, workers=2, verified=m, sample=1); "
            "open(sys.argv[3], 'w').write(json.dumps(dataclasses.asdict(r)))")
    proc = subprocess.run([sys.executable, "-c", code, str(root), str(root.parent / "verification.json"),
                           str(root.parent / "build.json")], capture_output=True, text=True, timeout=1800, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, json.loads((root.parent / "build.json").read_text())


@pytest.fixture(scope="module")
def aw_root(aw_build):
    return aw_build[0]


@pytest.fixture(scope="module")
def aw_env(aw_root):
    from memtrials.envs import make_env
    from memtrials.envs.process.child import ProcessEnv

    env = make_env("appworld", root=aw_root)  # in a child process by default: no world opens here
    assert isinstance(env, ProcessEnv)
    yield env
    env.close()


@pytest.fixture(scope="module")
def aw_table(aw_root):
    from memtrials.envs.appworld.env import task_rows

    return make_table("appworld", task_rows(aw_root))


def test_task_set_size_apps_answers_and_splits(aw_table, aw_build):
    from memtrials.envs.appworld.tasks import FAMILIES

    details = [json.loads(d) for d in aw_table["detail"]]
    assert len(aw_table) == len(FAMILIES) >= 30  # one variant of every family
    assert len({a for d in details for a in d["apps"]}) >= 6
    assert set(aw_table["split"]) == {"train", "practice", "eval"}
    for split in ("train", "practice", "eval"):
        kinds = {d["expects_answer"] for d, s in zip(details, aw_table["split"]) if s == split}
        assert kinds == {True, False}, split
        assert len({a for d, s in zip(details, aw_table["split"]) if s == split for a in d["apps"]}) >= 5, split
    assert len({d["difficulty"] for d in details}) >= 3
    # every task verified: its bare completion failed at least one of its >= 3 unit tests
    rows = aw_build[1]["rows"]
    assert sorted(r["task_id"] for r in rows) == sorted(aw_table["task_id"])
    assert all(r["num_tests"] >= 3 and 1 <= r["noop_failed_tests"] < r["num_tests"] for r in rows)


def test_manifest_covers_every_task_and_matches_the_built_sources(aw_build):
    """The checked-in manifest lists every authored task with AppWorld's evaluator passing its
    solution and failing its bare completion; the digests of what this build wrote (variant 1
    of every family, the base world) equal the manifest's, under the installed AppWorld."""
    from memtrials.envs.appworld.tasks import task_specs
    from memtrials.envs.appworld.manifest import appworld_version

    manifest = load_manifest(MANIFEST)
    specs = task_specs(0)
    assert manifest["appworld"] == appworld_version() and manifest["seed"] == 0
    assert {t: (e["split"], e["family"]) for t, e in manifest["tasks"].items()} == \
        {s.task_id: (s.split, s.family) for s in specs}
    built = aw_build[1]
    assert built["world_digest"] == manifest["world_digest"], "base world changed: remake the manifest"
    stale = [r["task_id"] for r in built["rows"]
             if r["task_id"] != TAMPERED and r["digest"] != manifest["tasks"][r["task_id"]]["digest"]]
    assert not stale, f"tasks changed since the manifest was made: {stale}; remake it (memtrials.envs.appworld.verify)"
    for task_id, e in manifest["tasks"].items():
        assert e["ok"] and e["solution_passed"] and not e["noop_passed"], task_id
        assert e["num_tests"] == len(e["solution_tests"]) == len(e["noop_tests"]) >= 3, task_id
        assert set(e["solution_tests"]) == set(e["noop_tests"]) and all(e["solution_tests"].values()), task_id
        assert e["noop_failed_tests"] == sum(not ok for ok in e["noop_tests"].values()) >= 1, task_id


def test_build_reverifies_changed_and_sampled_tasks_and_agrees_with_the_manifest(aw_build):
    from memtrials.envs.appworld.manifest import sample_per_split

    manifest = load_manifest(MANIFEST)
    built = aw_build[1]
    splits = {r["task_id"]: r["split"] for r in built["rows"]}
    sampled = sample_per_split(splits, 1, 0)
    assert len({splits[t] for t in sampled}) == 3 == len(sampled)
    assert sorted(built["verified"]) == sorted({TAMPERED, *sampled})
    assert {r["task_id"] for r in built["rows"] if r["verified_by"] == "evaluator"} == set(built["verified"])
    for task_id in built["verified"]:  # AppWorld's evaluator, run now, says what the manifest says
        fresh, kept = built["entries"][task_id], manifest["tasks"][task_id]
        assert fresh["digest"] == kept["digest"]  # the tampered digest is replaced by the real one
        for key in ("ok", "solution_passed", "noop_passed", "num_tests", "noop_failed_tests", "solution_tests",
                    "noop_tests"):
            assert fresh[key] == kept[key], (task_id, key)


def test_stale_tasks_follow_digest_version_seed_and_world():
    from memtrials.envs.appworld.manifest import appworld_version, stale_tasks

    manifest = {"appworld": appworld_version(), "seed": 0, "world_digest": "w",
                "tasks": {"a": {"digest": "1", "ok": True}, "b": {"digest": "2", "ok": True},
                          "c": {"digest": "3", "ok": False}}}
    digests = {"a": "1", "b": "2x", "c": "3", "d": "4"}
    assert stale_tasks(manifest, 0, "w", digests) == ["b", "c", "d"]  # changed, failed before, new
    assert stale_tasks(manifest, 0, "w", {"a": "1"}) == []
    assert stale_tasks(manifest, 1, "w", {"a": "1"}) == ["a"]
    assert stale_tasks(manifest, 0, "w2", {"a": "1"}) == ["a"]
    assert stale_tasks(dict(manifest, appworld="0.0.1"), 0, "w", {"a": "1"}) == ["a"]
    assert stale_tasks(None, 0, "w", {"a": "1"}) == ["a"]


def test_full_task_set_sizes_and_disjoint_families():
    from collections import Counter

    from memtrials.envs.appworld.tasks import FAMILIES, task_specs

    specs = task_specs(0)
    sizes = Counter(s.split for s in specs)
    assert sizes["train"] >= 90 and sizes["practice"] >= 57 and sizes["eval"] >= 168, sizes
    assert len({s.task_id for s in specs}) == len(specs)
    split_of = {}
    for s in specs:
        assert split_of.setdefault(s.family, s.split) == s.split, f"family {s.family} spans two splits"
    assert set(split_of) == set(FAMILIES)
    for split in ("train", "practice", "eval"):
        assert sum(v == split for v in split_of.values()) >= 6, split
    assert len({a for s in specs for a in s.apps}) >= 6
    for family in FAMILIES:  # variants differ by seeded values (world, instruction or answer)
        variants = [s for s in specs if s.family == family]
        assert len({(s.instruction, repr(s.answer), json.dumps(s.public, sort_keys=True)) for s in variants}) >= 2
    # the first set's 30 ids are kept
    ids = {s.task_id for s in specs}
    assert {"hsnotecreate_1", "hsvenmobalance_2", "hsnotetagcount_2", "hssplitcreategroup_3"} <= ids
    again, other = task_specs(0), task_specs(1)  # deterministic in the seed
    assert [(s.instruction, repr(s.answer)) for s in again] == [(s.instruction, repr(s.answer)) for s in specs]
    assert [(s.instruction, repr(s.answer)) for s in other] != [(s.instruction, repr(s.answer)) for s in specs]


def test_gold_solves_a_sample_of_every_split_with_per_test_results(aw_env, aw_table):
    sample = sample_tasks(aw_table, per_split=2, seed=0)
    for task_id in sample["task_id"]:
        obs = aw_env.reset(task_id)
        assert obs.step == 0 and aw_env.task_description() in obs.text
        for code in aw_env.gold_actions(task_id):
            obs = aw_env.step(code)
        assert obs.done and obs.won and obs.score == 100.0, (task_id, obs.info)
        assert obs.info["passed"] is True and obs.info["num_tests"] >= 3
        assert all(t["passed"] for t in obs.info["tests"])


def test_noop_completion_fails_with_per_test_feedback(aw_env):
    aw_env.reset("hsnotecreate_1")
    obs = aw_env.step("apis.supervisor.complete_task()")
    assert obs.done and not obs.won and obs.info["passed"] is False
    by_req = {t["requirement"]: t["passed"] for t in obs.info["tests"]}
    assert by_req["the task is marked complete with status success"] is True
    assert by_req["no answer is given, since the task asks for none"] is True
    assert any(not ok for ok in by_req.values())
    assert 0 < obs.score < 100


def test_answer_to_a_task_that_expects_none_fails_that_test(aw_env):
    aw_env.reset("hsnotecreate_1")
    for code in aw_env.gold_actions("hsnotecreate_1"):
        obs = aw_env.step(code.replace("apis.supervisor.complete_task()", "apis.supervisor.complete_task(answer='done')"))
    failed = [t["requirement"] for t in obs.info["tests"] if not t["passed"]]
    assert failed == ["no answer is given, since the task asks for none"] and not obs.won


def test_random_agent_rarely_wins(aw_env, aw_table):
    sample = sample_tasks(aw_table, per_split=3, seed=1)
    eps = [run_episode(aw_env, RandomAgent(0), t, max_steps=10) for t in sample["task_id"]]
    assert len(eps) == 9 and sum(ep.won for ep in eps) <= 1


def _random_prefix(env, task_id, n, seed):
    import random

    rng = random.Random(seed)
    env.reset(task_id)
    actions, texts = [], []
    while len(actions) < n:
        code = env.random_action(rng)
        if "complete_task" in code:
            continue
        obs = env.step(code)
        actions.append(code)
        texts.append(obs.text)
    return actions, texts


def test_restore_after_random_prefix_same_and_fresh_process(aw_env, aw_root, tmp_path):
    login = ("passwords = {p['account_name']: p['password'] for p in apis.supervisor.show_account_passwords()}\n"
             "token = apis.venmo.login(username='ada.moreau@gmail.com', password=passwords['venmo'])['access_token']\n"
             "print(apis.venmo.show_venmo_balance(access_token=token))")
    actions, texts = _random_prefix(aw_env, "hsvenmobalance_1", 19, seed=4)
    obs = aw_env.step(login)
    actions, texts = actions + [login], texts + [obs.text]
    assert "venmo_balance" in obs.text
    assert aw_env.restore("hsvenmobalance_1", actions, texts).text == texts[-1]
    with pytest.raises(RestoreMismatch):
        aw_env.restore("hsvenmobalance_1", actions, texts[:-1] + ["{}"])
    aw_env.close()
    assert restore_in_fresh_process("appworld", {"root": str(aw_root)}, "hsvenmobalance_1", actions, texts,
                                    tmp_path) == texts[-1]


def test_official_split_listing_and_errors(aw_root, tmp_path, monkeypatch):
    from memtrials.envs.appworld.env import AppWorldEnv, task_rows

    official = tmp_path / "official"
    (official / "data" / "datasets").mkdir(parents=True)
    for folder in ("tasks", "base_dbs", "api_docs"):
        os.symlink(aw_root / "data" / folder, official / "data" / folder)
    ids = (aw_root / "data" / "datasets" / "eval.txt").read_text()
    (official / "data" / "datasets" / "test_normal.txt").write_text(ids)
    monkeypatch.setenv("APPWORLD_ROOT", str(official))
    rows = task_rows(official=True)
    assert {r["split"] for r in rows} == {"test_normal"} and {r["source"] for r in rows} == {"official"}
    monkeypatch.delenv("APPWORLD_ROOT")
    with pytest.raises(FileNotFoundError, match="APPWORLD_ROOT"):
        AppWorldEnv(official=True)
    with pytest.raises(FileNotFoundError, match="env_appworld_data"):
        AppWorldEnv(root=tmp_path / "nothing")


BROKEN_TASK = """
import dataclasses, sys
from pathlib import Path
from memtrials.envs.appworld.env import _activate_root
from memtrials.envs.appworld.data import TaskCheckFailed, verify
from memtrials.envs.appworld.tasks import save_task, task_specs
root = Path(sys.argv[1])
_activate_root(root)
spec = next(s for s in task_specs(0) if s.family == "venmo_balance")
save_task(dataclasses.replace(spec, task_id="hsbroken_1", answer=spec.answer + 1))
try:
    verify(root, ["hsbroken_1"])
except TaskCheckFailed as exc:
    print(exc)
    sys.exit(3)
"""


def test_build_check_rejects_a_task_its_solution_does_not_solve(aw_root):
    import shutil

    # the check opens AppWorld worlds: in its own process, as the pipeline's build rule does
    try:
        proc = subprocess.run([sys.executable, "-c", BROKEN_TASK, str(aw_root)], capture_output=True, text=True,
                              timeout=600, env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
        assert proc.returncode == 3, proc.stderr[-2000:]
        assert re.search("hsbroken_1: its solution fails.*answer matches", proc.stdout, re.S), proc.stdout
    finally:
        shutil.rmtree(aw_root / "data" / "tasks" / "hsbroken_1", ignore_errors=True)


def test_two_objects_play_the_same_task_at_once_in_their_own_folders_removed_on_close(aw_root):
    """Each object's own experiment folder (AppWorldEnv's default): two episodes on one task
    at once (two jobs of a run, two episodes of a job) wrote and removed the same
    ``tasks/<id>/evaluation`` under one shared name, and one failed with FileNotFoundError."""
    from concurrent.futures import ThreadPoolExecutor

    from memtrials.envs import make_env

    outputs = aw_root / "experiments" / "outputs"
    before = set(p.name for p in outputs.iterdir()) if outputs.is_dir() else set()
    task = sorted(p.name for p in (aw_root / "data" / "tasks").iterdir())[0]
    envs = [make_env("appworld", root=aw_root, max_steps=1) for _ in range(2)]
    try:
        for e in envs:
            e.reset(task)
        with ThreadPoolExecutor(2) as pool:  # the one step is the cap: both evaluate at once
            obs = list(pool.map(lambda e: e.step("print('hello')"), envs))
        assert all(o.done for o in obs)
        new = sorted(set(p.name for p in outputs.iterdir()) - before)
        assert len(new) == 2 and all((outputs / n / "tasks" / task).is_dir() for n in new)
    finally:
        for e in envs:
            e.close()
    assert not (set(p.name for p in outputs.iterdir()) - before)  # each removed its own folder
