"""ScienceWorld adapter on the real engine (scienceworld==1.2.3, one JVM for the module)."""

from __future__ import annotations

import pytest

from memtrials.envs.scripted import GoldAgent, RandomAgent, run_episode
from memtrials.envs.base import RestoreMismatch
from memtrials.envs.scienceworld.ambiguity import parse_options, same_observation
from memtrials.envs.scienceworld.tasks import parse_task_id
from tests.envs.conftest import random_prefix, restore_in_fresh_process

pytestmark = pytest.mark.slow


def test_reset_step_and_won_on_gold_path(sw_env):
    plan = sw_env.gold_actions("boil:0")
    obs = sw_env.reset("boil:0")
    assert obs.step == 0 and "hallway" in obs.text and obs.admissible is None
    assert "boil water" in sw_env.task_description()
    for action in plan:
        obs = sw_env.step(action)
    assert obs.won and obs.done and obs.score == 100.0 and obs.step == len(plan)


def test_failure_is_done_not_won(sw_env):
    sw_env.reset("boil:0")
    obs = sw_env.step("focus on picture")  # focusing on the wrong object fails the task
    assert obs.done and not obs.won and obs.score == -100.0


def test_admissible_actions_on_demand(sw_env):
    obs = sw_env.reset("melt:1")
    assert obs.admissible is None
    actions = sw_env.admissible_actions()
    assert actions and "look around" in actions and all(isinstance(a, str) for a in actions)


@pytest.fixture(scope="module")
def sw_other():
    """A second engine (its own JVM), shared by the tests that need two."""
    from memtrials.envs.scienceworld.env import ScienceWorldEnv

    env = ScienceWorldEnv()
    yield env
    env.close()


def test_ambiguity_prompt_replays_by_option_text(sw_env, sw_other, tmp_path):
    sw_env.reset("boil:0")
    prompt = sw_env.step("open door")
    options = parse_options(prompt.text)
    assert options and len(options) > 2 and sw_env.admissible_actions() == tuple(str(i) for i in range(len(options)))
    chosen = sw_env.step("2")
    assert chosen.info["chosen_option"] == options[2]
    assert chosen.info["replay_action"] == "@option " + options[2]
    after = sw_env.step("look around")
    actions, texts = ["open door", "2", "look around"], [prompt.text, chosen.text, after.text]
    # same process, another engine (its own JVM: option order may differ), numeric answer + records
    assert sw_other.restore("boil:0", actions, texts).text == after.text
    # the recorded option text alone (no observations) also replays exactly
    replay = ["open door", chosen.info["replay_action"], "look around"]
    assert sw_other.restore("boil:0", replay).text == after.text
    assert restore_in_fresh_process("scienceworld", {}, "boil:0", actions, texts, tmp_path) == after.text


def test_restore_after_random_prefix_same_and_fresh_process(sw_env, tmp_path):
    # "focus on" ends most tasks at once (a wrong focus fails them): keep the prefix 20 steps long
    actions, texts = random_prefix(sw_env, "melt:1", 20, seed=3, avoid=("focus on",))
    assert len(actions) == 20
    assert sw_env.restore("melt:1", actions, texts).text == texts[-1]
    assert restore_in_fresh_process("scienceworld", {}, "melt:1", actions, texts, tmp_path) == texts[-1]


def test_restore_detects_divergence(sw_env):
    sw_env.reset("boil:0")
    first = sw_env.step("look around")
    with pytest.raises(RestoreMismatch, match="step 1"):
        sw_env.restore("boil:0", ["look around"], [first.text + " (tampered)"])


def test_ambiguity_equivalence_ignores_option_order():
    a = "Ambiguous request: pick:\n0:\tx\n1:\ty\n"
    b = "Ambiguous request: pick:\n0:\ty\n1:\tx\n"
    assert same_observation(a, b) and not same_observation(a, "Ambiguous request: pick:\n0:\tx\n")


def test_bad_task_ids_name_the_fix(sw_env):
    with pytest.raises(ValueError, match="<task-name>:<variation>"):
        parse_task_id("boil")
    with pytest.raises(ValueError, match="unknown task 'boill'"):
        sw_env.reset("boill:0")


def test_gold_agent_solves_every_split_random_agent_does_not(sw_env):
    from memtrials.envs.scienceworld.tasks import task_rows
    from memtrials.envs.tasks import make_table, sample_tasks

    table = make_table("scienceworld", task_rows(sw_env))
    counts = table["split"].value_counts().to_dict()
    assert counts == {"train": 3592, "dev": 1796, "test": 1819}
    assert table["type"].nunique() == 30
    sample = sample_tasks(table[table["type"].isin(["boil", "find-animal", "grow-plant", "test-conductivity"])],
                          per_split=1, seed=0)
    assert set(sample["split"]) == {"train", "dev", "test"}
    gold = [run_episode(sw_env, GoldAgent(), t, max_steps=300) for t in sample["task_id"]]
    assert all(ep.won for ep in gold), [(ep.task_id, ep.score) for ep in gold if not ep.won]
    rand = [run_episode(sw_env, RandomAgent(0), t, max_steps=20) for t in sample["task_id"]]
    assert len(rand) == 3 and not any(ep.won for ep in rand)


def test_two_envs_run_concurrently_in_threads(sw_env, sw_other):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        eps = list(pool.map(lambda e: run_episode(e, GoldAgent(), "boil:0", max_steps=300), [sw_env, sw_other]))
    assert all(ep.won for ep in eps) and eps[0].observations == eps[1].observations


def test_joined_admissible_list_equals_the_item_by_item_list(sw_env, monkeypatch):
    """One joined py4j string gives the same actions in the same order as iterating the Java list,
    on random walks of two tasks; cached per state; the separator fallback and the switch work."""
    import random

    from memtrials.envs.scienceworld import env as swmod

    assert sw_env._join is None  # off in a process that did not read the config (the module docstring)
    monkeypatch.setattr(sw_env, "_join", sw_env.engine._gateway.jvm.java.lang.String.join)
    rng, checked = random.Random(3), 0
    for task in ("boil:0", "find-living-thing:2"):
        sw_env.reset(task)
        for _ in range(6):
            got = sw_env.admissible_actions()
            if parse_options(sw_env._last_text) is None:
                items = tuple(str(a) for a in sw_env.server.getValidActionObjectCombinations())
                assert got == items and len(got) > 10
                assert sw_env.admissible_actions() is got  # once per state
                checked += 1
            sw_env.step(rng.choice([a for a in got if not a.startswith("focus")] or ["look around"]))
    assert checked >= 8
    monkeypatch.setattr(swmod, "JOIN_SEP", " ")  # splits inside actions: falls back to items
    assert sw_env._fetch_valid() == tuple(str(a) for a in sw_env.server.getValidActionObjectCombinations())
    monkeypatch.setenv(swmod.JOIN_SWITCH, "0")
    assert not swmod.join_enabled()
    monkeypatch.setenv(swmod.JOIN_SWITCH, "1")
    assert swmod.join_enabled()


def test_join_comes_from_the_config_and_the_constructor(monkeypatch):
    """envs.scienceworld.join_admissible reaches the process (and its children) as the variable;
    an explicit join_admissible decides for one object."""
    import copy

    from memtrials.envs.scienceworld import env as swmod
    from tests.conftest import base_config

    cfg = copy.deepcopy(base_config())
    assert cfg["envs"]["scienceworld"]["join_admissible"] is True  # the default
    monkeypatch.delenv(swmod.JOIN_SWITCH, raising=False)
    swmod.configure(cfg)
    assert swmod.join_enabled()
    cfg["envs"]["scienceworld"]["join_admissible"] = False
    swmod.configure(cfg)
    assert not swmod.join_enabled()
    with pytest.raises(ValueError, match="true or false"):
        swmod.configure({"envs": {"scienceworld": {"join_admissible": "yes"}}})


REPLAY_SCRIPT = """
import json, random, sys
from memtrials.envs.scienceworld.env import ScienceWorldEnv
env = ScienceWorldEnv()
rng, out = random.Random(5), {"join": env._join is not None, "steps": []}
for task in ("find-non-living-thing:0", "lifespan-longest-lived:0"):
    obs = env.reset(task)
    out["steps"].append([obs.text, list(env.admissible_actions())])
    for i in range(8):
        acts = env.admissible_actions()
        moves = sorted(a for a in acts if a.startswith(("open door", "go to", "look")))
        act = "look around" if i % 3 == 2 else rng.choice(moves or sorted(acts))
        obs = env.step(act)
        out["steps"].append([act, obs.text, list(env.admissible_actions())])
env.close()
sys.stdout.write(json.dumps(out))
"""


def _replay(join: str, java_options: str = "") -> dict:
    import json
    import os
    import subprocess
    import sys

    from memtrials.envs.scienceworld.env import JOIN_SWITCH

    env = {**os.environ, JOIN_SWITCH: join, "JAVA_TOOL_OPTIONS": java_options}
    out = subprocess.run([sys.executable, "-c", REPLAY_SCRIPT], env=env, capture_output=True, check=True,
                         timeout=240).stdout
    return json.loads(out)


def test_episode_reproducible_in_fresh_processes_with_and_without_the_join():
    """The same actions in fresh processes give byte-identical observations and action lists
    (doors and a room's objects included), with the joined list (the default) and item by item,
    and whatever threads the JVM starts: the second process runs another garbage collector
    (other GC threads), which under HotSpot's default identity hash reordered a room's objects
    (the flake seen under load); the setting reaches the child through the environment, as
    ProcessEnv children get it."""
    joined = _replay("1")
    assert joined["join"] is True
    assert len(joined["steps"]) == 18 and any("door" in step[-2] for step in joined["steps"][1:])
    other_jvm = _replay("1", "-XX:+UseSerialGC")
    assert other_jvm == joined
    one_by_one = _replay("0", "-XX:+UseSerialGC")
    assert one_by_one["join"] is False
    assert one_by_one["steps"] == joined["steps"]


class _BrokenStdin:
    """A JVM stdin whose reader has gone: every write raises, as a closed pipe does."""

    def write(self, data: bytes) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_own_engine_close_runs_once_and_survives_a_jvm_already_gone(monkeypatch):
    """The package's ``close`` writes a newline to the JVM's stdin, and its ``__del__`` calls
    ``close`` again: with the JVM's stdin gone that raised BrokenPipeError (a traceback printed
    at garbage collection). The engine MemTrials starts closes once and never raises."""
    import subprocess

    from memtrials.envs.scienceworld.env import ScienceWorldEnv

    env = ScienceWorldEnv(shared_jvm=False)
    engine = env.engine
    process = engine._gateway.java_process
    real_stdin = process.stdin
    shutdowns = []
    real_shutdown = engine._gateway.shutdown
    monkeypatch.setattr(engine._gateway, "shutdown", lambda *a, **k: (shutdowns.append(1), real_shutdown(*a, **k)))
    try:
        monkeypatch.setattr(process, "stdin", _BrokenStdin())  # the JVM's end of the pipe is gone
        monkeypatch.setattr(process, "poll", lambda: None)  # ... but the process is not reaped yet
        env.close()  # the wrapper's close: no exception
        engine.close()  # what __del__ does at garbage collection: nothing is done twice
        engine.__del__()
        assert shutdowns == [1]
    finally:
        monkeypatch.undo()
        real_stdin.close()  # the JVM dies when its stdin closes (die_on_exit)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
