"""Known-answer runs of the history study (issue 38): the planted agent on the planted world,
through the real cells, client and cache, against the truth of its declared policy."""

from __future__ import annotations

import random
from math import factorial

import pandas as pd
import pytest

from memtrials.config import REPO_ROOT, ConfigError, load_config, load_models
from memtrials.studies.history.known_answer import known_answer
from memtrials.studies.history.planted import read_prompt
from memtrials.studies.history.planted_truth import _detect, success_probability

DECLARED = load_models(REPO_ROOT / "config" / "models.yaml")["planted-history"].planted.params
P, R = DECLARED["p_right"], DECLARED["repeat"]
COVERAGE_CONDITIONS = ["raw", "obsonly", "shuffle_all", "causal"]


def _simulate(condition: str, shape: tuple[int, ...], budget: int, rng: random.Random) -> bool:
    """One episode of the declared chain, drawn directly (permutations drawn, not counted)."""
    hist: list[tuple[int, int]] = []
    k, failed = 0, None
    for _ in range(budget):
        n = len(hist)
        if condition == "check":
            p = P["check"]
        elif n == 0 or condition == "raw" or (condition == "recent3" and n <= 3):
            p = P["raw"]
        elif condition in ("recent3", "obsonly", "causal", "experience"):
            p = P[condition]
        else:
            idx = list(range(n)) if condition == "shuffle_all" else list(range(max(0, n - 3)))
            perm = idx[:]
            rng.shuffle(perm)
            moved = any(hist[i] != hist[j] for i, j in zip(idx, perm))
            p = P["shuffled"] if moved else P["raw"]
        rate = R["causal"] if condition == "causal" else R["base"]
        if failed is not None and rng.random() < rate:
            hist.append((k, failed))
            continue
        if rng.random() < p:
            hist.append((k, -1))
            k, failed = k + 1, None
            if k == len(shape):
                return True
            continue
        wrong = [w for w in range(shape[k] - 1) if w != failed]
        failed = rng.choice(wrong)
        hist.append((k, failed))
    return False


@pytest.mark.parametrize("condition", ["raw", "recent3", "shuffle_all", "shuffle_old", "causal", "check"])
def test_the_exact_truth_agrees_with_a_simulation_of_the_declared_chain(condition):
    rng = random.Random(7)
    shape, n = (5, 3, 4, 5), 20000
    sim = sum(_simulate(condition, shape, 6, rng) for _ in range(n)) / n
    exact = success_probability(condition, shape, 6, P, R)
    assert abs(sim - exact) < 4 * (exact * (1 - exact) / n) ** 0.5 + 1e-9, (sim, exact)


def test_detection_of_a_shuffle_counts_the_permutations_that_keep_every_string():
    assert _detect(["a"]) == 0.0 and _detect(["a", "a", "a"]) == 0.0
    assert _detect(["a", "b"]) == pytest.approx(0.5)
    assert _detect(["a", "a", "b"]) == pytest.approx(1 - 2 / factorial(3))


def test_the_policy_reads_the_view_from_the_rendered_text():
    o1 = "Open the vault: at each step enter the code the panel shows. The panel shows code K7Q. (step 1 of 3)"
    o2 = "Nothing happens: 'enter code M2X' is not right here. The panel shows code K7Q. (step 1 of 3)"
    o3 = "Accepted. The panel shows code B4N. (step 2 of 3)"
    raw = f"[Observation 1: '{o1}', Action 1: 'enter code M2X']\n[Observation 2: '{o2}', Action 2: 'enter code K7Q']\n"
    cur = f"You have already taken 2 step(s) and are now at step 3. Current observation: {o3}\n"
    assert read_prompt(raw + cur).view == "raw"
    swapped = raw.replace("Action 1: 'enter code M2X'", "Action 1: 'X'").replace("Action 2: 'enter code K7Q'",
                                                                                 "Action 2: 'enter code M2X'")
    assert read_prompt(swapped + cur).view == "shuffled"
    assert read_prompt(raw.replace("[Observation 1:", "[Initial Observation 1:") + cur).view == "causal"
    assert read_prompt(f"[Observation 1: '{o1}']\n[Observation 2: '{o2}']\n" + cur).view == "obsonly"
    assert read_prompt("[History caution]\n" + raw + cur).view == "check"
    failed = read_prompt(f"[Observation 1: '{o1}', Action 1: 'enter code M2X']\nCurrent observation: {o2}\n")
    assert failed.failed == "enter code M2X" and failed.view == "raw"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three seeds x four conditions x 40 planted tasks, through the study's own cells."""
    return {s: known_answer(40, s, COVERAGE_CONDITIONS, folder=tmp_path_factory.mktemp(f"ka{s}"), n_boot=1000)
            for s in (1, 2, 3)}


def test_the_truth_lies_inside_the_95_percent_interval_in_at_least_90_percent_of_cells(runs):
    table = pd.concat(runs.values(), ignore_index=True)
    assert len(table) == 3 * (4 + 3 + 4)
    rate = table["covered"].mean()
    assert rate >= 0.9, table[~table["covered"]]


def test_the_table_orders_the_views_as_planted(runs):
    table = pd.concat(runs.values(), ignore_index=True)
    succ = table[table["estimand"] == "success"].groupby("condition")[["estimate", "truth"]].mean()
    assert list(succ.sort_values("estimate").index) == list(succ.sort_values("truth").index)
    rep = table[table["estimand"] == "repetition"].groupby("condition")["estimate"].mean()
    assert rep["causal"] < rep["raw"]  # labels lower the repetition, as planted


def test_a_shuffle_that_is_not_applied_fails_the_known_answer_check(monkeypatch, tmp_path):
    """Mutation: the actor renders Shuffle-All as Raw (the shuffle not applied): the estimate
    leaves the planted truth's interval."""
    import memtrials.agent.actor as actor

    real = actor.apply_view
    monkeypatch.setattr(actor, "apply_view",
                        lambda view, entries, **kw: real("raw" if view == "shuffle_all" else view, entries, **kw))
    table = known_answer(40, 1, ["raw", "shuffle_all"], folder=tmp_path, n_boot=1000)
    shuffled = table[table["condition"] == "shuffle_all"]
    assert not shuffled.loc[shuffled["estimand"] == "success", "covered"].all()
    assert not shuffled["covered"].all()


def test_a_cell_that_played_other_tasks_than_configured_is_refused(tmp_path):
    from memtrials.studies.history.planted_report import planted_table

    eps = pd.DataFrame({"condition": ["raw"], "task_id": ["test-vault-0000"], "won": [True], "episode_id": ["e"]})
    with pytest.raises(ValueError, match="not the configured list"):
        planted_table(eps, pd.DataFrame(), ["test-vault-0001"], {"conditions": ["raw"], "model": "m"}, 10)


def test_the_planted_block_is_checked_before_any_job():
    from memtrials.studies.history.workflow import HistoryWorkflow

    cfg = load_config(REPO_ROOT / "config" / "config.yaml")
    models = load_models(REPO_ROOT / "config" / "models.yaml")
    cfg["history"]["planted"]["model"] = "smollm2"
    with pytest.raises(ConfigError, match="history.planted.model"):
        HistoryWorkflow(cfg, models, lambda m: models[m].cell_params())
    cfg["history"]["planted"]["model"] = "planted-history"
    cfg["history"]["actor"]["max_listed_actions"] = 3
    with pytest.raises(ConfigError, match="max_listed_actions"):
        HistoryWorkflow(cfg, models, lambda m: models[m].cell_params())
    cfg["history"]["actor"]["max_listed_actions"] = 10
    cfg["history"]["shuffle"] = "per_episode"  # the planted cells draw their shuffles per step all the same
    built = HistoryWorkflow(cfg, models, lambda m: models[m].cell_params())
    assert built.cell("planted-history", "planted")["shuffle"] == "per_step"
