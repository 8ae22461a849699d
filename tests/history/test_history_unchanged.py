"""The history study's outputs do not change unless a change is meant (issue 8, issue 13).

``golden/data`` holds default-config history cells (rollouts, reference continuations,
the repetition probe) made on real ScienceWorld, and the model cache they filled
(``golden/make_golden.py``).  The data was first made with the code before the episode
runner moved into ``memtrials.agent.runner``, and the moved code reproduced it (shown at
commit c1839e8); it is now made with the current code after the faithfulness fixes of
issue 13, which changed the continuation cells only, and remade when call records
gained the serving-contract columns (no episode or step content changed).  Here the same cells run with
today's code from a copy of that cache, with nothing listening at the endpoint's
address: every model call must be a cache hit (a changed prompt would be a fresh call and
fail), and every Parquet table (episodes, steps, call records, probe screen and
responses) must equal the golden one.
"""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"
sys.path.insert(0, str(GOLDEN))

from golden_cells import GOLDEN_PORT, run_cells  # noqa: E402


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.slow
def test_history_cells_reproduce_the_golden_outputs_from_the_same_cache(tmp_path):
    assert _port_free(GOLDEN_PORT), f"port {GOLDEN_PORT} must be free (the golden endpoint's identity)"
    cache = tmp_path / "llm.sqlite"
    shutil.copy(GOLDEN / "data" / "llm.sqlite", cache)
    files = run_cells(tmp_path, cache, max_retries=0)
    assert len(files) == 30
    for f in files:
        got, want = pq.read_table(f), pq.read_table(GOLDEN / "data" / f.name)
        assert got.schema.remove_metadata() == want.schema.remove_metadata(), f.name
        assert got.num_rows == want.num_rows, f.name
        for name in want.column_names:
            assert got.column(name).to_pylist() == want.column(name).to_pylist(), f"{f.name}: column {name}"
