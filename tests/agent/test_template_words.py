"""A choice-mode reply fills a template action (WebShop's search bar) with words of the task only."""

from memtrials.agent.actor import template_words
from memtrials.llm.structured import gbnf_actions


def test_template_words_are_the_task_words_once_each():
    assert template_words("Find me a RED cotton shirt, red, size: x-large") == [
        "find", "me", "red", "cotton", "shirt", "size", "large"]
    assert template_words(None) == [] and template_words("") == []


def test_the_grammar_draws_a_search_from_the_words():
    g = gbnf_actions(["click[next >]"], ["search"], 100, words=["red", "shirt", "red"], max_words=3)
    assert 'arg ::= word (" " word){0,2}' in g
    assert 'word ::= "red" | "shirt"' in g
    # without words: any text, as before (no other environment's grammar changes)
    assert gbnf_actions(["click[next >]"], ["search"], 100) == gbnf_actions(["click[next >]"], ["search"], 100, words=None)
    assert "[^<" in gbnf_actions(["a"], ["search"], 100)
