"""Stable Parquet schemas of the actor's outputs: one row per step, one row per episode.

Declared once here; every cell writes exactly these columns (in this order), so a rerun
that replays the model cache writes byte-identical files.  JSON columns hold canonical
JSON (sorted keys).  Nothing time-of-day dependent is stored; ``latency_s`` is the
recorded latency of the model call (a cache replay carries the original value).
"""

from __future__ import annotations

from itertools import islice
import os
from typing import Any, Iterable, Iterator, Mapping

import pyarrow as pa

from memtrials.io import canonical_json, release_arrow_memory, write_parquet, write_parquet_groups

STEP_SCHEMA = pa.schema([
    ("episode_id", pa.string()),          # <cell>/<task_id>
    ("task_id", pa.string()),
    ("step", pa.int64()),                 # 1-based index of the action in the episode
    ("obs_before", pa.string()),          # O_t, the observation the action was chosen on
    ("n_admissible", pa.int64()),         # -1: the environment has no action list
    ("shown_actions", pa.string()),       # JSON list of the actions listed in the prompt
    ("prompt_digest", pa.string()),       # SHA-256 of the canonical request messages
    ("prompt_chars", pa.int64()),
    ("history_chars", pa.int64()),        # rendered history (block text or history messages)
    ("history_tokens", pa.int64()),       # approx. tokens of the rendered history (render.approx_tokens)
    ("prompt_tokens", pa.int64()),        # the endpoint's own count for the whole request
    ("completion_tokens", pa.int64()),
    ("permutation", pa.string()),         # JSON list (shuffle views) or null
    ("memory_ids", pa.string()),          # JSON list of lesson ids in the prompt
    ("raw_reply", pa.string()),
    ("finish_reason", pa.string()),
    ("constraint", pa.string()),          # grammar | json_enum | none
    ("action", pa.string()),              # what was executed
    ("parse_status", pa.string()),        # ok | inadmissible | unparsable
    ("replay_action", pa.string()),       # what reproduces the step on replay (ScienceWorld options)
    ("observation", pa.string()),         # O_{t+1}, returned by the action
    ("reward", pa.float64()),
    ("score", pa.float64()),
    ("done", pa.bool_()),
    ("won", pa.bool_()),
    ("latency_s", pa.float64()),
    ("call_id", pa.string()),             # links to the cell's model-call records
    ("review_call_id", pa.string()),      # Experience/Calibrator review of this transition
    ("review_decision", pa.string()),     # CALIBRATE | NOUPDATE | INVALID | null (no review)
    ("experience", pa.string()),
    ("carry_cut", pa.int64()),            # characters of action + experience left out of later prompts (carry.max_chars)
])

EPISODE_SCHEMA = pa.schema([
    ("episode_id", pa.string()),
    ("model", pa.string()),
    ("env", pa.string()),
    ("condition", pa.string()),
    ("task_id", pa.string()),
    ("task_index", pa.int64()),
    ("seed", pa.int64()),
    ("task", pa.string()),
    ("initial_observation", pa.string()),
    ("won", pa.bool_()),
    ("n_steps", pa.int64()),
    ("final_score", pa.float64()),
    ("termination", pa.string()),         # won | done | budget | context_exceeded
    ("n_unparsable", pa.int64()),
    ("n_inadmissible", pa.int64()),
    ("n_reviews", pa.int64()),
    ("n_experiences", pa.int64()),
    ("n_noupdate", pa.int64()),
    ("n_review_invalid", pa.int64()),
    ("first_prompt_tokens", pa.int64()),  # endpoint count at the first request (Figure 3)
    ("first_prompt_approx_tokens", pa.int64()),
    ("prompt_tokens", pa.int64()),
    ("completion_tokens", pa.int64()),
])


def dumps(value: Any) -> str | None:
    """A JSON column's text: canonical JSON on one line with Python's spaced separators."""
    return None if value is None else canonical_json(value, indent=None, compact=False, newline=False)


def table(rows: Iterable[Mapping[str, Any]], schema: pa.Schema, first: int = 0) -> pa.Table:
    """Rows as a table of ``schema``: a missing or extra column is an error (rows numbered from
    ``first``)."""
    rows = list(rows)
    names = set(schema.names)
    for i, r in enumerate(rows, start=first):
        extra, missing = set(r) - names, names - set(r)
        if extra or missing:
            raise ValueError(f"row {i}: extra columns {sorted(extra)}, missing columns {sorted(missing)}")
    return pa.table({n: [r[n] for r in rows] for n in schema.names}, schema=schema)


CHUNK_ROWS = 1024
"""Rows :func:`table_in_chunks` converts at a time: a multiple of the Parquet writer's batch of
1,024 values, so a table of such chunks is written (one row group) byte for byte as the same
rows in one chunk (tests/agent/test_spill.py)."""


def table_in_chunks(rows: Iterable[Mapping[str, Any]], schema: pa.Schema, first: int = 0) -> pa.Table:
    """:func:`table` of ``rows`` a :data:`CHUNK_ROWS` at a time (the rows are consumed as they come:
    only one chunk of them is held as Python objects), the chunks concatenated."""
    it = iter(rows)
    chunks = []
    while True:
        part = list(islice(it, CHUNK_ROWS))
        if not part and chunks:
            break
        chunks.append(table(part, schema, first=first + len(chunks) * CHUNK_ROWS))
        release_arrow_memory()  # the chunk's conversion buffers, freed: not kept by Arrow's allocator
        if len(part) < CHUNK_ROWS:
            break
    return chunks[0] if len(chunks) == 1 else pa.concat_tables(chunks)


ROW_GROUP_ROWS = 2 * CHUNK_ROWS
"""The most rows :func:`write_rows` writes as one row group: a table of at most this many rows is
one row group, byte for byte the file it was before (the default run's longest step table has 820
rows); a longer one (a paper-scale cell: 500 episodes of 30 steps, 15,000 rows) is written a row
group of this many rows at a time, so what a job holds while writing is one row group's table
(as a records file's, ``memtrials.llm.records.CHUNK``), not the whole step table (issue 39,
"memory flat in episodes per job")."""


def write_rows(rows: Iterable[Mapping[str, Any]], n_rows: int, schema: pa.Schema,
               path: str | os.PathLike[str]) -> None:
    """Write ``n_rows`` rows (consumed as they come) as zstd Parquet of ``schema``, atomically: one
    row group when they fit :data:`ROW_GROUP_ROWS`, else one row group of that many at a time."""
    it = iter(rows)
    if n_rows <= ROW_GROUP_ROWS:
        write_parquet(table_in_chunks(it, schema), path)
        return

    def groups() -> Iterator[pa.Table]:
        first = 0
        while part := list(islice(it, ROW_GROUP_ROWS)):
            yield table_in_chunks(part, schema, first=first)
            first += len(part)

    write_parquet_groups(groups(), schema, path, rows=n_rows)
