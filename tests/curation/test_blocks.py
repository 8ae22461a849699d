"""Blocks by Ward's method: planted clusters recovered, deterministic numbering, small playbooks."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from memtrials.curation.blocks import BLOCKS_SCHEMA, _number_by_first_lesson, cluster_blocks


def planted(seed: int = 0, k: int = 4, per: int = 6, d: int = 32, noise: float = 0.05):
    """k topics of ``per`` lessons each, interleaved in a shuffled playbook order."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(k, d))
    topic = np.repeat(np.arange(k), per)
    rng.shuffle(topic)
    vecs = centers[topic] + noise * rng.normal(size=(k * per, d))
    ids = [f"L{i:03d}" for i in range(k * per)]
    return ids, vecs, topic


def partition(labels) -> set[frozenset[int]]:
    labels = np.asarray(labels)
    return {frozenset(np.flatnonzero(labels == b).tolist()) for b in np.unique(labels)}


def test_planted_clusters_are_put_together():
    for seed in range(5):
        ids, vecs, topic = planted(seed)
        blocks = cluster_blocks(ids, vecs, 4)
        assert blocks.method == "ward" and blocks.m == 4
        assert partition(blocks.labels) == partition(topic)


def test_numbering_follows_each_blocks_first_lesson_and_is_deterministic():
    ids, vecs, _ = planted(1)
    a, b = cluster_blocks(ids, vecs, 4), cluster_blocks(ids, vecs.copy(), 4)
    assert a == b
    firsts = [ids.index(a.members(j)[0]) for j in range(a.m)]
    assert firsts == sorted(firsts) and firsts[0] == 0 and a.labels[0] == 0
    # whatever labels the library hands out, the numbering is the same
    raw = np.array([2, 2, 0, 1, 0, 3, 1])
    assert _number_by_first_lesson(raw) == _number_by_first_lesson((raw + 1) % 4) == (0, 0, 1, 2, 1, 3, 2)
    # members keep playbook order
    for j in range(a.m):
        pos = [ids.index(x) for x in a.members(j)]
        assert pos == sorted(pos)


def test_vectors_are_clustered_by_direction_not_length():
    rng = np.random.default_rng(2)
    dirs = np.eye(8)[:2]
    vecs = np.vstack([dirs[i % 2] * (1.0 if i < 6 else 10.0) + 0.01 * rng.normal(size=8) for i in range(12)])
    ids = [f"L{i}" for i in range(12)]
    by_direction = partition([i % 2 for i in range(12)])
    assert partition(cluster_blocks(ids, vecs, 2).labels) == by_direction
    assert partition(cluster_blocks(ids, vecs, 2, normalize=False).labels) != by_direction


def test_fewer_lessons_than_m_gives_one_block_each_and_is_recorded():
    ids, vecs, _ = planted(3, k=3, per=1)
    blocks = cluster_blocks(ids, vecs, 8)
    assert blocks.method == "singletons" and blocks.m == 3 and blocks.labels == (0, 1, 2)
    rec = blocks.record()
    assert rec["m_requested"] == 8 and rec["m"] == 3 and rec["n_lessons"] == 3
    assert rec["blocks"] == [[ids[0]], [ids[1]], [ids[2]]]
    empty = cluster_blocks([], np.zeros((0, 5)), 8)
    assert empty.method == "empty" and empty.m == 0 and empty.record()["blocks"] == []
    exact = cluster_blocks(ids, vecs, 3)
    assert exact.m == 3 and exact.method == "ward"


def test_tokens_table_and_parquet(tmp_path):
    ids, vecs, _ = planted(4, k=2, per=3)
    blocks = cluster_blocks(ids, vecs, 2)
    tokens = {lid: 10 + i for i, lid in enumerate(ids)}
    per_block = blocks.block_tokens(tokens)
    assert per_block.sum() == sum(tokens.values())
    assert per_block[0] == sum(tokens[x] for x in blocks.members(0))
    path = blocks.write(tmp_path / "blocks.parquet")
    back = pq.read_table(path)
    assert back.schema.equals(BLOCKS_SCHEMA)
    assert back.column("lesson_id").to_pylist() == ids and back.column("block").to_pylist() == list(blocks.labels)
    with pytest.raises(ValueError, match="no count for lessons"):
        blocks.block_tokens({ids[0]: 3})
    with pytest.raises(ValueError, match="blocks 0..1"):
        blocks.members(2)


def test_bad_input_is_refused():
    ids, vecs, _ = planted(5, k=2, per=3)
    with pytest.raises(ValueError, match="duplicate ids"):
        cluster_blocks(ids[:-1] + [ids[0]], vecs, 2)
    with pytest.raises(ValueError, match="one row per lesson"):
        cluster_blocks(ids, vecs[:-1], 2)
    with pytest.raises(ValueError, match="NaN"):
        cluster_blocks(ids, np.where(np.arange(vecs.size).reshape(vecs.shape) == 0, np.nan, vecs), 2)
    with pytest.raises(ValueError, match="m \\(number of blocks\\)"):
        cluster_blocks(ids, vecs, 0)
    with pytest.raises(ValueError, match="zero vector"):
        cluster_blocks(ids, np.vstack([np.zeros(vecs.shape[1]), vecs[1:]]), 2)
