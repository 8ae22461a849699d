"""Blocks: a playbook's lessons clustered by their embeddings (Ward's method).

Source: *Reliable Memory from Unstable Growth*, Section 3.2 ("Blocks"): each lesson is
embedded (the caller gets the vectors from ``Client.embed`` on the ``embedder`` role) and
the embeddings are clustered with Ward's method into ``m`` blocks (scikit-learn's
``AgglomerativeClustering(linkage="ward")``).

Choices the paper leaves open, made here:
- rows are scaled to unit length first (``normalize=True``), so Ward's squared Euclidean
  distance is ``2 - 2 cos``, the cosine geometry the embedder is used with elsewhere;
- blocks are numbered 0..m-1 by the playbook position of each block's first lesson, so
  the numbering depends only on the playbook and the partition, never on the library's
  label order;
- a playbook with fewer lessons than ``m`` gets one block per lesson (``method =
  "singletons"``, ``m`` smaller than ``m_requested``); an empty one gets no block
  (``method = "empty"``). Both are recorded in :meth:`Blocks.record`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from memtrials.io import write_parquet

#: One row per lesson, in playbook order.
BLOCKS_SCHEMA = pa.schema([
    pa.field("lesson_id", pa.string(), nullable=False),
    pa.field("position", pa.int64(), nullable=False),  # 0-based place in the playbook
    pa.field("block", pa.int64(), nullable=False),  # 0..m-1, numbered by first lesson
])


@dataclass(frozen=True)
class Blocks:
    """A partition of a playbook's lessons into blocks (lessons in playbook order)."""

    lesson_ids: tuple[str, ...]
    labels: tuple[int, ...]  # block of each lesson
    m_requested: int
    method: str  # "ward", "singletons" or "empty"

    @property
    def m(self) -> int:
        """The number of blocks actually formed."""
        return len(set(self.labels))

    def members(self, block: int) -> tuple[str, ...]:
        """The lesson ids of ``block``, in playbook order."""
        if not 0 <= block < self.m:
            raise ValueError(f"block {block}: this playbook has blocks 0..{self.m - 1}")
        return tuple(lid for lid, b in zip(self.lesson_ids, self.labels) if b == block)

    def block_tokens(self, tokens: Mapping[str, int]) -> np.ndarray:
        """Tokens per block, summed from each lesson's token count (``tokens[lesson_id]``)."""
        missing = [lid for lid in self.lesson_ids if lid not in tokens]
        if missing:
            raise ValueError(f"tokens: no count for lessons {missing[:5]}{' ...' if len(missing) > 5 else ''}; "
                             "count every lesson of the playbook with the declared tokenizer")
        out = np.zeros(self.m, dtype=np.int64)
        for lid, b in zip(self.lesson_ids, self.labels):
            out[b] += int(tokens[lid])
        return out

    def table(self) -> pd.DataFrame:
        """Lesson id, position and block, one row per lesson (schema :data:`BLOCKS_SCHEMA`)."""
        return pd.DataFrame({
            "lesson_id": pd.Series(self.lesson_ids, dtype=str),
            "position": np.arange(len(self.lesson_ids), dtype=np.int64),
            "block": np.asarray(self.labels, dtype=np.int64),
        })

    def write(self, path: str | Path) -> Path:
        """Write :meth:`table` as Parquet with :data:`BLOCKS_SCHEMA`, atomically."""
        return write_parquet(self.table(), path, schema=BLOCKS_SCHEMA)

    def record(self) -> dict[str, object]:
        """What a per-setting record keeps: sizes, method and each block's lesson ids."""
        return {"m_requested": self.m_requested, "m": self.m, "n_lessons": len(self.lesson_ids),
                "method": self.method, "blocks": [list(self.members(b)) for b in range(self.m)]}


def _number_by_first_lesson(raw: np.ndarray) -> tuple[int, ...]:
    first: dict[int, int] = {}
    for pos, label in enumerate(raw.tolist()):
        first.setdefault(label, pos)
    order = {label: k for k, label in enumerate(sorted(first, key=first.__getitem__))}
    return tuple(order[label] for label in raw.tolist())


def cluster_blocks(lesson_ids: Sequence[str], embeddings: np.ndarray, m: int, *,
                   normalize: bool = True) -> Blocks:
    """Cluster lessons (given in playbook order) into ``m`` blocks by Ward's method.

    ``embeddings`` has one row per lesson, in the same order as ``lesson_ids``.
    Deterministic: the same playbook and vectors give the same blocks and numbering.
    """
    ids = tuple(str(x) for x in lesson_ids)
    vecs = np.asarray(embeddings, dtype=float)
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m (number of blocks): expected an integer >= 1, got {m!r}")
    if len(set(ids)) != len(ids):
        dup = sorted({x for x in ids if ids.count(x) > 1})
        raise ValueError(f"lesson_ids: duplicate ids {dup[:5]}; a playbook's lesson ids must be unique")
    if vecs.ndim != 2 or vecs.shape[0] != len(ids):
        raise ValueError(f"embeddings: expected one row per lesson ({len(ids)} x d), got shape {vecs.shape}")
    if not np.isfinite(vecs).all():
        raise ValueError("embeddings: contain NaN or inf; re-embed the lessons")
    n = len(ids)
    if n == 0:
        return Blocks((), (), int(m), "empty")
    if n <= m:
        return Blocks(ids, tuple(range(n)), int(m), "singletons" if n < m else "ward")
    if normalize:
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        if (norms == 0).any():
            raise ValueError("embeddings: a lesson has the zero vector, which has no direction; re-embed it")
        vecs = vecs / norms
    from sklearn.cluster import AgglomerativeClustering  # here: the workflow's parse imports this module

    raw = AgglomerativeClustering(n_clusters=int(m), linkage="ward").fit_predict(vecs)
    return Blocks(ids, _number_by_first_lesson(raw), int(m), "ward")
