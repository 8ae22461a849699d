"""The practice round's design: fair, independent inclusions, reproducible episode by episode."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy import stats as st

from memtrials.curation.blocks import cluster_blocks
from memtrials.curation.design import (
    DESIGN_COLUMNS, block_columns, choice_episodes, design_schema, inclusion_matrix, practice_episode,
    practice_round, served_lessons, write_design,
)

TASKS = [f"task-{k}" for k in range(7)]


def unfair(z: np.ndarray, task: np.ndarray, p: float = 0.5, alpha: float = 1e-3) -> list[str]:
    """What is wrong with a design, if anything: biased rates, joint dependence, dependence on the task.

    Each check is a test at level ``alpha`` (Bonferroni over blocks), so a fair design
    fails one with probability below about ``3 * alpha``.
    """
    n, m = z.shape
    problems = []
    rates = st.binomtest  # exact per-block rate test
    for j in range(m):
        if rates(int(z[:, j].sum()), n, p).pvalue < alpha / m:
            problems.append(f"block {j} included at rate {z[:, j].mean():.3f}")
    # joint: every one of the 2^m patterns equally likely (fails correlated blocks)
    codes = z @ (1 << np.arange(m))
    observed = np.bincount(codes, minlength=2**m)
    expected = np.array([p ** bin(c).count("1") * (1 - p) ** (m - bin(c).count("1")) for c in range(2**m)]) * n
    if st.chisquare(observed, expected).pvalue < alpha:
        problems.append("inclusion patterns are not independent Bernoulli draws")
    for j in range(m):
        table = pd.crosstab(task, z[:, j]).to_numpy()
        if table.shape[1] == 2 and st.chi2_contingency(table).pvalue < alpha / m:
            problems.append(f"block {j}'s inclusion depends on the task")
    return problems


@pytest.mark.parametrize("task_order", ["cycle", "draw"])
def test_inclusions_are_half_per_block_and_independent(task_order):
    m = 6
    design = practice_round(TASKS, 3000, m, seed=17, task_order=task_order)
    assert list(design.columns) == [*DESIGN_COLUMNS, *block_columns(m)]
    z = inclusion_matrix(design, m)
    assert unfair(z, design["task_id"].to_numpy()) == []
    corr = np.corrcoef(z.T)[np.triu_indices(m, 1)]
    assert np.abs(corr).max() < 4 / np.sqrt(len(z))


def test_the_fairness_check_fails_biased_and_correlated_designs():
    rng = np.random.default_rng(0)
    n, m = 3000, 6
    task = np.array(TASKS)[np.arange(n) % len(TASKS)]
    biased = (rng.random((n, m)) < np.array([0.5] * 5 + [0.56])).astype(int)
    assert any("block 5 included" in s for s in unfair(biased, task))
    correlated = (rng.random((n, m)) < 0.5).astype(int)
    copy = rng.random(n) < 0.2
    correlated[copy, 1] = correlated[copy, 0]  # rates stay 1/2, blocks 0 and 1 move together
    problems = unfair(correlated, task)
    assert problems == ["inclusion patterns are not independent Bernoulli draws"]
    by_task = (rng.random((n, m)) < 0.5).astype(int)
    by_task[task == TASKS[0], 2] = 1  # always served on one task
    assert any("depends on the task" in s for s in unfair(by_task, task))


def test_any_episode_is_reproducible_alone_and_rounds_extend():
    design = practice_round(TASKS, 40, 5, seed=3)
    for i in (0, 13, 39):
        assert practice_episode(TASKS, i, 5, seed=3) == design.iloc[i].to_dict()
    tail = practice_round(TASKS, 20, 5, seed=3, start=20)
    pd.testing.assert_frame_equal(tail.reset_index(drop=True), design.iloc[20:].reset_index(drop=True))
    assert not practice_round(TASKS, 40, 5, seed=4).equals(design)
    # a round over more blocks keeps the tasks, actor seeds and the first blocks' draws
    wider = practice_round(TASKS, 40, 7, seed=3)
    pd.testing.assert_frame_equal(wider[design.columns], design)


def test_task_orders():
    cyc = practice_round(TASKS, 30, 2, seed=1)
    assert cyc["task_id"].tolist() == [TASKS[i % 7] for i in range(30)]
    drawn = practice_round(TASKS, 700, 2, seed=1, task_order="draw")["task_id"].value_counts()
    assert set(drawn.index) == set(TASKS)
    assert st.chisquare(drawn.to_numpy()).pvalue > 1e-3
    assert cyc["task_id"].tolist() != practice_round(TASKS, 30, 2, seed=1, task_order="draw")["task_id"].tolist()


def test_choice_episodes_are_fresh_and_the_same_for_every_candidate():
    est = practice_round(TASKS, 50, 4, seed=9)
    cho = choice_episodes(TASKS, 50, seed=9)
    assert list(cho.columns) == list(DESIGN_COLUMNS)
    assert not set(zip(est["task_id"], est["actor_seed"])) & set(zip(cho["task_id"], cho["actor_seed"]))
    pd.testing.assert_frame_equal(cho, choice_episodes(TASKS, 50, seed=9))


def test_served_lessons_keep_playbook_order():
    ids = [f"L{i}" for i in range(6)]
    vecs = np.array([[1, 0], [0, 1], [1, 0.05], [0.05, 1], [1, 0.1], [0.1, 1]], float)
    blocks = cluster_blocks(ids, vecs, 2)
    assert blocks.members(0) == ("L0", "L2", "L4")
    assert served_lessons(blocks, [0, 1]) == ["L1", "L3", "L5"]
    assert served_lessons(blocks, [1, 1]) == ids
    assert served_lessons(blocks, [0, 0]) == []
    with pytest.raises(ValueError, match="2 blocks"):
        served_lessons(blocks, [1, 0, 1])


def test_design_parquet_schema(tmp_path):
    design = practice_round(TASKS, 12, 3, seed=2)
    back = pq.read_table(write_design(design, 3, tmp_path / "round.parquet"))
    assert back.schema.equals(design_schema(3))
    pd.testing.assert_frame_equal(back.to_pandas(), design)
    with pytest.raises(ValueError, match="expected"):
        write_design(design, 4, tmp_path / "bad.parquet")


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least one practice task"):
        practice_round([], 3, 2, seed=0)
    with pytest.raises(ValueError, match="duplicate task ids"):
        practice_round(["a", "a"], 3, 2, seed=0)
    with pytest.raises(ValueError, match="inclusion probability"):
        practice_round(TASKS, 3, 2, seed=0, p=1.0)
    with pytest.raises(ValueError, match="seed"):
        practice_round(TASKS, 3, 2, seed=-1)
    with pytest.raises(ValueError, match="task_order"):
        practice_round(TASKS, 3, 2, seed=0, task_order="sorted")
    with pytest.raises(ValueError, match="no columns"):
        inclusion_matrix(practice_round(TASKS, 3, 2, seed=0), 3)
