"""What a reference continuation shows, on a synthetic source (no environment, no model).

*When History Fails to Become Experience*, Appendices D.6 and F.2: reference records are
numbered and labelled apart from executed steps in every reference condition, the header
does not call them actions the agent took, the Experience at resumption reviews the last
executed transition (``A_k -> O_{k+1}``) and stays beside it, and in the chat format the
reference block is its own user message followed by a separate one with the current
observation and actions.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.views import Entry
from memtrials.studies.history.continuation import ContinuationComposer, Source, resume_transition

PROMPTS = Path(__file__).resolve().parents[2] / "config" / "prompts" / "actor"
L = 9  # k = 3, m = 6
SRC = Source("ep", "task-1", 7, "O1", tuple(f"A{t}" for t in range(1, L + 1)), tuple(f"A{t}" for t in range(1, L + 1)),
             tuple(f"O{t}" for t in range(2, L + 2)), "the task")
TOOK = "actions you took"


@pytest.fixture(scope="module")
def prompts() -> ActorPrompts:
    return ActorPrompts.load(PROMPTS)


def block_prompt(prompts, condition, entries=(), experience=None, fmt="block"):
    comp = ContinuationComposer(condition, SRC, experience, fmt == "chat").bind(prompts)
    segs, label, _ = comp.actor(list(entries))
    return prompts.actor_messages(env="alfworld", task="the task", history=segs, current_observation="CUR",
                                  current_label=label, step_count=SRC.k + len(entries), admissible=["a", "b"],
                                  mode="choice", fmt=fmt)


def reference_block(text: str) -> list[str]:
    lines = text.split("\n")
    start = next(i for i, s in enumerate(lines) if s.startswith("Additional reference history"))
    return lines[start + 1: lines.index("End of additional reference history.")]


@pytest.mark.parametrize("condition", ["reference", "causal_reference", "experience", "calibrator"])
def test_reference_records_are_numbered_and_labelled_apart_in_every_reference_condition(prompts, condition):
    base = "causal_reference" if condition == "causal_reference" else "reference"
    text = block_prompt(prompts, base, [Entry("O4", "X4")])[0]["content"]
    block = reference_block(text)
    n = SRC.m - SRC.k
    assert len(block) == n + 1
    for j, line in enumerate(block[:-1], 1):  # numbered 1..n, every action a "Reference Action"
        assert f", Reference Action {j}: 'A{SRC.k + j}']" in line
    assert not any(re.search(r"(?<!Reference )(?<!Outcome of )Action \d+: ", line) for line in block)  # no executed-step label
    assert not any(f"Observation {SRC.k + 1}:" in line and "Reference" not in line for line in block)
    if base == "reference":
        assert block[0] == f"[Reference Observation 1: 'O{SRC.k + 1}', Reference Action 1: 'A{SRC.k + 1}']"
        assert block[-1] == f"[Reference Observation {n + 1}: 'O{SRC.m + 1}']"
    else:
        assert block[0] == f"[Outcome of Action {SRC.k}: 'O{SRC.k + 1}', Reference Action 1: 'A{SRC.k + 1}']"
        assert block[-1] == f"[Outcome of Reference Action {n}: 'O{SRC.m + 1}']"
    # the executed continuation keeps the task's step numbers, after the block
    after = text[text.index("Actual interaction history after restoring"):]
    assert f"Action {SRC.k + 1}: 'X4'" in after
    # the header does not call the reference actions ones the agent took
    assert TOOK not in text and "not executed" in text.split("\n")[1]


def test_full_rollout_header_is_unchanged(prompts):
    from memtrials.agent.render import Segment
    from memtrials.agent.views import raw

    text = prompts.actor_messages(env="alfworld", task="t", history=[Segment.of(raw([Entry("O1", "A1")]))],
                                  current_observation="O2", current_label="Current observation", step_count=1,
                                  admissible=["a"], mode="choice")[0]["content"]
    assert text.split("\n")[1] == "Below are the earlier observations and the corresponding actions you took:"


def test_experience_at_resumption_reviews_the_last_executed_transition(prompts):
    assert resume_transition(SRC) == (f"A{SRC.k}", f"O{SRC.k + 1}")  # not the last reference action A_m
    assert resume_transition(Source("e", "t", 0, "O1", ("A1", "A2"), ("A1", "A2"), ("O2", "O3"))) is None  # k = 0
    review = ContinuationComposer("reference", SRC).bind(prompts).review([])
    action, observation = resume_transition(SRC)
    msgs = prompts.review_messages(env="alfworld", task="the task", history=review, action=action,
                                   observation=observation)
    user = msgs[1]["content"]
    assert user.endswith(f"Latest completed action: A{SRC.k}\nReturned observation: O{SRC.k + 1}")
    assert "Experience derived" not in user
    # kept beside its source transition A_k -> O_{k+1}: right after entry k, before the block
    text = block_prompt(prompts, "reference", experience="Doors stay closed.")[0]["content"]
    lines = text.split("\n")
    i = lines.index(f"[Observation {SRC.k}: 'O{SRC.k}', Action {SRC.k}: 'A{SRC.k}']")
    assert lines[i + 1] == f"[Experience derived from Action {SRC.k} -> its returned observation: Doors stay closed.]"
    assert lines[i + 2].startswith("Additional reference history")
    assert "Experience derived" not in "\n".join(reference_block(text))


def test_chat_reference_is_its_own_user_message_then_the_current_one(prompts):
    first = block_prompt(prompts, "reference", fmt="chat")
    roles = [m["role"] for m in first]
    assert roles == ["system"] + ["user", "assistant"] * SRC.k + ["user", "user"]
    ref, current = first[-2]["content"], first[-1]["content"]
    assert ref.startswith("Additional reference history (not executed") and ref.endswith(
        "End of additional reference history.")
    assert "Current observation" not in ref and current.startswith("Current observation: CUR")
    assert "Admissible actions:\n- a\n- b" in current
    later = block_prompt(prompts, "reference", [Entry(f"O{SRC.k + 1}", "X4")], fmt="chat")
    assert [m["role"] for m in later][-5:] == ["assistant", "user", "user", "assistant", "user"]
    assert later[-4]["content"] == ref  # the block stays one message
    assert later[-3]["content"] == f"O{SRC.k + 1}" and later[-2]["content"] == "X4"
    assert later[-1]["content"].startswith("Current observation: CUR")
