"""Every history view renders the worked example of Table 1 (O1..O7, A1..A6) exactly.

*When History Fails to Become Experience*, Table 1, Appendices F and G.1.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from memtrials.agent import views as V
from memtrials.memory.base import Lesson, MemoryBlock
from memtrials.agent.prompts import PROMPT_FILES, ActorPrompts, fill, parse_review
from memtrials.agent.render import Segment, render_block, render_chat
from memtrials.studies.history.prompts import PROMPT_FILES as JUDGE_PROMPT_FILES, JudgePrompts

PROMPTS = Path(__file__).resolve().parents[2] / "config" / "prompts" / "actor"
JUDGE_PROMPTS = PROMPTS.parent / "history"
ENTRIES = [V.Entry(f"O{t}", f"A{t}") for t in range(1, 7)]
RAW_LINES = [f"[Observation {t}: 'O{t}', Action {t}: 'A{t}']" for t in range(1, 7)]


def block(view: V.ViewResult) -> list[str]:
    return render_block(view).split("\n")


def test_raw_and_check_render_every_entry_in_order():
    assert block(V.apply_view("raw", ENTRIES)) == RAW_LINES
    assert block(V.apply_view("check", ENTRIES)) == RAW_LINES


def test_recent3_omits_whole_earlier_entries():
    assert block(V.apply_view("recent3", ENTRIES)) == RAW_LINES[3:]
    assert block(V.apply_view("recent3", ENTRIES[:2])) == RAW_LINES[:2]


def test_observation_only_keeps_observations_in_order_without_actions():
    assert block(V.apply_view("obsonly", ENTRIES)) == [f"[Observation {t}: 'O{t}']" for t in range(1, 7)]


def test_table1_illustrative_shuffles_render_exactly():
    # Table 1: Shuffle-All (O1,A4),(O2,A5),(O3,A6),(O4,A1),(O5,A2),(O6,A3)
    sa = V.reassign(ENTRIES, [3, 4, 5, 0, 1, 2], "shuffle_all")
    assert block(sa) == [f"[Observation {t}: 'O{t}', Action {t}: 'A{a}']"
                         for t, a in zip(range(1, 7), [4, 5, 6, 1, 2, 3])]
    # Shuffle-Old (O1,A2),(O2,A3),(O3,A1) then the three latest intact
    so = V.reassign(ENTRIES, [1, 2, 0, 3, 4, 5], "shuffle_old")
    assert block(so) == [f"[Observation {t}: 'O{t}', Action {t}: 'A{a}']"
                         for t, a in zip(range(1, 7), [2, 3, 1, 4, 5, 6])]
    with pytest.raises(ValueError, match="moves one of the 3 latest"):
        V.reassign(ENTRIES, [5, 1, 2, 3, 4, 0], "shuffle_old")
    with pytest.raises(ValueError, match="not a permutation"):
        V.reassign(ENTRIES, [0, 0, 1, 2, 3, 4], "shuffle_all")


@pytest.mark.parametrize("view", ["shuffle_all", "shuffle_old"])
def test_seeded_shuffles_are_true_permutations_keeping_observation_order(view):
    seen = set()
    for seed in range(40):
        res = V.apply_view(view, ENTRIES, seed=seed)
        perm = res.permutation
        assert sorted(perm) == list(range(6))
        assert [it.observation for it in res.items] == [f"O{t}" for t in range(1, 7)]
        assert [it.action for it in res.items] == [f"A{p + 1}" for p in perm]
        assert V.apply_view(view, ENTRIES, seed=seed) == res  # same seed, same arrangement
        if view == "shuffle_old":
            assert perm[3:] == (3, 4, 5)
        seen.add(perm)
    # the seed matters: many different arrangements over 40 seeds (3! = 6 for shuffle_old)
    assert len(seen) >= (6 if view == "shuffle_old" else 20)
    with pytest.raises(ValueError, match="needs a seed"):
        V.apply_view(view, ENTRIES)


def test_permutation_is_uniform_enough():
    counts = {}
    for seed in range(3000):
        p = V.permutation(3, seed)
        counts[p] = counts.get(p, 0) + 1
    assert len(counts) == 6 and min(counts.values()) > 400  # 500 expected each


def test_causal_transition_labels_G1():
    assert block(V.apply_view("causal", ENTRIES)) == (
        ["[Initial Observation 1: 'O1', Action 1: 'A1']"]
        + [f"[Outcome of Action {t - 1}: 'O{t}', Action {t}: 'A{t}']" for t in range(2, 7)]
    )
    assert V.current_label("causal", 6) == "Current observation (Outcome of Action 6)"
    assert V.current_label("raw", 6) == "Current observation"


def test_experience_is_kept_beside_its_source_transition():
    entries = [V.Entry(e.observation, e.action, "E2" if i == 1 else "E5" if i == 4 else None)
               for i, e in enumerate(ENTRIES)]
    lines = block(V.apply_view("experience", entries))
    assert lines == (RAW_LINES[:2] + ["[Experience derived from Action 2 -> its returned observation: E2]"]
                     + RAW_LINES[2:5] + ["[Experience derived from Action 5 -> its returned observation: E5]"]
                     + RAW_LINES[5:])


def test_empty_history_renders_none_and_unknown_view_is_named():
    assert render_block(V.apply_view("raw", [])) == "None"
    with pytest.raises(ValueError, match="unknown history view 'shuffle'"):
        V.apply_view("shuffle", ENTRIES)


@pytest.fixture(scope="module")
def prompts() -> ActorPrompts:
    return ActorPrompts.load(PROMPTS)


ADM = ("go to desk 1", "look")


def test_block_prompt_contains_history_current_observation_and_actions(prompts):
    msgs = prompts.actor_messages(
        env="alfworld", task="put a mug on the desk", history=[Segment.of(V.apply_view("raw", ENTRIES))],
        current_observation="O7", current_label="Current observation", step_count=6,
        admissible=ADM, mode="choice")
    assert len(msgs) == 1 and msgs[0]["role"] == "user"
    text = msgs[0]["content"]
    assert "\n".join(RAW_LINES) in text
    assert "and are now at step 7. Current observation: O7\nAdmissible actions:\n- go to desk 1\n- look\n" in text
    assert "taken 6 step(s)" in text and "[History caution]" not in text
    check = prompts.actor_messages(
        env="alfworld", task="t", history=[Segment.of(V.apply_view("check", ENTRIES))],
        current_observation="O7", current_label="Current observation", step_count=6,
        admissible=ADM, mode="choice", reminder=True)[0]["content"]
    assert prompts.t("check_reminder.txt") in check
    assert check.index("[/History caution]") < check.index("Current observation: O7")


@pytest.mark.parametrize("fmt", ["block", "chat"])
@pytest.mark.parametrize("task, clause", [
    ("Your task is to: put some cd on sidetable.", "put some cd on sidetable."),  # ALFWorld's goal line
    ("Your task is to find a(n) non-living thing. First, focus on the thing.",  # ScienceWorld's
     "find a(n) non-living thing. First, focus on the thing."),
    ("Add a task titled 'Order the onyx boxes' to my Todoist project 'Garden'.",  # AppWorld's
     "Add a task titled 'Order the onyx boxes' to my Todoist project 'Garden'."),
])
def test_the_task_follows_the_templates_marker_once(prompts, task, clause, fmt):
    """The environments' task texts that begin with "Your task is to" are not prefixed with the
    template's own "Your task is to: " a second time (every ALFWorld and ScienceWorld prompt said
    "Your task is to: Your task is to ...")."""
    msgs = prompts.actor_messages(
        env="alfworld", task=task, history=[Segment.of(V.apply_view("raw", ENTRIES))],
        current_observation="O7", current_label="Current observation", step_count=6,
        admissible=ADM, mode="choice", fmt=fmt)
    text = msgs[0]["content"]
    assert f"Your task is to: {clause}" in text
    assert text.lower().count("your task is to") == 1


def test_chat_format_alternates_user_and_assistant(prompts):
    msgs = prompts.actor_messages(
        env="alfworld", task="t", history=[Segment.of(V.apply_view("raw", ENTRIES))],
        current_observation="O7", current_label="Current observation", step_count=6,
        admissible=ADM, mode="choice", fmt="chat")
    assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * 6 + ["user"]
    assert [m["content"] for m in msgs[1:-1]] == [x for t in range(1, 7) for x in (f"O{t}", f"A{t}")]
    assert msgs[-1]["content"].startswith("Current observation: O7\nAdmissible actions:")
    # historical admissible lists are not replayed
    assert sum("Admissible actions" in m["content"] for m in msgs) == 1
    causal = render_chat(V.apply_view("causal", ENTRIES))
    assert causal[0] == {"role": "user", "content": "Initial Observation 1: O1"}
    assert causal[2] == {"role": "user", "content": "Outcome of Action 1: O2"}
    shuffled = render_chat(V.reassign(ENTRIES, [3, 4, 5, 0, 1, 2]))
    assert [m["content"] for m in shuffled if m["role"] == "assistant"] == ["A4", "A5", "A6", "A1", "A2", "A3"]
    obs_only = render_chat(V.apply_view("obsonly", ENTRIES))
    assert obs_only == [{"role": "user", "content": "\n".join(f"O{t}" for t in range(1, 7))}]
    exp = render_chat(V.apply_view("experience", [V.Entry("O1", "A1", "E1"), V.Entry("O2", "A2")]))
    assert exp == [{"role": "user", "content": "O1"}, {"role": "assistant", "content": "A1"},
                   {"role": "user", "content": "[Experience derived from Action 1 -> its returned observation: E1]\nO2"},
                   {"role": "assistant", "content": "A2"}]


def test_memory_block_is_rendered_and_ids_kept(prompts):
    mem = MemoryBlock((Lesson("L1", "Check the fridge first."), Lesson("L7", "Open containers.")))
    text = prompts.actor_messages(
        env="scienceworld", task="t", history=[], current_observation="O1", current_label="Current observation",
        step_count=0, admissible=ADM, mode="react", memory=mem)[0]["content"]
    assert "Lessons from earlier tasks:\n- Check the fridge first.\n- Open containers.\n" in text
    assert mem.ids == ("L1", "L7")
    # the block, the same across a candidate's episodes, comes before the task (a stable prompt
    # prefix for the server's cache); with nothing served the verl-agent line is as it was
    assert text.startswith("You are an expert agent operating in ") and ".\nLessons from earlier tasks:\n" in text
    assert text.index("Open containers.") < text.index("Your task is to: t\n")
    for fmt in ("block", "chat"):
        bare = prompts.actor_messages(
            env="scienceworld", task="t", history=[], current_observation="O1", current_label="Current observation",
            step_count=0, admissible=ADM, mode="react", fmt=fmt)[0]["content"]
        assert ". Your task is to: t\n" in bare
        served = prompts.actor_messages(
            env="scienceworld", task="t", history=[], current_observation="O1", current_label="Current observation",
            step_count=0, admissible=ADM, mode="react", fmt=fmt, memory=mem)[0]["content"]
        assert served.index("Lessons from earlier tasks:") < served.index("Your task is to: t")
    with pytest.raises(ValueError, match="duplicate lesson ids"):
        MemoryBlock((Lesson("L1", "a"), Lesson("L1", "b")))


def test_review_prompt_is_G2_and_parses_both_outputs(prompts):
    msgs = prompts.review_messages(env="alfworld", task="t", history=[Segment.of(V.apply_view("raw", ENTRIES))],
                                   action="A6", observation="O7")
    assert msgs[0]["content"].startswith("You are calibrating your own prior interaction history")
    assert '{"decision":"NOUPDATE","experience":null}' in msgs[0]["content"]
    assert "Latest completed action: A6\nReturned observation: O7" in msgs[1]["content"]
    assert parse_review({"decision": "NOUPDATE", "experience": None}) == ("NOUPDATE", None)
    assert parse_review({"decision": "CALIBRATE", "experience": " Mugs  are in cabinets. "}) == (
        "CALIBRATE", "Mugs are in cabinets.")
    assert parse_review({"decision": "CALIBRATE", "experience": ""}) == ("INVALID", None)
    assert parse_review(None) == ("INVALID", None)
    assert parse_review({"decision": "NOUPDATE", "experience": "blue paint"}) == ("INVALID", None)
    from memtrials.llm.structured import parse_json_reply
    from memtrials.agent.prompts import REVIEW_SCHEMA
    assert parse_json_reply('{"decision":"NOUPDATE","experience":null}', REVIEW_SCHEMA)[1] is None
    assert parse_json_reply('{"decision":"CALIBRATE","experience":"Mugs are in cabinets."}', REVIEW_SCHEMA)[1] is None
    assert parse_json_reply('{"decision":"NOUPDATE","experience":"x"}', REVIEW_SCHEMA)[1] is not None


def test_reference_structure_D6(prompts):
    prefix = Segment.of(V.raw(ENTRIES[:2]))
    ref = Segment.of(V.raw(ENTRIES[2:4], start=3))
    segs = prompts.reference_segments(prefix, ref, None, restored_step=2)
    text = render_block(segs)
    assert text.split("\n") == RAW_LINES[:2] + [
        "Additional reference history (not executed in the current environment; the actual environment "
        "was restored to step 2):"] + RAW_LINES[2:4] + [
        "End of additional reference history.",
        "Actual interaction history after restoring the environment to step 2:", "None"]
    causal_ref = V.causal(ENTRIES[2:4], start=3, initial=False, action_word="Reference Action")
    assert render_block(causal_ref).split("\n") == [
        "[Outcome of Action 2: 'O3', Reference Action 3: 'A3']",
        "[Outcome of Reference Action 3: 'O4', Reference Action 4: 'A4']"]


def test_fill_rejects_missing_fields_and_keeps_json_braces():
    assert fill('{"a": 1} {x}', x=2) == '{"a": 1} 2'
    with pytest.raises(KeyError, match="needs fields"):
        fill("{x} {y}", x=1)


EXPECTED_SHA256 = None  # filled below from SOURCES.md-pinned digests


@pytest.mark.parametrize("folder, names", [(PROMPTS, PROMPT_FILES), (JUDGE_PROMPTS, JUDGE_PROMPT_FILES)],
                         ids=["actor", "history"])
def test_prompt_files_match_their_pinned_digests(folder, names):
    """The actor's files (config/prompts/actor/) and the history study's own (the repetition
    screen, config/prompts/history/), each against its folder's SOURCES.md."""
    pinned = {}
    for line in (folder / "SOURCES.md").read_text().splitlines():
        if line.startswith("| `") and "sha256:" in line:
            name = line.split("`")[1]
            pinned[name] = line.split("sha256:")[1].strip(" |`")
    assert set(pinned) == set(names)
    for name in names:
        data = (folder / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == pinned[name], f"{name} changed: update SOURCES.md on purpose"


def test_the_repetition_screen_renders_the_judge_files_with_the_actors_environment(prompts):
    judge = JudgePrompts.load(JUDGE_PROMPTS)
    msgs = judge.judge_messages(prompts, env="alfworld", task="t", history=[Segment.of(V.apply_view("raw", ENTRIES))],
                                action="A6", observation="O7")
    assert msgs[0] == {"role": "system", "content": judge.texts["judge_repetition_system.txt"].rstrip("\n")}
    assert msgs[1]["role"] == "user" and prompts.environment("alfworld") in msgs[1]["content"]
    assert render_block([Segment.of(V.apply_view("raw", ENTRIES))]) in msgs[1]["content"]


def _changed(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Positions (of the shorter) whose shown action differs between two arrangements."""
    return sum(x != y for x, y in zip(a, b))


@pytest.mark.parametrize("view, fixed", [("shuffle_all", 0), ("shuffle_old", 3)])
def test_per_episode_shuffle_keeps_one_permutation_extended_as_history_grows(view, fixed):
    """history.shuffle: per_episode -- the arrangement at n+1 is the one at n with one swap."""
    for seed in range(30):
        prev = None
        for n in range(0, 12):
            entries = [V.Entry(f"O{t}", f"A{t}") for t in range(1, n + 1)]
            res = V.apply_view(view, entries, seed=seed, shuffle="per_episode")
            perm = res.permutation
            assert sorted(perm) == list(range(n)) and perm[max(0, n - fixed):] == tuple(range(max(0, n - fixed), n))
            old = perm[:max(0, n - fixed)]
            if prev is not None:
                assert _changed(prev, old) <= 1  # the new old entry swapped into one earlier position
            prev = old
            assert V.apply_view(view, entries, seed=seed, shuffle="per_episode") == res


def test_per_step_shuffle_draws_afresh_and_both_modes_are_uniform():
    """history.shuffle: per_step -- a new draw at every step; both give uniform permutations."""
    moved = [_changed(V.draw(8, s, "per_step"), V.draw(9, s, "per_step")) for s in range(200)]
    grown = [_changed(V.draw(8, s, "per_episode"), V.draw(9, s, "per_episode")) for s in range(200)]
    assert sum(moved) / 200 > 5 and max(grown) <= 1  # per_step rearranges most positions
    for mode in ("per_step", "per_episode"):
        counts: dict[tuple[int, ...], int] = {}
        for seed in range(3000):
            p = V.draw(3, seed, mode)
            counts[p] = counts.get(p, 0) + 1
        assert len(counts) == 6 and min(counts.values()) > 400 and max(counts.values()) < 600, (mode, counts)
    with pytest.raises(ValueError, match="unknown shuffle mode 'per_episod'; known: per_step, per_episode"):
        V.draw(3, 0, "per_episod")  # the agent layer names no study's key: the study's check does (below)


def test_the_actor_uses_the_configured_shuffle():
    from memtrials.agent.actor import ActorSettings, ViewComposer
    from memtrials.studies.history.design import actor_settings

    s = actor_settings("m", "shuffle_all", {}, shuffle="per_episode")
    assert s.shuffle == "per_episode" and actor_settings("m", "shuffle_all", {}).shuffle == "per_step"
    with pytest.raises(ValueError, match="history.shuffle"):
        actor_settings("m", "shuffle_all", {}, shuffle="sometimes")
    with pytest.raises(ValueError, match="shuffle mode"):
        ActorSettings(model="m", shuffle="sometimes")
    entries = [V.Entry(f"O{t}", f"A{t}") for t in range(1, 8)]
    for mode in ("per_step", "per_episode"):
        _, _, perm = ViewComposer("shuffle_all", 11, shuffle=mode).actor(entries)
        assert perm == V.draw(7, 11, mode)
