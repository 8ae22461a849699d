"""Declared Parquet schemas of the calibrator's label chain (one per stage)."""

from __future__ import annotations

import pyarrow as pa

CONTEXT_SCHEMA = pa.schema([
    ("context_id", pa.string()), ("source_model", pa.string()), ("env", pa.string()),
    ("task_id", pa.string()), ("episode_id", pa.string()), ("task", pa.string()),
    ("step", pa.int64()),                 # the completed action A_t (1-based)
    ("history", pa.string()),             # JSON [[O_1, A_1], ..., [O_t, A_t]]
    ("action", pa.string()), ("observation", pa.string()),   # A_t and the O_{t+1} it returned
    ("next_actions", pa.string()),        # JSON list shown at step t+1, or null (code actions)
])

GENERATE_SCHEMA = pa.schema([
    ("context_id", pa.string()), ("generator", pa.string()), ("call_id", pa.string()),
    ("decision", pa.string()),            # CALIBRATE | NOUPDATE | INVALID
    ("experience", pa.string()),
])

SCREEN_SCHEMA = pa.schema([
    ("context_id", pa.string()), ("judge", pa.string()), ("call_id", pa.string()),
    ("valid", pa.bool_()), ("unsupported", pa.bool_()), ("restates_observation", pa.bool_()),
    ("passed", pa.bool_()),
])

COMPARE_SCHEMA = pa.schema([
    ("context_id", pa.string()), ("actor", pa.string()), ("judge", pa.string()),
    ("call_without", pa.string()), ("call_with", pa.string()),
    ("reply_without", pa.string()), ("reply_with", pa.string()),
    ("action_without", pa.string()), ("action_with", pa.string()),
    ("identical", pa.bool_()),
    ("judge_call_ab", pa.string()), ("judge_call_ba", pa.string()),   # A = with E first, then reversed
    ("verdict_ab", pa.string()), ("verdict_ba", pa.string()),         # A | B | tie | invalid | null
    ("outcome", pa.string()),             # win | loss | tie
])

LABEL_SCHEMA = pa.schema([
    ("context_id", pa.string()), ("source_model", pa.string()), ("env", pa.string()),
    ("task_id", pa.string()),             # the source (training) task of the context
    ("decision", pa.string()), ("experience", pa.string()),
    ("screened", pa.bool_()), ("screen_passed", pa.bool_()),
    ("n_actors", pa.int64()), ("n_up", pa.int64()), ("n_down", pa.int64()), ("n_tie", pa.int64()),
    ("n_tie_no_judge", pa.int64()), ("q", pa.int64()),
    ("target_full", pa.string()), ("target_screen_only", pa.string()),   # CALIBRATE | NOUPDATE | null
])
