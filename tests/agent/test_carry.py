"""Replies of unbounded length are stored whole but carried forward cut (issue 39, "Paid once").

Before the cap, a 256 KiB action was fed back into every later prompt whole: prompts grew
from 1,721 to 1,312,722 characters in six steps.  Here the loopback endpoint answers every
actor request with a 256 KiB action and every lesson request with a 256 KiB lesson, on real
ScienceWorld episodes; later prompts must stay within the cap (``carry.max_chars``), the
step rows and call records keep the whole reply, and the cut is recorded (the step row's
``carry_cut``, the lesson's ``cut``).
"""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest

from memtrials.llm import read_records
from memtrials.llm.carry import carry, configure, marker, max_chars, set_max_chars

from .stream_cell import MEMORY_PROMPTS, PROMPTS, TASKS

HUGE = 256 * 1024
LESSON_SYSTEM = "You keep a short list of lessons"


@pytest.fixture
def restore_cap():
    before = max_chars()
    yield
    set_max_chars(before)


def test_carry_cuts_once_and_leaves_short_texts_alone(restore_cap):
    set_max_chars(10)
    assert carry("short") == carry("short", 10)
    assert carry("short").cut == 0 and carry("short").text == "short"
    kept = carry("x" * 25)
    assert kept.cut == 15 and kept.text == "x" * 10 + marker(15)
    assert carry(kept.text) == type(kept)(kept.text, 0)  # a cut text quoted again is not cut again
    assert carry("y" * 25, 20).cut == 5  # an explicit limit wins
    set_max_chars(None)
    assert carry("z" * 10 ** 6).cut == 0


def test_carry_setting_is_checked(restore_cap):
    for bad in (0, -1, 1.5, "16k", True):
        with pytest.raises(ValueError, match="carry.max_chars"):
            set_max_chars(bad)
    configure({"carry": {"max_chars": 123}})
    assert max_chars() == 123
    configure({})  # no section: unchanged
    assert max_chars() == 123


def huge_policy(body):
    """A 256 KiB lesson to lesson requests; a 256 KiB action (``look around`` and filler) to actors."""
    msgs = body.get("messages") or []
    if msgs and msgs[0].get("content", "").startswith(LESSON_SYSTEM):
        return "Always-" + "check-" * (HUGE // 6)  # one word: the endpoint's max_tokens does not cut it
    return "<action>look around " + "z" * HUGE + "</action>"


@pytest.mark.slow
def test_a_256_kib_reply_is_stored_whole_and_carried_cut(loopback, make_config, tmp_path, restore_cap):
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.agent.runner import EpisodeSpec, Runner, write_episodes
    from memtrials.envs.pool import EnvPool, env_factory
    from memtrials.llm import open_client
    from memtrials.memory.lessons import LessonLog
    from memtrials.studies.history.design import actor_settings

    srv = loopback(policy=huge_policy)
    cfg = make_config(srv)
    cap = cfg["carry"]["max_chars"]
    assert cap == 16384  # config/config.yaml's default
    s = actor_settings("loop", "raw", {"mode": "react", "max_actions": 4, "max_output_tokens": None,
                                       "max_listed_actions": 5})
    specs = [EpisodeSpec("scienceworld", TASKS[i], f"carry/{i}", i, s) for i in range(2)]
    memory = LessonLog("loop", MEMORY_PROMPTS)

    async def main():
        async with EnvPool(env_factory("scienceworld"), 1) as pool, \
                open_client(cfg, "tests/carry", tmp_path / "calls.parquet") as client:
            runner = Runner(client, pool, ActorPrompts.load(PROMPTS), in_flight=1)
            return await runner.stream(specs, memory, batch_size=1)

    eps = asyncio.run(main())
    write_episodes(eps, {"model": "loop", "env": "scienceworld", "condition": "carry"}, {t: i for i, t in enumerate(TASKS)},
                   str(tmp_path / "episodes.parquet"), str(tmp_path / "steps.parquet"))
    steps = pd.read_parquet(tmp_path / "steps.parquet")
    calls = read_records(tmp_path / "calls.parquet").to_pandas()
    actor = calls[calls["purpose"] == "actor"].sort_values("started_at")
    assert len(steps) == 8 and len(actor) == 8
    # stored whole: the reply in the call record and the step row, the action as executed
    assert (steps["raw_reply"].str.len() > HUGE).all()
    assert (steps["action"].str.len() > HUGE).all()
    assert (actor["response_text"].str.len() > HUGE).all()
    # the cut recorded: each step's action lost all but cap characters
    assert (steps["carry_cut"] == steps["action"].str.len() - cap).all()
    # carried cut: a prompt holds at most its steps' cut actions (and the lesson) beside the template
    # and the observations (uncut, each a few hundred characters: 1,500 allowed per step); uncut,
    # the second prompt alone would exceed 256 KiB
    sizes = [sum(len(m["content"]) for m in json.loads(raw)) for raw in actor["messages"]]
    first = sizes[0]
    assert first < 5000
    for k, size in enumerate(sizes):
        step, lessons = k % 4, k // 4
        assert size <= first + (step + lessons) * (cap + 1500), (k, size)
    later = json.loads(actor["messages"].iloc[3])[-1]["content"]
    assert later.count(marker(HUGE + len("look around ") - cap)) == 3  # three earlier actions, each cut
    # the lesson: written whole by the endpoint, kept cut, the cut recorded, served cut
    lesson_calls = calls[calls["purpose"] == "memory_update"]
    assert len(lesson_calls) == 2 and (lesson_calls["response_text"].str.len() > HUGE).all()
    lessons = memory.state()["lessons"]
    assert len(lessons) == 2
    assert all(len(x["text"]) < cap + 100 and x["cut"] > HUGE - cap - 100 for x in lessons)
    second = json.loads(actor["messages"].iloc[4])[-1]["content"]
    assert lessons[0]["text"] in second
    # the lesson writer read the trajectory's actions cut too
    writer_prompt = json.loads(lesson_calls.sort_values("started_at")["messages"].iloc[0])[-1]["content"]
    assert len(writer_prompt) < 4 * (cap + 1500) + 5000
