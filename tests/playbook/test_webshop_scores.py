"""WebShop's study-side rules that need no environment: the playbook study scores a WebShop
episode by its purchase reward (others by success), ACE's Reflector is told the reward there
(``ace-reward``) while Dynamic Cheatsheet never is, and the actor may fill in a template
action (the search bar) whose text no list can hold."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from memtrials.agent.actor import action_constraint
from memtrials.agent.parse import parse_action, templates
from memtrials.llm.structured import gbnf_actions
from memtrials.memory.ace_feedback import feedback_text
from memtrials.memory.cheatsheet import Cheatsheet
from memtrials.studies.playbook.analysis import method_score
from memtrials.studies.playbook.design import VARIANTS, variants_for
from memtrials.studies.playbook.records import score, scores
from tests.memory.helpers import MEMORY_PROMPTS, episode


def _episodes(env: str) -> pd.DataFrame:
    # two tasks, two seeds each: rewards 1.0 / 0.5 on task a, 0.25 / 0.0 on task b; won only at 1.0
    return pd.DataFrame({"env": env, "task_id": ["a", "a", "b", "b"], "won": [True, False, False, False],
                         "final_score": [1.0, 0.5, 0.25, 0.0]})


def test_webshop_scores_the_purchase_reward_and_other_benchmarks_success():
    ws, alf = _episodes("webshop"), _episodes("alfworld")
    assert list(scores(ws)) == [1.0, 0.5, 0.25, 0.0]
    assert list(scores(alf)) == [1.0, 0.0, 0.0, 0.0]
    # 100 x the mean over tasks of each task's mean over seeds
    assert method_score(ws) == pytest.approx(100 * (0.75 + 0.125) / 2)
    assert method_score(alf) == pytest.approx(100 * (0.5 + 0.0) / 2)
    both = pd.concat([ws, alf], ignore_index=True)
    assert list(scores(both)) == [1.0, 0.5, 0.25, 0.0, 1.0, 0.0, 0.0, 0.0]
    summary = {"won": False, "final_score": 0.75}
    assert score(summary, "webshop") == 0.75 and score(summary, "alfworld") == 0.0
    assert score({"won": True, "final_score": 0.0}, "appworld") == 1.0


def test_ace_sees_the_reward_on_webshop_and_dynamic_cheatsheet_never_does():
    assert variants_for("webshop", ["ace", "dc"], ["pass_fail", "unit_tests"]) == ["ace-reward", "dc"]
    assert variants_for("alfworld", ["ace"], ["pass_fail"]) == ["ace-passfail"]
    assert VARIANTS["ace-reward"] == ("ace", "reward") and VARIANTS["dc"] == ("dc", None)
    ep = episode("e1", "buy a red shirt under 30 dollars", won=False, score=0.6667)
    assert feedback_text(ep, "reward") == "The task was not completed. Reward: 0.67 (1.00 is full success)."
    assert feedback_text(ep, "pass_fail") == "The task was not completed."
    won = episode("e2", "buy it", won=True, score=1.0)
    assert feedback_text(won, "reward").startswith("The task was completed successfully. Reward: 1.00")
    # Dynamic Cheatsheet's curator reads no outcome: its prompt has no outcome field at all
    dc = Cheatsheet("loop", MEMORY_PROMPTS)
    assert not any(f in text for text in dc.prompts.texts.values() for f in ("{outcome}", "{feedback}", "{reward}"))


SHOWN = ["search[<your query>]", "click[back to search]", 'click[b0 "7"]']


def test_a_template_action_is_filled_in_and_admitted():
    assert templates(SHOWN) == ["search"]
    assert parse_action("search[red shirt under 30 dollars]", SHOWN, "choice").status == "ok"
    assert parse_action("<action>search[ x ]</action>", SHOWN, "react").status == "ok"
    assert parse_action("Search[x]", SHOWN, "react").status == "inadmissible"  # as WebShop refuses it
    assert parse_action("search [x]", SHOWN, "react").status == "inadmissible"
    assert parse_action("search[]", SHOWN, "choice").status == "inadmissible"
    assert parse_action("search[<your query>]", SHOWN, "choice").status == "inadmissible"  # the placeholder copied
    assert parse_action("click[next >]", SHOWN, "choice").status == "inadmissible"  # clicks must be listed
    assert parse_action("search[shirt]", SHOWN[1:], "choice").status == "inadmissible"  # no search bar shown
    grammar = gbnf_actions(SHOWN[1:], ["search"], 100)
    assert grammar.splitlines()[1] == 'root ::= "click[back to search]" | "click[b0 \\"7\\"]" | "search[" arg "]"'
    assert grammar.splitlines()[2] == "arg ::= [^<\\]\\n\\r \\t] [^\\]\\n\\r]{0,99}"  # no placeholder copied


class _Client:
    def __init__(self, grammar: bool) -> None:
        self.grammar = grammar

    def supports_grammar(self, model: str) -> bool:
        return self.grammar


def test_the_constraint_of_a_list_with_a_template():
    plain = ["click[back to search]", "click[next >]"]
    assert action_constraint(_Client(True), "m", plain) == {"choices": plain}  # unchanged: same cache keys
    with_bar = action_constraint(_Client(True), "m", SHOWN)
    assert set(with_bar) == {"grammar"} and '"search[" arg "]"' in with_bar["grammar"]
    assert action_constraint(_Client(False), "m", SHOWN) == {}  # free reply, parsed against the list
    assert action_constraint(_Client(True), "m", []) == {}
    json.dumps(with_bar)  # a request field
